/* SPDX-License-Identifier: MIT */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "query/llm.h"
#include "shared/macro.h"

/* The pieces of reply parsing that the whole-document parser (llm.c) and
 * the chunk-stream parser (llm-stream.c) share, so that both read the four
 * servers the same way and fail with the same codes and messages. Only
 * those two files include this header. Strings returned are owned by the
 * caller; json_object arguments are borrowed. */

/* *ret_error = { code, formatted message }; returns -EBADMSG, or -ENOMEM
 * (then *ret_error is untouched). */
_printf_(3, 4) int llm_fail(LlmError *ret_error, ApiError code, const char *format, ...);

/* o[key] when o is an object; NULL when absent, JSON null, or o is not an
 * object. */
json_object *llm_json_get(json_object *o, const char *key);
/* o[key] when it is a string, else NULL. Borrowed from o. */
const char *llm_json_get_string(json_object *o, const char *key);

/* size bytes as one JSON document followed only by whitespace: valid UTF-8,
 * nested at most LLM_REPLY_MAX_DEPTH. Returns the document (the caller
 * puts it), or NULL and a static reason in *ret_why. */
json_object *llm_parse_json(const uint8_t *body, size_t size, const char **ret_why);

/* Whether obj is an error document rather than a reply or a chunk: an
 * "error" member (object or string) or vLLM's flat {"object": "error"}. */
bool llm_is_error_body(json_object *obj);

/* The error of an error body (any shape of upstreams.md): the context-window
 * errors are model_context_exceeded, the rest upstream_failed naming
 * http_status and quoting the upstream's message. A JSON document that is
 * not an error body is quoted as it is. Returns -EBADMSG or -ENOMEM. */
int llm_fail_error_body(unsigned http_status, json_object *obj, LlmError *ret_error);

/* A copy of a JSON string made valid UTF-8 without NUL (\u0000 becomes
 * U+FFFD). ret_len may be NULL. Returns 0 or -ENOMEM. */
int llm_dup_json_string(json_object *s, char **ret, size_t *ret_len);

/* A message's "content": a string, null, absent (*ret NULL), or an array of
 * parts whose "text" members are joined. Anything else: -EBADMSG. */
int llm_parse_content(json_object *c, char **ret, size_t *ret_len);

/* A tool call's "arguments" as JSON text: a string as it is (made valid
 * UTF-8), any other JSON value serialized (Ollama's native shape is an
 * object). Returns 0 or -ENOMEM. */
int llm_parse_arguments(json_object *args, char **ret, size_t *ret_len);

/* Give every call a usable id, unique within the reply: the model's own if
 * it is one, else a generated "ww" + 7 digits seeded by step. Returns 0 or
 * -ENOMEM. */
int llm_fix_tool_call_ids(LlmToolCall *calls, size_t n, unsigned step);

/* usage.{prompt,completion}_tokens into r (has_usage set) when usage is an
 * object; anything else leaves r as it is. */
void llm_reply_set_usage(LlmReply *r, json_object *usage);

/* The model_output_limit failures, worded once for both parsers. */
int llm_fail_finish_length(LlmError *ret_error);
int llm_fail_too_many_calls(LlmError *ret_error, size_t n);
int llm_fail_output_budget(LlmError *ret_error, uint64_t output, uint64_t max);
