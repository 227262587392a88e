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
                            M(HTTP_METHOD_GET) | M(HTTP_METHOD_HEAD),
                            "GET, HEAD" },
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
};

const char *route_to_string(Route r) {
        if (r < 0 || r >= _ROUTE_MAX)
                return NULL;
        return route_table[r].name;
}

/* prefix + exactly 32 lowercase hex digits, then exactly the suffix (NULL:
 * nothing). */
static bool id_is_valid(const char *s, const char *prefix, const char *suffix) {
        size_t l = strlen(prefix);

        if (!strneq(s, prefix, l))
                return false;
        s += l;
        for (size_t i = 0; i < 32; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false; /* also stops at the NUL */
        return streq(s + 32, suffix ? suffix : "");
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
                id = path + strlen(route_table[r].path);
                if (!id_is_valid(id, route_table[r].id_prefix, route_table[r].suffix))
                        continue;

                _Static_assert(3 + 32 < ROUTE_ID_MAX, "an id fits in RouteMatch.id");
                *ret = (RouteMatch){ .route = r };
                memcpy(ret->id, id, 3 + 32);
                ret->id[3 + 32] = '\0';
                return 0;
        }

        return -ENOENT;
}

bool router_path_is_api(const char *path) {
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
