/* SPDX-License-Identifier: MIT */
/* The MCP face's JSON-RPC parser (mcp/jsonrpc.h) on valid and hostile
 * messages: each refusal has its JSON-RPC code, and the id when it could
 * be read. */
#include <string.h>

#include "mcp/jsonrpc.h"
#include "shared/macro.h"
#include "tests.h"

/* Parse s; the code of its refusal, or 0 (the message in *ret, freed by
 * the caller). */
static int parse(const char *s, JsonRpcMessage *ret, JsonRpcError *ret_error) {
        JsonRpcMessage m = { 0 };
        JsonRpcError e = { 0 };
        int r = jsonrpc_parse(s, strlen(s), &m, &e);

        if (ret_error)
                *ret_error = e;
        if (r < 0)
                return e.code;
        if (ret)
                *ret = m;
        else
                jsonrpc_message_done(&m);
        return 0;
}

static int code_of(const char *s) {
        return parse(s, NULL, NULL);
}

TEST(request) {
        JsonRpcMessage m;

        ASSERT_EQ_INT(
                parse("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"x\"}}",
                      &m,
                      NULL),
                0);
        ASSERT_EQ_INT(m.kind, JSONRPC_KIND_REQUEST);
        ASSERT_TRUE(m.has_id && !m.id.is_string && m.id.number == 7);
        ASSERT_EQ_STR(m.method, "tools/call");
        ASSERT_TRUE(m.params && json_object_is_type(m.params, json_type_object));
        jsonrpc_message_done(&m);

        ASSERT_EQ_INT(parse(" {\"method\":\"ping\",\"id\":\"abc\",\"jsonrpc\":\"2.0\"}\n", &m, NULL), 0);
        ASSERT_TRUE(m.id.is_string);
        ASSERT_EQ_STR(m.id.string, "abc");
        ASSERT_TRUE(!m.params);
        jsonrpc_message_done(&m);

        ASSERT_EQ_INT(parse("{\"jsonrpc\":\"2.0\",\"id\":-9007199254740991,\"method\":\"ping\"}", &m, NULL), 0);
        ASSERT_TRUE(m.id.number == -JSONRPC_ID_NUMBER_MAX);
        jsonrpc_message_done(&m);
}

