/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <limits.h>
#include <string.h>

#include "mcp/jsonrpc.h"
#include "shared/json-util.h"
#include "shared/utf8.h"

/* A refusal: what is known of the request (its id) with the code. */
static int refuse(JsonRpcError *ret, const JsonRpcError *known, int code, const char *message) {
        *ret = *known;
        ret->code = code;
        ret->message = message;
        return -EINVAL;
}

/* An id as JSON-RPC 2.0 and MCP allow it: a string or an integer, not
 * null (MCP), not a fraction. */
static int parse_id(json_object *v, JsonRpcId *ret) {
        JsonRpcId id = { 0 };

        if (json_object_is_type(v, json_type_string)) {
                const char *s = json_object_get_string(v);
                size_t n = (size_t) json_object_get_string_len(v);

                if (n == 0 || n > JSONRPC_ID_MAX || strlen(s) != n)
                        return -EINVAL;
                id.is_string = true;
                memcpy(id.string, s, n);
                id.string[n] = '\0';
        } else if (json_object_is_type(v, json_type_int)) {
                /* json-c saturates silently what does not fit int64:
                 * only integers every client can hold exactly pass (a
                 * JavaScript number's, +-(2^53 - 1)). */
                id.number = json_object_get_int64(v);
                if (id.number > JSONRPC_ID_NUMBER_MAX || id.number < -JSONRPC_ID_NUMBER_MAX)
                        return -EINVAL;
        } else
                return -EINVAL;
        *ret = id;
        return 0;
}

static bool method_is_valid(const char *s, size_t n) {
        if (n == 0 || n > JSONRPC_METHOD_MAX || strlen(s) != n)
                return false;
        for (size_t i = 0; i < n; i++)
                if (s[i] <= ' ' || s[i] > '~')
                        return false;
        return true;
}

int jsonrpc_parse(const void *data, size_t size, JsonRpcMessage *ret, JsonRpcError *ret_error) {
        _cleanup_(json_tokener_freep) struct json_tokener *tok = NULL;
        _cleanup_(json_object_putp) json_object *root = NULL;
        JsonRpcError e = { 0 };
        JsonRpcMessage m = { 0 };
        json_object *version = NULL, *id = NULL, *method = NULL, *params = NULL, *error = NULL;
        bool has_method = false, has_params = false, has_result = false, has_error = false;
        bool whole = false;

        assert(data || size == 0);
        assert(ret);
        assert(ret_error);

        if (size == 0 || size > INT_MAX || !utf8_is_valid(data, size))
                return refuse(ret_error, &e, JSONRPC_PARSE_ERROR, "Parse error: not a JSON text in UTF-8");
        if (memchr(data, '\0', size))
                return refuse(ret_error, &e, JSONRPC_PARSE_ERROR, "Parse error: a NUL byte");

        tok = json_tokener_new_ex(JSONRPC_DEPTH_MAX);
        if (!tok)
                return -ENOMEM;
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
        root = json_tokener_parse_ex(tok, data, (int) size);
        if (!root && json_tokener_get_error(tok) == json_tokener_continue) {
                /* A literal or number at the very end ("null", "1") waits
                 * for what follows it: the end of the text is a NUL. */
                whole = true;
                root = json_tokener_parse_ex(tok, "", 1);
        }
        if (!root) {
                enum json_tokener_error te = json_tokener_get_error(tok);

                if (te == json_tokener_error_depth)
                        return refuse(
                                ret_error, &e, JSONRPC_INVALID_REQUEST, "Invalid request: nested too deeply");
                /* "null" parses to NULL with success. */
                if (te == json_tokener_success)
                        return refuse(ret_error, &e, JSONRPC_INVALID_REQUEST, "Invalid request: not an object");
                return refuse(ret_error, &e, JSONRPC_PARSE_ERROR, "Parse error: invalid JSON");
        }
        if (!whole && !json_rest_is_whitespace(data, json_tokener_get_parse_end(tok), size))
                return refuse(ret_error, &e, JSONRPC_PARSE_ERROR, "Parse error: bytes after the JSON text");

        if (json_object_is_type(root, json_type_array))
                return refuse(
                        ret_error, &e, JSONRPC_INVALID_REQUEST, "Invalid request: batches are not supported");
        if (!json_object_is_type(root, json_type_object))
                return refuse(ret_error, &e, JSONRPC_INVALID_REQUEST, "Invalid request: not an object");

        /* The id first, so that every later refusal answers it. */
        if (json_object_object_get_ex(root, "id", &id)) {
                if (parse_id(id, &m.id) < 0)
                        return refuse(
                                ret_error,
                                &e,
                                JSONRPC_INVALID_REQUEST,
                                "Invalid request: the id must be a string of 1 to 128 bytes or an integer");
                m.has_id = true;
                e.has_id = true;
                e.id = m.id;
        }

        /* A member set to null is there: it is not absent. */
        json_object_object_foreach(root, key, value) {
                if (streq(key, "jsonrpc"))
                        version = value;
                else if (streq(key, "method")) {
                        method = value;
                        has_method = true;
                } else if (streq(key, "params")) {
                        params = value;
                        has_params = true;
                } else if (streq(key, "result"))
                        has_result = true;
                else if (streq(key, "error")) {
                        error = value;
                        has_error = true;
                } else if (!streq(key, "id"))
                        return refuse(
                                ret_error, &e, JSONRPC_INVALID_REQUEST, "Invalid request: unknown member");
        }

        if (!version || !json_object_is_type(version, json_type_string) ||
            !streq(json_object_get_string(version), "2.0"))
                return refuse(
                        ret_error, &e, JSONRPC_INVALID_REQUEST, "Invalid request: jsonrpc must be \"2.0\"");

        if (!has_method) {
                /* A response to a request of ours: an id and exactly one
                 * of result and error. */
                if (!m.has_id || has_params || has_result == has_error ||
                    (has_error && !json_object_is_type(error, json_type_object)))
                        return refuse(ret_error, &e, JSONRPC_INVALID_REQUEST, "Invalid request: no method");
                m.kind = JSONRPC_KIND_RESPONSE;
        } else {
                if (has_result || has_error)
                        return refuse(
                                ret_error,
                                &e,
                                JSONRPC_INVALID_REQUEST,
                                "Invalid request: a request has no result or error");
                if (!json_object_is_type(method, json_type_string) ||
                    !method_is_valid(
                            json_object_get_string(method), (size_t) json_object_get_string_len(method)))
                        return refuse(
                                ret_error,
                                &e,
                                JSONRPC_INVALID_REQUEST,
                                "Invalid request: the method must be 1 to 64 printable ASCII characters");
                if (has_params && !json_object_is_type(params, json_type_object) &&
                    !json_object_is_type(params, json_type_array))
                        return refuse(
                                ret_error,
                                &e,
                                JSONRPC_INVALID_REQUEST,
                                "Invalid request: params must be an object or an array");
                size_t n = (size_t) json_object_get_string_len(method);
                memcpy(m.method, json_object_get_string(method), n);
                m.method[n] = '\0';
                m.kind = m.has_id ? JSONRPC_KIND_REQUEST : JSONRPC_KIND_NOTIFICATION;
                m.params = params;
        }

        m.root = TAKE_PTR(root);
        *ret = m;
        return 0;
}

