/* SPDX-License-Identifier: MIT */
#include <json-c/json.h>

#include "query/llm.h"
#include "shared/macro.h"
#include "shared/utf8.h"
#include "tests.h"

/* Tests of the chat-completions builder and parser (API.md 8.2): replies of
 * the four servers as upstreams.md describes them (tests/unit/data/llm/),
 * then request bodies, then hostile bytes. */

static const LlmReplyLimits limits = { .max_output_bytes = 65536, .step = 3 };

static char *read_data(const char *name, size_t *ret_size) {
        char path[4096];

        (void) snprintf(path, sizeof(path), "%s/llm/%s", test_data_dir(), name);
        return test_read_file(path, ret_size);
}

/* Parse s as a reply with the status; returns the rc, fills *reply or *err. */
static int parse(unsigned status, const char *s, size_t n, LlmReply *reply, LlmError *err) {
        *reply = (LlmReply){ .content = NULL };
        *err = (LlmError){ .message = NULL };
        return llm_parse_reply(status, (const uint8_t *) s, n, &limits, reply, err);
}

static int parse_str(unsigned status, const char *s, LlmReply *reply, LlmError *err) {
        return parse(status, s, strlen(s), reply, err);
}

/* An error of the given code whose message contains needle. */
static void expect_error(int r, const LlmError *err, ApiError code, const char *needle) {
        if (r != -EBADMSG || err->code != code || !err->message || !strstr(err->message, needle)) {
                fprintf(stderr,
                        "expected %s containing \"%s\", got r=%d %s \"%s\"\n",
                        api_error_to_string(code),
                        needle,
                        r,
                        r == -EBADMSG ? api_error_to_string(err->code) : "-",
                        r == -EBADMSG && err->message ? err->message : "");
                abort();
        }
        ASSERT_TRUE(utf8_is_valid(err->message, strlen(err->message)));
}

typedef struct Captured {
        const char *file;
        unsigned status;
        ApiError error; /* _API_ERROR_INVALID: success */
        const char *needle;
        size_t n_calls;
        const char *name0, *args0, *id0; /* id0 NULL: not checked */
        const char *content;             /* NULL: content must be NULL */
        bool has_usage;
        uint64_t prompt, completion;
} Captured;