TEST(notification_and_response) {
        JsonRpcMessage m;

        ASSERT_EQ_INT(parse("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &m, NULL), 0);
        ASSERT_EQ_INT(m.kind, JSONRPC_KIND_NOTIFICATION);
        ASSERT_TRUE(!m.has_id);
        jsonrpc_message_done(&m);

        ASSERT_EQ_INT(parse("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}", &m, NULL), 0);
        ASSERT_EQ_INT(m.kind, JSONRPC_KIND_RESPONSE);
        jsonrpc_message_done(&m);
        ASSERT_EQ_INT(
                parse("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":1,\"message\":\"x\"}}", &m, NULL), 0);
        jsonrpc_message_done(&m);
        /* Both, neither, or an error that is no object. */
        ASSERT_EQ_INT(
                code_of("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{},\"error\":{}}"), JSONRPC_INVALID_REQUEST);
        ASSERT_EQ_INT(code_of("{\"jsonrpc\":\"2.0\",\"id\":1}"), JSONRPC_INVALID_REQUEST);
        ASSERT_EQ_INT(code_of("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":3}"), JSONRPC_INVALID_REQUEST);
        ASSERT_EQ_INT(code_of("{\"jsonrpc\":\"2.0\",\"result\":{}}"), JSONRPC_INVALID_REQUEST);
}

TEST(parse_errors) {
        static const char *const bad[] = {
                "",
                "{",
                "nope",
                "{\"jsonrpc\":\"2.0\",}",
                "{} {}",
                "{}x",
                "{'jsonrpc':'2.0'}",
                "\xff",
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xc0\xaf\"}", /* overlong UTF-8 */
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                ASSERT_EQ_INT(code_of(bad[i]), JSONRPC_PARSE_ERROR);

        JsonRpcMessage m;
        JsonRpcError e;
        ASSERT_EQ_INT(jsonrpc_parse("{\"a\":\0}", 7, &m, &e), -EINVAL);
        ASSERT_EQ_INT(e.code, JSONRPC_PARSE_ERROR);
}

TEST(invalid_requests) {
        static const char *const bad[] = {
                "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", /* a batch */
                "[]",
                "null",
                "1",
                "\"x\"",
                "{\"id\":1,\"method\":\"ping\"}", /* no jsonrpc */
                "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}",
                "{\"jsonrpc\":2.0,\"id\":1,\"method\":\"ping\"}",
                "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}", /* MCP: never null */
                "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}",
                "{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"ping\"}",
                "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}",
                "{\"jsonrpc\":\"2.0\",\"id\":\"\",\"method\":\"ping\"}",
                "{\"jsonrpc\":\"2.0\",\"id\":99999999999999999999,\"method\":\"ping\"}",
                "{\"jsonrpc\":\"2.0\",\"id\":9007199254740992,\"method\":\"ping\"}",
                "{\"jsonrpc\":\"2.0\",\"id\":\"a\\u0000b\",\"method\":\"ping\"}",
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\"}",
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a b\"}",
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"caf\\u00e9\"}",
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":7}",
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":3}",
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":null}",
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"extra\":1}",
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"result\":{}}",
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                if (code_of(bad[i]) != JSONRPC_INVALID_REQUEST)
                        fprintf(stderr, "not refused as -32600: %s\n", bad[i]);
                ASSERT_EQ_INT(code_of(bad[i]), JSONRPC_INVALID_REQUEST);
        }
}

TEST(bounds) {
        char id[JSONRPC_ID_MAX + 2], method[JSONRPC_METHOD_MAX + 2], buf[512];
        JsonRpcError e;

        /* An id and a method at their limits pass, one byte more does not. */
        memset(id, 'i', sizeof id - 1);
        id[JSONRPC_ID_MAX] = '\0';
        memset(method, 'm', sizeof method - 1);
        method[JSONRPC_METHOD_MAX] = '\0';
        snprintf(buf, sizeof buf, "{\"jsonrpc\":\"2.0\",\"id\":\"%s\",\"method\":\"%s\"}", id, method);
        ASSERT_EQ_INT(code_of(buf), 0);
        id[JSONRPC_ID_MAX] = 'i';
        id[JSONRPC_ID_MAX + 1] = '\0';
        snprintf(buf, sizeof buf, "{\"jsonrpc\":\"2.0\",\"id\":\"%s\",\"method\":\"ping\"}", id);
        ASSERT_EQ_INT(code_of(buf), JSONRPC_INVALID_REQUEST);
        method[JSONRPC_METHOD_MAX] = 'm';
        method[JSONRPC_METHOD_MAX + 1] = '\0';
        snprintf(buf, sizeof buf, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"%s\"}", method);
        ASSERT_EQ_INT(parse(buf, NULL, &e), JSONRPC_INVALID_REQUEST);
        /* The refusal answers the id it could read. */
        ASSERT_TRUE(e.has_id && e.id.number == 5);
}

TEST(depth) {
        char buf[4096];
        size_t n = 0;

        /* arguments nested to exactly the limit pass; one more level is
         * refused by the tokenizer, before the values past it are built. */
        for (int extra = 0; extra <= 1; extra++) {
                n = (size_t) snprintf(
                        buf, sizeof buf, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":");
                for (int i = 0; i < JSONRPC_DEPTH_MAX - 1 + extra; i++)
                        buf[n++] = '[';
                for (int i = 0; i < JSONRPC_DEPTH_MAX - 1 + extra; i++)
                        buf[n++] = ']';
                buf[n++] = '}';
                buf[n] = '\0';
                ASSERT_EQ_INT(code_of(buf), extra ? JSONRPC_INVALID_REQUEST : 0);
        }
        /* A hundred thousand levels: refused, no stack used up. */
        {
                size_t deep = 100000;
                char *s = malloc(deep * 2 + 1);

                ASSERT_TRUE(s);
                memset(s, '[', deep);
                memset(s + deep, ']', deep);
                s[deep * 2] = '\0';
                ASSERT_EQ_INT(code_of(s), JSONRPC_INVALID_REQUEST);
                free(s);
        }
}

TEST(texts) {
        JsonRpcId sid = { .is_string = true, .string = "q\"1" }, nid = { .number = 3 };
        _cleanup_free_ char *a = NULL, *b = NULL, *c = NULL, *d = NULL;

        a = jsonrpc_result_text(&nid, json_object_new_object());
        ASSERT_EQ_STR(a, "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}");
        b = jsonrpc_error_text(&sid, JSONRPC_METHOD_NOT_FOUND, "Method not found");
        ASSERT_EQ_STR(
                b,
                "{\"jsonrpc\":\"2.0\",\"id\":\"q\\\"1\",\"error\":{\"code\":-32601,\"message\":\"Method not found\"}}");
        c = jsonrpc_error_text(NULL, JSONRPC_PARSE_ERROR, "x");
        ASSERT_EQ_STR(c, "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"x\"}}");
        d = jsonrpc_notification_text("notifications/progress", json_object_new_object());
        ASSERT_EQ_STR(d, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}");
        ASSERT_TRUE(jsonrpc_id_equal(&nid, &(JsonRpcId){ .number = 3 }));
        ASSERT_TRUE(!jsonrpc_id_equal(&nid, &sid));
}

DEFINE_TEST_MAIN()
