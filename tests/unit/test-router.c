/* SPDX-License-Identifier: MIT */
#include "shared/macro.h"
#include "http/router.h"
#include "tests.h"

#define QR "qr_0123456789abcdef0123456789abcdef"
#define AF "af_fedcba9876543210fedcba9876543210"

TEST(method_from_string) {
        ASSERT_EQ_INT(http_method_from_string("GET"), HTTP_METHOD_GET);
        ASSERT_EQ_INT(http_method_from_string("HEAD"), HTTP_METHOD_HEAD);
        ASSERT_EQ_INT(http_method_from_string("POST"), HTTP_METHOD_POST);
        ASSERT_EQ_INT(http_method_from_string("PUT"), HTTP_METHOD_PUT);
        ASSERT_EQ_INT(http_method_from_string("DELETE"), HTTP_METHOD_DELETE);
        ASSERT_EQ_INT(http_method_from_string("PATCH"), HTTP_METHOD_PATCH);
        ASSERT_EQ_INT(http_method_from_string("OPTIONS"), HTTP_METHOD_OPTIONS);

        /* Case-sensitive, exact. */
        ASSERT_EQ_INT(http_method_from_string("get"), HTTP_METHOD_OTHER);
        ASSERT_EQ_INT(http_method_from_string("Get"), HTTP_METHOD_OTHER);
        ASSERT_EQ_INT(http_method_from_string("GET "), HTTP_METHOD_OTHER);
        ASSERT_EQ_INT(http_method_from_string(" GET"), HTTP_METHOD_OTHER);
        ASSERT_EQ_INT(http_method_from_string("GETX"), HTTP_METHOD_OTHER);
        ASSERT_EQ_INT(http_method_from_string("GE"), HTTP_METHOD_OTHER);
        ASSERT_EQ_INT(http_method_from_string("TRACE"), HTTP_METHOD_OTHER);
        ASSERT_EQ_INT(http_method_from_string("CONNECT"), HTTP_METHOD_OTHER);
        ASSERT_EQ_INT(http_method_from_string(""), HTTP_METHOD_OTHER);
        ASSERT_EQ_INT(http_method_from_string(NULL), _HTTP_METHOD_INVALID);

        for (HttpMethod m = 0; m < HTTP_METHOD_OTHER; m++)
                ASSERT_EQ_INT(http_method_from_string(http_method_to_string(m)), m);
        ASSERT_TRUE(!http_method_to_string(HTTP_METHOD_OTHER));
        ASSERT_TRUE(!http_method_to_string(_HTTP_METHOD_MAX));
        ASSERT_TRUE(!http_method_to_string(_HTTP_METHOD_INVALID));
}

static void expect_route(const char *path, Route route, const char *id) {
        RouteMatch m;

        memset(&m, 'X', sizeof m);
        if (router_match(path, &m) != 0) {
                fprintf(stderr, "no match for %s\n", path);
                abort();
        }
        ASSERT_EQ_INT(m.route, route);
        ASSERT_EQ_STR(m.id, id);
        ASSERT_TRUE(router_path_is_api(path));
}

static void expect_no_route(const char *path) {
        RouteMatch m;

        if (router_match(path, &m) != -ENOENT) {
                fprintf(stderr, "unexpected match for \"%s\"\n", path);
                abort();
        }
}

TEST(match) {
        expect_route("/api/v1/health", ROUTE_HEALTH, "");
        expect_route("/api/v1/queue/join", ROUTE_QUEUE_JOIN, "");
        expect_route("/api/v1/queue/status", ROUTE_QUEUE_STATUS, "");
        expect_route("/api/v1/queue/ticket", ROUTE_QUEUE_TICKET, "");
        expect_route("/api/v1/queue/events", ROUTE_QUEUE_EVENTS, "");
        expect_route("/api/v1/query", ROUTE_QUERY, "");
        expect_route("/api/v1/history", ROUTE_HISTORY, "");
        expect_route("/api/v1/history/" QR, ROUTE_HISTORY_ITEM, QR);
        expect_route("/api/v1/history/" QR "/events", ROUTE_HISTORY_EVENTS, QR);
        expect_route("/api/v1/history/" QR "/sources", ROUTE_HISTORY_SOURCES, QR);
        expect_route("/api/v1/artifacts/" AF, ROUTE_ARTIFACT, AF);
}

