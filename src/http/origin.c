/* SPDX-License-Identifier: MIT */
#include <strings.h>

#include "shared/macro.h"
#include "http/origin.h"

/* An origin split into its parts, pointing into the string it came from.
 * The authority excludes a default port, so that "http://h:80" and
 * "http://h" compare equal. */
typedef struct OriginParts {
        const char *scheme;
        size_t scheme_len;
        const char *authority;
        size_t authority_len;
} OriginParts;

static bool is_ows(char c) {
        return c == ' ' || c == '\t';
}

/* Characters of a host[:port] we accept: letters, digits, and those of a
 * reg-name, an IPv6 literal or a port. Everything that could start a path,
 * query, fragment or userinfo ('/', '?', '#', '@'), whitespace, control
 * characters, quotes, ',' and non-ASCII bytes are not. Percent-encoding is
 * not accepted either: browsers never send it in an Origin. */
static bool authority_char_is_valid(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                c == '.' || c == '_' || c == '~' || c == ':' || c == '[' || c == ']';
}

/* Validate and split host[:port] of len bytes at s, dropping the default
 * port of the scheme. */
static bool authority_parse(
        const char *s, size_t len, const char *scheme, size_t scheme_len, const char **ret, size_t *ret_len) {
        const char *colon = NULL;
        size_t host_len;

        if (len == 0 || len > ORIGIN_MAX_LEN)
                return false;
        for (size_t i = 0; i < len; i++)
                if (!authority_char_is_valid(s[i]))
                        return false;

        /* The port follows the ':' after the host; an IPv6 literal is in
         * brackets and is the only place '[', ']' and further ':' may be. */
        if (s[0] == '[') {
                const char *close = memchr(s, ']', len);

                if (!close || close == s + 1 || memchr(s + 1, '[', (size_t) (close - s - 1)))
                        return false;
                if ((size_t) (close - s) + 1 < len) {
                        if (close[1] != ':')
                                return false;
                        colon = close + 1;
                }
        } else {
                if (memchr(s, '[', len) || memchr(s, ']', len))
                        return false;
                colon = memchr(s, ':', len);
                if (colon && memchr(colon + 1, ':', len - (size_t) (colon + 1 - s)))
                        return false;
                if (colon == s)
                        return false;
        }

        host_len = colon ? (size_t) (colon - s) : len;
        if (colon) {
                const char *port = colon + 1;
                size_t port_len = len - host_len - 1;

                /* A port is 1..5 digits; an empty one ("host:") is malformed. */
                if (port_len == 0 || port_len > 5)
                        return false;
                for (size_t i = 0; i < port_len; i++)
                        if (port[i] < '0' || port[i] > '9')
                                return false;

                if ((scheme_len == STRLEN("http") && memcmp(scheme, "http", scheme_len) == 0 &&
                     port_len == 2 && memcmp(port, "80", 2) == 0) ||
                    (scheme_len == STRLEN("https") && memcmp(scheme, "https", scheme_len) == 0 &&
                     port_len == 3 && memcmp(port, "443", 3) == 0))
                        len = host_len;
        }

        *ret = s;
        *ret_len = len;
        return true;
}

/* Parse a serialized origin "scheme://host[:port]" (RFC 6454 section 6.2).
 * The scheme is kept as sent: comparing it exactly is the policy. */
static bool origin_parse(const char *s, OriginParts *ret) {
        const char *sep;
        size_t len;

        len = strnlen(s, ORIGIN_MAX_LEN + 1);
        if (len == 0 || len > ORIGIN_MAX_LEN)
                return false;

        sep = strstr(s, "://");
        if (!sep || sep == s)
                return false;
        for (const char *p = s; p < sep; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                      (p > s && ((*p >= '0' && *p <= '9') || *p == '+' || *p == '-' || *p == '.'))))
                        return false;

        ret->scheme = s;
        ret->scheme_len = (size_t) (sep - s);
        return authority_parse(
                sep + 3,
                len - ret->scheme_len - 3,
                ret->scheme,
                ret->scheme_len,
                &ret->authority,
                &ret->authority_len);
}

static bool origin_parts_equal(const OriginParts *a, const OriginParts *b) {
        return a->scheme_len == b->scheme_len && memcmp(a->scheme, b->scheme, a->scheme_len) == 0 &&
                a->authority_len == b->authority_len &&
                strncasecmp(a->authority, b->authority, a->authority_len) == 0;
}

/* Our own origin: the scheme from the cookie setting, the authority from
 * Host (trimmed of OWS, as MHD may leave it). */
static bool own_origin(const char *host, bool cookie_secure, OriginParts *ret) {
        const char *scheme = cookie_secure ? "https" : "http";
        const char *end;
        size_t len;

        if (!host)
                return false;
        while (is_ows(*host))
                host++;
        /* Measured before trimming, so a cut cannot make a long value look
         * like a short one. */
        len = strnlen(host, ORIGIN_MAX_LEN + 1);
        if (len > ORIGIN_MAX_LEN)
                return false;
        end = host + len;
        while (end > host && is_ows(end[-1]))
                end--;

        ret->scheme = scheme;
        ret->scheme_len = strlen(scheme);
        return authority_parse(
                host, (size_t) (end - host), ret->scheme, ret->scheme_len, &ret->authority, &ret->authority_len);
}

static bool sec_fetch_site_is_cross_site(const char *v) {
        const char *end;
        size_t len;

        if (!v)
                return false;
        while (is_ows(*v))
                v++;
        len = strnlen(v, 64);
        if (len >= 64)
                return false; /* not "cross-site" with some OWS */
        end = v + len;
        while (end > v && is_ows(end[-1]))
                end--;
        return (size_t) (end - v) == STRLEN("cross-site") &&
                strncasecmp(v, "cross-site", STRLEN("cross-site")) == 0;
}

OriginVerdict origin_check(
        const char *origin,
        const char *host,
        const char *sec_fetch_site,
        bool cookie_secure,
        char *const *allowed) {
        OriginParts o, own;

        if (!origin)
                /* No Origin: a same-origin navigation or a non-browser
                 * client, unless the browser tells us it is cross-site (a
                 * cross-site GET does not carry Origin). */
                return sec_fetch_site_is_cross_site(sec_fetch_site) ? ORIGIN_DENY : ORIGIN_ALLOW;

        /* "null" (sandboxed frames, file:, redirects) fails to parse here:
         * it has no "://". It is denied even if someone lists it. */
        if (!origin_parse(origin, &o))
                return ORIGIN_DENY;

        for (char *const *a = allowed; a && *a; a++) {
                OriginParts l;

                if (origin_parse(*a, &l) && origin_parts_equal(&o, &l))
                        return ORIGIN_ALLOW_CORS;
        }

        if (own_origin(host, cookie_secure, &own) && origin_parts_equal(&o, &own))
                return ORIGIN_ALLOW;

        return ORIGIN_DENY;
}

const char *origin_verdict_to_string(OriginVerdict v) {
        static const char *const table[_ORIGIN_VERDICT_MAX] = {
                [ORIGIN_ALLOW] = "allow",
                [ORIGIN_ALLOW_CORS] = "allow-cors",
                [ORIGIN_DENY] = "deny",
        };

        if (v < 0 || v >= _ORIGIN_VERDICT_MAX)
                return NULL;
        return table[v];
}