static const Captured captured[] = {
        /* OpenAI */
        { "openai-tool-calls.json",
          200,
          _API_ERROR_INVALID,
          NULL,
          1,
          "wiki_search",
          "{\"query\":\"apple varieties\",\"limit\":5}",
          "call_Wq3pZ8yVbN2kLm4xT6rS9aQe",
          NULL,
          true,
          412,
          21 },
        { "openai-tool-calls-stop.json",
          200,
          _API_ERROR_INVALID,
          NULL,
          2,
          "wiki_read",
          "{\"title\": \"Apple\"}",
          "call_1",
          NULL,
          true,
          500,
          40 },
        { "openai-answer.json",
          200,
          _API_ERROR_INVALID,
          NULL,
          0,
          NULL,
          NULL,
          NULL,
          "Apples come in many varieties [Apple].",
          true,
          900,
          12 },
        { "openai-length.json", 200, API_ERROR_MODEL_OUTPUT_LIMIT, "\"length\"" },
        { "openai-context-length-exceeded.json",
          400,
          API_ERROR_MODEL_CONTEXT_EXCEEDED,
          "maximum context length is 128000" },
        { "openai-404-model-not-found.json",
          404,
          API_ERROR_UPSTREAM_FAILED,
          "HTTP 404 (invalid_request_error): The model `gpt-9` does not exist" },
        { "openai-429.json", 429, API_ERROR_UPSTREAM_FAILED, "HTTP 429 (tokens): Rate limit reached" },
        /* vLLM */
        { "vllm-tool-calls.json",
          200,
          _API_ERROR_INVALID,
          NULL,
          1,
          "wiki_read",
          "{\"title\": \"Apple\"}",
          "chatcmpl-tool-3f2a9c4b1e8d47a6b0c5d2e1f4a7b8c9",
          NULL,
          true,
          1024,
          26 },
        { "vllm-mistral-tool-calls.json",
          200,
          _API_ERROR_INVALID,
          NULL,
          1,
          "wiki_search",
          "{\"query\": \"pear\"}",
          "Xk3Pq9Zr2",
          "",
          true,
          800,
          15 },
        { "vllm-empty-tool-calls.json",
          200,
          _API_ERROR_INVALID,
          NULL,
          0,
          NULL,
          NULL,
          NULL,
          "The Apple page says there are over 7,500 cultivars.",
          true,
          2000,
          14 },
        { "vllm-401.json", 401, API_ERROR_UPSTREAM_FAILED, "HTTP 401: Unauthorized" },
        { "vllm-context-nested.json", 400, API_ERROR_MODEL_CONTEXT_EXCEEDED, "maximum context length is 4096" },
        { "vllm-context-flat.json", 400, API_ERROR_MODEL_CONTEXT_EXCEEDED, "you requested 6144 tokens" },
        { "vllm-404-model.json",
          404,
          API_ERROR_UPSTREAM_FAILED,
          "HTTP 404 (NotFoundError): The model `gpt-4o` does not exist." },
        { "vllm-400-no-tool-parser.json", 400, API_ERROR_UPSTREAM_FAILED, "requires --enable-auto-tool-choice" },
        { "fastapi-404.json", 404, API_ERROR_UPSTREAM_FAILED, "HTTP 404: Not Found" },
        /* llama.cpp */
        { "llamacpp-tool-calls-old.json",
          200,
          _API_ERROR_INVALID,
          NULL,
          1,
          "wiki_search",
          "{\"query\":\"apple\"}",
          "ww0030000",
          NULL,
          true,
          733,
          18 },
        { "llamacpp-tool-calls.json",
          200,
          _API_ERROR_INVALID,
          NULL,
          2,
          "wiki_read",
          "{\"title\":\"Apple\"}",
          "Gk2mP0nX7qR4sT8vW1yZ3aB5cD9eF6hJ",
          "",
          true,
          1500,
          40 },
        { "llamacpp-answer-no-usage.json",
          200,
          _API_ERROR_INVALID,
          NULL,
          0,
          NULL,
          NULL,
          NULL,
          "According to [Apple], apples are pomaceous fruit.",
          false,
          0,
          0 },
        { "llamacpp-context.json",
          400,
          API_ERROR_MODEL_CONTEXT_EXCEEDED,
          "exceeds the available context size (8192" },
        { "llamacpp-context-old.json",
          400,
          API_ERROR_MODEL_CONTEXT_EXCEEDED,
          "the request exceeds the available context size" },
        { "llamacpp-503-loading.json",
          503,
          API_ERROR_UPSTREAM_FAILED,
          "HTTP 503 (unavailable_error): Loading model" },
        { "llamacpp-401.json", 401, API_ERROR_UPSTREAM_FAILED, "HTTP 401 (authentication_error): Invalid API Key" },
        { "llamacpp-length.json", 200, API_ERROR_MODEL_OUTPUT_LIMIT, "max_tokens" },
        /* Ollama */
        { "ollama-tool-calls.json",
          200,
          _API_ERROR_INVALID,
          NULL,
          1,
          "wiki_search",
          "{\"limit\":3,\"query\":\"apple\"}",
          "call_k3j2h1g0",
          "",
          true,
          300,
          25 },
        { "ollama-object-arguments.json",
          200,
          _API_ERROR_INVALID,
          NULL,
          1,
          "wiki_read",
          "{\"title\":\"Apple\"}",
          "call_a9b8c7d6",
          "",
          true,
          310,
          20 },
        { "ollama-503.json",
          503,
          API_ERROR_UPSTREAM_FAILED,
          "HTTP 503 (api_error): server busy, please try again.  maximum pending requests exceeded" },
        { "ollama-context-400.json", 400, API_ERROR_MODEL_CONTEXT_EXCEEDED, "longer than the context length" },
        { "ollama-404.json", 404, API_ERROR_UPSTREAM_FAILED, "model 'llama9' not found" },
        /* a proxy in front of any of them */
        { "proxy-502.html", 502, API_ERROR_UPSTREAM_FAILED, "HTTP 502: <html>" },
};

TEST(captured) {
        for (size_t i = 0; i < ELEMENTSOF(captured); i++) {
                const Captured *c = &captured[i];
                _cleanup_free_ char *body = NULL;
                LlmReply reply;
                LlmError err;
                size_t n;
                int r;

                fprintf(stderr, "  %s\n", c->file);
                body = read_data(c->file, &n);
                r = parse(c->status, body, n, &reply, &err);
                if (c->error != _API_ERROR_INVALID) {
                        expect_error(r, &err, c->error, c->needle);
                        llm_error_done(&err);
                        continue;
                }
                ASSERT_OK(r);
                ASSERT_EQ_INT(reply.n_tool_calls, c->n_calls);
                if (c->n_calls > 0) {
                        ASSERT_EQ_STR(reply.tool_calls[0].name, c->name0);
                        ASSERT_EQ_STR(reply.tool_calls[0].arguments, c->args0);
                        if (c->id0)
                                ASSERT_EQ_STR(reply.tool_calls[0].id, c->id0);
                        for (size_t k = 0; k < reply.n_tool_calls; k++)
                                ASSERT_TRUE(reply.tool_calls[k].id && *reply.tool_calls[k].id);
                }
                if (c->content)
                        ASSERT_EQ_STR(reply.content, c->content);
                else
                        ASSERT_TRUE(!reply.content);
                ASSERT_EQ_INT(reply.has_usage, c->has_usage);
                ASSERT_EQ_INT(reply.prompt_tokens, c->prompt);
                ASSERT_EQ_INT(reply.completion_tokens, c->completion);
                llm_reply_done(&reply);
        }
}

/* The second call of llama.cpp's reply, and finish_reason kept. */
TEST(captured_details) {
        _cleanup_free_ char *body = NULL;
        LlmReply reply;
        LlmError err;
        size_t n;

        body = read_data("llamacpp-tool-calls.json", &n);
        ASSERT_OK(parse(200, body, n, &reply, &err));
        ASSERT_EQ_STR(reply.tool_calls[1].name, "run_python");
        ASSERT_EQ_STR(reply.tool_calls[1].arguments, "{\"code\":\"print(1+1)\"}");
        ASSERT_EQ_STR(reply.finish_reason, "tool_calls");
        llm_reply_done(&reply);

        free(body);
        body = read_data("ollama-tool-calls.json", &n);
        ASSERT_OK(parse(200, body, n, &reply, &err));
        ASSERT_EQ_STR(reply.finish_reason, "stop"); /* and still a tool call */
        ASSERT_EQ_INT(reply.n_tool_calls, 1);
        llm_reply_done(&reply);
}

