/* SPDX-License-Identifier: MIT */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

/* The API's paths and methods (API.md 1, 6, 7, 9): which route a path is,
 * which methods a route takes, and the Allow header of a 405. Pure string
 * matching; the glue in httpd.c does the rest. */

typedef enum HttpMethod {
        HTTP_METHOD_GET,
        HTTP_METHOD_HEAD,
        HTTP_METHOD_POST,
        HTTP_METHOD_PUT,
        HTTP_METHOD_DELETE,
        HTTP_METHOD_PATCH,
        HTTP_METHOD_OPTIONS,
        HTTP_METHOD_OTHER, /* any other token: 405 on a known path */
        _HTTP_METHOD_MAX,
        _HTTP_METHOD_INVALID = -EINVAL,
} HttpMethod;

/* Exact and case-sensitive, as methods are (RFC 9110 section 9.1): "get" is
 * HTTP_METHOD_OTHER. NULL is _HTTP_METHOD_INVALID. */
HttpMethod http_method_from_string(const char *s);
/* "GET", ...; NULL for HTTP_METHOD_OTHER and out-of-range values. */
const char *http_method_to_string(HttpMethod m);

typedef enum Route {
        ROUTE_HEALTH,            /* /api/v1/health */
        ROUTE_QUEUE_JOIN,        /* /api/v1/queue/join */
        ROUTE_QUEUE_STATUS,      /* /api/v1/queue/status */
        ROUTE_QUEUE_TICKET,      /* /api/v1/queue/ticket */
        ROUTE_QUEUE_EVENTS,      /* /api/v1/queue/events */
        ROUTE_QUERY,             /* /api/v1/query */
        ROUTE_HISTORY,           /* /api/v1/history */
        ROUTE_HISTORY_ITEM,      /* /api/v1/history/qr_<32 hex> */
        ROUTE_HISTORY_EVENTS,    /* /api/v1/history/qr_<32 hex>/events */
        ROUTE_HISTORY_SOURCES,   /* /api/v1/history/qr_<32 hex>/sources */
        ROUTE_ARTIFACT,          /* /api/v1/artifacts/af_<32 hex> */
        ROUTE_HISTORY_FEEDBACK,  /* /api/v1/history/qr_<32 hex>/feedback */
        ROUTE_REPORT_UNANSWERED, /* /api/v1/reports/unanswered */
        ROUTE_HISTORY_EXPORT,    /* /api/v1/history/qr_<32 hex>/export */
        ROUTE_HISTORY_SHARE,     /* /api/v1/history/qr_<32 hex>/share */
        ROUTE_SHARED,            /* /api/v1/shared/sh_<64 hex> */
        ROUTE_SHARED_EXPORT,     /* /api/v1/shared/sh_<64 hex>/export */
        ROUTE_SHARED_ARTIFACT,   /* /api/v1/shared/sh_<64 hex>/artifacts/af_<32 hex> */
        ROUTE_REPORTS,           /* /api/v1/reports */
        ROUTE_MCP,               /* /mcp: the MCP face (API.md "MCP") */
        ROUTE_TOKENS,            /* /api/v1/tokens */
        ROUTE_TOKEN,             /* /api/v1/tokens/tk_<32 hex> */
        ROUTE_HISTORY_ARCHIVE,   /* /api/v1/history/export */
        _ROUTE_MAX,
        _ROUTE_INVALID = -EINVAL,
} Route;

/* "health", "queue-join", ...: for logs; NULL for out-of-range values. */
const char *route_to_string(Route r);

/* A share token (API.md 9 "Share"): "sh_" and 64 lowercase hex digits,
 * 256 random bits. */
#define SHARE_TOKEN_HEX_DIGITS 64
#define ROUTE_ID_MAX 72

typedef struct RouteMatch {
        Route route;
        char id[ROUTE_ID_MAX];  /* the {id} segment (a record, an artifact, a share token), "" when none */
        char id2[ROUTE_ID_MAX]; /* SHARED_ARTIFACT: the artifact's id; "" otherwise */
} RouteMatch;

/* Match a request path (without the query string). Returns 0 and fills
 * *ret, or -ENOENT (not_found) for every other path, and -EINVAL for NULL.
 * Matching is exact: no trailing slash, no case variants, no "//", no dot
 * segments, no percent-decoding. Ids are "qr_" (history), "af_"
 * (artifacts) or "tk_" (access tokens) followed by exactly 32 lowercase hex digits, share tokens
 * "sh_" and exactly 64. */
int router_match(const char *path, RouteMatch *ret);

/* True for "/api/v1", anything starting with "/api/v1/", and "/mcp": the
 * paths that get sessions, the origin policy and JSON errors. */
bool router_path_is_api(const char *path);

/* Methods per route (OPTIONS is answered as a preflight before routing, so
 * no route lists it):
 *   health, queue/status, artifact: GET, HEAD
 *   history, history item: GET, HEAD, DELETE (DELETE /history: all of the person's)
 *   queue/join, query: POST
 *   queue/ticket: DELETE
 *   queue/events, history item's events: GET (event streams, API.md 11)
 *   history item's sources: GET (each one costs a wiki request, API.md 9)
 *   history item's feedback: POST (API.md 9.1)
 *   reports/unanswered: GET, HEAD (API.md 9.2)
 *   reports: GET (API.md 9.2: the reports this person may read)
 *   history item's export, shared, shared export: GET
 *   shared artifact: GET, HEAD
 *   history item's share: POST, DELETE
 *   tokens: GET, HEAD, POST; a token: DELETE ("Access tokens")
 *   mcp: POST (no server-initiated stream, so GET is 405: API.md "MCP") */
bool route_allows_method(Route r, HttpMethod m);

/* The Allow header value for a 405 on route r, e.g. "GET, HEAD"; NULL for
 * an out-of-range route. Static. */
const char *route_allow_header(Route r);

/* Access-Control-Allow-Methods of a preflight: every method the API uses. */
#define HTTP_CORS_ALLOW_METHODS "GET, HEAD, POST, DELETE, OPTIONS"

/* Percent-decode a request path or query argument in place (RFC 3986
 * 2.1), as libmicrohttpd does (a "%" not followed by two hex digits stays),
 * except that "%00" stays "%00": a NUL would cut the string short, so that
 * "/api/v1/health%00x" would be routed as "/api/v1/health". Returns the new
 * length, which is strlen(s) afterwards. */
size_t http_percent_decode(char *s);
