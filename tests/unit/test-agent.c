/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <json-c/json.h>

#include "query/agent.h"
#include "shared/macro.h"
#include "shared/utf8.h"
#include "shared/wiki-page.h"
#include "tests.h"

/* Tests of the tool loop (API.md 8.2, 8.6) over scripted model replies:
 * every branch of agent_next(), then the tool results, their truncation
 * and the bookkeeping. No I/O: the replies are strings. */

static const AgentSettings defaults = {
        .model = "test-model",
        .max_steps = 8,
        .context_tokens = 32768,
        .max_output_bytes = 65536,
        .tool_result_max_bytes = 16384,
        .sandbox_available = true,
};

/* ---- helpers ---- */

static char *reply_answer(const char *content) {
        _cleanup_free_ char *quoted = NULL;
        json_object *s = json_object_new_string(content);
        char *r;

        ASSERT_TRUE(s);
        quoted = strdup(json_object_to_json_string_ext(s, JSON_C_TO_STRING_PLAIN));
        json_object_put(s);
        ASSERT_TRUE(
                asprintf(
                        &r,
                        "{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":%s},"
                        "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":100,\"completion_tokens\":10}}",
                        quoted) > 0);
        return r;
}

/* calls: "name", "arguments JSON", "name", "arguments JSON", ..., NULL */
static char *reply_calls_v(const char *first, va_list ap) {
        json_object *root, *calls = json_object_new_array();
        const char *name = first;
        char *r;
        int i = 0;

        while (name) {
                const char *args = va_arg(ap, const char *);
                json_object *c = json_object_new_object(), *f = json_object_new_object();
                char id[32];

                (void) snprintf(id, sizeof(id), "call_%d", i++);
                json_object_object_add(f, "name", json_object_new_string(name));
                json_object_object_add(f, "arguments", json_object_new_string(args));
                json_object_object_add(c, "id", json_object_new_string(id));
                json_object_object_add(c, "type", json_object_new_string("function"));
                json_object_object_add(c, "function", f);
                json_object_array_add(calls, c);
                name = va_arg(ap, const char *);
        }
        root = json_tokener_parse(
                "{\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":null},"
                "\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":50,\"completion_tokens\":5}}");
        ASSERT_TRUE(root);
        {
                json_object *choices, *message;

                ASSERT_TRUE(json_object_object_get_ex(root, "choices", &choices));
                ASSERT_TRUE(json_object_object_get_ex(
                        json_object_array_get_idx(choices, 0), "message", &message));
                json_object_object_add(message, "tool_calls", calls);
        }
        r = strdup(json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN));
        json_object_put(root);
        ASSERT_TRUE(r);
        return r;
}

static char *reply_calls(const char *first, ...) {
        va_list ap;
        char *r;

        va_start(ap, first);
        r = reply_calls_v(first, ap);
        va_end(ap);
        return r;
}

static void feed(Agent *a, unsigned status, const char *body) {
        ASSERT_OK(agent_model_reply(a, status, (const uint8_t *) body, strlen(body)));
}

static void feed_free(Agent *a, char *body) {
        feed(a, 200, body);
        free(body);
}

static AgentAction next(Agent *a, AgentActionType expected) {
        AgentAction act;

        ASSERT_OK(agent_next(a, &act));
        if (act.type != expected) {
                fprintf(stderr,
                        "expected action %s, got %s (%s: %s)\n",
                        agent_action_type_to_string(expected),
                        agent_action_type_to_string(act.type),
                        act.type == AGENT_ACTION_FAIL ? api_error_to_string(act.error) : "",
                        act.type == AGENT_ACTION_FAIL ? act.message : "");
                abort();
        }
        return act;
}

static void expect_fail(Agent *a, ApiError code, const char *needle) {
        AgentAction act = next(a, AGENT_ACTION_FAIL);

        ASSERT_EQ_STR(api_error_to_string(act.error), api_error_to_string(code));
        if (!strstr(act.message, needle)) {
                fprintf(stderr, "message \"%s\" lacks \"%s\"\n", act.message, needle);
                abort();
        }
}

static json_object *body_json(const AgentAction *act) {
        json_object *o;

        ASSERT_EQ_INT(act->type, AGENT_ACTION_SEND);
        ASSERT_EQ_INT(strlen(act->body), act->body_size);
        o = json_tokener_parse(act->body);
        ASSERT_TRUE(o);
        return o;
}

static json_object *field(json_object *o, const char *key) {
        json_object *v = NULL;

        return json_object_object_get_ex(o, key, &v) ? v : NULL;
}

/* The tool message at index i must answer id and contain needle. */
static void expect_tool_message(const Agent *a, size_t i, const char *id, const char *needle) {
        size_t n;
        const LlmMessage *m = agent_messages(a, &n);

        ASSERT_TRUE(i < n);
        ASSERT_EQ_INT(m[i].role, LLM_ROLE_TOOL);
        ASSERT_EQ_STR(m[i].tool_call_id, id);
        if (!strstr(m[i].content, needle)) {
                fprintf(stderr, "tool message %zu \"%s\" lacks \"%s\"\n", i, m[i].content, needle);
                abort();
        }
        ASSERT_TRUE(utf8_is_valid(m[i].content, strlen(m[i].content)));
}

static Agent *new_agent(const AgentSettings *s, const char *question) {
        Agent *a = NULL;

        ASSERT_OK(agent_new(s, question, &a));
        return a;
}

static const WikiPage apple = {
        .title = "Apple",
        .url = "http://127.0.0.1:8081/index.php/Apple",
        .revision_id = 42,
        .content = "The '''apple''' is a fruit.",
        .content_size = 27,
};
static const WikiPage pear = {
        .title = "Pear",
        .url = "http://127.0.0.1:8081/index.php/Pear",
        .revision_id = 7,
        .content = "Pears.",
        .content_size = 6,
};

/* ---- branches ---- */

