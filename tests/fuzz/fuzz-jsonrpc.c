/* SPDX-License-Identifier: MIT */
/* The MCP face's JSON-RPC parser (mcp/jsonrpc.h) on arbitrary bytes.
 * Checks the contract, not just the absence of crashes:
 *   - a refusal is -32700 or -32600 with a message, and the id it answers
 *     is a valid one;
 *   - a message has its kind's members: a request an id and a method, a
 *     notification a method and no id, a response an id and no method;
 *     the method is 1..JSONRPC_METHOD_MAX printable ASCII bytes, a string
 *     id 1..JSONRPC_ID_MAX bytes without NUL; params an object or array;
 *   - the texts made from it are JSON and parse back to the same id. */

#include <string.h>

#include "mcp/jsonrpc.h"
#include "shared/json-util.h"
#include "shared/macro.h"
#include "fuzz.h"

static void check_id(const JsonRpcId *id) {
        if (id->is_string) {
                size_t n = strlen(id->string);

                CHECK(n >= 1 && n <= JSONRPC_ID_MAX);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        JsonRpcMessage m = { 0 };
        JsonRpcError e = { 0 };
        int r;

        r = jsonrpc_parse(data, size, &m, &e);
        if (r == -ENOMEM)
                return 0;
        if (r < 0) {
                CHECK(r == -EINVAL);
                CHECK(e.code == JSONRPC_PARSE_ERROR || e.code == JSONRPC_INVALID_REQUEST);
                CHECK(e.message && e.message[0]);
                if (e.has_id)
                        check_id(&e.id);
                return 0;
        }

        CHECK(m.root);
        switch (m.kind) {
        case JSONRPC_KIND_REQUEST:
                CHECK(m.has_id);
                break;
        case JSONRPC_KIND_NOTIFICATION:
                CHECK(!m.has_id);
                break;
        case JSONRPC_KIND_RESPONSE:
                CHECK(m.has_id && m.method[0] == '\0' && !m.params);
                break;
        default:
                CHECK(false);
        }
        if (m.kind != JSONRPC_KIND_RESPONSE) {
                size_t n = strlen(m.method);

                CHECK(n >= 1 && n <= JSONRPC_METHOD_MAX);
                for (size_t i = 0; i < n; i++)
                        CHECK(m.method[i] > ' ' && m.method[i] <= '~');
        }
        if (m.params)
                CHECK(json_object_is_type(m.params, json_type_object) ||
                      json_object_is_type(m.params, json_type_array));
        if (m.has_id) {
                _cleanup_free_ char *t = NULL;
                JsonRpcMessage back = { 0 };
                JsonRpcError be = { 0 };

                check_id(&m.id);
                t = jsonrpc_result_text(&m.id, json_object_new_object());
                if (t) {
                        CHECK(jsonrpc_parse(t, strlen(t), &back, &be) == 0);
                        CHECK(back.kind == JSONRPC_KIND_RESPONSE && jsonrpc_id_equal(&back.id, &m.id));
                        jsonrpc_message_done(&back);
                }
        }
        jsonrpc_message_done(&m);
        return 0;
}