/* ---- the shapes one by one ---- */

#define REPLY(msg) "{\"choices\":[{\"index\":0,\"message\":" msg ",\"finish_reason\":\"stop\"}]}"

TEST(shapes) {
        LlmReply reply;
        LlmError err;
        int r;

        /* content: absent, null, "", parts */
        ASSERT_OK(parse_str(200, REPLY("{\"role\":\"assistant\"}"), &reply, &err));
        ASSERT_TRUE(!reply.content && reply.n_tool_calls == 0 && !reply.has_usage);
        llm_reply_done(&reply);
        ASSERT_OK(parse_str(200, REPLY("{\"content\":null}"), &reply, &err));
        ASSERT_TRUE(!reply.content);
        llm_reply_done(&reply);
        ASSERT_OK(parse_str(200, REPLY("{\"content\":\"\"}"), &reply, &err));
        ASSERT_EQ_STR(reply.content, "");
        llm_reply_done(&reply);
        ASSERT_OK(parse_str(
                200,
                REPLY("{\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"image\"},{\"type\":\"text\",\"text\":\"b\"}]}"),
                &reply,
                &err));
        ASSERT_EQ_STR(reply.content, "ab");
        llm_reply_done(&reply);

        /* \u0000 never reaches a C string: U+FFFD */
        ASSERT_OK(parse_str(200, REPLY("{\"content\":\"a\\u0000b\"}"), &reply, &err));
        ASSERT_EQ_STR(
                reply.content,
                "a\xEF\xBF\xBD"
                "b");
        llm_reply_done(&reply);
        /* a lone surrogate escape becomes valid UTF-8 (json-c: U+FFFD) */
        ASSERT_OK(parse_str(200, REPLY("{\"content\":\"x\\ud800y\"}"), &reply, &err));
        ASSERT_TRUE(utf8_is_valid(reply.content, strlen(reply.content)));
        llm_reply_done(&reply);

        /* arguments: absent -> {}, object -> text, other JSON -> text */
        ASSERT_OK(parse_str(
                200, REPLY("{\"tool_calls\":[{\"id\":\"a\",\"function\":{\"name\":\"x\"}}]}"), &reply, &err));
        ASSERT_EQ_STR(reply.tool_calls[0].arguments, "{}");
        llm_reply_done(&reply);
        ASSERT_OK(parse_str(
                200,
                REPLY("{\"tool_calls\":[{\"id\":\"a\",\"function\":{\"name\":\"x\",\"arguments\":[1,\"/\"]}}]}"),
                &reply,
                &err));
        ASSERT_EQ_STR(reply.tool_calls[0].arguments, "[1,\"/\"]");
        llm_reply_done(&reply);
        /* no function at all: a call with an empty name, for the agent to refuse */
        ASSERT_OK(parse_str(200, REPLY("{\"tool_calls\":[{\"id\":\"a\"}]}"), &reply, &err));
        ASSERT_EQ_STR(reply.tool_calls[0].name, "");
        llm_reply_done(&reply);

        /* ids: missing, empty, too long, with a space, duplicate -> generated, unique */
        ASSERT_OK(parse_str(
                200,
                REPLY("{\"tool_calls\":["
                      "{\"function\":{\"name\":\"a\"}},"
                      "{\"id\":\"\",\"function\":{\"name\":\"b\"}},"
                      "{\"id\":\"ww0030000\",\"function\":{\"name\":\"c\"}},"
                      "{\"id\":\"x y\",\"function\":{\"name\":\"d\"}},"
                      "{\"id\":\"ww0030000\",\"function\":{\"name\":\"e\"}},"
                      "{\"id\":\"0123456789012345678901234567890123456789012345678901234567890123456789\","
                      "\"function\":{\"name\":\"f\"}},"
                      "{\"id\":42,\"function\":{\"name\":\"g\"}}]}"),
                &reply,
                &err));
        ASSERT_EQ_INT(reply.n_tool_calls, 7);
        for (size_t i = 0; i < reply.n_tool_calls; i++) {
                ASSERT_TRUE(
                        strlen(reply.tool_calls[i].id) >= 1 &&
                        strlen(reply.tool_calls[i].id) <= LLM_TOOL_CALL_ID_MAX);
                for (size_t j = 0; j < i; j++)
                        ASSERT_TRUE(!streq(reply.tool_calls[i].id, reply.tool_calls[j].id));
        }
        /* generated ids avoid the model's, later ones included */
        ASSERT_EQ_STR(reply.tool_calls[0].id, "ww0030001");
        ASSERT_EQ_STR(reply.tool_calls[1].id, "ww0030002");
        ASSERT_EQ_STR(reply.tool_calls[2].id, "ww0030000");
        ASSERT_EQ_STR(reply.tool_calls[3].id, "ww0030003");
        ASSERT_EQ_STR(reply.tool_calls[4].id, "ww0030004");
        ASSERT_EQ_STR(reply.tool_calls[6].id, "ww0030006");
        llm_reply_done(&reply);

        /* usage: wrong types and huge numbers count as absent, the reply is fine */
        ASSERT_OK(parse_str(
                200,
                "{\"choices\":[{\"message\":{\"content\":\"x\"}}],\"usage\":{\"prompt_tokens\":1e400,"
                "\"completion_tokens\":99999999999999999999999999}}",
                &reply,
                &err));
        ASSERT_TRUE(reply.has_usage && reply.prompt_tokens == 0 && reply.completion_tokens == 0);
        llm_reply_done(&reply);
        ASSERT_OK(parse_str(
                200,
                "{\"choices\":[{\"message\":{\"content\":\"x\"}}],\"usage\":{\"prompt_tokens\":-5,"
                "\"completion_tokens\":\"7\"}}",
                &reply,
                &err));
        ASSERT_TRUE(reply.prompt_tokens == 0 && reply.completion_tokens == 0);
        llm_reply_done(&reply);
        ASSERT_OK(parse_str(
                200, "{\"choices\":[{\"message\":{\"content\":\"x\"}}],\"usage\":null}", &reply, &err));
        ASSERT_TRUE(!reply.has_usage);
        llm_reply_done(&reply);
        /* NaN from a Python server (logprobs) is JSON enough */
        ASSERT_OK(parse_str(
                200, "{\"choices\":[{\"message\":{\"content\":\"x\"},\"logprobs\":{\"v\":NaN}}]}", &reply, &err));
        llm_reply_done(&reply);

        /* wrong types where the reply matters */
        r = parse_str(200, "{\"choices\":\"x\"}", &reply, &err);
        expect_error(r, &err, API_ERROR_UPSTREAM_FAILED, "no choices");
        llm_error_done(&err);
        r = parse_str(200, "{\"choices\":[]}", &reply, &err);
        expect_error(r, &err, API_ERROR_UPSTREAM_FAILED, "no choices");
        llm_error_done(&err);
        r = parse_str(200, "{\"choices\":[{\"message\":1}]}", &reply, &err);
        expect_error(r, &err, API_ERROR_UPSTREAM_FAILED, "no message");
        llm_error_done(&err);
        r = parse_str(200, REPLY("{\"content\":5}"), &reply, &err);
        expect_error(r, &err, API_ERROR_UPSTREAM_FAILED, "content of the wrong type");
        llm_error_done(&err);
        r = parse_str(200, REPLY("{\"tool_calls\":{}}"), &reply, &err);
        expect_error(r, &err, API_ERROR_UPSTREAM_FAILED, "tool_calls of the wrong type");
        llm_error_done(&err);
        r = parse_str(200, REPLY("{\"tool_calls\":[1]}"), &reply, &err);
        expect_error(r, &err, API_ERROR_UPSTREAM_FAILED, "malformed tool call");
        llm_error_done(&err);
        r = parse_str(200, REPLY("{\"tool_calls\":[{\"function\":\"wiki_read\"}]}"), &reply, &err);
        expect_error(r, &err, API_ERROR_UPSTREAM_FAILED, "malformed tool call");
        llm_error_done(&err);
        r = parse_str(200, "[1,2]", &reply, &err);
        expect_error(r, &err, API_ERROR_UPSTREAM_FAILED, "not a JSON object");
        llm_error_done(&err);

        /* an error object with 200 */
        r = parse_str(200, "{\"error\":{\"message\":\"boom\",\"type\":\"server_error\"}}", &reply, &err);
        expect_error(r, &err, API_ERROR_UPSTREAM_FAILED, "HTTP 200 (server_error): boom");
        llm_error_done(&err);
        r = parse_str(200, "{\"error\":{\"type\":\"exceed_context_size_error\"}}", &reply, &err);
        expect_error(r, &err, API_ERROR_MODEL_CONTEXT_EXCEEDED, "exceed_context_size_error");
        llm_error_done(&err);
        /* error bodies of odd shapes */
        r = parse_str(500, "{\"error\":{}}", &reply, &err);
        expect_error(r, &err, API_ERROR_UPSTREAM_FAILED, "HTTP 500: no message");
        llm_error_done(&err);
        r = parse_str(500, "{\"error\":42}", &reply, &err);
        expect_error(r, &err, API_ERROR_UPSTREAM_FAILED, "HTTP 500: no message");
        llm_error_done(&err);
        r = parse_str(500, "{\"foo\":\"bar\"}", &reply, &err);
        expect_error(r, &err, API_ERROR_UPSTREAM_FAILED, "HTTP 500: {\"foo\":\"bar\"}");
        llm_error_done(&err);
        r = parse_str(
                400, "{\"error\":{\"message\":\"x\",\"code\":\"context_length_exceeded\"}}", &reply, &err);
        expect_error(r, &err, API_ERROR_MODEL_CONTEXT_EXCEEDED, "x");
        llm_error_done(&err);
        /* a success status does not make an error body a reply, and a
         * reply-shaped body with 500 is still an error */
        r = parse_str(500, REPLY("{\"content\":\"hi\"}"), &reply, &err);
        expect_error(r, &err, API_ERROR_UPSTREAM_FAILED, "HTTP 500");
        llm_error_done(&err);
        r = parse_str(301, "", &reply, &err);
        expect_error(r, &err, API_ERROR_UPSTREAM_FAILED, "HTTP 301 with an empty body");
        llm_error_done(&err);
}

