/* SPDX-License-Identifier: MIT */
#include "shared/macro.h"
#include "http/router.h"
#include "shared/parse-util.h"

static const char *const http_method_table[_HTTP_METHOD_MAX] = {
        [HTTP_METHOD_GET] = "GET",         [HTTP_METHOD_HEAD] = "HEAD",     [HTTP_METHOD_POST] = "POST",
        [HTTP_METHOD_PUT] = "PUT",         [HTTP_METHOD_DELETE] = "DELETE", [HTTP_METHOD_PATCH] = "PATCH",
        [HTTP_METHOD_OPTIONS] = "OPTIONS",
};

HttpMethod http_method_from_string(const char *s) {
        if (!s)
                return _HTTP_METHOD_INVALID;
        for (HttpMethod m = 0; m < HTTP_METHOD_OTHER; m++)
                if (streq(s, http_method_table[m]))
                        return m;
        return HTTP_METHOD_OTHER;
}

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(http_method, HttpMethod)

#define M(m) (1U << (m))

static const struct {
        const char *name;
        const char *path;      /* exact path, or the prefix before {id} */
        const char *id_prefix; /* NULL: no {id} segment */
        const char *suffix;    /* what follows the {id}; NULL: nothing */
        unsigned methods;
        const char *allow;
        size_t id_digits;       /* hex digits of the {id}; 0: 32 */
        const char *id2_prefix; /* a second id after the suffix: this prefix and 32 hex digits; NULL: none */
} route_table[_ROUTE_MAX] = {
        [ROUTE_HEALTH] = { "health",
                           "/api/v1/health",
                           NULL,
                           NULL,
                           M(HTTP_METHOD_GET) | M(HTTP_METHOD_HEAD),
                           "GET, HEAD" },
        [ROUTE_QUEUE_JOIN] = { "queue-join", "/api/v1/queue/join", NULL, NULL, M(HTTP_METHOD_POST), "POST" },
        [ROUTE_QUEUE_STATUS] = { "queue-status",
                                 "/api/v1/queue/status",
                                 NULL,
                                 NULL,
                                 M(HTTP_METHOD_GET) | M(HTTP_METHOD_HEAD),
                                 "GET, HEAD" },
        [ROUTE_QUEUE_TICKET] = { "queue-ticket", "/api/v1/queue/ticket", NULL, NULL, M(HTTP_METHOD_DELETE), "DELETE" },
        /* Event streams (API.md 11): GET only, a HEAD would be a stream
         * without a body. */
        [ROUTE_QUEUE_EVENTS] = { "queue-events", "/api/v1/queue/events", NULL, NULL, M(HTTP_METHOD_GET), "GET" },
        [ROUTE_QUERY] = { "query", "/api/v1/query", NULL, NULL, M(HTTP_METHOD_POST), "POST" },
        [ROUTE_HISTORY] = { "history",
                            "/api/v1/history",
                            NULL,
                            NULL,
                            M(HTTP_METHOD_GET) | M(HTTP_METHOD_HEAD) | M(HTTP_METHOD_DELETE),
                            "GET, HEAD, DELETE" },
        [ROUTE_HISTORY_ITEM] = { "history-item",
                                 "/api/v1/history/",
                                 "qr_",
                                 NULL,
                                 M(HTTP_METHOD_GET) | M(HTTP_METHOD_HEAD) | M(HTTP_METHOD_DELETE),
                                 "GET, HEAD, DELETE" },
        [ROUTE_HISTORY_EVENTS] = { "history-events", "/api/v1/history/", "qr_", "/events", M(HTTP_METHOD_GET), "GET" },
        [ROUTE_HISTORY_SOURCES] = { "history-sources",
                                    "/api/v1/history/",
                                    "qr_",
                                    "/sources",
                                    M(HTTP_METHOD_GET),
                                    "GET" },
        [ROUTE_ARTIFACT] = { "artifact",
                             "/api/v1/artifacts/",
                             "af_",
                             NULL,
                             M(HTTP_METHOD_GET) | M(HTTP_METHOD_HEAD),
                             "GET, HEAD" },
        [ROUTE_HISTORY_FEEDBACK] = { "history-feedback",
                                     "/api/v1/history/",
                                     "qr_",
                                     "/feedback",
                                     M(HTTP_METHOD_POST),
                                     "POST" },
        [ROUTE_REPORT_UNANSWERED] = { "report-unanswered",
                                      "/api/v1/reports/unanswered",
                                      NULL,
                                      NULL,
                                      M(HTTP_METHOD_GET) | M(HTTP_METHOD_HEAD),
                                      "GET, HEAD" },
        /* Conversations (API.md 9 "Export" and "Share"). */
        [ROUTE_HISTORY_EXPORT] = { "history-export", "/api/v1/history/", "qr_", "/export", M(HTTP_METHOD_GET), "GET" },
        [ROUTE_HISTORY_SHARE] = { "history-share",
                                  "/api/v1/history/",
                                  "qr_",
                                  "/share",
                                  M(HTTP_METHOD_POST) | M(HTTP_METHOD_DELETE),
                                  "POST, DELETE" },
        [ROUTE_SHARED] = { "shared", "/api/v1/shared/", "sh_", NULL, M(HTTP_METHOD_GET), "GET", SHARE_TOKEN_HEX_DIGITS },
        [ROUTE_SHARED_EXPORT] = { "shared-export",
                                  "/api/v1/shared/",
                                  "sh_",
                                  "/export",
                                  M(HTTP_METHOD_GET),
                                  "GET",
                                  SHARE_TOKEN_HEX_DIGITS },
        [ROUTE_SHARED_ARTIFACT] = { "shared-artifact",
                                    "/api/v1/shared/",
                                    "sh_",
                                    "/artifacts/",
                                    M(HTTP_METHOD_GET) | M(HTTP_METHOD_HEAD),
                                    "GET, HEAD",
                                    SHARE_TOKEN_HEX_DIGITS,
                                    "af_" },
        [ROUTE_REPORTS] = { "reports", "/api/v1/reports", NULL, NULL, M(HTTP_METHOD_GET), "GET" },
        [ROUTE_MCP] = { "mcp", "/mcp", NULL, NULL, M(HTTP_METHOD_POST), "POST" },
        /* Personal access tokens (API.md "Access tokens"). */
        [ROUTE_TOKENS] = { "tokens",
                           "/api/v1/tokens",
                           NULL,
                           NULL,
                           M(HTTP_METHOD_GET) | M(HTTP_METHOD_HEAD) | M(HTTP_METHOD_POST),
                           "GET, HEAD, POST" },
        [ROUTE_TOKEN] = { "token", "/api/v1/tokens/", "tk_", NULL, M(HTTP_METHOD_DELETE), "DELETE" },
        /* A person's whole history as one ZIP (API.md 9 "Export of a whole
         * history"): GET only, as a conversation's export. */
        [ROUTE_HISTORY_ARCHIVE] = { "history-archive",
                                    "/api/v1/history/export",
                                    NULL,
                                    NULL,
                                    M(HTTP_METHOD_GET),
                                    "GET" },
};

