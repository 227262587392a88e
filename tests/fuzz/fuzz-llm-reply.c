/* SPDX-License-Identifier: MIT */
/* llm_parse_reply() on arbitrary bodies. The first byte picks the HTTP
 * status (mostly 200, so the reply parser is what gets exercised); the rest
 * is the body. Checks the contract, not just the absence of crashes: a reply
 * has valid UTF-8 strings, at most LLM_REPLY_MAX_TOOL_CALLS calls with
 * usable, unique ids and stays within the output budget, and can be sent
 * back as an assistant message in a request that is valid JSON; a failure
 * is one of the three codes with a bounded message.
 *
 * Then the same reply drives the tool loop (agent.c): each valid call is
 * answered with results built from its own arguments, so the argument
 * validation and the cutting of tool results see hostile bytes too; every
 * tool result must stay within its limit and be valid UTF-8. */

#include <json-c/json.h>
#include <stdint.h>

#include "query/agent.h"
#include "query/llm.h"
#include "shared/macro.h"
#include "shared/utf8.h"
#include "fuzz.h"

static const unsigned statuses[] = { 200, 200, 200, 200, 201, 400, 401, 404, 429, 500, 503, 302 };

static void check_string(const char *s) {
        if (!s || !utf8_is_valid(s, strlen(s)))
                abort();
}

static void check_tool_messages(const Agent *a, size_t max) {
        size_t n;
        const LlmMessage *m = agent_messages(a, &n);

        for (size_t i = 0; i < n; i++)
                if (m[i].role == LLM_ROLE_TOOL) {
                        check_string(m[i].content);
                        if (strlen(m[i].content) > max)
                                abort();
                }
}

static void drive_agent(unsigned status, const uint8_t *data, size_t size) {
        static const AgentSettings settings = {
                .model = "m",
                .max_steps = 2,
                .context_tokens = 1u << 30,
                .max_output_bytes = 4096,
                .tool_result_max_bytes = 1024,
                .sandbox_available = true,
        };
        _cleanup_(agent_freep) Agent *a = NULL;
        AgentAction act;
        int r;

        if (agent_new(&settings, "question", &a) < 0)
                return;
        if (agent_next(a, &act) < 0 || act.type != AGENT_ACTION_SEND)
                abort();
        if (agent_model_reply(a, status, data, size) < 0)
                return;
        for (unsigned i = 0; i < 2 * LLM_REPLY_MAX_TOOL_CALLS; i++) {
                r = agent_next(a, &act);
                if (r < 0)
                        return; /* -ENOMEM */
                if (act.type != AGENT_ACTION_TOOL)
                        break;
                switch (act.call.tool) {
                case AGENT_TOOL_WIKI_SEARCH: {
                        MediaWikiSearchHit results[AGENT_SEARCH_LIMIT_MAX];

                        if (act.call.limit < 1 || act.call.limit > AGENT_SEARCH_LIMIT_MAX)
                                abort();
                        for (unsigned k = 0; k < act.call.limit; k++)
                                results[k] = (MediaWikiSearchHit){ (char *) act.call.query,
                                                                   (char *) act.call.query };
                        r = agent_tool_search_done(a, results, act.call.limit);
                        break;
                }
                case AGENT_TOOL_WIKI_READ: {
                        WikiPage page = {
                                .title = (char *) act.call.title,
                                .url = (char *) act.call.title,
                                .revision_id = UINT64_MAX,
                                .content = (char *) act.call.title,
                                .content_size = strlen(act.call.title),
                        };
                        if (strlen(act.call.title) < 1 || strlen(act.call.title) > AGENT_TITLE_MAX_BYTES)
                                abort();
                        r = agent_tool_read_done(a, &page);
                        break;
                }
                case AGENT_TOOL_RUN_PYTHON: {
                        SandboxResult run = {
                                .stdout_text = (char *) act.call.code,
                                .stdout_size = act.call.code_size,
                                .stderr_text = (char *) act.call.code,
                                .stderr_size = act.call.code_size,
                        };
                        r = agent_tool_python_done(a, &run);
                        break;
                }
                default:
                        abort();
                }
                if (r < 0)
                        return;
        }
        check_tool_messages(a, settings.tool_result_max_bytes);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        LlmReplyLimits limits = { .max_output_bytes = 4096, .step = 7 };
        LlmReply reply = { .content = NULL };
        LlmError err = { .message = NULL };
        bool has_calls = false;
        unsigned status;
        int r;

        if (size < 1)
                return 0;
        status = statuses[data[0] % ELEMENTSOF(statuses)];
        data++, size--;

        r = llm_parse_reply(status, data, size, &limits, &reply, &err);
        if (r == 0) {
                size_t output = 0;

                if (err.message || status < 200 || status > 299)
                        abort();
                if (reply.content) {
                        check_string(reply.content);
                        output += strlen(reply.content);
                }
                if (reply.n_tool_calls > LLM_REPLY_MAX_TOOL_CALLS ||
                    (reply.n_tool_calls > 0) != !!reply.tool_calls)
                        abort();
                for (size_t i = 0; i < reply.n_tool_calls; i++) {
                        const LlmToolCall *c = &reply.tool_calls[i];

                        check_string(c->id);
                        check_string(c->name);
                        check_string(c->arguments);
                        if (strlen(c->id) < 1 || strlen(c->id) > LLM_TOOL_CALL_ID_MAX)
                                abort();
                        for (size_t j = 0; j < i; j++)
                                if (streq(c->id, reply.tool_calls[j].id))
                                        abort();
                        output += strlen(c->arguments);
                }
                if (output > limits.max_output_bytes)
                        abort();
                if (reply.finish_reason && streq(reply.finish_reason, "length"))
                        abort();
                has_calls = reply.n_tool_calls > 0;

                /* Round trip: the reply as the next request's assistant message. */
                {
                        LlmMessage m = {
                                .role = LLM_ROLE_ASSISTANT,
                                .content = reply.content,
                                .tool_calls = reply.tool_calls,
                                .n_tool_calls = reply.n_tool_calls,
                        };
                        LlmRequest req = {
                                .model = "m",
                                .messages = &m,
                                .n_messages = 1,
                                .context_tokens = 1u << 30,
                                .max_output_bytes = 65536,
                        };
                        LlmRequestBody b = { .body = NULL };
                        json_object *o;

                        r = llm_build_request(&req, &b);
                        if (r == 0) {
                                o = json_tokener_parse(b.body);
                                if (!o || !utf8_is_valid(b.body, b.size))
                                        abort();
                                json_object_put(o);
                                llm_request_body_done(&b);
                        } else if (r != -ENOMEM)
                                abort();
                }
                llm_reply_done(&reply);
        } else if (r == -EBADMSG) {
                if (!err.message || strlen(err.message) > LLM_ERROR_QUOTE_MAX + 128)
                        abort();
                if (err.code != API_ERROR_UPSTREAM_FAILED && err.code != API_ERROR_MODEL_CONTEXT_EXCEEDED &&
                    err.code != API_ERROR_MODEL_OUTPUT_LIMIT)
                        abort();
                if (reply.content || reply.tool_calls)
                        abort();
                llm_error_done(&err);
        } else if (r != -ENOMEM)
                abort();

        /* Replies without tool calls take the agent's simple paths, which
         * the unit tests cover; spend the time on the calls. */
        if (has_calls)
                drive_agent(status, data, size);
        return 0;
}
