/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "shared/macro.h"
#include "shared/netprefix.h"

static const uint8_t v4_mapped_prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

static unsigned family_bits(int family) {
        return family == AF_INET ? 32 : 128;
}

static bool bytes_all_zero(const uint8_t *b, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (b[i])
                        return false;
        return true;
}

/* Whether the bits of a past len are zero. */
static bool host_bits_zero(const NetAddress *a, unsigned len) {
        unsigned bits = family_bits(a->family);

        for (unsigned i = len; i < bits; i++)
                if (a->bytes[i / 8] & (0x80u >> (i % 8)))
                        return false;
        return true;
}

bool net_ipv4_is_strict(const char *s) {
        unsigned parts = 0;

        for (const char *p = s;;) {
                size_t n = strspn(p, "0123456789");

                if (n == 0 || n > 3 || (n > 1 && p[0] == '0'))
                        return false;
                parts++;
                p += n;
                if (*p == '\0')
                        break;
                if (*p != '.')
                        return false;
                p++;
        }
        return parts == 4;
}

static int parse_prefix_len(const char *s, unsigned max, unsigned *ret) {
        size_t n = strlen(s);
        unsigned v = 0;

        /* Decimal, no sign, no blanks, no leading zero ("/032" is not /32). */
        if (n == 0 || n > 3 || strspn(s, "0123456789") != n || (n > 1 && s[0] == '0'))
                return -EINVAL;
        for (size_t i = 0; i < n; i++)
                v = v * 10 + (unsigned) (s[i] - '0');
        if (v > max)
                return -EINVAL;
        *ret = v;
        return 0;
}

int net_prefix_parse(const char *s, size_t len, NetPrefix *ret) {
        char buf[NET_PREFIX_STRING_MAX + 1];
        NetPrefix p = { 0 };
        char *slash;
        bool has_len;
        int r;

        assert(s || len == 0);
        assert(ret);

        if (len == 0 || len > NET_PREFIX_STRING_MAX || memchr(s, '\0', len))
                return -EINVAL;
        memcpy(buf, s, len);
        buf[len] = '\0';

        if (streq(buf, "*"))
                return -EPERM;

        slash = strchr(buf, '/');
        has_len = slash != NULL;
        if (slash)
                *slash = '\0';

        if (strchr(buf, ':')) {
                if (inet_pton(AF_INET6, buf, p.address.bytes) != 1)
                        return -EINVAL;
                p.address.family = AF_INET6;
        } else {
                if (!net_ipv4_is_strict(buf) || inet_pton(AF_INET, buf, p.address.bytes) != 1)
                        return -EINVAL;
                p.address.family = AF_INET;
        }

        p.prefix_len = family_bits(p.address.family);
        if (has_len) {
                r = parse_prefix_len(slash + 1, p.prefix_len, &p.prefix_len);
                if (r < 0)
                        return r;
        }

        /* Matching every peer is what a wildcard does, whatever it is
         * written as. */
        if (p.prefix_len == 0)
                return -EPERM;
        /* The unspecified address as a host is "any address" to bind(),
         * never a peer: taken for the wildcard it is written as. */
        if (p.prefix_len == family_bits(p.address.family) &&
            bytes_all_zero(p.address.bytes, p.address.family == AF_INET ? 4 : 16))
                return -EPERM;

        /* ::ffff:a.b.c.d/n is the IPv4 prefix a.b.c.d/(n-96); shorter than
         * /96 it would reach beyond the mapped range. */
        if (p.address.family == AF_INET6 && memcmp(p.address.bytes, v4_mapped_prefix, 12) == 0) {
                if (p.prefix_len < 96)
                        return -EINVAL;
                memmove(p.address.bytes, p.address.bytes + 12, 4);
                memset(p.address.bytes + 4, 0, 12);
                p.address.family = AF_INET;
                p.prefix_len -= 96;
                if (p.prefix_len == 0 || (p.prefix_len == 32 && bytes_all_zero(p.address.bytes, 4)))
                        return -EPERM;
        }

        if (!host_bits_zero(&p.address, p.prefix_len))
                return -EINVAL;

        *ret = p;
        return 0;
}

int net_address_from_sockaddr(const struct sockaddr *sa, socklen_t len, NetAddress *ret) {
        NetAddress a = { 0 };

        assert(ret);

        if (!sa || len < (socklen_t) sizeof(sa_family_t))
                return -EINVAL;

        switch (sa->sa_family) {
        case AF_INET: {
                struct sockaddr_in in;

                if (len < (socklen_t) sizeof in)
                        return -EINVAL;
                memcpy(&in, sa, sizeof in);
                a.family = AF_INET;
                memcpy(a.bytes, &in.sin_addr, 4);
                break;
        }
        case AF_INET6: {
                struct sockaddr_in6 in6;

                if (len < (socklen_t) sizeof in6)
                        return -EINVAL;
                memcpy(&in6, sa, sizeof in6);
                if (memcmp(in6.sin6_addr.s6_addr, v4_mapped_prefix, 12) == 0) {
                        a.family = AF_INET;
                        memcpy(a.bytes, in6.sin6_addr.s6_addr + 12, 4);
                } else {
                        a.family = AF_INET6;
                        memcpy(a.bytes, in6.sin6_addr.s6_addr, 16);
                }
                break;
        }
        default:
                return -EAFNOSUPPORT;
        }

        *ret = a;
        return 0;
}

bool net_prefix_contains(const NetPrefix *p, const NetAddress *a) {
        unsigned full, rest;

        assert(p);
        assert(a);

        if (p->address.family != a->family || p->prefix_len > family_bits(a->family))
                return false;
        full = p->prefix_len / 8;
        rest = p->prefix_len % 8;
        if (memcmp(p->address.bytes, a->bytes, full) != 0)
                return false;
        if (rest == 0)
                return true;
        return ((p->address.bytes[full] ^ a->bytes[full]) & (uint8_t) (0xff00u >> rest)) == 0;
}

bool net_prefix_list_contains(const NetPrefix *prefixes, size_t n, const NetAddress *a) {
        assert(prefixes || n == 0);

        for (size_t i = 0; i < n; i++)
                if (net_prefix_contains(prefixes + i, a))
                        return true;
        return false;
}

void net_address_format(const NetAddress *a, char buf[static NET_PREFIX_STRING_MAX]) {
        assert(a);

        if (!inet_ntop(a->family, a->bytes, buf, NET_PREFIX_STRING_MAX))
                snprintf(buf, NET_PREFIX_STRING_MAX, "?");
}

void net_prefix_format(const NetPrefix *p, char buf[static NET_PREFIX_STRING_MAX]) {
        size_t n;

        assert(p);

        net_address_format(&p->address, buf);
        n = strlen(buf);
        snprintf(buf + n, NET_PREFIX_STRING_MAX - n, "/%u", p->prefix_len);
}
