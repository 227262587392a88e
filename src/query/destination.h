/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "shared/macro.h"

/* The destination policy of API.md 8 ("destination_denied"), pure: no I/O,
 * no libcurl. Upstream requests go only to the hosts named in
 * WIKI_WEB_WIKI_API_URL, WIKI_WEB_LLM_URL and WIKI_WEB_ALLOWED_DESTINATIONS,
 * over http or https. Two checks, both made by src/query/upstream.c on
 * every hop:
 *  1. destination_check_url(): before a request (and before each redirect
 *     hop) the URL is parsed strictly and its host must be named;
 *  2. destination_address_allowed(): on every connection, against the
 *     resolved address (CURLOPT_OPENSOCKETFUNCTION, before the socket
 *     exists): loopback, RFC 1918, CGNAT (100.64/10), link-local,
 *     unique-local (fc00::/7), IPv4-mapped/compatible IPv6 of those,
 *     unspecified, multicast, broadcast and the other IANA special ranges are
 *     denied unless the connection's host was named explicitly.
 *
 * Hosts are compared after normalisation: ASCII lower case, one trailing
 * dot dropped, IPv6 literals without brackets in canonical inet_ntop()
 * form, IPv4 literals only in dotted-quad form (no "0x7f.1", no "2130706433":
 * those are refused as hosts, so no parser differential can turn them into
 * an address). Ports do not matter: a named host is named on every port. */

#define DESTINATION_HOST_MAX 253
#define DESTINATION_URL_MAX 8192

typedef struct DestinationPolicy DestinationPolicy;

/* The parts of a URL that the policy looks at. */
typedef struct DestinationUrl {
        bool https;
        char host[DESTINATION_HOST_MAX + 1]; /* normalised */
        bool host_is_ip;                     /* an IPv4 or IPv6 literal */
        uint16_t port;                       /* explicit, or 80/443 */
} DestinationUrl;

/* Parse url strictly: "http" or "https" (any case), "://", no user info,
 * a host (DNS name of [A-Za-z0-9-_.] labels, an IPv4 dotted quad or a
 * bracketed IPv6 literal without zone), an optional port 1..65535, then
 * nothing or a path/query starting with "/" or "?" or "#" of printable
 * ASCII. Returns 0, -EPROTONOSUPPORT for another scheme, -EINVAL otherwise. */
int destination_parse_url(const char *url, DestinationUrl *ret);

/* Build the policy from the configured URLs (each may be NULL; invalid ones
 * are an error) and the extra hosts (NULL-terminated, may be NULL).
 * Returns 0, -EINVAL, -ENOMEM. */
int destination_policy_new(
        const char *wiki_api_url, const char *llm_url, char *const *extra_hosts, DestinationPolicy **ret);
DestinationPolicy *destination_policy_free(DestinationPolicy *p);

/* Whether the (normalised or raw) host is named in the policy. */
bool destination_host_named(const DestinationPolicy *p, const char *host);

/* Check 1: returns 0 when url may be requested, with its parts in *ret;
 * -EPERM when the policy denies it (scheme or host); -EINVAL when it is
 * not a valid URL (also a denial for a redirect target). */
int destination_check_url(const DestinationPolicy *p, const char *url, DestinationUrl *ret);

/* Whether an address is of a special class (loopback, private, ...; see
 * above). Unknown families count as special. */
bool destination_address_is_special(const struct sockaddr *sa, socklen_t len);

/* Check 2: whether a connection to sa for a URL whose host is `host` may be
 * made. A special address is allowed only when host is named; a host that
 * is an IP literal allows only a connection to that very address (IPv4 and
 * its IPv4-mapped IPv6 form are the same address). Since check 1 has already
 * refused every host that is not named, check 2 is the second line: it holds
 * even if libcurl read a URL differently from destination_parse_url(). */
bool destination_address_allowed(
        const DestinationPolicy *p, const char *host, const struct sockaddr *sa, socklen_t len);

/* Whether a redirect from the URL `from` to `to` may be followed: to must
 * pass check 1 and have the same host as from (the scheme and port may
 * change): a redirect to another host, named or not, or to an IP literal
 * that is not from's own host is refused. Returns 0, -EPERM, -EINVAL. */
int destination_check_redirect(
        const DestinationPolicy *p, const DestinationUrl *from, const char *to, DestinationUrl *ret);
DEFINE_TRIVIAL_CLEANUP_FUNC(DestinationPolicy *, destination_policy_free);
