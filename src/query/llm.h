/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shared/api-error.h"

/* The OpenAI-compatible chat-completions client, pure part (API.md 8.2):
 * request bodies are built here and replies are parsed here; nothing in
 * this module does I/O. The exchange (POST {WIKI_WEB_LLM_URL}/chat/completions
 * with "Authorization: Bearer <llm-api-key>", caps, TLS, redirects) belongs
 * to the upstream layer, which hands over (HTTP status, body bytes).
 *
 * A request asks for a streamed reply or not (LlmStreamMode). A whole reply
 * (one JSON document: the answer to "stream": false, a server that ignores
 * "stream", an HTTP error body) is parsed by llm_parse_reply() here; a
 * streamed one (text/event-stream) by llm-stream.h, which yields the same
 * LlmReply and LlmError. Replies of llama.cpp's server, vLLM, Ollama's /v1
 * and OpenAI are read as docs/QUERY.md describes them:
 *   - tool calls come from choices[0].message.tool_calls whatever
 *     finish_reason says ("tool_calls", "stop", null); an empty array is no
 *     tool call;
 *   - "arguments" is a JSON string (OpenAI, vLLM, llama.cpp, Ollama /v1) or
 *     an object (Ollama's native shape); either way it is kept as JSON text;
 *   - "content" may be null, absent, "", a string or an array of text parts;
 *   - "usage" may be missing (then has_usage is false);
 *   - an empty, missing, overlong or duplicate tool-call id is replaced by
 *     a generated one ("ww" + 7 digits: 9 alphanumerics, which Mistral
 *     templates in vLLM demand).
 *
 * Error messages produced here may quote upstream bytes (an error body's
 * "message"): they are RAW. The caller passes every one through
 * sanitize_message() before it reaches a response, the history or the log.
 *
 * Ownership: everything returned is owned by the caller and freed with the
 * matching *_done(); inputs are borrowed. */

/* Nesting accepted in a reply. A reply needs 6 levels (plus what a model
 * puts in object arguments); deeper is only ever an attack on the parser. */
#define LLM_REPLY_MAX_DEPTH 32
/* Tool calls accepted in one reply; more is model_output_limit. */
#define LLM_REPLY_MAX_TOOL_CALLS 64
/* A tool-call id longer than this (or with bytes outside printable ASCII)
 * is replaced by a generated one. */
#define LLM_TOOL_CALL_ID_MAX 64
/* Bytes of an upstream error body quoted in a message when it has no
 * readable "message" (the sanitizer cuts further, to 1024). */
#define LLM_ERROR_QUOTE_MAX 512
/* The prompt estimate: at least one token per this many bytes of the body. */
#define LLM_BYTES_PER_TOKEN 4

typedef enum LlmRole {
        LLM_ROLE_SYSTEM,
        LLM_ROLE_USER,
        LLM_ROLE_ASSISTANT,
        LLM_ROLE_TOOL,
        _LLM_ROLE_MAX,
        _LLM_ROLE_INVALID = -EINVAL,
} LlmRole;

const char *llm_role_to_string(LlmRole r);

typedef struct LlmToolCall {
        char *id;        /* never NULL or empty after llm_parse_reply() */
        char *name;      /* never NULL; "" when the reply had none */
        char *arguments; /* JSON text as the model sent it (an object is serialized); never NULL */
} LlmToolCall;

void llm_tool_call_done(LlmToolCall *c);

/* One message of the conversation. */
typedef struct LlmMessage {
        LlmRole role;
        char *content; /* NULL: sent as "" (assistant with tool calls) */
        LlmToolCall *tool_calls;
        size_t n_tool_calls; /* assistant only */
        char *tool_call_id;  /* tool only */
} LlmMessage;

void llm_message_done(LlmMessage *m);

/* A function tool offered to the model. */
typedef struct LlmTool {
        const char *name;
        const char *description;
        const char *parameters; /* JSON Schema, as JSON text */
} LlmTool;

/* What a request says about streaming. */
typedef enum LlmStreamMode {
        LLM_STREAM_OFF,        /* "stream": false */
        LLM_STREAM_ON,         /* "stream": true */
        LLM_STREAM_WITH_USAGE, /* "stream": true, "stream_options": {"include_usage": true} */
        _LLM_STREAM_MODE_MAX,
        _LLM_STREAM_MODE_INVALID = -EINVAL,
} LlmStreamMode;

typedef struct LlmRequest {
        const char *model;
        const LlmMessage *messages;
        size_t n_messages;
        const LlmTool *tools; /* n_tools == 0: no "tools" and no "tool_choice" */
        size_t n_tools;
        uint64_t context_tokens;   /* WIKI_WEB_MODEL_CONTEXT_TOKENS */
        uint64_t max_output_bytes; /* WIKI_WEB_MODEL_MAX_OUTPUT_BYTES */
        LlmStreamMode stream;
} LlmRequest;

typedef struct LlmRequestBody {
        char *body; /* NUL-terminated JSON, owned */
        size_t size;
        uint64_t prompt_tokens_estimate; /* ceil(size / LLM_BYTES_PER_TOKEN) */
        uint64_t max_tokens;             /* as sent */
} LlmRequestBody;