void jsonrpc_message_done(JsonRpcMessage *m) {
        if (!m)
                return;
        json_object_put(m->root);
        *m = (JsonRpcMessage){ .root = NULL };
}

json_object *jsonrpc_id_to_json(const JsonRpcId *id) {
        assert(id);
        if (id->is_string)
                return json_object_new_string(id->string);
        return json_object_new_int64(id->number);
}

bool jsonrpc_id_equal(const JsonRpcId *a, const JsonRpcId *b) {
        assert(a);
        assert(b);
        if (a->is_string != b->is_string)
                return false;
        return a->is_string ? streq(a->string, b->string) : a->number == b->number;
}

static char *message_text(json_object *o) {
        const char *s;

        if (!o)
                return NULL;
        s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        return s ? strdup(s) : NULL;
}

static json_object *message_new(const JsonRpcId *id) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();

        if (!o || json_add(o, "jsonrpc", json_object_new_string("2.0")) < 0)
                return NULL;
        if (id) {
                if (json_add(o, "id", jsonrpc_id_to_json(id)) < 0)
                        return NULL;
        } else if (json_object_object_add(o, "id", NULL) < 0)
                return NULL;
        return TAKE_PTR(o);
}

char *jsonrpc_result_text(const JsonRpcId *id, json_object *result) {
        _cleanup_(json_object_putp) json_object *r = result;
        _cleanup_(json_object_putp) json_object *o = NULL;

        assert(id);
        o = message_new(id);
        if (!o || json_add(o, "result", TAKE_PTR(r)) < 0)
                return NULL;
        return message_text(o);
}

char *jsonrpc_error_text(const JsonRpcId *id, int code, const char *message) {
        _cleanup_(json_object_putp) json_object *o = message_new(id);
        _cleanup_(json_object_putp) json_object *e = json_object_new_object();

        if (!o || !e || json_add(e, "code", json_object_new_int(code)) < 0 ||
            json_add(e, "message", json_string(message)) < 0 || json_add(o, "error", TAKE_PTR(e)) < 0)
                return NULL;
        return message_text(o);
}

char *jsonrpc_notification_text(const char *method, json_object *params) {
        _cleanup_(json_object_putp) json_object *p = params;
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();

        assert(method);
        if (!o || json_add(o, "jsonrpc", json_object_new_string("2.0")) < 0 ||
            json_add(o, "method", json_object_new_string(method)) < 0 ||
            json_add(o, "params", TAKE_PTR(p)) < 0)
                return NULL;
        return message_text(o);
}
