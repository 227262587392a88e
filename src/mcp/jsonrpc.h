/* SPDX-License-Identifier: MIT */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shared/macro.h"

/* One JSON-RPC 2.0 message as the MCP face receives it (API.md "MCP"),
 * parsed strictly: bytes in, a struct out, nothing else done. A message is
 * one JSON object with "jsonrpc": "2.0" and only the members JSON-RPC
 * defines; a batch (an array) is refused, ids and method names are
 * bounded, and nesting deeper than JSONRPC_DEPTH_MAX is refused by the
 * tokenizer itself, before any value past it is built.
 *
 * The error codes are JSON-RPC's: -32700 (the bytes are no JSON text:
 * invalid UTF-8, invalid JSON, trailing bytes), -32600 (valid JSON but no
 * valid message), -32601 and -32602 for the caller's dispatch. */

#define JSONRPC_PARSE_ERROR (-32700)
#define JSONRPC_INVALID_REQUEST (-32600)
#define JSONRPC_METHOD_NOT_FOUND (-32601)
#define JSONRPC_INVALID_PARAMS (-32602)
#define JSONRPC_INTERNAL_ERROR (-32603)

/* A string id: 1 to this many bytes of UTF-8, no NUL. An integer id: a
 * JSON integer (no fraction, no exponent) of at most JSONRPC_ID_NUMBER_MAX
 * in magnitude, the integers a JavaScript client holds exactly. */
#define JSONRPC_ID_MAX 128
#define JSONRPC_ID_NUMBER_MAX ((INT64_C(1) << 53) - 1)
/* A method: 1 to this many bytes, printable ASCII without space. */
#define JSONRPC_METHOD_MAX 64
/* Nesting of the whole message: the message object is 1, its params 2,
 * a tool's arguments 3. */
#define JSONRPC_DEPTH_MAX 10

typedef enum JsonRpcKind {
        JSONRPC_KIND_REQUEST,      /* method and id */
        JSONRPC_KIND_NOTIFICATION, /* method, no id */
        JSONRPC_KIND_RESPONSE,     /* id and result or error: a client's answer */
        _JSONRPC_KIND_MAX,
        _JSONRPC_KIND_INVALID = -EINVAL,
} JsonRpcKind;

typedef struct JsonRpcId {
        bool is_string;
        int64_t number;
        char string[JSONRPC_ID_MAX + 1];
} JsonRpcId;

typedef struct JsonRpcMessage {
        JsonRpcKind kind;
        bool has_id;
        JsonRpcId id;
        char method[JSONRPC_METHOD_MAX + 1]; /* "" for a response */
        json_object *params;                 /* an object or array, borrowed from root; NULL: absent */
        json_object *root;                   /* owned: the parsed message */
} JsonRpcMessage;

/* Why a message was refused: a JSON-RPC code and a static message; the
 * request's id when it could be read (the error then answers it), else
 * the error's id is null. */
typedef struct JsonRpcError {
        int code;
        const char *message;
        bool has_id;
        JsonRpcId id;
} JsonRpcError;

/* Parse size bytes at data. Returns 0 and fills *ret (free with
 * jsonrpc_message_done()), or -EINVAL with *ret_error filled and *ret
 * untouched, or -ENOMEM. */
int jsonrpc_parse(const void *data, size_t size, JsonRpcMessage *ret, JsonRpcError *ret_error);
void jsonrpc_message_done(JsonRpcMessage *m);

/* The id as JSON (a new object; NULL when out of memory or for a string
 * id json-c cannot take). */
json_object *jsonrpc_id_to_json(const JsonRpcId *id);
bool jsonrpc_id_equal(const JsonRpcId *a, const JsonRpcId *b);

/* A response's text: {"jsonrpc":"2.0","id":…,"result":…} (result taken
 * over, also on failure) or the error object (id NULL: null). New
 * strings, NULL when out of memory. */
char *jsonrpc_result_text(const JsonRpcId *id, json_object *result);
char *jsonrpc_error_text(const JsonRpcId *id, int code, const char *message);
/* A notification's text, params taken over. */
char *jsonrpc_notification_text(const char *method, json_object *params);
