/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <assert.h>
#include <string.h>
#include <strings.h>

#include "shared/host.h"
#include "shared/macro.h"
#include "shared/netprefix.h"

static const uint8_t host_v4_mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

static bool host_is_ows(char c) {
        return c == ' ' || c == '\t';
}

static bool host_is_digit(char c) {
        return c >= '0' && c <= '9';
}

static bool host_label_char_is_valid(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || host_is_digit(c) || c == '-' || c == '_';
}

/* A DNS name of len bytes at s (no trailing dot here): labels of 1..63
 * label characters, at most HOST_NAME_MAX_LEN bytes. */
static bool host_name_is_valid(const char *s, size_t len) {
        size_t label = 0;

        if (len == 0 || len > HOST_NAME_MAX_LEN)
                return false;
        for (size_t i = 0; i < len; i++) {
                if (s[i] == '.') {
                        if (label == 0)
                                return false;
                        label = 0;
                        continue;
                }
                if (!host_label_char_is_valid(s[i]) || ++label > 63)
                        return false;
        }
        return label > 0;
}

/* Only digits and dots: what a browser would have read as an IPv4 address
 * in some form. */
static bool host_is_numeric(const char *s, size_t len) {
        for (size_t i = 0; i < len; i++)
                if (!host_is_digit(s[i]) && s[i] != '.')
                        return false;
        return true;
}

/* An IPv4 dotted quad, strictly (net_ipv4_is_strict()). */
static bool host_ipv4_parse(const char *s, size_t len, uint8_t ret[static 4]) {
        char buf[16];

        if (len >= sizeof buf)
                return false;
        memcpy(buf, s, len);
        buf[len] = '\0';
        return net_ipv4_is_strict(buf) && inet_pton(AF_INET, buf, ret) == 1;
}

static bool host_ipv6_parse(const char *s, size_t len, uint8_t ret[static 16]) {
        char buf[INET6_ADDRSTRLEN];

        /* The longest text form, "ffff:...:255.255.255.255", fits; a zone
         * ("%25eth0") names an interface, never this daemon to a browser. */
        if (len == 0 || len >= sizeof buf)
                return false;
        for (size_t i = 0; i < len; i++)
                if (!host_is_digit(s[i]) && !((s[i] | 0x20) >= 'a' && (s[i] | 0x20) <= 'f') && s[i] != ':' &&
                    s[i] != '.')
                        return false;
        memcpy(buf, s, len);
        buf[len] = '\0';
        return inet_pton(AF_INET6, buf, ret) == 1;
}

static bool host_port_is_valid(const char *s, size_t len) {
        unsigned v = 0;

        if (len == 0 || len > 5)
                return false;
        for (size_t i = 0; i < len; i++) {
                if (!host_is_digit(s[i]))
                        return false;
                v = v * 10 + (unsigned) (s[i] - '0');
        }
        return v <= 65535;
}

static void host_address_classify(HostParts *p) {
        const uint8_t *b = p->address.bytes;

        if (p->address.family == AF_INET6 && memcmp(b, host_v4_mapped, sizeof host_v4_mapped) == 0) {
                uint8_t v4[4];

                memcpy(v4, b + 12, 4);
                memset(p->address.bytes, 0, sizeof p->address.bytes);
                memcpy(p->address.bytes, v4, 4);
                p->address.family = AF_INET;
        }
        if (p->address.family == AF_INET) {
                p->loopback = b[0] == 127;
                p->unspecified = b[0] == 0 && b[1] == 0 && b[2] == 0 && b[3] == 0;
        } else {
                static const uint8_t zero[16] = { 0 };

                p->unspecified = memcmp(b, zero, 16) == 0;
                p->loopback = memcmp(b, zero, 15) == 0 && b[15] == 1;
        }
}

