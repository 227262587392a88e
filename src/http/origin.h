/* SPDX-License-Identifier: MIT */
#pragma once

#include <errno.h>
#include <stdbool.h>

/* The origin policy of API.md 4, as a pure function of the request headers
 * and the settings. */

typedef enum OriginVerdict {
        ORIGIN_ALLOW,      /* no Origin header (and not Sec-Fetch-Site: cross-site), or
                            * same origin: no CORS headers needed */
        ORIGIN_ALLOW_CORS, /* Origin in the allow-list: add Access-Control-Allow-Origin:
                            * <origin>, -Credentials: true, Vary: Origin */
        ORIGIN_DENY,       /* 403 origin_denied */
        _ORIGIN_VERDICT_MAX,
        _ORIGIN_VERDICT_INVALID = -EINVAL,
} OriginVerdict;

/* Longest Origin value we consider at all; longer ones are denied. */
#define ORIGIN_MAX_LEN 1024

/* origin, host, sec_fetch_site: the raw request header values, each may be
 * NULL (absent). cookie_secure: WIKI_WEB_COOKIE_SECURE, which makes our own
 * origin https:// + Host rather than http:// + Host. allowed: the
 * WIKI_WEB_ALLOWED_ORIGINS entries, NULL-terminated (may be NULL). All
 * borrowed.
 *
 * Decision, in order:
 *   - no Origin: DENY when Sec-Fetch-Site is "cross-site" (ASCII
 *     case-insensitive, OWS trimmed), else ALLOW;
 *   - an Origin that is not a plain "scheme://host[:port]" (control
 *     characters, spaces, non-ASCII, a path, query, fragment or userinfo,
 *     more than ORIGIN_MAX_LEN bytes, empty, or "null"): DENY;
 *   - in the allow-list: ALLOW_CORS (even when it is also our own origin);
 *   - equal to our own origin: ALLOW (host is one the Host check of
 *     shared/host.h accepted: the server refuses any other first);
 *   - anything else (including a missing or malformed Host): DENY.
 * Origins compare with the scheme exact and host[:port] ASCII
 * case-insensitive, a default port (":80" for http, ":443" for https)
 * being the same as none. */
OriginVerdict origin_check(
        const char *origin,
        const char *host,
        const char *sec_fetch_site,
        bool cookie_secure,
        char *const *allowed);

/* "allow", "allow-cors", "deny" */
const char *origin_verdict_to_string(OriginVerdict v);
