/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <assert.h>
#include <netinet/in.h>

#include "query/destination.h"
#include "shared/macro.h"
#include "shared/strv.h"

struct DestinationPolicy {
        char **hosts; /* normalised, NULL-terminated */
        size_t n_hosts;
};

static bool is_alpha(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_digit(char c) {
        return c >= '0' && c <= '9';
}

static char lower(char c) {
        return c >= 'A' && c <= 'Z' ? (char) (c - 'A' + 'a') : c;
}

/* Normalise a host given without brackets (IPv6 literals may still carry
 * them: "[::1]"). Returns 0, or -EINVAL. */
static int normalise_host(const char *in, size_t len, char out[static DESTINATION_HOST_MAX + 1], bool *ret_is_ip) {
        char buf[DESTINATION_HOST_MAX + 1];
        bool all_numeric_label = false;

        if (len == 0 || len > DESTINATION_HOST_MAX + 2)
                return -EINVAL;

        if (in[0] == '[') {
                struct in6_addr a6;

                if (len < 3 || in[len - 1] != ']' || len - 2 > INET6_ADDRSTRLEN - 1)
                        return -EINVAL;
                memcpy(buf, in + 1, len - 2);
                buf[len - 2] = 0;
                /* inet_pton refuses zone ids ("%eth0"), which is what we want. */
                if (inet_pton(AF_INET6, buf, &a6) != 1)
                        return -EINVAL;
                if (!inet_ntop(AF_INET6, &a6, out, DESTINATION_HOST_MAX + 1))
                        return -EINVAL;
                *ret_is_ip = true;
                return 0;
        }

        if (memchr(in, ':', len)) { /* a bare IPv6 literal, as a caller may give it */
                struct in6_addr a6;

                if (len > INET6_ADDRSTRLEN - 1)
                        return -EINVAL;
                memcpy(buf, in, len);
                buf[len] = 0;
                if (inet_pton(AF_INET6, buf, &a6) != 1 ||
                    !inet_ntop(AF_INET6, &a6, out, DESTINATION_HOST_MAX + 1))
                        return -EINVAL;
                *ret_is_ip = true;
                return 0;
        }

        if (in[len - 1] == '.') /* one trailing dot: the same name */
                len--;
        if (len == 0 || len > DESTINATION_HOST_MAX)
                return -EINVAL;

        /* Labels of [A-Za-z0-9_-], 1..63 bytes, separated by single dots. */
        size_t label = 0;
        for (size_t i = 0; i < len; i++) {
                char c = in[i];

                if (c == '.') {
                        if (label == 0)
                                return -EINVAL;
                        label = 0;
                        continue;
                }
                if (!is_alpha(c) && !is_digit(c) && c != '-' && c != '_')
                        return -EINVAL;
                if (++label > 63)
                        return -EINVAL;
        }
        if (label == 0) /* "a.." : an empty last label */
                return -EINVAL;
        for (size_t i = 0; i < len; i++)
                buf[i] = lower(in[i]);
        buf[len] = 0;

        /* The last label decides whether resolvers and URL parsers take it as
         * an IPv4 address (WHATWG: a last label that is a number, decimal or
         * 0x-hex). Such a host must be a strict dotted quad, else refused. */
        {
                const char *last = strrchr(buf, '.');
                last = last ? last + 1 : buf;
                all_numeric_label = *last != 0;
                for (const char *p = last; *p; p++)
                        if (!is_digit(*p))
                                all_numeric_label = false;
                if (last[0] == '0' && last[1] == 'x')
                        all_numeric_label = true;
        }
        if (all_numeric_label) {
                struct in_addr a4;

                if (inet_pton(AF_INET, buf, &a4) != 1)
                        return -EINVAL;
                if (!inet_ntop(AF_INET, &a4, out, DESTINATION_HOST_MAX + 1) || !streq(out, buf))
                        return -EINVAL;
                *ret_is_ip = true;
                return 0;
        }

        memcpy(out, buf, len + 1);
        *ret_is_ip = false;
        return 0;
}

int destination_parse_url(const char *url, DestinationUrl *ret) {
        DestinationUrl u = { 0 };
        const char *p, *host, *host_end, *auth_end;
        size_t n;
        int r;

        if (!url)
                return -EINVAL;
        n = strnlen(url, DESTINATION_URL_MAX + 1);
        if (n > DESTINATION_URL_MAX)
                return -EINVAL;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) url[i] <= 0x20 || (unsigned char) url[i] >= 0x7f)
                        return -EINVAL; /* printable ASCII only, no spaces, no "\\" games below */

        p = strstr(url, "://");
        if (!p)
                return -EINVAL;
        if (p - url == 4 && strncasecmp(url, "http", 4) == 0)
                u.https = false;
        else if (p - url == 5 && strncasecmp(url, "https", 5) == 0)
                u.https = true;
        else
                return -EPROTONOSUPPORT;
        host = p + 3;

        auth_end = host + strcspn(host, "/?#");
        for (const char *q = host; q < auth_end; q++)
                if (*q == '@' || *q == '\\')
                        return -EINVAL; /* no user info, no backslash confusion */

        if (*host == '[') {
                const char *close = memchr(host, ']', (size_t) (auth_end - host));
                if (!close)
                        return -EINVAL;
                host_end = close + 1;
        } else {
                host_end = memchr(host, ':', (size_t) (auth_end - host));
                if (!host_end)
                        host_end = auth_end;
        }

        r = normalise_host(host, (size_t) (host_end - host), u.host, &u.host_is_ip);
        if (r < 0)
                return r;

        if (host_end < auth_end) {
                uint32_t port = 0;
                const char *q = host_end;

                if (*q != ':' || q + 1 == auth_end || auth_end - q > 6)
                        return -EINVAL;
                for (q++; q < auth_end; q++) {
                        if (!is_digit(*q))
                                return -EINVAL;
                        port = port * 10 + (uint32_t) (*q - '0');
                }
                if (port == 0 || port > 65535)
                        return -EINVAL;
                u.port = (uint16_t) port;
        } else
                u.port = u.https ? 443 : 80;

        *ret = u;
        return 0;
}