int host_parse(const char *s, HostParts *ret) {
        HostParts p = { .kind = _HOST_KIND_INVALID };
        const char *end, *host, *colon;
        size_t len, host_len;

        assert(ret);

        if (!s)
                return -EINVAL;
        while (host_is_ows(*s))
                s++;
        /* Measured before trimming, so that a cut cannot make a long value
         * look like a short one. */
        len = strnlen(s, HOST_MAX_LEN + 1);
        if (len == 0 || len > HOST_MAX_LEN)
                return -EINVAL;
        end = s + len;
        while (end > s && host_is_ows(end[-1]))
                end--;
        len = (size_t) (end - s);
        if (len == 0)
                return -EINVAL;

        if (s[0] == '[') {
                const char *close = memchr(s, ']', len);

                if (!close)
                        return -EINVAL;
                host = s + 1;
                host_len = (size_t) (close - host);
                colon = close + 1 < end ? close + 1 : NULL;
                if (colon && *colon != ':')
                        return -EINVAL;
                p.address.family = AF_INET6;
                if (!host_ipv6_parse(host, host_len, p.address.bytes))
                        return -EINVAL;
                p.kind = HOST_KIND_ADDRESS;
        } else {
                colon = memchr(s, ':', len);
                host = s;
                host_len = colon ? (size_t) (colon - s) : len;
                if (host_len > 0 && s[host_len - 1] == '.')
                        host_len--; /* "wiki.example.com." is that name */
                if (host_is_numeric(host, host_len)) {
                        p.address.family = AF_INET;
                        if (!host_ipv4_parse(host, host_len, p.address.bytes))
                                return -EINVAL;
                        p.kind = HOST_KIND_ADDRESS;
                } else {
                        if (!host_name_is_valid(host, host_len))
                                return -EINVAL;
                        for (size_t i = 0; i < host_len; i++)
                                p.name[i] =
                                        (char) ((host[i] >= 'A' && host[i] <= 'Z') ? host[i] | 0x20 : host[i]);
                        p.name[host_len] = '\0';
                        p.kind = HOST_KIND_NAME;
                }
        }
        if (colon && !host_port_is_valid(colon + 1, (size_t) (end - colon - 1)))
                return -EINVAL;
        if (p.kind == HOST_KIND_ADDRESS)
                host_address_classify(&p);

        *ret = p;
        return 0;
}

bool host_pattern_is_valid(const char *pattern) {
        size_t len;

        if (!pattern)
                return false;
        if (strneq(pattern, "*.", 2))
                pattern += 2;
        len = strlen(pattern);
        return host_name_is_valid(pattern, len) && !host_is_numeric(pattern, len);
}

/* Whether name (lower-case, from host_parse()) is matched by pattern. */
static bool host_pattern_matches(const char *pattern, const char *name) {
        if (strneq(pattern, "*.", 2)) {
                const char *dot = strchr(name, '.');

                /* Exactly one label in place of the '*'. */
                return dot && dot > name && strcasecmp(dot + 1, pattern + 2) == 0;
        }
        return strcasecmp(pattern, name) == 0;
}

/* The host of an allowed origin "scheme://host[:port]", parsed as a Host
 * is. The list is validated at start; an entry that does not parse here
 * matches nothing. */
static bool host_matches_origin(const char *origin, const HostParts *h) {
        const char *sep = strstr(origin, "://");
        HostParts o;

        if (!sep || host_parse(sep + 3, &o) < 0 || o.kind != h->kind)
                return false;
        if (o.kind == HOST_KIND_NAME)
                return streq(o.name, h->name);
        return o.address.family == h->address.family &&
                memcmp(o.address.bytes, h->address.bytes, sizeof o.address.bytes) == 0;
}

HostVerdict host_check(const char *host, const HostPolicy *policy) {
        HostParts h;

        assert(policy);

        if (host_parse(host, &h) < 0)
                return HOST_DENY;

        for (char *const *o = policy->allowed_origins; o && *o; o++)
                if (host_matches_origin(*o, &h))
                        return HOST_ALLOW;

        if (h.kind == HOST_KIND_NAME) {
                if (streq(h.name, "localhost"))
                        return HOST_ALLOW;
                for (char *const *a = policy->allowed_hosts; a && *a; a++)
                        if (host_pattern_matches(*a, h.name))
                                return HOST_ALLOW;
                return HOST_DENY;
        }

        if (h.loopback || h.unspecified)
                return HOST_ALLOW;
        for (size_t i = 0; i < policy->n_own; i++)
                if (policy->own[i].family == h.address.family &&
                    memcmp(policy->own[i].bytes, h.address.bytes, sizeof h.address.bytes) == 0)
                        return HOST_ALLOW;
        return HOST_UNKNOWN_ADDRESS;
}

const char *host_verdict_to_string(HostVerdict v) {
        static const char *const table[_HOST_VERDICT_MAX] = {
                [HOST_ALLOW] = "allow",
                [HOST_DENY] = "deny",
                [HOST_UNKNOWN_ADDRESS] = "unknown-address",
        };

        if (v < 0 || v >= _HOST_VERDICT_MAX)
                return NULL;
        return table[v];
}