TEST(no_match) {
        static const char *const paths[] = {
                "",
                "/",
                "/api",
                "/api/",
                "/api/v1",
                "/api/v1/",
                "/api/v2/health",
                "/api/v1/health/",
                "/api/v1/health/x",
                "/api/v1/healthz",
                "/api/v1/Health",
                "/API/v1/health",
                "/api/V1/health",
                "//api/v1/health",
                "/api//v1/health",
                "/api/v1//health",
                "/api/v1/./health",
                "/api/v1/../v1/health",
                "/api/v1/queue/../health",
                "/api/v1/health/.",
                "/api/v1/health/..",
                "/api/v1/%68ealth",
                "/api/v1/health?x=1",
                "/api/v1/health#x",
                "/api/v1/health;x",
                "api/v1/health",
                " /api/v1/health",
                "/api/v1/health ",
                "/api/v1/queue",
                "/api/v1/queue/",
                "/api/v1/queue/join/",
                "/api/v1/queue/JOIN",
                "/api/v1/query/",
                "/api/v1/query/" QR,
                "/api/v1/history/",
                "/api/v1/history//" QR,
                "/api/v1/history/" QR "/",
                "/api/v1/history/" QR "x",
                "/api/v1/history/" QR "0",
                "/api/v1/history/qr_0123456789abcdef0123456789abcde",  /* 31 digits */
                "/api/v1/history/qr_0123456789ABCDEF0123456789ABCDEF", /* uppercase */
                "/api/v1/history/QR_0123456789abcdef0123456789abcdef",
                "/api/v1/history/qr_0123456789abcdeg0123456789abcdef",
                "/api/v1/history/qr-0123456789abcdef0123456789abcdef",
                "/api/v1/history/0123456789abcdef0123456789abcdef",
                "/api/v1/history/" AF, /* wrong prefix */
                "/api/v1/history/tk_0123456789abcdef0123456789abcdef",
                "/api/v1/history/qr_",
                "/api/v1/history/" QR "/x",
                "/api/v1/history/" QR "/events/",
                "/api/v1/history/" QR "/event",
                "/api/v1/history/" QR "/eventsx",
                "/api/v1/history/" QR "/EVENTS",
                "/api/v1/history/" QR "//events",
                "/api/v1/history/qr_0123456789abcdef0123456789abcde/events", /* 31 digits */
                "/api/v1/history/events",
                "/api/v1/artifacts/" AF "/events",
                "/api/v1/queue/events/",
                "/api/v1/artifacts",
                "/api/v1/artifacts/",
                "/api/v1/artifacts/" QR,
                "/api/v1/artifacts/" AF "/",
                "/api/v1/artifact/" AF,
                "/api/v1/artifacts//" AF,
                "/api/v1/artifacts/af_fedcba9876543210fedcba987654321",
                "/api/v1/artifacts/af_fedcba9876543210fedcba98765432100",
                "/api/v1/artifacts/af_fedcba9876543210fedcba987654321\xff",
                "/api/v1/artifacts/af_fedcba9876543210fedcba987654321 ",
                "/api/v1/artifacts/../history/" QR,
                "/api/v1/health\xff",
                "/api/v1/\xff",
                "\xff\xfe",
        };

        for (size_t i = 0; i < ELEMENTSOF(paths); i++)
                expect_no_route(paths[i]);

        {
                RouteMatch m;
                ASSERT_EQ_INT(router_match(NULL, &m), -EINVAL);
        }

        /* A NUL cuts the path, as it would for libmicrohttpd. */
        {
                static const char p[] = "/api/v1/health\0/x";
                expect_route(p, ROUTE_HEALTH, "");
        }
}

TEST(huge_path) {
        size_t n = 1 << 20;
        char *p = malloc(n + 1);
        RouteMatch m;

        ASSERT_TRUE(p);
        memcpy(p, "/api/v1/history/qr_", STRLEN("/api/v1/history/qr_"));
        memset(p + STRLEN("/api/v1/history/qr_"), 'a', n - STRLEN("/api/v1/history/qr_"));
        p[n] = '\0';
        ASSERT_EQ_INT(router_match(p, &m), -ENOENT);
        ASSERT_TRUE(router_path_is_api(p));
        free(p);
}