TEST(output_limit) {
        LlmReplyLimits small = { .max_output_bytes = 10 };
        LlmReply reply = { .content = NULL };
        LlmError err = { .message = NULL };
        const char *ok = REPLY(
                "{\"content\":\"12345\",\"tool_calls\":[{\"id\":\"a\",\"function\":{\"name\":\"n\","
                "\"arguments\":\"{}\"}}]}");
        const char *over = REPLY(
                "{\"content\":\"12345\",\"tool_calls\":[{\"id\":\"a\",\"function\":{\"name\":\"n\","
                "\"arguments\":\"{\\\"a\\\":1}\"}}]}");
        char many[16384];
        size_t n;
        int r;

        /* 5 + 2 bytes: fine; 5 + 7: over */
        ASSERT_OK(llm_parse_reply(200, (const uint8_t *) ok, strlen(ok), &small, &reply, &err));
        llm_reply_done(&reply);
        r = llm_parse_reply(200, (const uint8_t *) over, strlen(over), &small, &reply, &err);
        expect_error(r, &err, API_ERROR_MODEL_OUTPUT_LIMIT, "12 bytes");
        llm_error_done(&err);

        /* 64 tool calls are fine, 65 are model_output_limit */
        for (int count = 64; count <= 65; count++) {
                n = (size_t) snprintf(many, sizeof(many), "{\"choices\":[{\"message\":{\"tool_calls\":[");
                for (int i = 0; i < count; i++)
                        n += (size_t) snprintf(
                                many + n, sizeof(many) - n, "%s{\"function\":{\"name\":\"x\"}}", i ? "," : "");
                n += (size_t) snprintf(many + n, sizeof(many) - n, "]}}]}");
                ASSERT_TRUE(n < sizeof(many));
                r = parse(200, many, n, &reply, &err);
                if (count == 64) {
                        ASSERT_OK(r);
                        ASSERT_EQ_INT(reply.n_tool_calls, 64);
                        llm_reply_done(&reply);
                } else {
                        expect_error(r, &err, API_ERROR_MODEL_OUTPUT_LIMIT, "65 tool calls");
                        llm_error_done(&err);
                }
        }
}

