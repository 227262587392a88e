/* SPDX-License-Identifier: MIT */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#include "shared/netprefix.h"

/* The Host a request names, checked against the names the daemon answers
 * to (API.md 4, "Host"): the defence against DNS rebinding. Pure: no I/O,
 * no allocation; the machine's own addresses are passed in.
 *
 * A page on a name its owner makes resolve to this machine reaches the
 * daemon with that name in Host, and the browser counts the daemon as that
 * page's own origin. Only a Host the daemon knows to be its own can make
 * a request "same origin". */

/* The longest Host value looked at: a name of 253 bytes, brackets, a port. */
#define HOST_MAX_LEN 270
/* The longest name (RFC 1035), without a trailing dot. */
#define HOST_NAME_MAX_LEN 253

typedef enum HostKind {
        HOST_KIND_NAME,    /* a DNS name, lower-cased, without a trailing dot */
        HOST_KIND_ADDRESS, /* an IPv4 dotted quad or a bracketed IPv6 literal */
        _HOST_KIND_MAX,
        _HOST_KIND_INVALID = -EINVAL,
} HostKind;

typedef struct HostParts {
        HostKind kind;
        char name[HOST_NAME_MAX_LEN + 1]; /* HOST_KIND_NAME */
        NetAddress address;               /* HOST_KIND_ADDRESS; a mapped IPv6 is AF_INET */
        bool loopback;                    /* 127.0.0.0/8, ::1 */
        bool unspecified;                 /* 0.0.0.0, :: */
} HostParts;

/* Parse a Host field value "host[:port]" (s, NUL-terminated, OWS around it
 * dropped). host is a DNS name (labels of 1..63 letters, digits, '-' or
 * '_', at most 253 bytes, one trailing dot allowed and dropped), a strict
 * IPv4 dotted quad (no short, octal or hex forms, no leading zeros), or an
 * IPv6 literal in brackets without a zone; a name of digits and dots only
 * that is no dotted quad is refused. The port is 1..5 digits, 0..65535.
 * Anything else (empty, too long, a path, userinfo, percent-encoding,
 * control characters, non-ASCII) is -EINVAL. Returns 0 and fills *ret on
 * success. */
int host_parse(const char *s, HostParts *ret);

/* An entry of WIKI_WEB_ALLOWED_HOSTS: a DNS name as host_parse() reads
 * one (no port, no address), or "*." followed by such a name. */
bool host_pattern_is_valid(const char *pattern);

typedef enum HostVerdict {
        HOST_ALLOW,
        HOST_DENY,
        /* An address literal that is none of own[]: the caller may read the
         * machine's addresses again and ask once more. */
        HOST_UNKNOWN_ADDRESS,
        _HOST_VERDICT_MAX,
        _HOST_VERDICT_INVALID = -EINVAL,
} HostVerdict;

typedef struct HostPolicy {
        char *const *allowed_hosts;   /* WIKI_WEB_ALLOWED_HOSTS, NULL-terminated, may be NULL */
        char *const *allowed_origins; /* WIKI_WEB_ALLOWED_ORIGINS: their hosts, NULL-terminated, may be NULL */
        const NetAddress *own;        /* the machine's own addresses */
        size_t n_own;
} HostPolicy;

/* Whether the Host value host (NULL: absent) names this daemon:
 *   - "localhost";
 *   - a loopback or unspecified address, or one of own[], as a literal;
 *   - a name of allowed_hosts (ASCII case-insensitive; "*.example.com"
 *     matches one more label before "example.com", not "example.com" and
 *     not "a.b.example.com");
 *   - the host of an entry of allowed_origins (names and literals);
 * each with any port. An absent or malformed Host is DENY. All borrowed. */
HostVerdict host_check(const char *host, const HostPolicy *policy);

/* "allow", "deny", "unknown-address" */
const char *host_verdict_to_string(HostVerdict v);