const char *route_to_string(Route r) {
        if (r < 0 || r >= _ROUTE_MAX)
                return NULL;
        return route_table[r].name;
}

/* prefix + exactly digits lowercase hex digits at s: the length of that,
 * or 0. */
static size_t id_length(const char *s, const char *prefix, size_t digits) {
        size_t l = strlen(prefix);

        if (!strneq(s, prefix, l))
                return 0;
        for (size_t i = 0; i < digits; i++)
                if (!((s[l + i] >= '0' && s[l + i] <= '9') || (s[l + i] >= 'a' && s[l + i] <= 'f')))
                        return 0; /* also stops at the NUL */
        return l + digits;
}

int router_match(const char *path, RouteMatch *ret) {
        if (!path || !ret)
                return -EINVAL;

        for (Route r = 0; r < _ROUTE_MAX; r++) {
                const char *id;

                if (!route_table[r].id_prefix) {
                        if (!streq(path, route_table[r].path))
                                continue;
                        *ret = (RouteMatch){ .route = r };
                        return 0;
                }

                if (!strneq(path, route_table[r].path, strlen(route_table[r].path)))
                        continue;
                const char *rest, *suffix = route_table[r].suffix ? route_table[r].suffix : "";
                size_t l, l2 = 0;

                id = path + strlen(route_table[r].path);
                l = id_length(
                        id, route_table[r].id_prefix, route_table[r].id_digits ? route_table[r].id_digits : 32);
                if (l == 0)
                        continue;
                rest = id + l;
                if (!route_table[r].id2_prefix) {
                        if (!streq(rest, suffix))
                                continue;
                } else {
                        if (!strneq(rest, suffix, strlen(suffix)))
                                continue;
                        rest += strlen(suffix);
                        l2 = id_length(rest, route_table[r].id2_prefix, 32);
                        if (l2 == 0 || rest[l2] != '\0')
                                continue;
                }

                _Static_assert(3 + SHARE_TOKEN_HEX_DIGITS < ROUTE_ID_MAX, "an id fits in RouteMatch.id");
                *ret = (RouteMatch){ .route = r };
                memcpy(ret->id, id, l);
                ret->id[l] = '\0';
                memcpy(ret->id2, rest, l2);
                ret->id2[l2] = '\0';
                return 0;
        }

        return -ENOENT;
}

bool router_path_is_api(const char *path) {
        if (path && streq(path, "/mcp"))
                return true;
        if (!path || !strneq(path, "/api/v1", STRLEN("/api/v1")))
                return false;
        return path[STRLEN("/api/v1")] == '\0' || path[STRLEN("/api/v1")] == '/';
}

bool route_allows_method(Route r, HttpMethod m) {
        if (r < 0 || r >= _ROUTE_MAX || m < 0 || m >= _HTTP_METHOD_MAX)
                return false;
        return route_table[r].methods & M(m);
}

const char *route_allow_header(Route r) {
        if (r < 0 || r >= _ROUTE_MAX)
                return NULL;
        return route_table[r].allow;
}

size_t http_percent_decode(char *s) {
        char *w = s;

        for (const char *r = s; *r;) {
                int hi, lo;

                if (r[0] == '%' && (hi = unhexchar(r[1])) >= 0 && (lo = unhexchar(r[2])) >= 0 &&
                    (hi | lo) != 0) {
                        *w++ = (char) (hi << 4 | lo);
                        r += 3;
                } else
                        *w++ = *r++;
        }
        *w = '\0';
        return (size_t) (w - s);
}
