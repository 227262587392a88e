/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "query/llm.h"
#include "query/conversation.h"
#include "query/mediawiki.h"
#include "sandbox/result.h"
#include "shared/api-error.h"
#include "shared/artifact.h"
#include "shared/macro.h"
#include "shared/source.h"
#include "shared/wiki-page.h"

/* The model's tool loop, pure part (API.md 8.2, 8.6): which request to send
 * next, which tool to call, when the answer is there and when to give up.
 * No I/O and no clock: the pipeline does the exchanges and the tool runs
 * and feeds their results in; agent_next() says what to do next. Tested
 * over scripted replies, like admission.c.
 *
 *   agent_new()            question and settings
 *   agent_preload_page()   each page of the request's "pages", read before
 *                          the first step (a wiki_read the model did not ask for)
 *   loop: agent_next()
 *     AGENT_ACTION_SEND    POST action.body; then agent_model_reply()
 *     AGENT_ACTION_TOOL    run action.call; then agent_tool_search_done(),
 *                          agent_tool_read_done(), agent_tool_python_done()
 *                          or agent_tool_failed()
 *     AGENT_ACTION_ANSWER  done: action.answer
 *     AGENT_ACTION_FAIL    done: action.error and action.message (raw: the
 *                          caller sanitizes it, as every upstream text)
 *
 * Rules it implements: at most max_steps model requests; the last one is
 * sent without tools (and says so to the model), and tool calls in its
 * reply are execution_failed "no answer within N steps". Tool calls of one
 * reply run in order; an unknown tool, invalid arguments, and calls beyond
 * AGENT_MAX_CALLS_PER_REPLY get a tool result {"error": "..."} and use up
 * their step, they do not fail the query. run_python exists only when the
 * sandbox is available. Every tool result is cut to tool_result_max_bytes
 * (JSON kept valid by shortening its longest strings, each cut visibly
 * marked and never splitting a UTF-8 character). Before each request the
 * prompt is estimated (llm_build_request()); over the context:
 * model_context_exceeded without calling the model.
 *
 * Ownership: an Agent owns everything it returns; the pointers in an
 * AgentAction and from the accessors stay valid until the next call that
 * changes the agent (agent_next(), agent_model_reply(), agent_tool_*(),
 * agent_preload_page()) or agent_free(). Inputs are borrowed and copied. */

#define AGENT_SEARCH_QUERY_MAX_CHARS 300
#define AGENT_SEARCH_LIMIT_MAX 20
#define AGENT_SEARCH_LIMIT_DEFAULT 5
#define AGENT_TITLE_MAX_BYTES 255
#define AGENT_CODE_MAX_BYTES 65536
/* Tool calls run per reply; the rest get an error result. */
#define AGENT_MAX_CALLS_PER_REPLY 16
/* Nesting accepted in a tool call's arguments (ours need 1). */
#define AGENT_ARGUMENTS_MAX_DEPTH 8

typedef enum AgentTool {
        AGENT_TOOL_WIKI_SEARCH,
        AGENT_TOOL_WIKI_READ,
        AGENT_TOOL_RUN_PYTHON,
        _AGENT_TOOL_MAX,
        _AGENT_TOOL_INVALID = -EINVAL,
} AgentTool;

const char *agent_tool_to_string(AgentTool t);
AgentTool agent_tool_from_string(const char *s);

/* The function tools of API.md 8.6 as sent to the model: wiki_search,
 * wiki_read, and run_python when with_python. Static; *ret_n is set. */
const LlmTool *agent_tools(bool with_python, size_t *ret_n);

typedef struct AgentSettings {
        const char *model;              /* WIKI_WEB_LLM_MODEL */
        unsigned max_steps;             /* WIKI_WEB_QUERY_MAX_STEPS, >= 1 */
        uint64_t context_tokens;        /* WIKI_WEB_MODEL_CONTEXT_TOKENS */
        uint64_t max_output_bytes;      /* WIKI_WEB_MODEL_MAX_OUTPUT_BYTES */
        uint64_t tool_result_max_bytes; /* WIKI_WEB_TOOL_RESULT_MAX_BYTES, >= 256 */
        bool sandbox_available;         /* offer run_python */
        LlmStreamMode stream;           /* how requests ask for the reply */
} AgentSettings;

typedef struct Agent Agent;

/* Returns 0 and a new agent in *ret; -EINVAL for settings out of range;
 * -ENOMEM. question: valid UTF-8 (validated by the HTTP layer). */
int agent_new(const AgentSettings *settings, const char *question, Agent **ret);
/* The same for a follow-up (API.md 7): the earlier turns (oldest first,
 * borrowed) go before the question as messages (query/conversation.h),
 * within half of what the context leaves after the system prompt, the
 * tools and the question; the system prompt says what they are. n_turns 0:
 * agent_new(). */
int agent_new_follow_up(
        const AgentSettings *settings, const char *question, const QueryTurn *turns, size_t n_turns, Agent **ret);
/* How many earlier turns were given to the model, how many left out
 * (the oldest), and whether the one just before was cut. */
void agent_turns(const Agent *a, size_t *ret_kept, size_t *ret_dropped, bool *ret_cut);
Agent *agent_free(Agent *a);
DEFINE_TRIVIAL_CLEANUP_FUNC(Agent *, agent_free);

typedef enum AgentActionType {
        AGENT_ACTION_SEND,
        AGENT_ACTION_TOOL,
        AGENT_ACTION_ANSWER,
        AGENT_ACTION_FAIL,
        _AGENT_ACTION_MAX,
        _AGENT_ACTION_INVALID = -EINVAL,
} AgentActionType;