DestinationPolicy *destination_policy_free(DestinationPolicy *p) {
        if (!p)
                return NULL;
        strv_free(p->hosts); /* NULL-terminated at every step of policy_add() */
        free(p);
        return NULL;
}

static int policy_add(DestinationPolicy *p, const char *host) {
        char **l;

        if (destination_host_named(p, host))
                return 0;
        l = realloc(p->hosts, (p->n_hosts + 2) * sizeof(char *));
        if (!l)
                return -ENOMEM;
        p->hosts = l;
        l[p->n_hosts] = strdup(host);
        if (!l[p->n_hosts])
                return -ENOMEM;
        l[++p->n_hosts] = NULL;
        return 0;
}

int destination_policy_new(
        const char *wiki_api_url, const char *llm_url, char *const *extra_hosts, DestinationPolicy **ret) {
        _cleanup_(destination_policy_freep) DestinationPolicy *p = NULL;
        const char *urls[] = { wiki_api_url, llm_url };
        int r;

        assert(ret);

        p = calloc(1, sizeof *p);
        if (!p)
                return -ENOMEM;

        for (size_t i = 0; i < ELEMENTSOF(urls); i++) {
                DestinationUrl u;

                if (!urls[i])
                        continue;
                r = destination_parse_url(urls[i], &u);
                if (r < 0)
                        return r;
                r = policy_add(p, u.host);
                if (r < 0)
                        return r;
        }
        for (char *const *h = extra_hosts; h && *h; h++) {
                char norm[DESTINATION_HOST_MAX + 1];
                bool ip;

                r = normalise_host(*h, strlen(*h), norm, &ip);
                if (r < 0)
                        return r;
                r = policy_add(p, norm);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(p);
        return 0;
}

bool destination_host_named(const DestinationPolicy *p, const char *host) {
        char norm[DESTINATION_HOST_MAX + 1];
        bool ip;

        if (!p || !host)
                return false;
        if (normalise_host(host, strlen(host), norm, &ip) < 0)
                return false;
        for (size_t i = 0; i < p->n_hosts; i++)
                if (streq(p->hosts[i], norm))
                        return true;
        return false;
}

int destination_check_url(const DestinationPolicy *p, const char *url, DestinationUrl *ret) {
        DestinationUrl u;
        int r;

        r = destination_parse_url(url, &u);
        if (r == -EPROTONOSUPPORT)
                return -EPERM;
        if (r < 0)
                return r;
        if (!destination_host_named(p, u.host))
                return -EPERM;
        if (ret)
                *ret = u;
        return 0;
}

static bool ipv4_is_special(uint32_t a) {
        static const struct {
                uint32_t net, mask;
        } ranges[] = {
                { 0x00000000, 0xff000000 }, /* 0.0.0.0/8 "this network" */
                { 0x0a000000, 0xff000000 }, /* 10/8 RFC 1918 */
                { 0x64400000, 0xffc00000 }, /* 100.64/10 CGNAT */
                { 0x7f000000, 0xff000000 }, /* 127/8 loopback */
                { 0xa9fe0000, 0xffff0000 }, /* 169.254/16 link-local */
                { 0xac100000, 0xfff00000 }, /* 172.16/12 RFC 1918 */
                { 0xc0000000, 0xffffff00 }, /* 192.0.0/24 IETF protocol assignments */
                { 0xc0000200, 0xffffff00 }, /* 192.0.2/24 TEST-NET-1 */
                { 0xc0a80000, 0xffff0000 }, /* 192.168/16 RFC 1918 */
                { 0xc6120000, 0xfffe0000 }, /* 198.18/15 benchmarking */
                { 0xc6336400, 0xffffff00 }, /* 198.51.100/24 TEST-NET-2 */
                { 0xcb007100, 0xffffff00 }, /* 203.0.113/24 TEST-NET-3 */
                { 0xe0000000, 0xf0000000 }, /* 224/4 multicast */
                { 0xf0000000, 0xf0000000 }, /* 240/4 reserved, broadcast */
        };

        for (size_t i = 0; i < ELEMENTSOF(ranges); i++)
                if ((a & ranges[i].mask) == ranges[i].net)
                        return true;
        return false;
}

static uint32_t be32_at(const uint8_t *b) {
        return (uint32_t) b[0] << 24 | (uint32_t) b[1] << 16 | (uint32_t) b[2] << 8 | b[3];
}

static bool ipv6_is_special(const uint8_t b[static 16]) {
        static const uint8_t zero[12] = { 0 };

        /* ::/96: unspecified, loopback and the deprecated IPv4-compatible
         * form; ::ffff:0:0/96 mapped: both judged by the IPv4 inside, and
         * ::, ::1 are special there too (0/8). */
        if (memcmp(b, zero, 12) == 0)
                return ipv4_is_special(be32_at(b + 12)) || be32_at(b + 12) <= 1;
        if (memcmp(b, zero, 10) == 0 && b[10] == 0xff && b[11] == 0xff)
                return ipv4_is_special(be32_at(b + 12));
        /* 64:ff9b::/96 NAT64 well-known prefix: the embedded IPv4. */
        if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && memcmp(b + 4, zero, 8) == 0)
                return ipv4_is_special(be32_at(b + 12));
        /* 64:ff9b:1::/48 local-use NAT64. */
        if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && b[4] == 0 && b[5] == 1)
                return true;
        /* 2002::/16 6to4: the embedded IPv4. */
        if (b[0] == 0x20 && b[1] == 0x02)
                return ipv4_is_special(be32_at(b + 2));
        if ((b[0] & 0xfe) == 0xfc) /* fc00::/7 unique-local */
                return true;
        if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) /* fe80::/10 link-local */
                return true;
        if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) /* fec0::/10 site-local (deprecated) */
                return true;
        if (b[0] == 0xff) /* ff00::/8 multicast */
                return true;
        if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8) /* 2001:db8::/32 documentation */
                return true;
        if (b[0] == 0x01 && b[1] == 0x00 && memcmp(b + 2, zero, 6) == 0) /* 100::/64 discard */
                return true;
        return false;
}