/* ---- hostile bytes ---- */

TEST(hostile) {
        LlmReply reply;
        LlmError err;
        size_t big = 4 * 1024 * 1024;
        _cleanup_free_ char *junk = malloc(big);
        int r;

        /* empty, whitespace, truncated, trailing garbage */
        r = parse(200, "", 0, &reply, &err);
        expect_error(r, &err, API_ERROR_UPSTREAM_FAILED, "empty body");
        llm_error_done(&err);
        r = parse_str(200, "   ", &reply, &err);
        expect_error(r, &err, API_ERROR_UPSTREAM_FAILED, "unusable");
        llm_error_done(&err);
        r = parse_str(200, "{\"choices\":[", &reply, &err);
        expect_error(r, &err, API_ERROR_UPSTREAM_FAILED, "truncated JSON");
        llm_error_done(&err);
        r = parse_str(200, REPLY("{\"content\":\"x\"}") "garbage", &reply, &err);
        expect_error(r, &err, API_ERROR_UPSTREAM_FAILED, "bytes after the JSON document");
        llm_error_done(&err);
        ASSERT_OK(parse_str(200, REPLY("{\"content\":\"x\"}") " \r\n\t", &reply, &err));
        llm_reply_done(&reply);
        r = parse(200, REPLY("{\"content\":\"x\"}") "\0", sizeof(REPLY("{\"content\":\"x\"}")), &reply, &err);
        expect_error(r, &err, API_ERROR_UPSTREAM_FAILED, "bytes after");
        llm_error_done(&err);

        /* invalid UTF-8: in a reply, in an error body */
        r = parse_str(200, REPLY("{\"content\":\"\xC3\x28\"}"), &reply, &err);
        expect_error(r, &err, API_ERROR_UPSTREAM_FAILED, "not valid UTF-8");
        llm_error_done(&err);
        r = parse_str(200, REPLY("{\"content\":\"\xED\xA0\x80\"}"), &reply, &err); /* a surrogate */
        expect_error(r, &err, API_ERROR_UPSTREAM_FAILED, "not valid UTF-8");
        llm_error_done(&err);
        r = parse_str(500, "\xff\xfe oops", &reply, &err);
        ASSERT_EQ_INT(r, -EBADMSG);
        ASSERT_EQ_INT(err.code, API_ERROR_UPSTREAM_FAILED);
        ASSERT_TRUE(strstr(err.message, "HTTP 500: "));
        llm_error_done(&err); /* raw bytes: the caller sanitizes */

        /* deep nesting */
        {
                size_t depth = 100000;
                _cleanup_free_ char *deep = malloc(depth * 2);

                ASSERT_TRUE(deep);
                memset(deep, '[', depth);
                memset(deep + depth, ']', depth);
                r = parse(200, deep, depth * 2, &reply, &err);
                expect_error(r, &err, API_ERROR_UPSTREAM_FAILED, "nested too deeply");
                llm_error_done(&err);
                r = parse(400, deep, depth * 2, &reply, &err);
                expect_error(r, &err, API_ERROR_UPSTREAM_FAILED, "HTTP 400: [[[[");
                ASSERT_TRUE(strlen(err.message) < LLM_ERROR_QUOTE_MAX + 64);
                llm_error_done(&err);
        }

        /* megabytes of junk, a megabyte-long error message: bounded messages */
        ASSERT_TRUE(junk);
        for (size_t i = 0; i < big; i++)
                junk[i] = (char) ("{[\"a:1,]}\\\xc3\xa9\x80"[(i * 7919) % 14]);
        r = parse(200, junk, big, &reply, &err);
        ASSERT_EQ_INT(r, -EBADMSG);
        ASSERT_EQ_INT(err.code, API_ERROR_UPSTREAM_FAILED);
        llm_error_done(&err);
        r = parse(502, junk, big, &reply, &err);
        ASSERT_EQ_INT(r, -EBADMSG);
        ASSERT_TRUE(strlen(err.message) < LLM_ERROR_QUOTE_MAX + 64);
        llm_error_done(&err);
        {
                size_t n = 0;

                n += (size_t) snprintf(junk, big, "{\"error\":{\"message\":\"");
                memset(junk + n, 'x', 2 * 1024 * 1024);
                n += 2 * 1024 * 1024;
                n += (size_t) snprintf(junk + n, big - n, "\",\"type\":\"t\"}}");
                r = parse(400, junk, n, &reply, &err);
                expect_error(r, &err, API_ERROR_UPSTREAM_FAILED, "HTTP 400 (t): xxxx");
                ASSERT_TRUE(strlen(err.message) < LLM_ERROR_QUOTE_MAX + 64);
                llm_error_done(&err);
        }
        /* a multi-byte character at the quote's edge is not split */
        {
                size_t n = 0;

                n += (size_t) snprintf(junk, big, "{\"error\":\"");
                for (size_t i = 0; i < 1000; i++) {
                        memcpy(junk + n, "\xe2\x82\xac", 3); /* EUR sign */
                        n += 3;
                }
                n += (size_t) snprintf(junk + n, big - n, "\"}");
                r = parse(400, junk, n, &reply, &err);
                ASSERT_EQ_INT(r, -EBADMSG);
                ASSERT_TRUE(utf8_is_valid(err.message, strlen(err.message)));
                llm_error_done(&err);
        }
}