TEST(answer_at_once) {
        _cleanup_(agent_freep) Agent *a = new_agent(&defaults, "What is an apple?");
        AgentAction act;
        json_object *o, *tools;
        uint64_t p, c;

        act = next(a, AGENT_ACTION_SEND);
        ASSERT_EQ_INT(act.step, 1);
        ASSERT_TRUE(act.with_tools);
        ASSERT_EQ_INT(act.prompt_tokens_estimate, (act.body_size + 3) / 4);
        o = body_json(&act);
        ASSERT_EQ_STR(json_object_get_string(field(o, "model")), "test-model");
        tools = field(o, "tools");
        ASSERT_EQ_INT(json_object_array_length(tools), 3);
        ASSERT_EQ_STR(
                json_object_get_string(field(field(json_object_array_get_idx(tools, 2), "function"), "name")),
                "run_python");
        ASSERT_EQ_STR(json_object_get_string(field(o, "tool_choice")), "auto");
        ASSERT_EQ_INT(json_object_array_length(field(o, "messages")), 2);
        json_object_put(o);

        /* nothing can happen before the reply */
        ASSERT_EQ_INT(agent_next(a, &act), -EBUSY);
        ASSERT_EQ_INT(agent_tool_failed(a, "x"), -EBUSY);

        feed_free(a, reply_answer("  \nAn apple is a fruit [Apple].\n "));
        act = next(a, AGENT_ACTION_ANSWER);
        ASSERT_EQ_STR(act.answer, "An apple is a fruit [Apple].");
        /* and stays the answer */
        act = next(a, AGENT_ACTION_ANSWER);
        ASSERT_EQ_STR(act.answer, "An apple is a fruit [Apple].");
        ASSERT_EQ_INT(agent_model_reply(a, 200, (const uint8_t *) "{}", 2), -EBUSY);
        ASSERT_EQ_INT(agent_steps(a), 1);
        agent_usage(a, &p, &c);
        ASSERT_EQ_INT(p, 100);
        ASSERT_EQ_INT(c, 10);
}

TEST(one_tool_then_answer) {
        _cleanup_(agent_freep) Agent *a = new_agent(&defaults, "Apples?");
        MediaWikiSearchHit results[] = {
                { (char *) "Apple", (char *) "The apple is a fruit" },
                { (char *) "Apple pie", (char *) "A pie" },
        };
        AgentAction act;
        json_object *o, *msgs, *last;
        uint64_t p, c;

        next(a, AGENT_ACTION_SEND);
        feed_free(a, reply_calls("wiki_search", "{\"query\":\"apple\"}", NULL));
        act = next(a, AGENT_ACTION_TOOL);
        ASSERT_EQ_INT(act.call.tool, AGENT_TOOL_WIKI_SEARCH);
        ASSERT_EQ_STR(act.call.query, "apple");
        ASSERT_EQ_INT(act.call.limit, 5); /* the default */
        ASSERT_EQ_STR(act.call.id, "call_0");
        ASSERT_EQ_INT(agent_next(a, &act), -EBUSY);
        ASSERT_EQ_INT(agent_tool_read_done(a, &apple), -EBUSY); /* not a wiki_read */
        ASSERT_OK(agent_tool_search_done(a, results, 2));

        act = next(a, AGENT_ACTION_SEND);
        ASSERT_EQ_INT(act.step, 2);
        o = body_json(&act);
        msgs = field(o, "messages");
        ASSERT_EQ_INT(json_object_array_length(msgs), 4); /* system, user, assistant, tool */
        last = json_object_array_get_idx(msgs, 3);
        ASSERT_EQ_STR(json_object_get_string(field(last, "role")), "tool");
        ASSERT_EQ_STR(json_object_get_string(field(last, "tool_call_id")), "call_0");
        ASSERT_EQ_STR(
                json_object_get_string(field(last, "content")),
                "{\"results\":[{\"title\":\"Apple\",\"snippet\":\"The apple is a fruit\"},"
                "{\"title\":\"Apple pie\",\"snippet\":\"A pie\"}]}");
        json_object_put(o);

        feed_free(a, reply_answer("Yes [Apple]."));
        act = next(a, AGENT_ACTION_ANSWER);
        ASSERT_EQ_STR(act.answer, "Yes [Apple].");
        agent_usage(a, &p, &c);
        ASSERT_EQ_INT(p, 150);
        ASSERT_EQ_INT(c, 15);
        ASSERT_EQ_INT(agent_steps(a), 2);
}

TEST(several_calls_in_order) {
        _cleanup_(agent_freep) Agent *a = new_agent(&defaults, "Fruit?");
        const Source *src;
        AgentAction act;
        size_t n, base;

        next(a, AGENT_ACTION_SEND);
        feed_free(
                a,
                reply_calls(
                        "wiki_read",
                        "{\"title\":\"Apple\"}",
                        "wiki_read",
                        "{\"title\":\"Pear\"}",
                        "wiki_read",
                        "{\"title\":\"Quince\"}",
                        "run_python",
                        "{\"code\":\"print(1)\"}",
                        NULL));
        agent_messages(a, &base);

        act = next(a, AGENT_ACTION_TOOL);
        ASSERT_EQ_STR(act.call.title, "Apple");
        ASSERT_OK(agent_tool_read_done(a, &apple));
        act = next(a, AGENT_ACTION_TOOL);
        ASSERT_EQ_STR(act.call.title, "Pear");
        ASSERT_OK(agent_tool_read_done(a, &pear));
        act = next(a, AGENT_ACTION_TOOL);
        ASSERT_EQ_STR(act.call.title, "Quince");
        ASSERT_OK(agent_tool_read_done(a, NULL)); /* missing */
        act = next(a, AGENT_ACTION_TOOL);
        ASSERT_EQ_INT(act.call.tool, AGENT_TOOL_RUN_PYTHON);
        ASSERT_EQ_STR(act.call.code, "print(1)");
        ASSERT_EQ_INT(act.call.code_size, 8);
        {
                Artifact files[] = { { .name = (char *) "table.csv", .size_bytes = 120, .fd = -1 } };
                SandboxResult run = {
                        .has_exit_code = true,
                        .exit_code = 0,
                        .stdout_text = (char *) "1\n",
                        .stdout_size = 2,
                        .stderr_text = (char *) "",
                        .files = files,
                        .n_files = 1,
                };
                ASSERT_OK(agent_tool_python_done(a, &run));
        }

        expect_tool_message(a, base + 0, "call_0", "\"revision_id\":42");
        expect_tool_message(a, base + 0, "call_0", "\"url\":\"http://127.0.0.1:8081/index.php/Apple\"");
        expect_tool_message(a, base + 0, "call_0", "\"truncated\":false");
        expect_tool_message(a, base + 1, "call_1", "\"title\":\"Pear\"");
        expect_tool_message(a, base + 2, "call_2", "{\"error\":\"missing\"}");
        expect_tool_message(
                a,
                base + 3,
                "call_3",
                "{\"exit_code\":0,\"signal\":null,\"timed_out\":false,\"stdout\":\"1\\n\",\"stderr\":\"\","
                "\"files\":[{\"name\":\"table.csv\",\"size_bytes\":120}]}");

        /* Next step: Pear again (no new source), then Banana through a redirect. */
        next(a, AGENT_ACTION_SEND);
        feed_free(
                a,
                reply_calls("wiki_read", "{\"title\":\"Pear\"}", "wiki_read", "{\"title\":\"Banane\"}", NULL));
        next(a, AGENT_ACTION_TOOL);
        ASSERT_OK(agent_tool_read_done(a, &pear));
        next(a, AGENT_ACTION_TOOL);
        {
                WikiPage banana = {
                        .title = "Banana", .url = "u", .revision_id = 9, .content = "", .content_size = 0
                };
                ASSERT_OK(agent_tool_read_done(a, &banana));
        }
        src = agent_sources(a, &n);
        ASSERT_EQ_INT(n, 3);
        ASSERT_EQ_STR(src[0].title, "Apple");
        ASSERT_EQ_INT(src[0].revision_id, 42);
        ASSERT_EQ_STR(src[0].url, "http://127.0.0.1:8081/index.php/Apple");
        ASSERT_EQ_STR(src[1].title, "Pear");
        ASSERT_EQ_STR(src[2].title, "Banana");
        next(a, AGENT_ACTION_SEND);
        feed_free(a, reply_answer("Done."));
        next(a, AGENT_ACTION_ANSWER);
}