void llm_request_body_done(LlmRequestBody *b);

/* The estimate of the prompt for a body of size bytes: ceil(size / 4). */
uint64_t llm_estimate_prompt_tokens(size_t size);

/* The max_tokens sent for a prompt estimate: the output budget at the same
 * rate (max_output_bytes / 4), but no more than what the context has left,
 * and at least 1. */
uint64_t llm_max_tokens(uint64_t context_tokens, uint64_t max_output_bytes, uint64_t prompt_tokens_estimate);

/* Build the body of one chat-completions request:
 *   {"model", "messages", ["tools", "tool_choice": "auto",] "max_tokens",
 *    "stream", ["stream_options": {"include_usage": true}]}
 * with every assistant tool call's "arguments" sent as a JSON string (Ollama
 * demands it) and "type": "function". The prompt is estimated from the
 * finished body; if the estimate exceeds context_tokens this returns
 * -EOVERFLOW (model_context_exceeded, the model must not be called) and
 * still fills *ret so the caller can say by how much.
 * Returns 0 or -EOVERFLOW and fills *ret (free with llm_request_body_done());
 * -EINVAL for a malformed request (a tool's schema is not JSON, a role or
 * a stream mode out of range: programming errors); -ENOMEM. */
int llm_build_request(const LlmRequest *req, LlmRequestBody *ret);

typedef struct LlmReplyLimits {
        uint64_t max_output_bytes; /* content + all arguments of one reply */
        unsigned step;             /* seeds generated tool-call ids */
} LlmReplyLimits;

typedef struct LlmReply {
        char *content; /* NULL when null or absent; may be "" */
        LlmToolCall *tool_calls;
        size_t n_tool_calls;
        char *finish_reason; /* NULL when absent or not a string */
        bool has_usage;
        uint64_t prompt_tokens;
        uint64_t completion_tokens;
} LlmReply;

void llm_reply_done(LlmReply *r);

/* Why a reply is not usable: an API error code and a raw message (the
 * caller sanitizes it). */
typedef struct LlmError {
        ApiError code;
        char *message; /* owned, never NULL once set */
} LlmError;

void llm_error_done(LlmError *e);

/* Parse the reply to one chat-completions request: http_status and the
 * body bytes as received (any bytes, at most INT_MAX; borrowed).
 *
 * Read the status first:
 *   - 2xx with a body that has choices[0].message: the reply. But
 *     finish_reason "length" (also beside tool calls: llama.cpp then did not
 *     parse them), more than limits->max_output_bytes of content and
 *     arguments, or more than LLM_REPLY_MAX_TOOL_CALLS tool calls:
 *     model_output_limit.
 *   - a context-window error of any of the four servers, whatever the
 *     status (llama.cpp "type": "exceed_context_size_error" or "exceeds the
 *     available context size"; OpenAI "code": "context_length_exceeded";
 *     vLLM and OpenAI "maximum context length", nested or flat; Ollama
 *     "longer than the context length"): model_context_exceeded.
 *   - any other error body ("error" an object or a string, vLLM's flat
 *     {"object": "error", "message"}, FastAPI's {"detail"}), any other
 *     non-2xx, a body that is not JSON, not valid UTF-8, nested deeper than
 *     LLM_REPLY_MAX_DEPTH, or without choices: upstream_failed with a
 *     message that names the status and quotes the upstream's message.
 * Returns 0 and fills *ret (free with llm_reply_done()); -EBADMSG and fills
 * *ret_error (free with llm_error_done()); -ENOMEM. Each out-parameter is
 * written only in its own case. */
int llm_parse_reply(
        unsigned http_status,
        const uint8_t *body,
        size_t size,
        const LlmReplyLimits *limits,
        LlmReply *ret,
        LlmError *ret_error);

/* Whether a reply refuses "stream_options" (a server that does not know the
 * option): HTTP 400 or 422 whose body names it. The caller then sends the
 * request once more without it (LLM_STREAM_ON) and keeps doing so. Pure. */
bool llm_refuses_stream_options(unsigned http_status, const uint8_t *body, size_t size);

/* The model server's capacity, where it says it: llama.cpp's GET /props at
 * the root of the server of WIKI_WEB_LLM_URL ("http://h:8080/v1" ->
 * "http://h:8080/props"). Returns 0 and a new string in *ret, -EINVAL for
 * a URL without "scheme://", -ENOMEM. Pure. */
int llm_props_url(const char *llm_url, char **ret);

/* "total_slots" of a /props body: 0 and the number (1..LLM_PROPS_SLOTS_MAX)
 * in *ret; -ENODATA when the body is not a JSON object (at most
 * LLM_REPLY_MAX_DEPTH deep, valid UTF-8) with an integer total_slots in
 * that range (another server, or none: nothing is known). Pure. */
#define LLM_PROPS_SLOTS_MAX 1000000u
int llm_parse_props_total_slots(const uint8_t *body, size_t size, unsigned *ret);