TEST(path_is_api) {
        ASSERT_TRUE(router_path_is_api("/api/v1"));
        ASSERT_TRUE(router_path_is_api("/api/v1/"));
        ASSERT_TRUE(router_path_is_api("/api/v1/health"));
        ASSERT_TRUE(router_path_is_api("/api/v1/nonexistent"));
        ASSERT_TRUE(router_path_is_api("/api/v1//x"));

        ASSERT_TRUE(!router_path_is_api("/api/v10"));
        ASSERT_TRUE(!router_path_is_api("/api/v1x"));
        ASSERT_TRUE(!router_path_is_api("/api/v"));
        ASSERT_TRUE(!router_path_is_api("/api"));
        ASSERT_TRUE(!router_path_is_api("/api/"));
        ASSERT_TRUE(!router_path_is_api("/API/v1"));
        ASSERT_TRUE(!router_path_is_api("//api/v1"));
        ASSERT_TRUE(!router_path_is_api("api/v1"));
        ASSERT_TRUE(!router_path_is_api("/"));
        ASSERT_TRUE(!router_path_is_api(""));
        ASSERT_TRUE(!router_path_is_api("/index.html"));
        ASSERT_TRUE(!router_path_is_api(NULL));
        /* The MCP face gets the same sessions, origin policy and errors. */
        ASSERT_TRUE(router_path_is_api("/mcp"));
        ASSERT_TRUE(!router_path_is_api("/mcp/"));
        ASSERT_TRUE(!router_path_is_api("/mcpx"));
        ASSERT_TRUE(!router_path_is_api("/MCP"));
}

#define TOKEN "sh_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define SHARED_AF "af_0123456789abcdef0123456789abcdef"

/* The conversation routes: exports, shares, and the shared view with its
 * artifacts (two ids in one path). */
TEST(conversation_routes) {
        RouteMatch m;

        ASSERT_OK(router_match("/api/v1/history/qr_0123456789abcdef0123456789abcdef/export", &m));
        ASSERT_EQ_INT(m.route, ROUTE_HISTORY_EXPORT);
        ASSERT_EQ_STR(m.id, "qr_0123456789abcdef0123456789abcdef");
        /* The whole history's export is not a record's. */
        ASSERT_OK(router_match("/api/v1/history/export", &m));
        ASSERT_EQ_INT(m.route, ROUTE_HISTORY_ARCHIVE);
        ASSERT_EQ_STR(m.id, "");
        ASSERT_EQ_INT(router_match("/api/v1/history/export/", &m), -ENOENT);
        ASSERT_OK(router_match("/api/v1/history/qr_0123456789abcdef0123456789abcdef/share", &m));
        ASSERT_EQ_INT(m.route, ROUTE_HISTORY_SHARE);
        ASSERT_OK(router_match("/api/v1/shared/" TOKEN, &m));
        ASSERT_EQ_INT(m.route, ROUTE_SHARED);
        ASSERT_EQ_STR(m.id, TOKEN);
        ASSERT_EQ_STR(m.id2, "");
        ASSERT_OK(router_match("/api/v1/shared/" TOKEN "/export", &m));
        ASSERT_EQ_INT(m.route, ROUTE_SHARED_EXPORT);
        ASSERT_EQ_STR(m.id, TOKEN);
        ASSERT_OK(router_match("/api/v1/shared/" TOKEN "/artifacts/" SHARED_AF, &m));
        ASSERT_EQ_INT(m.route, ROUTE_SHARED_ARTIFACT);
        ASSERT_EQ_STR(m.id, TOKEN);
        ASSERT_EQ_STR(m.id2, SHARED_AF);

        /* Exactly 64 lowercase hex digits, and nothing after an id. */
        ASSERT_EQ_INT(router_match("/api/v1/shared/sh_0123456789abcdef0123456789abcdef", &m), -ENOENT);
        ASSERT_EQ_INT(router_match("/api/v1/shared/" TOKEN "0", &m), -ENOENT);
        ASSERT_EQ_INT(router_match("/api/v1/shared/" TOKEN "/", &m), -ENOENT);
        ASSERT_EQ_INT(
                router_match(
                        "/api/v1/shared/sh_0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
                        &m),
                -ENOENT);
        ASSERT_EQ_INT(router_match("/api/v1/shared/qr_0123456789abcdef0123456789abcdef", &m), -ENOENT);
        ASSERT_EQ_INT(router_match("/api/v1/shared/" TOKEN "/artifacts/", &m), -ENOENT);
        ASSERT_EQ_INT(router_match("/api/v1/shared/" TOKEN "/artifacts/" SHARED_AF "/", &m), -ENOENT);
        ASSERT_EQ_INT(router_match("/api/v1/shared/" TOKEN "/artifacts/af_0123", &m), -ENOENT);
        ASSERT_EQ_INT(
                router_match("/api/v1/shared/" TOKEN "/artifacts/qr_0123456789abcdef0123456789abcdef", &m),
                -ENOENT);
        ASSERT_EQ_INT(router_match("/api/v1/shared/" TOKEN "/export/x", &m), -ENOENT);
        ASSERT_EQ_INT(router_match("/api/v1/shared/", &m), -ENOENT);
}