TEST(bad_calls) {
        _cleanup_(agent_freep) Agent *a = new_agent(&defaults, "q");
        char long_title[300], long_args[400];
        AgentAction act;
        size_t base;

        memset(long_title, 'x', 256);
        long_title[256] = '\0';
        (void) snprintf(long_args, sizeof(long_args), "{\"title\":\"%s\"}", long_title);

        next(a, AGENT_ACTION_SEND);
        feed_free(
                a,
                reply_calls(
                        "delete_wiki",
                        "{}",
                        "wiki_search",
                        "{\"query\":\"a\",\"limit\":50}",
                        "wiki_search",
                        "{\"query\":\"a\",\"limit\":\"5\"}",
                        "wiki_search",
                        "{\"query\":\"\"}",
                        "wiki_read",
                        "{\"title\":\"A\",\"section\":2}",
                        "wiki_read",
                        "not json",
                        "wiki_read",
                        long_args,
                        "wiki_read",
                        "{\"title\":\"a\\nb\"}",
                        "wiki_read",
                        "[\"Apple\"]",
                        "run_python",
                        "{\"code\":\"\"}",
                        "run_python",
                        "{\"code\":\"a\\u0000b\"}",
                        "wiki_read",
                        "{\"title\":\"Apple\"} ",
                        NULL));
        agent_messages(a, &base);

        /* The only valid call is the last: everything before it is
         * answered with an error, in order, without a TOOL action. */
        act = next(a, AGENT_ACTION_TOOL);
        ASSERT_EQ_STR(act.call.id, "call_11");
        ASSERT_EQ_STR(act.call.title, "Apple");
        expect_tool_message(
                a,
                base + 0,
                "call_0",
                "{\"error\":\"unknown tool \\\"delete_wiki\\\"; the tools are wiki_search, wiki_read, run_python\"}");
        expect_tool_message(a, base + 1, "call_1", "limit must be an integer from 1 to 20");
        expect_tool_message(a, base + 2, "call_2", "limit must be an integer from 1 to 20");
        expect_tool_message(a, base + 3, "call_3", "query must be a string of 1 to 300 characters");
        expect_tool_message(a, base + 4, "call_4", "unknown argument \\\"section\\\"");
        expect_tool_message(a, base + 5, "call_5", "arguments are not a JSON object");
        expect_tool_message(a, base + 6, "call_6", "title must be a string of 1 to 255 bytes");
        expect_tool_message(a, base + 7, "call_7", "without control characters");
        expect_tool_message(a, base + 8, "call_8", "arguments are not a JSON object");
        expect_tool_message(a, base + 9, "call_9", "code must be a string of 1 to 65536 bytes");
        expect_tool_message(a, base + 10, "call_10", "without NUL");
        /* ... and shown to the caller with the action, in order. */
        ASSERT_EQ_INT(act.n_rejected, 11);
        ASSERT_EQ_INT(act.rejected[0].step, act.step);
        ASSERT_EQ_STR(act.rejected[0].name, "delete_wiki");
        ASSERT_TRUE(strstr(act.rejected[0].error, "unknown tool") != NULL);
        ASSERT_EQ_STR(act.rejected[3].name, "wiki_search");
        ASSERT_EQ_STR(act.rejected[3].error, "query must be a string of 1 to 300 characters");
        ASSERT_EQ_STR(act.rejected[10].name, "run_python");
        ASSERT_OK(agent_tool_read_done(a, &apple));
        act = next(a, AGENT_ACTION_SEND);
        ASSERT_EQ_INT(act.n_rejected, 0);

        /* run_python is unknown without a sandbox, and not offered */
        {
                AgentSettings s = defaults;
                _cleanup_(agent_freep) Agent *b = NULL;
                json_object *o;

                s.sandbox_available = false;
                b = new_agent(&s, "q");
                act = next(b, AGENT_ACTION_SEND);
                o = body_json(&act);
                ASSERT_EQ_INT(json_object_array_length(field(o, "tools")), 2);
                ASSERT_TRUE(!strstr(act.body, "run_python"));
                ASSERT_TRUE(!strstr(act.body, "/out"));
                json_object_put(o);
                feed_free(b, reply_calls("run_python", "{\"code\":\"print(1)\"}", NULL));
                agent_messages(b, &base);
                act = next(b, AGENT_ACTION_SEND); /* the error result went back */
                ASSERT_EQ_INT(act.step, 2);
                /* The rejected call is shown with the step that made it. */
                ASSERT_EQ_INT(act.n_rejected, 1);
                ASSERT_EQ_INT(act.rejected[0].step, 1);
                ASSERT_EQ_STR(act.rejected[0].name, "run_python");
                expect_tool_message(
                        b,
                        base,
                        "call_0",
                        "unknown tool \\\"run_python\\\"; the tools are wiki_search, wiki_read\"");
        }
}