/* ---- request bodies ---- */

static const LlmTool tools[] = {
        { "wiki_read",
          "Read a page.",
          "{\"type\":\"object\",\"properties\":{\"title\":{\"type\":\"string\"}},\"required\":[\"title\"],"
          "\"additionalProperties\":false}" },
};

static json_object *parse_body(const LlmRequestBody *b) {
        json_object *o = json_tokener_parse(b->body);

        ASSERT_TRUE(o);
        ASSERT_EQ_INT(strlen(b->body), b->size);
        return o;
}

static json_object *field(json_object *o, const char *key) {
        json_object *v = NULL;

        return json_object_object_get_ex(o, key, &v) ? v : NULL;
}

TEST(build) {
        LlmToolCall calls[] = {
                { .id = (char *) "call_1",
                  .name = (char *) "wiki_read",
                  .arguments = (char *) "{\"title\":\"Apple\"}" },
        };
        LlmMessage msgs[] = {
                { .role = LLM_ROLE_SYSTEM, .content = (char *) "You answer questions." },
                { .role = LLM_ROLE_USER, .content = (char *) "What is an \"apple\"? </script> \xc3\xa9" },
                { .role = LLM_ROLE_ASSISTANT, .content = NULL, .tool_calls = calls, .n_tool_calls = 1 },
                { .role = LLM_ROLE_TOOL,
                  .content = (char *) "{\"title\":\"Apple\"}",
                  .tool_call_id = (char *) "call_1" },
        };
        LlmRequest req = {
                .model = "qwen2.5",
                .messages = msgs,
                .n_messages = ELEMENTSOF(msgs),
                .tools = tools,
                .n_tools = ELEMENTSOF(tools),
                .context_tokens = 32768,
                .max_output_bytes = 65536,
        };
        LlmRequestBody b = { .body = NULL };
        json_object *o, *m, *t;

        ASSERT_OK(llm_build_request(&req, &b));
        o = parse_body(&b);
        ASSERT_EQ_STR(json_object_get_string(field(o, "model")), "qwen2.5");
        ASSERT_TRUE(json_object_get_boolean(field(o, "stream")) == 0 && field(o, "stream"));
        ASSERT_EQ_STR(json_object_get_string(field(o, "tool_choice")), "auto");
        ASSERT_EQ_INT(json_object_get_int64(field(o, "max_tokens")), 16384);
        ASSERT_EQ_INT(b.max_tokens, 16384);
        ASSERT_EQ_INT(b.prompt_tokens_estimate, (b.size + 3) / 4);
        ASSERT_TRUE(!field(o, "max_completion_tokens"));
        t = json_object_array_get_idx(field(o, "tools"), 0);
        ASSERT_EQ_STR(json_object_get_string(field(t, "type")), "function");
        ASSERT_EQ_STR(json_object_get_string(field(field(t, "function"), "name")), "wiki_read");
        ASSERT_TRUE(!json_object_get_boolean(
                field(field(field(t, "function"), "parameters"), "additionalProperties")));
        m = field(o, "messages");
        ASSERT_EQ_INT(json_object_array_length(m), 4);
        ASSERT_EQ_STR(json_object_get_string(field(json_object_array_get_idx(m, 0), "role")), "system");
        ASSERT_EQ_STR(
                json_object_get_string(field(json_object_array_get_idx(m, 1), "content")),
                "What is an \"apple\"? </script> \xc3\xa9");
        {
                json_object *a = json_object_array_get_idx(m, 2),
                            *c = json_object_array_get_idx(field(a, "tool_calls"), 0);
                json_object *args = field(field(c, "function"), "arguments");

                ASSERT_EQ_STR(json_object_get_string(field(a, "content")), "");
                ASSERT_EQ_STR(json_object_get_string(field(c, "id")), "call_1");
                ASSERT_EQ_STR(json_object_get_string(field(c, "type")), "function");
                ASSERT_TRUE(json_object_is_type(args, json_type_string)); /* a string, for Ollama */
                ASSERT_EQ_STR(json_object_get_string(args), "{\"title\":\"Apple\"}");
        }
        ASSERT_EQ_STR(json_object_get_string(field(json_object_array_get_idx(m, 3), "tool_call_id")), "call_1");
        ASSERT_EQ_STR(json_object_get_string(field(json_object_array_get_idx(m, 3), "role")), "tool");
        json_object_put(o);
        llm_request_body_done(&b);

        /* without tools: neither tools nor tool_choice */
        req.n_tools = 0;
        ASSERT_OK(llm_build_request(&req, &b));
        o = parse_body(&b);
        ASSERT_TRUE(!field(o, "tools") && !field(o, "tool_choice"));
        ASSERT_TRUE(!strstr(b.body, "tool_choice"));
        json_object_put(o);
        llm_request_body_done(&b);

        /* max_tokens shrinks to what the context has left */
        req.context_tokens = 300;
        ASSERT_OK(llm_build_request(&req, &b));
        ASSERT_TRUE(b.prompt_tokens_estimate + b.max_tokens <= 300);
        ASSERT_TRUE(b.prompt_tokens_estimate + b.max_tokens >= 300 - 5); /* the 19 reserved digits */
        llm_request_body_done(&b);

        /* over the context: -EOVERFLOW, with the body to say by how much */
        req.context_tokens = 100;
        ASSERT_EQ_INT(llm_build_request(&req, &b), -EOVERFLOW);
        ASSERT_TRUE(b.prompt_tokens_estimate > 100);
        ASSERT_EQ_INT(b.max_tokens, 1);
        llm_request_body_done(&b);

        /* a tool with a schema that is not JSON: a programming error */
        {
                LlmTool bad = { "x", "y", "{not json" };

                req.context_tokens = 32768;
                req.tools = &bad;
                req.n_tools = 1;
                ASSERT_EQ_INT(llm_build_request(&req, &b), -EINVAL);
        }
}