TEST(tokens) {
        RouteMatch m;

        ASSERT_OK(router_match("/api/v1/tokens", &m));
        ASSERT_EQ_INT(m.route, ROUTE_TOKENS);
        ASSERT_OK(router_match("/api/v1/tokens/tk_0123456789abcdef0123456789abcdef", &m));
        ASSERT_EQ_INT(m.route, ROUTE_TOKEN);
        ASSERT_EQ_STR(m.id, "tk_0123456789abcdef0123456789abcdef");
        ASSERT_EQ_INT(router_match("/api/v1/tokens/", &m), -ENOENT);
        ASSERT_EQ_INT(router_match("/api/v1/tokens/tk_0123456789ABCDEF0123456789abcdef", &m), -ENOENT);
        ASSERT_EQ_INT(router_match("/api/v1/tokens/qr_0123456789abcdef0123456789abcdef", &m), -ENOENT);
        ASSERT_EQ_INT(router_match("/api/v1/tokens/tk_0123456789abcdef0123456789abcdef/", &m), -ENOENT);
}

TEST(methods) {
        /* The full table: route x method. */
        static const struct {
                Route route;
                const char *allowed; /* the methods, as in the Allow header */
        } table[] = {
                { ROUTE_HEALTH, "GET, HEAD" },
                { ROUTE_QUEUE_JOIN, "POST" },
                { ROUTE_QUEUE_STATUS, "GET, HEAD" },
                { ROUTE_QUEUE_TICKET, "DELETE" },
                { ROUTE_QUEUE_EVENTS, "GET" },
                { ROUTE_QUERY, "POST" },
                { ROUTE_HISTORY, "GET, HEAD, DELETE" },
                { ROUTE_HISTORY_ITEM, "GET, HEAD, DELETE" },
                { ROUTE_HISTORY_EVENTS, "GET" },
                { ROUTE_ARTIFACT, "GET, HEAD" },
                { ROUTE_HISTORY_SOURCES, "GET" },
                { ROUTE_HISTORY_FEEDBACK, "POST" },
                { ROUTE_REPORT_UNANSWERED, "GET, HEAD" },
                { ROUTE_HISTORY_EXPORT, "GET" },
                { ROUTE_HISTORY_SHARE, "POST, DELETE" },
                { ROUTE_SHARED, "GET" },
                { ROUTE_SHARED_EXPORT, "GET" },
                { ROUTE_SHARED_ARTIFACT, "GET, HEAD" },
                { ROUTE_REPORTS, "GET" },
                { ROUTE_MCP, "POST" },
                { ROUTE_TOKENS, "GET, HEAD, POST" },
                { ROUTE_TOKEN, "DELETE" },
                { ROUTE_HISTORY_ARCHIVE, "GET" },
        };

        ASSERT_EQ_INT(ELEMENTSOF(table), _ROUTE_MAX);

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                Route r = table[i].route;

                ASSERT_EQ_STR(route_allow_header(r), table[i].allowed);
                ASSERT_TRUE(route_to_string(r));

                for (HttpMethod m = 0; m < _HTTP_METHOD_MAX; m++) {
                        const char *name = http_method_to_string(m);
                        bool listed = false;

                        /* Is the method one of the comma-separated names? */
                        if (name) {
                                const char *a = table[i].allowed;
                                size_t l = strlen(name);

                                for (const char *p = a; (p = strstr(p, name)); p++)
                                        if ((p == a || p[-1] == ' ') && (p[l] == ',' || p[l] == '\0'))
                                                listed = true;
                        }

                        if (route_allows_method(r, m) != listed) {
                                fprintf(stderr,
                                        "route %s method %s: expected %s\n",
                                        route_to_string(r),
                                        name ? name : "(other)",
                                        listed ? "allowed" : "not allowed");
                                abort();
                        }
                }

                /* Preflights are handled before routing; no route takes them. */
                ASSERT_TRUE(!route_allows_method(r, HTTP_METHOD_OPTIONS));
                ASSERT_TRUE(!route_allows_method(r, HTTP_METHOD_OTHER));
                ASSERT_TRUE(!route_allows_method(r, HTTP_METHOD_PUT));
                ASSERT_TRUE(!route_allows_method(r, HTTP_METHOD_PATCH));
                ASSERT_TRUE(!route_allows_method(r, _HTTP_METHOD_INVALID));
                ASSERT_TRUE(!route_allows_method(r, _HTTP_METHOD_MAX));
        }

        ASSERT_TRUE(!route_allows_method(_ROUTE_INVALID, HTTP_METHOD_GET));
        ASSERT_TRUE(!route_allows_method(_ROUTE_MAX, HTTP_METHOD_GET));
        ASSERT_TRUE(!route_allow_header(_ROUTE_MAX));
        ASSERT_TRUE(!route_allow_header(_ROUTE_INVALID));
        ASSERT_TRUE(!route_to_string(_ROUTE_INVALID));

        /* The spot checks a reader would look for first. */
        ASSERT_TRUE(route_allows_method(ROUTE_HISTORY_ITEM, HTTP_METHOD_DELETE));
        ASSERT_TRUE(route_allows_method(ROUTE_HISTORY, HTTP_METHOD_DELETE));
        ASSERT_TRUE(!route_allows_method(ROUTE_HISTORY, HTTP_METHOD_POST));
        ASSERT_TRUE(!route_allows_method(ROUTE_QUERY, HTTP_METHOD_GET));
        ASSERT_TRUE(!route_allows_method(ROUTE_QUEUE_TICKET, HTTP_METHOD_GET));
        ASSERT_TRUE(route_allows_method(ROUTE_ARTIFACT, HTTP_METHOD_HEAD));
        ASSERT_TRUE(!route_allows_method(ROUTE_ARTIFACT, HTTP_METHOD_DELETE));

        ASSERT_EQ_STR(HTTP_CORS_ALLOW_METHODS, "GET, HEAD, POST, DELETE, OPTIONS");
}