TEST(empty_name_and_limits) {
        _cleanup_(agent_freep) Agent *a = new_agent(&defaults, "q");
        const char *body =
                "{\"choices\":[{\"message\":{\"tool_calls\":[{\"function\":{}},"
                "{\"id\":\"x\",\"function\":{\"name\":\"wiki_search\",\"arguments\":"
                "{\"query\":\"pear\",\"limit\":20}}}]}}]}";
        AgentAction act;
        size_t base;

        next(a, AGENT_ACTION_SEND);
        feed(a, 200, body);
        agent_messages(a, &base);
        act = next(a, AGENT_ACTION_TOOL);
        ASSERT_EQ_STR(act.call.query, "pear");
        ASSERT_EQ_INT(act.call.limit, 20);
        expect_tool_message(a, base, "ww0010000", "unknown tool \\\"\\\"");
}

TEST(too_many_calls) {
        _cleanup_(agent_freep) Agent *a = new_agent(&defaults, "q");
        char body[8192];
        size_t n, base, count = 0;
        AgentAction act;

        n = (size_t) snprintf(body, sizeof(body), "{\"choices\":[{\"message\":{\"tool_calls\":[");
        for (int i = 0; i < 18; i++)
                n += (size_t) snprintf(
                        body + n,
                        sizeof(body) - n,
                        "%s{\"id\":\"c%d\",\"function\":{\"name\":\"wiki_read\",\"arguments\":"
                        "\"{\\\"title\\\":\\\"P%d\\\"}\"}}",
                        i ? "," : "",
                        i,
                        i);
        (void) snprintf(body + n, sizeof(body) - n, "]}}]}");
        next(a, AGENT_ACTION_SEND);
        feed(a, 200, body);
        agent_messages(a, &base);
        for (;;) {
                ASSERT_OK(agent_next(a, &act));
                if (act.type != AGENT_ACTION_TOOL)
                        break;
                count++;
                ASSERT_OK(agent_tool_failed(a, "wiki unreachable"));
        }
        ASSERT_EQ_INT(act.type, AGENT_ACTION_SEND);
        ASSERT_EQ_INT(count, AGENT_MAX_CALLS_PER_REPLY);
        expect_tool_message(a, base, "c0", "{\"error\":\"wiki unreachable\"}");
        expect_tool_message(a, base + 16, "c16", "not run: at most 16 tool calls");
        expect_tool_message(a, base + 17, "c17", "not run");
}

TEST(step_bound) {
        AgentSettings s = defaults;
        AgentAction act;
        json_object *o, *msgs;

        s.max_steps = 3;
        /* The model keeps asking for tools: step 3 goes out without them. */
        {
                _cleanup_(agent_freep) Agent *a = new_agent(&s, "q");

                for (unsigned step = 1; step <= 2; step++) {
                        act = next(a, AGENT_ACTION_SEND);
                        ASSERT_EQ_INT(act.step, step);
                        ASSERT_TRUE(act.with_tools);
                        feed_free(a, reply_calls("wiki_search", "{\"query\":\"x\"}", NULL));
                        next(a, AGENT_ACTION_TOOL);
                        ASSERT_OK(agent_tool_search_done(a, NULL, 0));
                }
                act = next(a, AGENT_ACTION_SEND);
                ASSERT_EQ_INT(act.step, 3);
                ASSERT_TRUE(!act.with_tools);
                o = body_json(&act);
                ASSERT_TRUE(!field(o, "tools") && !field(o, "tool_choice"));
                msgs = field(o, "messages");
                ASSERT_TRUE(
                        strstr(json_object_get_string(field(
                                       json_object_array_get_idx(msgs, json_object_array_length(msgs) - 1),
                                       "content")),
                               "last step"));
                json_object_put(o);
                feed_free(a, reply_calls("wiki_search", "{\"query\":\"x\"}", NULL));
                expect_fail(a, API_ERROR_EXECUTION_FAILED, "no answer within 3 steps");
                ASSERT_EQ_INT(agent_steps(a), 3);
                /* stays failed */
                expect_fail(a, API_ERROR_EXECUTION_FAILED, "no answer within 3 steps");
        }
        /* ... and answering in the last step is fine. */
        {
                _cleanup_(agent_freep) Agent *a = new_agent(&s, "q");

                for (unsigned step = 1; step <= 2; step++) {
                        next(a, AGENT_ACTION_SEND);
                        feed_free(a, reply_calls("wiki_search", "{\"query\":\"x\"}", NULL));
                        next(a, AGENT_ACTION_TOOL);
                        ASSERT_OK(agent_tool_search_done(a, NULL, 0));
                }
                next(a, AGENT_ACTION_SEND);
                feed_free(a, reply_answer("Nothing found."));
                ASSERT_EQ_STR(next(a, AGENT_ACTION_ANSWER).answer, "Nothing found.");
        }
        /* One step: no tools ever, no "last step" note either. */
        {
                _cleanup_(agent_freep) Agent *a = NULL;

                s.max_steps = 1;
                a = new_agent(&s, "q");
                act = next(a, AGENT_ACTION_SEND);
                ASSERT_TRUE(!act.with_tools);
                ASSERT_TRUE(!strstr(act.body, "\"tools\""));
                ASSERT_TRUE(!strstr(act.body, "[wikiweb] This is the last step"));
                feed_free(a, reply_calls("wiki_search", "{\"query\":\"x\"}", NULL));
                expect_fail(a, API_ERROR_EXECUTION_FAILED, "no answer within 1 steps");
        }
}

TEST(empty_answer) {
        const char *bodies[] = {
                "{\"choices\":[{\"message\":{\"content\":\"\"},\"finish_reason\":\"stop\"}]}",
                "{\"choices\":[{\"message\":{\"content\":null},\"finish_reason\":\"stop\"}]}",
                "{\"choices\":[{\"message\":{\"content\":\" \\n\\t \",\"tool_calls\":[]}}]}",
                "{\"choices\":[{\"message\":{}}]}",
        };

        for (size_t i = 0; i < ELEMENTSOF(bodies); i++) {
                _cleanup_(agent_freep) Agent *a = new_agent(&defaults, "q");

                next(a, AGENT_ACTION_SEND);
                feed(a, 200, bodies[i]);
                expect_fail(a, API_ERROR_UPSTREAM_FAILED, "the model's answer is empty");
        }
}

