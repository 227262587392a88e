/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "query/llm-stream.h"
#include "query/llm.h"
#include "query/upstream.h"
#include "shared/api-error.h"
#include "shared/macro.h"
#include "shared/time-util.h"

/* The model client (API.md 8.2): chat-completions exchanges with
 * POST {WIKI_WEB_LLM_URL}/chat/completions through src/query/upstream.c,
 * streamed.
 *
 * An LlmClient lives as long as the daemon's executor: it holds the URL,
 * the bearer key (wiped when freed) and what it learnt of the server. Its
 * requests ask for a stream with usage ("stream": true, "stream_options":
 * {"include_usage": true}); a server that refuses stream_options (HTTP 400
 * or 422 naming it, llm_refuses_stream_options()) gets the request once
 * more without the option, and every later request of the daemon's life is
 * built without it (llm_client_stream_mode()).
 *
 * One LlmCall is one model step. The Content-Type of the answer decides how
 * it is read: text/event-stream with a 2xx status goes through the chunk
 * parser (llm-stream.h) as libcurl hands the bytes over, and the live
 * handlers hear each content delta and each tool call's start at once;
 * anything else (a server that ignored "stream" and answered JSON, an error
 * body) is read whole by llm_parse_reply(). Either way the caller gets an
 * LlmReply or an LlmError.
 *
 * Time: the query's deadline bounds the exchange (upstream.h). Between two
 * pieces of a streamed reply at most idle_timeout may pass (armed at the
 * first byte: before it, a server may still be reading a long prompt);
 * then the call fails with upstream_failed. A stream whose finish_reason
 * has arrived is complete: a server that then stalls or drops the
 * connection costs nothing but the usage chunk.
 *
 * Threading and ownership: the event loop's thread. The client borrows the
 * Upstream, which must outlive it; every call must be freed before the
 * client. A call is owned by the caller until llm_call_free(); its done
 * callback runs exactly once, from a defer source (never inside
 * llm_call_start() or a libcurl callback), unless the call is freed first,
 * which cancels it with no callback. The live handlers run inside libcurl's
 * write callback: they must not free the call nor start or free another
 * upstream operation; they may forward the text anywhere else. */

/* The idle timeout between two pieces of a streamed reply: half of the
 * query's timeout, at most this. A minute covers a server that sends a
 * whole tool call at once after generating it silently (Ollama does), at
 * tens of tokens per second. */
#define LLM_CLIENT_IDLE_TIMEOUT_MAX_USEC (60 * USEC_PER_SEC)

typedef struct LlmClient LlmClient;
typedef struct LlmCall LlmCall;

typedef struct LlmClientSettings {
        const char *url;     /* WIKI_WEB_LLM_URL, "/chat/completions" is appended */
        const char *api_key; /* the credential llm-api-key; NULL: no Authorization */
        usec_t idle_timeout; /* 0: none */
} LlmClientSettings;

/* Copies the settings. Returns 0, -ENOMEM. */
int llm_client_new(Upstream *u, const LlmClientSettings *s, LlmClient **ret);
LlmClient *llm_client_free(LlmClient *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(LlmClient *, llm_client_free);

/* How the next request is to be built: LLM_STREAM_WITH_USAGE until the
 * server refused stream_options, LLM_STREAM_ON after. */
LlmStreamMode llm_client_stream_mode(const LlmClient *c);

/* The idle timeout for a query timeout: MIN(query_timeout / 2,
 * LLM_CLIENT_IDLE_TIMEOUT_MAX_USEC). */
usec_t llm_client_idle_timeout(usec_t query_timeout);

/* The same request again in mode (the call's body was built in another
 * one): *ret_body (size *ret_size) is borrowed until the call returns.
 * Returns 0 or a negative errno. */
typedef int (*LlmCallRebuild)(LlmStreamMode mode, const char **ret_body, size_t *ret_size, void *userdata);

typedef struct LlmCallRequest {
        const char *body; /* JSON, built in llm_client_stream_mode(); copied */
        size_t body_size;
        usec_t deadline;        /* the query's, CLOCK_MONOTONIC; 0: none */
        LlmReplyLimits limits;  /* the reply's budget and the step */
        LlmStreamHandlers live; /* live text and tool-call starts; may be empty */
        LlmCallRebuild rebuild; /* NULL: no retry without stream_options */
} LlmCallRequest;

typedef struct LlmCallResult {
        /* 0: read the reply with llm_call_take_reply(). A negative errno: no
         * reply could be read (the exchange's errno for the transport, the
         * timeout or the cap; -ETIMEDOUT for the idle timeout; -ENOMEM), and
         * api_error is what the client is told, message (sanitized) why. */
        int error;
        ApiError api_error; /* when error < 0 */
        const char *message;
        long status;       /* of the last answer; 0: none */
        uint64_t bytes;    /* body bytes of the last answer */
        bool streamed;     /* read as an event stream */
        unsigned attempts; /* 2 after a retry without stream_options */
        uint64_t events;   /* events of the stream */
} LlmCallResult;

/* error is r->error; r is borrowed for the duration of the call. */
typedef void (*LlmCallDone)(LlmCall *call, int error, const LlmCallResult *r, void *userdata);

/* Send one request. Returns 0 and the call in *ret; -ENOMEM. */
int llm_call_start(LlmClient *c, const LlmCallRequest *req, LlmCallDone done, void *userdata, LlmCall **ret);
LlmCall *llm_call_free(LlmCall *call);
DEFINE_TRIVIAL_CLEANUP_FUNC(LlmCall *, llm_call_free);

/* GET /props (llm_props_url()): how many requests the model server serves
 * at once, where it says it (llama.cpp's total_slots). One LlmProps is one
 * such exchange, with the client's Authorization; owned by the caller
 * until llm_props_free(), which cancels it with no callback. done runs
 * once, from the loop (never inside llm_props_start()), with error 0 and
 * total_slots (1..LLM_PROPS_SLOTS_MAX), or a negative errno: the
 * exchange's, or -ENODATA for an answer without the number (another kind
 * of server: nothing is known). It may free the LlmProps. */
typedef struct LlmProps LlmProps;
typedef void (*LlmPropsDone)(LlmProps *p, int error, unsigned total_slots, void *userdata);

/* deadline: CLOCK_MONOTONIC. Returns 0 and the exchange in *ret; -EINVAL
 * when the URL has no server root to ask, -ENOMEM. */
int llm_props_start(LlmClient *c, usec_t deadline, LlmPropsDone done, void *userdata, LlmProps **ret);
LlmProps *llm_props_free(LlmProps *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(LlmProps *, llm_props_free);

/* After done reported error 0: the reply, as llm_parse_reply() returns
 * it: 0 and *ret (free with llm_reply_done()), or -EBADMSG and *ret_error
 * (free with llm_error_done(); its message is RAW). Once; -ENODATA
 * otherwise. */
int llm_call_take_reply(LlmCall *call, LlmReply *ret, LlmError *ret_error);