TEST(build_stream) {
        LlmMessage m = { .role = LLM_ROLE_USER, .content = (char *) "q" };
        LlmRequest req = {
                .model = "m",
                .messages = &m,
                .n_messages = 1,
                .context_tokens = 32768,
                .max_output_bytes = 65536,
        };
        LlmRequestBody b = { .body = NULL };
        json_object *o;

        /* OFF: "stream": false, no stream_options (OpenAI refuses them then) */
        ASSERT_OK(llm_build_request(&req, &b));
        o = parse_body(&b);
        ASSERT_TRUE(field(o, "stream") && !json_object_get_boolean(field(o, "stream")));
        ASSERT_TRUE(!field(o, "stream_options"));
        json_object_put(o);
        llm_request_body_done(&b);

        req.stream = LLM_STREAM_ON;
        ASSERT_OK(llm_build_request(&req, &b));
        o = parse_body(&b);
        ASSERT_TRUE(json_object_get_boolean(field(o, "stream")));
        ASSERT_TRUE(!field(o, "stream_options"));
        json_object_put(o);
        llm_request_body_done(&b);

        req.stream = LLM_STREAM_WITH_USAGE;
        ASSERT_OK(llm_build_request(&req, &b));
        o = parse_body(&b);
        ASSERT_TRUE(json_object_get_boolean(field(o, "stream")));
        ASSERT_TRUE(json_object_get_boolean(field(field(o, "stream_options"), "include_usage")));
        ASSERT_EQ_INT(b.prompt_tokens_estimate, (b.size + 3) / 4);
        json_object_put(o);
        llm_request_body_done(&b);

        req.stream = _LLM_STREAM_MODE_MAX;
        ASSERT_EQ_INT(llm_build_request(&req, &b), -EINVAL);
}