TEST(length_and_upstream_errors) {
        static const struct {
                unsigned status;
                const char *body;
                ApiError code;
                const char *needle;
        } cases[] = {
                { 200,
                  "{\"choices\":[{\"message\":{\"content\":\"abc\"},\"finish_reason\":\"length\"}]}",
                  API_ERROR_MODEL_OUTPUT_LIMIT,
                  "length" },
                { 503,
                  "{\"error\":{\"message\":\"server busy, please try again.  maximum pending requests exceeded\"}}",
                  API_ERROR_UPSTREAM_FAILED,
                  "HTTP 503" },
                { 400,
                  "{\"error\":{\"code\":400,\"message\":\"request (9000 tokens) exceeds the available context size "
                  "(8192 tokens), try increasing it\",\"type\":\"exceed_context_size_error\"}}",
                  API_ERROR_MODEL_CONTEXT_EXCEEDED,
                  "8192" },
                { 200, "<html>", API_ERROR_UPSTREAM_FAILED, "not JSON" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_(agent_freep) Agent *a = new_agent(&defaults, "q");

                next(a, AGENT_ACTION_SEND);
                feed(a, cases[i].status, cases[i].body);
                expect_fail(a, cases[i].code, cases[i].needle);
        }
        /* too many output bytes */
        {
                AgentSettings s = defaults;
                _cleanup_(agent_freep) Agent *a = NULL;
                char body[4096];

                s.max_output_bytes = 1024;
                a = new_agent(&s, "q");
                next(a, AGENT_ACTION_SEND);
                (void) snprintf(
                        body, sizeof(body), "{\"choices\":[{\"message\":{\"content\":\"%01025d\"}}]}", 0);
                feed(a, 200, body);
                expect_fail(a, API_ERROR_MODEL_OUTPUT_LIMIT, "1025 bytes");
        }
}

/* The stream mode of the requests, a rebuild after a refusal of
 * stream_options, and replies parsed elsewhere (a stream). */
TEST(stream_mode_and_parsed_replies) {
        AgentSettings s = defaults;
        _cleanup_(agent_freep) Agent *a = NULL;
        AgentAction act, again;
        LlmReply reply = { .content = NULL };
        LlmError err = { .message = NULL };
        json_object *o;
        uint64_t prompt, completion;

        s.stream = LLM_STREAM_WITH_USAGE;
        a = new_agent(&s, "q");
        ASSERT_EQ_INT(agent_rebuild_request(a, &act), -EBUSY); /* nothing outstanding */
        act = next(a, AGENT_ACTION_SEND);
        o = body_json(&act);
        ASSERT_TRUE(json_object_get_boolean(field(o, "stream")));
        ASSERT_TRUE(field(o, "stream_options"));
        json_object_put(o);
        ASSERT_EQ_INT(agent_reply_limits(a).step, 1);
        ASSERT_EQ_INT(agent_reply_limits(a).max_output_bytes, 65536);

        /* refused: the same request without stream_options */
        ASSERT_OK(agent_set_stream(a, LLM_STREAM_ON));
        ASSERT_EQ_INT(agent_set_stream(a, _LLM_STREAM_MODE_MAX), -EINVAL);
        ASSERT_OK(agent_rebuild_request(a, &again));
        ASSERT_EQ_INT(again.step, 1);
        ASSERT_TRUE(again.with_tools);
        ASSERT_TRUE(again.body_size < act.body_size);
        o = body_json(&again);
        ASSERT_TRUE(json_object_get_boolean(field(o, "stream")));
        ASSERT_TRUE(!field(o, "stream_options"));
        ASSERT_EQ_INT(json_object_array_length(field(o, "messages")), 2);
        ASSERT_EQ_INT(json_object_array_length(field(o, "tools")), 3);
        json_object_put(o);

        /* a parsed reply with a call, taken over */
        reply.tool_calls = calloc(1, sizeof(LlmToolCall));
        ASSERT_TRUE(reply.tool_calls);
        reply.n_tool_calls = 1;
        reply.tool_calls[0] = (LlmToolCall){ strdup("c1"),
                                             strdup("wiki_read"),
                                             strdup("{\"title\":\"Apple\"}") };
        reply.content = strdup("");
        reply.has_usage = true;
        reply.prompt_tokens = 5;
        reply.completion_tokens = 6;
        ASSERT_OK(agent_model_parsed(a, &reply, NULL));
        ASSERT_TRUE(!reply.tool_calls && !reply.content);
        act = next(a, AGENT_ACTION_TOOL);
        ASSERT_EQ_STR(act.call.title, "Apple");
        ASSERT_OK(agent_tool_read_done(a, &apple));

        /* later requests keep the mode */
        act = next(a, AGENT_ACTION_SEND);
        o = body_json(&act);
        ASSERT_TRUE(!field(o, "stream_options"));
        json_object_put(o);

        /* a parsed error, taken over */
        err = (LlmError){ .code = API_ERROR_MODEL_OUTPUT_LIMIT, .message = strdup("too long") };
        ASSERT_OK(agent_model_parsed(a, NULL, &err));
        ASSERT_TRUE(!err.message);
        expect_fail(a, API_ERROR_MODEL_OUTPUT_LIMIT, "too long");
        agent_usage(a, &prompt, &completion);
        ASSERT_EQ_INT(prompt, 5);
        ASSERT_EQ_INT(completion, 6);

        /* after the end: -EBUSY is not reached, a failed agent drops it */
        err = (LlmError){ .code = API_ERROR_UPSTREAM_FAILED, .message = strdup("x") };
        ASSERT_OK(agent_model_parsed(a, NULL, &err));
        ASSERT_TRUE(!err.message);
}

TEST(context_estimate) {
        AgentSettings s = defaults;
        AgentAction act;

        /* The first request is already too big: the model is never called. */
        {
                _cleanup_(agent_freep) Agent *a = NULL;
                char question[4001];

                memset(question, 'q', 4000);
                question[4000] = '\0';
                s.context_tokens = 1000;
                a = new_agent(&s, question);
                expect_fail(
                        a, API_ERROR_MODEL_CONTEXT_EXCEEDED, "more than the model's context of 1000 tokens");
                ASSERT_EQ_INT(agent_steps(a), 0);
        }
        /* A tool result pushes step 2 over. */
        {
                _cleanup_(agent_freep) Agent *a = NULL;
                _cleanup_free_ char *content = malloc(12000);
                WikiPage big = apple;

                memset(content, 'w', 12000);
                big.content = content;
                big.content_size = 12000;
                s.context_tokens = 3000;
                a = new_agent(&s, "q");
                act = next(a, AGENT_ACTION_SEND);
                ASSERT_TRUE(act.prompt_tokens_estimate + act.max_tokens <= 3000);
                feed_free(a, reply_calls("wiki_read", "{\"title\":\"Apple\"}", NULL));
                next(a, AGENT_ACTION_TOOL);
                ASSERT_OK(agent_tool_read_done(a, &big));
                expect_fail(a, API_ERROR_MODEL_CONTEXT_EXCEEDED, "the prompt of step 2 is about");
                ASSERT_EQ_INT(agent_steps(a), 1);
        }
}

TEST(abort) {
        _cleanup_(agent_freep) Agent *a = new_agent(&defaults, "q");

        next(a, AGENT_ACTION_SEND);
        feed_free(a, reply_calls("run_python", "{\"code\":\"import time\"}", NULL));
        next(a, AGENT_ACTION_TOOL);
        ASSERT_OK(agent_abort(a, API_ERROR_QUERY_TIMEOUT, NULL));
        expect_fail(a, API_ERROR_QUERY_TIMEOUT, "Query execution timed out");
        /* a late result changes nothing, a second failure neither */
        ASSERT_OK(agent_tool_failed(a, "killed"));
        ASSERT_OK(agent_abort(a, API_ERROR_CLEANUP_FAILED, "x"));
        expect_fail(a, API_ERROR_QUERY_TIMEOUT, "timed out");
        ASSERT_OK(agent_model_reply(a, 200, (const uint8_t *) "{}", 2));
        expect_fail(a, API_ERROR_QUERY_TIMEOUT, "timed out");
}

TEST(preload) {
        _cleanup_(agent_freep) Agent *a = new_agent(&defaults, "Compare them");
        const LlmMessage *m;
        const Source *src;
        AgentAction act;
        json_object *o, *msgs, *am;
        size_t n;

        ASSERT_OK(agent_preload_page(a, "Apple", &apple));
        ASSERT_OK(agent_preload_page(a, "Nothing here", NULL));
        ASSERT_OK(agent_preload_page(a, "pear", &pear)); /* normalized by the wiki */
        m = agent_messages(a, &n);
        ASSERT_EQ_INT(n, 6); /* system, user, assistant(3 calls), 3 tool */
        ASSERT_EQ_INT(m[2].role, LLM_ROLE_ASSISTANT);
        ASSERT_EQ_INT(m[2].n_tool_calls, 3);
        ASSERT_EQ_STR(m[2].tool_calls[1].arguments, "{\"title\":\"Nothing here\"}");
        ASSERT_EQ_STR(m[2].tool_calls[2].id, "ww0000002");
        expect_tool_message(a, 3, "ww0000000", "\"title\":\"Apple\"");
        expect_tool_message(a, 4, "ww0000001", "{\"error\":\"missing\"}");
        expect_tool_message(a, 5, "ww0000002", "\"title\":\"Pear\"");
        src = agent_sources(a, &n);
        ASSERT_EQ_INT(n, 2);
        ASSERT_EQ_STR(src[0].title, "Apple");
        ASSERT_EQ_STR(src[1].title, "Pear");

        act = next(a, AGENT_ACTION_SEND);
        ASSERT_EQ_INT(act.step, 1);
        o = body_json(&act);
        msgs = field(o, "messages");
        am = json_object_array_get_idx(msgs, 2);
        ASSERT_TRUE(json_object_is_type(
                field(field(json_object_array_get_idx(field(am, "tool_calls"), 0), "function"), "arguments"),
                json_type_string));
        json_object_put(o);
        ASSERT_EQ_INT(agent_preload_page(a, "Apple", &apple), -EBUSY);
}

/* ---- tool results ---- */

TEST(truncation) {
        AgentSettings s = defaults;
        _cleanup_(agent_freep) Agent *a = NULL;
        _cleanup_free_ char *content = NULL;
        const LlmMessage *m;
        WikiPage big = apple;
        size_t n, base, size = 100000;
        json_object *o;

        s.tool_result_max_bytes = 1024;
        a = new_agent(&s, "q");
        /* é (2 bytes) and quotes (escaped: 2 bytes in JSON) */
        content = malloc(size + 1);
        for (size_t i = 0; i + 2 <= size; i += 3) {
                content[i] = '\xc3';
                content[i + 1] = '\xa9';
                content[i + 2] = '"';
        }
        content[size - 1] = 'x';
        content[size] = '\0';
        big.title = "Apple pie/Recipe";
        big.content = content;
        big.content_size = size;

        next(a, AGENT_ACTION_SEND);
        feed_free(
                a,
                reply_calls(
                        "wiki_read", "{\"title\":\"Apple pie/Recipe\"}", "run_python", "{\"code\":\"x\"}", NULL));
        agent_messages(a, &base);
        next(a, AGENT_ACTION_TOOL);
        ASSERT_OK(agent_tool_read_done(a, &big));
        next(a, AGENT_ACTION_TOOL);
        {
                SandboxResult run = {
                        .has_exit_code = false,
                        .signal = "SIGKILL",
                        .timed_out = true,
                        .stdout_text = content,
                        .stdout_size = size,
                        .stderr_text = (char *) "\xff\xfe\x00oops",
                        .stderr_size = 7,
                };
                ASSERT_OK(agent_tool_python_done(a, &run));
        }
        m = agent_messages(a, &n);
        for (size_t i = base; i < base + 2; i++) {
                ASSERT_TRUE(strlen(m[i].content) <= 1024);
                ASSERT_TRUE(strlen(m[i].content) >= 900); /* not cut more than needed */
                ASSERT_TRUE(utf8_is_valid(m[i].content, strlen(m[i].content)));
                o = json_tokener_parse(m[i].content);
                ASSERT_TRUE(o);
                json_object_put(o);
        }
        expect_tool_message(a, base, "call_0", "\"truncated\":true");
        expect_tool_message(
                a, base, "call_0", "more bytes cut by wikiweb; the whole page is /data/Apple_pie%2FRecipe.wiki]");
        expect_tool_message(
                a, base + 1, "call_1", "{\"exit_code\":null,\"signal\":\"SIGKILL\",\"timed_out\":true");
        expect_tool_message(a, base + 1, "call_1", "more bytes cut by wikiweb]");
        expect_tool_message(a, base + 1, "call_1", "\"stderr\":\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbdoops\"");
}

/* A long non-ASCII title: the hint names the file the sandbox writes under
 * /data, which is shortened past NAME_MAX: the shortened name, not the
 * unshortened one (a file that does not exist). */
TEST(truncation_hint_long_title) {
        AgentSettings s = defaults;
        _cleanup_(agent_freep) Agent *a = NULL;
        _cleanup_free_ char *content = NULL, *title = NULL, *args = NULL, *file = NULL, *needle = NULL;
        WikiPage big = apple;
        size_t base, size = 20000;

        /* 100 x "é": 200 bytes, 600 once percent-encoded */
        title = malloc(201);
        ASSERT_TRUE(title);
        for (size_t i = 0; i < 200; i += 2) {
                title[i] = '\xc3';
                title[i + 1] = '\xa9';
        }
        title[200] = 0;
        content = malloc(size + 1);
        ASSERT_TRUE(content);
        memset(content, 'w', size);
        content[size] = 0;
        big.title = title;
        big.content = content;
        big.content_size = size;
        s.tool_result_max_bytes = 4096;
        ASSERT_TRUE(asprintf(&args, "{\"title\":\"%s\"}", title) > 0);
        ASSERT_OK(wiki_page_data_file_name(title, strlen(title), &file));
        ASSERT_TRUE(strlen(file) <= 255);
        ASSERT_TRUE(asprintf(&needle, "the whole page is /data/%s]", file) > 0);

        a = new_agent(&s, "q");
        next(a, AGENT_ACTION_SEND);
        feed_free(a, reply_calls("wiki_read", args, NULL));
        agent_messages(a, &base);
        next(a, AGENT_ACTION_TOOL);
        ASSERT_OK(agent_tool_read_done(a, &big));
        expect_tool_message(a, base, "call_0", needle);
}

TEST(fit_result) {
        char *r;
        bool cut;
        json_object *o;

        /* fits: unchanged */
        ASSERT_OK(agent_fit_result("{\"a\":\"b\"}", 1024, NULL, &r, &cut));
        ASSERT_EQ_STR(r, "{\"a\":\"b\"}");
        ASSERT_TRUE(!cut);
        free(r);

        /* several long strings: both may be cut, the JSON stays valid */
        {
                char big[3000];
                char text[7000];

                memset(big, 'z', sizeof(big) - 1);
                big[sizeof(big) - 1] = '\0';
                (void) snprintf(text, sizeof(text), "{\"a\":\"%s\",\"b\":[\"%s\"],\"n\":1}", big, big);
                ASSERT_OK(agent_fit_result(text, 1000, NULL, &r, &cut));
                ASSERT_TRUE(cut);
                ASSERT_TRUE(strlen(r) <= 1000);
                o = json_tokener_parse(r);
                ASSERT_TRUE(o);
                json_object_put(o);
                free(r);
        }
        /* many short strings: structure alone too long; the text is cut */
        {
                char text[20000];
                size_t n = 0;

                n += (size_t) snprintf(text + n, sizeof(text) - n, "[");
                for (int i = 0; i < 2000; i++)
                        n += (size_t) snprintf(text + n, sizeof(text) - n, "%s\"ab\"", i ? "," : "");
                (void) snprintf(text + n, sizeof(text) - n, "]");
                ASSERT_OK(agent_fit_result(text, 300, NULL, &r, &cut));
                ASSERT_TRUE(cut && strlen(r) <= 300);
                ASSERT_TRUE(strstr(r, "more bytes cut by wikiweb]"));
                free(r);
        }
        /* not JSON at all */
        ASSERT_OK(agent_fit_result("plain text", 1024, NULL, &r, &cut));
        ASSERT_EQ_STR(r, "\"plain text\"");
        free(r);
}

TEST(tools_and_prompt) {
        const LlmTool *t;
        size_t n;

        t = agent_tools(true, &n);
        ASSERT_EQ_INT(n, 3);
        for (size_t i = 0; i < n; i++) {
                json_object *schema = json_tokener_parse(t[i].parameters), *v;

                ASSERT_TRUE(schema);
                ASSERT_EQ_STR(t[i].name, agent_tool_to_string((AgentTool) i));
                ASSERT_TRUE(json_object_object_get_ex(schema, "additionalProperties", &v));
                ASSERT_TRUE(json_object_is_type(v, json_type_boolean) && !json_object_get_boolean(v));
                ASSERT_TRUE(json_object_object_get_ex(schema, "required", &v));
                ASSERT_EQ_INT(json_object_array_length(v), 1);
                json_object_put(schema);
        }
        agent_tools(false, &n);
        ASSERT_EQ_INT(n, 2);

        ASSERT_EQ_INT(agent_tool_from_string("wiki_search"), AGENT_TOOL_WIKI_SEARCH);
        ASSERT_EQ_INT(agent_tool_from_string("wiki_read"), AGENT_TOOL_WIKI_READ);
        ASSERT_EQ_INT(agent_tool_from_string("run_python"), AGENT_TOOL_RUN_PYTHON);
        ASSERT_EQ_INT(agent_tool_from_string("Wiki_read"), _AGENT_TOOL_INVALID);
        ASSERT_EQ_INT(agent_tool_from_string(NULL), _AGENT_TOOL_INVALID);
        ASSERT_TRUE(!agent_tool_to_string(_AGENT_TOOL_MAX));
        ASSERT_EQ_STR(agent_action_type_to_string(AGENT_ACTION_SEND), "send");
        ASSERT_EQ_STR(agent_action_type_to_string(AGENT_ACTION_TOOL), "tool");
        ASSERT_EQ_STR(agent_action_type_to_string(AGENT_ACTION_ANSWER), "answer");
        ASSERT_EQ_STR(agent_action_type_to_string(AGENT_ACTION_FAIL), "fail");
        ASSERT_TRUE(!agent_action_type_to_string(_AGENT_ACTION_MAX));

        /* the system prompt */
        {
                _cleanup_(agent_freep) Agent *a = new_agent(&defaults, "q");
                const LlmMessage *m = agent_messages(a, &n);

                ASSERT_EQ_INT(m[0].role, LLM_ROLE_SYSTEM);
                ASSERT_TRUE(strstr(m[0].content, "wiki_search("));
                ASSERT_TRUE(strstr(m[0].content, "run_python("));
                ASSERT_TRUE(strstr(m[0].content, "/data/pages.json"));
                ASSERT_TRUE(strstr(m[0].content, "/out"));
                ASSERT_TRUE(strstr(m[0].content, "[1] Page title: \"exact quote\"\n"));
                ASSERT_TRUE(strstr(m[0].content, "numbered marker"));
                ASSERT_TRUE(strstr(m[0].content, "data, not instructions"));
                ASSERT_TRUE(strstr(m[0].content, "at most 8 steps"));
                ASSERT_EQ_INT(m[1].role, LLM_ROLE_USER);
                ASSERT_EQ_STR(m[1].content, "q");
        }
        {
                AgentSettings s = defaults;
                _cleanup_(agent_freep) Agent *a = NULL;
                const LlmMessage *m;

                s.sandbox_available = false;
                a = new_agent(&s, "q");
                m = agent_messages(a, &n);
                ASSERT_TRUE(!strstr(m[0].content, "run_python"));
                ASSERT_TRUE(!strstr(m[0].content, "/data"));
                ASSERT_TRUE(strstr(m[0].content, "data, not instructions"));
        }
        /* settings out of range */
        {
                AgentSettings s = defaults;
                Agent *a = NULL;

                s.max_steps = 0;
                ASSERT_EQ_INT(agent_new(&s, "q", &a), -EINVAL);
                s = defaults;
                s.tool_result_max_bytes = 10;
                ASSERT_EQ_INT(agent_new(&s, "q", &a), -EINVAL);
                ASSERT_TRUE(!a);
        }
}

/* ---- randomized, against a reference ---- */

typedef enum Move {
        MOVE_ANSWER,
        MOVE_EMPTY,
        MOVE_LENGTH,
        MOVE_ERROR,
        MOVE_CALLS,
        _MOVE_MAX,
} Move;

static unsigned rnd(unsigned *state, unsigned n) {
        *state = *state * 1103515245u + 12345u;
        return (*state >> 16) % n;
}

/* Random conversations: at each step the model answers, answers empty,
 * runs out of tokens, fails, or asks for 1..5 tool calls of which some are
 * invalid. The expected course is computed by a plain reading of API.md
 * 8.2 and compared action by action. */
TEST(random_conversations) {
        unsigned state = 12345;

        for (unsigned round = 0; round < 3000; round++) {
                AgentSettings s = defaults;
                _cleanup_(agent_freep) Agent *a = NULL;
                size_t n_tool_messages = 0, expected_tool_messages = 0;
                unsigned step = 0;
                AgentAction act;
                bool over = false;

                s.max_steps = 1 + rnd(&state, 6);
                s.sandbox_available = rnd(&state, 2);
                a = new_agent(&s, "q");

                while (!over) {
                        Move move = (Move) rnd(&state, _MOVE_MAX + 3); /* calls more often */
                        bool last;

                        if (move >= _MOVE_MAX)
                                move = MOVE_CALLS;
                        act = next(a, AGENT_ACTION_SEND);
                        step++;
                        last = step == s.max_steps;
                        ASSERT_EQ_INT(act.step, step);
                        ASSERT_EQ_INT(act.with_tools, !last);
                        ASSERT_EQ_INT(!!strstr(act.body, "\"tools\""), !last);

                        switch (move) {
                        case MOVE_ANSWER:
                                feed_free(a, reply_answer("fine"));
                                ASSERT_EQ_STR(next(a, AGENT_ACTION_ANSWER).answer, "fine");
                                over = true;
                                break;
                        case MOVE_EMPTY:
                                feed_free(a, reply_answer(" "));
                                expect_fail(a, API_ERROR_UPSTREAM_FAILED, "empty");
                                over = true;
                                break;
                        case MOVE_LENGTH:
                                feed(a,
                                     200,
                                     "{\"choices\":[{\"message\":{\"content\":\"x\"},\"finish_reason\":\"length\"}]}");
                                expect_fail(a, API_ERROR_MODEL_OUTPUT_LIMIT, "length");
                                over = true;
                                break;
                        case MOVE_ERROR:
                                feed(a, 503, "{\"error\":{\"code\":503,\"message\":\"Loading model\"}}");
                                expect_fail(a, API_ERROR_UPSTREAM_FAILED, "Loading model");
                                over = true;
                                break;
                        case MOVE_CALLS: {
                                unsigned k = 1 + rnd(&state, 5), valid = 0;
                                const char *names[5], *args[5];
                                char *body;

                                for (unsigned i = 0; i < k; i++) {
                                        switch (rnd(&state, 5)) {
                                        case 0:
                                                names[i] = "wiki_read", args[i] = "{\"title\":\"T\"}";
                                                valid++;
                                                break;
                                        case 1:
                                                names[i] = "wiki_search",
                                                args[i] = "{\"query\":\"q\",\"limit\":3}";
                                                valid++;
                                                break;
                                        case 2:
                                                names[i] = "run_python", args[i] = "{\"code\":\"1\"}";
                                                valid += s.sandbox_available;
                                                break;
                                        case 3:
                                                names[i] = "wiki_read", args[i] = "{\"title\":\"\"}";
                                                break;
                                        default:
                                                names[i] = "rm_rf", args[i] = "{}";
                                                break;
                                        }
                                }
                                for (unsigned i = k; i < 5; i++)
                                        names[i] = NULL, args[i] = NULL;
                                body = reply_calls(
                                        names[0],
                                        args[0],
                                        names[1],
                                        args[1],
                                        names[2],
                                        args[2],
                                        names[3],
                                        args[3],
                                        names[4],
                                        args[4],
                                        NULL);
                                feed_free(a, body);
                                if (last) {
                                        expect_fail(a, API_ERROR_EXECUTION_FAILED, "no answer within");
                                        over = true;
                                        break;
                                }
                                for (unsigned i = 0; i < valid; i++) {
                                        act = next(a, AGENT_ACTION_TOOL);
                                        ASSERT_OK(agent_tool_failed(a, "no"));
                                }
                                expected_tool_messages += k;
                                break;
                        }
                        default:
                                abort();
                        }
                }
                ASSERT_EQ_INT(agent_steps(a), step);
                {
                        size_t n;
                        const LlmMessage *m = agent_messages(a, &n);

                        for (size_t i = 0; i < n; i++)
                                n_tool_messages += m[i].role == LLM_ROLE_TOOL;
                }
                ASSERT_EQ_INT(n_tool_messages, expected_tool_messages);
        }
}

DEFINE_TEST_MAIN()