static void check_decode(const char *in, const char *out) {
        char buf[256];
        size_t n;

        snprintf(buf, sizeof buf, "%s", in);
        n = http_percent_decode(buf);
        ASSERT_EQ_STR(buf, out);
        ASSERT_EQ_INT(n, strlen(out));
}

TEST(percent_decode) {
        check_decode("", "");
        check_decode("/api/v1/health", "/api/v1/health");
        check_decode("/api/v1/h%65alth", "/api/v1/health");
        check_decode("%41%4a%4A%7e", "AJJ~");
        /* %00 stays: no NUL ever comes out. */
        check_decode("/api/v1/health%00x", "/api/v1/health%00x");
        check_decode("%00%00", "%00%00");
        check_decode("%2500", "%00"); /* one pass only, as RFC 3986 wants */
        /* Not an escape: left as it is. */
        check_decode("%", "%");
        check_decode("%4", "%4");
        check_decode("%4g", "%4g");
        check_decode("%g4", "%g4");
        check_decode("a%", "a%");
        check_decode("%%41", "%A");
        check_decode("%C3%A9", "\xc3\xa9");
        check_decode("%ff", "\xff");
        {
                RouteMatch m;
                char path[] = "/api/v1/health%00x";

                http_percent_decode(path);
                ASSERT_EQ_INT(router_match(path, &m), -ENOENT);
        }
}

DEFINE_TEST_MAIN()