TEST(refuses_stream_options) {
        static const struct {
                unsigned status;
                const char *body;
                bool refuses;
        } cases[] = {
                /* Azure OpenAI before the option existed */
                { 400,
                  "{\"error\":{\"message\":\"Unrecognized request argument supplied: stream_options\","
                  "\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}",
                  true },
                /* FastAPI/pydantic with extra="forbid" */
                { 422,
                  "{\"detail\":[{\"type\":\"extra_forbidden\",\"loc\":[\"body\",\"stream_options\"],"
                  "\"msg\":\"Extra inputs are not permitted\"}]}",
                  true },
                /* other refusals are not about the option */
                { 400, "{\"error\":{\"message\":\"maximum context length is 4096\"}}", false },
                { 401, "{\"error\":\"stream_options Unauthorized\"}", false },
                { 500, "stream_options", false },
                { 200, "stream_options", false },
                { 400, "", false },
                { 400, "stream_option", false },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                ASSERT_EQ_INT(
                        llm_refuses_stream_options(
                                cases[i].status, (const uint8_t *) cases[i].body, strlen(cases[i].body)),
                        cases[i].refuses);
        ASSERT_TRUE(!llm_refuses_stream_options(400, NULL, 0));
}

TEST(estimate) {
        ASSERT_EQ_INT(llm_estimate_prompt_tokens(0), 0);
        ASSERT_EQ_INT(llm_estimate_prompt_tokens(1), 1);
        ASSERT_EQ_INT(llm_estimate_prompt_tokens(4), 1);
        ASSERT_EQ_INT(llm_estimate_prompt_tokens(5), 2);
        ASSERT_EQ_INT(llm_estimate_prompt_tokens(131072), 32768);
        ASSERT_EQ_INT(llm_max_tokens(32768, 65536, 100), 16384);
        ASSERT_EQ_INT(llm_max_tokens(32768, 65536, 20000), 12768);
        ASSERT_EQ_INT(llm_max_tokens(32768, 65536, 32768), 1);
        ASSERT_EQ_INT(llm_max_tokens(32768, 65536, 40000), 1);
        ASSERT_EQ_INT(llm_max_tokens(32768, 2, 0), 1);
}

TEST(role_table) {
        ASSERT_EQ_STR(llm_role_to_string(LLM_ROLE_SYSTEM), "system");
        ASSERT_EQ_STR(llm_role_to_string(LLM_ROLE_USER), "user");
        ASSERT_EQ_STR(llm_role_to_string(LLM_ROLE_ASSISTANT), "assistant");
        ASSERT_EQ_STR(llm_role_to_string(LLM_ROLE_TOOL), "tool");
        ASSERT_TRUE(!llm_role_to_string(_LLM_ROLE_MAX));
        ASSERT_TRUE(!llm_role_to_string(_LLM_ROLE_INVALID));
}

static void expect_props_url(const char *llm_url, const char *want) {
        char *got = NULL;

        ASSERT_OK(llm_props_url(llm_url, &got));
        ASSERT_EQ_STR(got, want);
        free(got);
}

TEST(props_url) {
        char *u = NULL;

        expect_props_url("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/props");
        expect_props_url("https://llm.example.org/v1/", "https://llm.example.org/props");
        expect_props_url("http://[::1]:8080", "http://[::1]:8080/props");
        expect_props_url("http://h:1?x=/y#z", "http://h:1/props");
        ASSERT_EQ_INT(llm_props_url("no-scheme/v1", &u), -EINVAL);
        ASSERT_TRUE(!u);
}

static int props(const char *body) {
        unsigned n = 0;
        int r = llm_parse_props_total_slots((const uint8_t *) body, strlen(body), &n);

        return r < 0 ? r : (int) n;
}

TEST(props_total_slots) {
        ASSERT_EQ_INT(props("{\"total_slots\": 4, \"build_info\": \"b8681\"}"), 4);
        ASSERT_EQ_INT(props("{\"default_generation_settings\": {\"n_ctx\": 4096}, \"total_slots\": 1}"), 1);
        ASSERT_EQ_INT(props("{\"total_slots\": 1000000}"), 1000000);
        /* Servers that do not say, or say nonsense: nothing is known. */
        ASSERT_EQ_INT(props("{}"), -ENODATA);
        ASSERT_EQ_INT(props("{\"total_slots\": 0}"), -ENODATA);
        ASSERT_EQ_INT(props("{\"total_slots\": -3}"), -ENODATA);
        ASSERT_EQ_INT(props("{\"total_slots\": 1000001}"), -ENODATA);
        ASSERT_EQ_INT(props("{\"total_slots\": 99999999999999999999999}"), -ENODATA);
        ASSERT_EQ_INT(props("{\"total_slots\": 4.5}"), -ENODATA);
        ASSERT_EQ_INT(props("{\"total_slots\": \"4\"}"), -ENODATA);
        ASSERT_EQ_INT(props("[4]"), -ENODATA);
        ASSERT_EQ_INT(props("<html>404</html>"), -ENODATA);
        ASSERT_EQ_INT(props("{\"total_slots\": 4} trailing"), -ENODATA);
        ASSERT_EQ_INT(props(""), -ENODATA);
        ASSERT_EQ_INT(
                llm_parse_props_total_slots((const uint8_t *) "{\"total_slots\":\xff}", 17, &(unsigned){ 0 }),
                -ENODATA);
}

DEFINE_TEST_MAIN()
