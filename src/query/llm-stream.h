/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "query/llm.h"
#include "shared/macro.h"

/* A streamed chat-completions reply ("stream": true), pure part: the body
 * of a text/event-stream response, fed in slices of any size as they
 * arrive, read into the same LlmReply / LlmError that llm_parse_reply()
 * gives for a whole reply. No I/O, no clock.
 *
 *   llm_stream_new()     the limits of one reply and the live handlers
 *   llm_stream_feed()    each slice of the body, in order
 *   llm_stream_finish()  at the end of the body: the reply or the error
 *
 * The event stream (WHATWG HTML 9.2.6): lines end in CRLF, LF or CR (also
 * split across slices); one leading BOM is skipped; a line starting with
 * ":" is a comment; "data" lines are joined with "\n" and an empty line
 * ends the event; "event", "id", "retry" and unknown fields are ignored,
 * except that "event: error" marks the event's data as an error; an event
 * whose data is empty is not dispatched, and neither is an unfinished one
 * at the end of the body. Older llama.cpp wrote its errors as a
 * non-standard "error: {json}" field (issue #14566, fixed in PR #16109):
 * read as the data of an error event.
 *
 * Each event's data is "[DONE]" (the end: later bytes are ignored) or one
 * chunk object, read as upstreams.md says of each server:
 *   - choices[0].delta.content: text, reported to handlers->text as it
 *     arrives (null, "" and absent are no text; an array of parts is
 *     joined);
 *   - choices[0].delta.tool_calls[]: deltas accumulated by "index" (they
 *     may be split across chunks and interleaved): the first non-empty "id"
 *     wins, "name" pieces are joined (a repeated whole name is not doubled),
 *     "arguments" pieces are concatenated (a JSON string, or an object as
 *     Ollama's native shape, serialized). A delta without "index" continues
 *     the last call unless it brings a new id. handlers->tool_call is told
 *     when a call's name is first known;
 *   - choices[0].finish_reason: the last non-null one counts ("stop" with
 *     tool calls, as Ollama and some OpenAI models send, is fine);
 *   - usage: often only in a last chunk with empty choices (OpenAI, vLLM
 *     and Ollama send it only with stream_options.include_usage), in the
 *     finishing chunk (llama.cpp), or nowhere (has_usage false);
 *   - an error object inside the 200 stream ({"error": {...}} of llama.cpp,
 *     vLLM and OpenAI, vLLM's flat {"object": "error"}): the error it is, as
 *     llm_parse_reply() classifies it (model_context_exceeded or
 *     upstream_failed).
 *
 * Failures (the first one wins; the stream then ignores later bytes):
 *   model_output_limit: finish_reason "length"; content and arguments above
 *     limits->max_output_bytes, the moment they pass it; more than
 *     LLM_REPLY_MAX_TOOL_CALLS tool calls;
 *   upstream_failed: a line or an event longer than LLM_STREAM_LINE_MAX(),
 *     data that is not a JSON object (not UTF-8, too deep, truncated), a
 *     malformed tool call or content, a tool-call name longer than
 *     LLM_STREAM_NAME_MAX, and a body that ends before any finish_reason
 *     (a cut stream; also "[DONE]" without one).
 *
 * Ownership: the stream copies what it keeps; handlers->userdata is
 * borrowed. Error messages quote upstream bytes RAW: the caller sanitizes,
 * as for llm_parse_reply(). */

/* A tool-call name longer than this is not a name. */
#define LLM_STREAM_NAME_MAX 256
/* The longest line (and event) read: a chunk holds at most the output
 * budget of text, JSON-escaped (at most 6 bytes per byte, "\u00XX"), plus
 * the chunk's own members. */
#define LLM_STREAM_LINE_MAX(max_output_bytes) ((size_t) (max_output_bytes) *6 + 65536)

typedef struct LlmStream LlmStream;

/* A piece of the reply's content, as it arrives: n > 0 bytes of valid
 * UTF-8 without NUL at delta (not NUL-terminated; borrowed for the call). */
typedef void (*LlmTextHandler)(const char *delta, size_t n, void *userdata);
/* A tool call starts: index is its place in the stream's order (0, 1, …);
 * name is its name (NUL-terminated, borrowed for the call). */
typedef void (*LlmToolCallHandler)(size_t index, const char *name, void *userdata);

typedef struct LlmStreamHandlers {
        LlmTextHandler text;          /* NULL: not told */
        LlmToolCallHandler tool_call; /* NULL: not told */
        void *userdata;
} LlmStreamHandlers;

/* limits is copied; handlers NULL: none. Returns 0 or -ENOMEM. */
int llm_stream_new(const LlmReplyLimits *limits, const LlmStreamHandlers *handlers, LlmStream **ret);
LlmStream *llm_stream_free(LlmStream *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(LlmStream *, llm_stream_free);

/* The next n bytes of the body (borrowed). Handlers run inside this call.
 * Returns 0: more expected; 1: "[DONE]" was read (or the stream already
 * ended): later bytes are ignored; -EBADMSG: the reply failed (the reason
 * comes from llm_stream_finish(); later bytes are ignored); -ENOMEM. */
int llm_stream_feed(LlmStream *s, const void *data, size_t n);

/* The body has ended (or the caller stops reading). Returns 0 and fills
 * *ret (free with llm_reply_done()); -EBADMSG and fills *ret_error (free
 * with llm_error_done()); -ENOMEM. Each out-parameter is written only in
 * its own case. Call once. */
int llm_stream_finish(LlmStream *s, LlmReply *ret, LlmError *ret_error);

/* Whether the reply is complete (a finish_reason was read and nothing
 * failed): ending the body now loses at most a usage chunk. */
bool llm_stream_complete(const LlmStream *s);
/* Whether the reply failed (llm_stream_feed() returned -EBADMSG). */
bool llm_stream_failed(const LlmStream *s);
/* Events dispatched so far (for logs). */
uint64_t llm_stream_events(const LlmStream *s);