const char *agent_action_type_to_string(AgentActionType t);

/* A validated tool call. */
typedef struct AgentCall {
        AgentTool tool;
        const char *id;
        const char *query; /* wiki_search: 1..300 characters */
        unsigned limit;    /* wiki_search: 1..20, default 5 */
        const char *title; /* wiki_read: 1..255 bytes, no control characters */
        const char *code;  /* run_python: 1..65536 bytes, no NUL */
        size_t code_size;
} AgentCall;

/* A tool call of the model's reply that the agent answered itself with an
 * error (an unknown tool, bad arguments, beyond AGENT_MAX_CALLS_PER_REPLY):
 * the name as the model sent it, valid UTF-8 cut to 64 bytes, and the error
 * the model is told. */
typedef struct AgentRejectedCall {
        unsigned step; /* of the reply that made the call */
        char *name;
        char *error;
} AgentRejectedCall;

typedef struct AgentAction {
        AgentActionType type;
        unsigned step; /* the model step, 1..max_steps (0 before the first) */

        /* Any type: the calls this agent_next() answered with an error
         * before deciding the action, in order (their step may be the one
         * before the action's: a SEND after a reply of rejected calls). */
        const AgentRejectedCall *rejected;
        size_t n_rejected;

        /* SEND */
        const char *body;
        size_t body_size;
        uint64_t prompt_tokens_estimate;
        uint64_t max_tokens;
        bool with_tools;

        /* TOOL */
        AgentCall call;

        /* ANSWER */
        const char *answer;

        /* FAIL */
        ApiError error;
        const char *message;
} AgentAction;

/* What to do next. Returns 0 and fills *ret; -EBUSY while a request or a
 * tool call is outstanding (its result must come first); -ENOMEM. Once
 * ANSWER or FAIL is returned, every later call returns the same. */
int agent_next(Agent *a, AgentAction *ret);

/* The reply to the last SEND: status and body as received (borrowed).
 * Whatever the reply says, returns 0 and the next agent_next() tells;
 * -EBUSY when no request is outstanding; -ENOMEM. */
int agent_model_reply(Agent *a, unsigned http_status, const uint8_t *body, size_t size);

/* The reply to the last SEND, already parsed (a streamed reply,
 * llm-stream.h): exactly one of reply and error, taken over (their
 * contents are moved out and they are left empty, also on failure).
 * Returns as agent_model_reply(). */
int agent_model_parsed(Agent *a, LlmReply *reply, LlmError *error);

/* The limits a reply to the last SEND is parsed with (its budget and its
 * step, which seeds generated tool-call ids). */
LlmReplyLimits agent_reply_limits(const Agent *a);

/* How requests built from now on ask for the reply. Returns 0, -EINVAL. */
int agent_set_stream(Agent *a, LlmStreamMode mode);

/* The outstanding request built again in the current stream mode (after
 * agent_set_stream(): a server refused stream_options): the same messages
 * and tools. Returns 0 and the SEND action in *ret; -EBUSY when no request
 * is outstanding; -ENOMEM. */
int agent_rebuild_request(Agent *a, AgentAction *ret);

/* The pipeline cannot go on (timeout, a wiki error, a sandbox that cannot
 * start): the next agent_next() is FAIL with this error. The first failure
 * wins. Returns 0 or -ENOMEM. */
int agent_abort(Agent *a, ApiError error, const char *message);

/* The result of the outstanding TOOL action, which must be of the matching
 * tool (agent_tool_failed() fits any): the search hits as
 * mediawiki_parse_search() returns them (borrowed). page NULL or page->missing: the page
 * does not exist ({"error": "missing"}); a page read is after redirects. A page read becomes a source (first
 * read first). A run_python result as the sandbox made it (borrowed), told as
 * sandbox_result_to_json() builds it. Returns 0; -EBUSY when no tool call of that kind is outstanding; -ENOMEM. */
int agent_tool_search_done(Agent *a, const MediaWikiSearchHit *hits, size_t n);
int agent_tool_read_done(Agent *a, const WikiPage *page);
int agent_tool_python_done(Agent *a, const SandboxResult *run);
/* A tool failure the model should see and may work around. */
int agent_tool_failed(Agent *a, const char *message);

/* Before the first agent_next(): a page of the request's "pages", given to
 * the model as the result of a wiki_read call of title. page NULL or
 * page->missing: missing.
 * Returns 0; -EBUSY after the first step; -ENOMEM. */
int agent_preload_page(Agent *a, const char *title, const WikiPage *page);

/* Every page read so far, in first-read order, each title once: the
 * record's sources (shared/source.h; url "" when the wiki gave none, the
 * revision always known). Owned by the agent. */
const Source *agent_sources(const Agent *a, size_t *ret_n);

/* Usage summed over the replies that had one (saturating). */
void agent_usage(const Agent *a, uint64_t *ret_prompt_tokens, uint64_t *ret_completion_tokens);

/* Model requests sent so far. */
unsigned agent_steps(const Agent *a);

/* The messages of the conversation so far (tests and debugging). */
const LlmMessage *agent_messages(const Agent *a, size_t *ret_n);

/* Cut a tool result (JSON text, valid UTF-8) to at most max bytes: while it
 * is too long, its longest string is shortened and ends in a visible mark
 * "[… N more bytes cut by wikiweb]" (hint appended when not NULL), so the
 * result stays valid JSON; if even that cannot make it fit, the text itself
 * is cut and marked. Returns 0 and a new string in *ret; -ENOMEM. */
int agent_fit_result(const char *json, size_t max, const char *hint, char **ret, bool *ret_cut);