bool destination_address_is_special(const struct sockaddr *sa, socklen_t len) {
        if (!sa)
                return true;
        if (sa->sa_family == AF_INET && len >= (socklen_t) sizeof(struct sockaddr_in)) {
                const struct sockaddr_in *in = (const struct sockaddr_in *) sa;
                return ipv4_is_special(ntohl(in->sin_addr.s_addr));
        }
        if (sa->sa_family == AF_INET6 && len >= (socklen_t) sizeof(struct sockaddr_in6)) {
                const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *) sa;
                return ipv6_is_special(in6->sin6_addr.s6_addr);
        }
        return true;
}

bool destination_address_allowed(
        const DestinationPolicy *p, const char *host, const struct sockaddr *sa, socklen_t len) {
        char norm[DESTINATION_HOST_MAX + 1];
        bool ip = false;

        if (!sa || (sa->sa_family != AF_INET && sa->sa_family != AF_INET6))
                return false;
        if (sa->sa_family == AF_INET && len < (socklen_t) sizeof(struct sockaddr_in))
                return false;
        if (sa->sa_family == AF_INET6 && len < (socklen_t) sizeof(struct sockaddr_in6))
                return false;
        /* An IP literal host is connected to at that address and no other: a
         * connection elsewhere means the URL was read differently than we
         * read it. */
        if (host && normalise_host(host, strlen(host), norm, &ip) >= 0 && ip) {
                uint8_t want[16] = { 0 }, got[16] = { 0 };

                if (strchr(norm, ':')) {
                        if (inet_pton(AF_INET6, norm, want) != 1)
                                return false;
                } else {
                        want[10] = want[11] = 0xff; /* as IPv4-mapped */
                        if (inet_pton(AF_INET, norm, want + 12) != 1)
                                return false;
                }
                if (sa->sa_family == AF_INET) {
                        got[10] = got[11] = 0xff;
                        memcpy(got + 12, &((const struct sockaddr_in *) sa)->sin_addr, 4);
                } else
                        memcpy(got, &((const struct sockaddr_in6 *) sa)->sin6_addr, 16);
                if (memcmp(want, got, 16) != 0)
                        return false;
        }
        if (!destination_address_is_special(sa, len))
                return true;
        return destination_host_named(p, host);
}

int destination_check_redirect(
        const DestinationPolicy *p, const DestinationUrl *from, const char *to, DestinationUrl *ret) {
        DestinationUrl u;
        int r;

        r = destination_check_url(p, to, &u);
        if (r < 0)
                return r;
        if (!streq(u.host, from->host))
                return -EPERM; /* another host, named or not, or an IP literal */
        if (ret)
                *ret = u;
        return 0;
}
