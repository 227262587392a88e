/* SPDX-License-Identifier: MIT */
#include <json-c/json.h>

#include "query/llm-stream.h"
#include "shared/macro.h"
#include "shared/utf8.h"
#include "tests.h"

/* Tests of the chunk-stream parser (llm-stream.h): the streams of the four
 * servers as upstreams.md describes them (the .sse files of tests/unit/data/llm/), each
 * fed whole, byte by byte and in uneven slices, with LF, CRLF and CR line
 * ends and with a BOM, which must all read the same; then the event-stream
 * rules, the budgets and hostile bytes. */

static const LlmReplyLimits limits = { .max_output_bytes = 65536, .step = 4 };

/* What the handlers saw. */
typedef struct Seen {
        char text[4096];
        size_t text_len;
        unsigned text_calls;
        char tools[256];
} Seen;

static void on_text(const char *delta, size_t n, void *userdata) {
        Seen *seen = userdata;

        ASSERT_TRUE(n > 0);
        ASSERT_TRUE(utf8_is_valid(delta, n));
        ASSERT_TRUE(!memchr(delta, 0, n));
        ASSERT_TRUE(seen->text_len + n < sizeof(seen->text));
        memcpy(seen->text + seen->text_len, delta, n);
        seen->text_len += n;
        seen->text[seen->text_len] = 0;
        seen->text_calls++;
}

static void on_tool_call(size_t index, const char *name, void *userdata) {
        Seen *seen = userdata;
        size_t l = strlen(seen->tools);

        (void) snprintf(seen->tools + l, sizeof(seen->tools) - l, "%s%zu:%s", l ? "," : "", index, name);
}

typedef enum Split {
        SPLIT_WHOLE,
        SPLIT_BYTES,
        SPLIT_UNEVEN,
        _SPLIT_MAX,
} Split;

/* Feed body split as asked; returns what llm_stream_finish() returns and
 * the last llm_stream_feed() result in *ret_feed. */
static int
        run(const char *body,
            size_t n,
            Split split,
            const LlmReplyLimits *l,
            Seen *seen,
            LlmReply *reply,
            LlmError *err,
            int *ret_feed) {
        _cleanup_(llm_stream_freep) LlmStream *s = NULL;
        LlmStreamHandlers h = { .text = on_text, .tool_call = on_tool_call, .userdata = seen };
        size_t at = 0, step = 1;
        int f = 0;

        *seen = (Seen){ .text_len = 0 };
        *reply = (LlmReply){ .content = NULL };
        *err = (LlmError){ .message = NULL };
        ASSERT_OK(llm_stream_new(l, &h, &s));
        while (at < n) {
                size_t k = split == SPLIT_WHOLE ? n : split == SPLIT_BYTES ? 1 : step;

                k = MIN(k, n - at);
                f = llm_stream_feed(s, body + at, k);
                ASSERT_TRUE(f == 0 || f == 1 || f == -EBADMSG);
                at += k;
                step = step * 7 % 61 + 1; /* 1 .. 61, uneven */
        }
        if (ret_feed)
                *ret_feed = f;
        return llm_stream_finish(s, reply, err);
}

static char *read_data(const char *name, size_t *ret_size) {
        char path[4096];

        (void) snprintf(path, sizeof(path), "%s/llm/%s", test_data_dir(), name);
        return test_read_file(path, ret_size);
}

/* body with every "\n" as eol ("\r\n" or "\r"), and a BOM in front when
 * asked. */
static char *with_line_ends(const char *body, size_t n, const char *eol, bool bom, size_t *ret_n) {
        char *out = malloc(n * 2 + 4), *o = out;

        ASSERT_TRUE(out);
        if (bom) {
                memcpy(o, "\xEF\xBB\xBF", 3);
                o += 3;
        }
        for (size_t i = 0; i < n; i++)
                if (body[i] == '\n') {
                        memcpy(o, eol, strlen(eol));
                        o += strlen(eol);
                } else
                        *o++ = body[i];
        *ret_n = (size_t) (o - out);
        return out;
}

typedef struct Captured {
        const char *file;
        const char *content; /* NULL: content must be NULL */
        const char *calls;   /* "name=arguments|…" in order, "" for none */
        const char *ids;     /* "id|…", NULL: not checked */
        const char *tools;   /* what the tool-call handler heard */
        const char *finish;
        bool has_usage;
        uint64_t prompt, completion;
} Captured;

static const Captured captured[] = {
        { "openai-stream-answer.sse",
          "The orchard produced 1 240 kg of apples in 2023 [Apple harvest 2023] \xc3\xa9\xf0\x9f\x8d\x8e.",
          "",
          NULL,
          "",
          "stop",
          true,
          812,
          24 },
        { "openai-stream-tool-calls.sse",
          NULL,
          "wiki_search={\"query\": \"apple harvest\", \"limit\": 3}|wiki_read={\"title\": \"Apple\"}",
          "call_Wq3pZ8yVbN2kLm4xT6rS9aQe|call_Kd83nfPq0aZx7LmQ2vBc4TyU",
          "0:wiki_search,1:wiki_read",
          "tool_calls",
          true,
          412,
          41 },
        /* content and a call in one reply; finish_reason "stop" beside it */
        { "openai-stream-content-and-calls-stop.sse",
          "Let me read the page.",
          "wiki_read={\"title\": \"Apple\"}",
          "call_Mx0aQ2wE4rT6yU8iO0pA2sD4",
          "0:wiki_read",
          "stop",
          false,
          0,
          0 },
        { "openai-stream-interleaved.sse",
          NULL,
          "wiki_search={\"query\":\"pear\"}|wiki_read={\"title\":\"Pear\"}",
          "call_A|call_B",
          "1:wiki_read,0:wiki_search",
          "tool_calls",
          false,
          0,
          0 },
        { "vllm-stream-tool-calls.sse",
          "",
          "wiki_read={\"title\": \"Apple\"}",
          "chatcmpl-tool-4b1e9c0d2a7f4e3b8c6d5a4f3e2d1c0b",
          "0:wiki_read",
          "tool_calls",
          true,
          733,
          19 },
        { "llamacpp-stream-answer.sse", "Apples are fruit [Apple].", "", NULL, "", "stop", true, 321, 7 },
        { "llamacpp-stream-tool-calls.sse",
          NULL,
          "wiki_search={\"query\":\"apple\"}",
          "u8KcN2pQ7rT1vX4zA9bD3fG6hJ0kL5mR",
          "0:wiki_search",
          "tool_calls",
          true,
          602,
          18 },
        /* Ollama: the call whole in one chunk, then "stop" */
        { "ollama-stream-tool-calls.sse",
          "",
          "wiki_read={\"title\":\"Apple\"}",
          "call_k3j9x2qa",
          "0:wiki_read",
          "stop",
          true,
          288,
          17 },
        { "ollama-stream-answer-no-usage.sse", "An apple is a fruit.", "", NULL, "", "stop", false, 0, 0 },
        /* object arguments (the native shape) and no "index" */
        { "ollama-stream-object-arguments-no-index.sse",
          "",
          "wiki_search={\"query\":\"apple\",\"limit\":2}|wiki_read={\"title\":\"Pear\"}",
          "call_a1b2c3d4|call_e5f6g7h8",
          "0:wiki_search,1:wiki_read",
          "stop",
          false,
          0,
          0 },
};

/* Streams that fail: the code, a piece of the message, and the tool calls
 * the handler heard before. */
typedef struct CapturedFailure {
        const char *file;
        ApiError error;
        const char *needle;
        const char *tools;
} CapturedFailure;

static const CapturedFailure captured_failures[] = {
        { "openai-stream-cut.sse",
          API_ERROR_UPSTREAM_FAILED,
          "ended before a finish_reason (2 events, no [DONE])",
          "0:wiki_search" },
        { "vllm-stream-error.sse",
          API_ERROR_UPSTREAM_FAILED,
          "HTTP 200 (InternalServerError): Internal server error while generating: CUDA out of memory",
          "" },
        { "vllm-stream-error-nested.sse", API_ERROR_MODEL_CONTEXT_EXCEEDED, "maximum context length is 4096", "" },
        /* llama.cpp before PR #16109: a non-standard "error:" field */
        { "llamacpp-stream-error-old.sse",
          API_ERROR_MODEL_CONTEXT_EXCEEDED,
          "exceeds the available context size",
          "" },
        { "llamacpp-stream-error.sse",
          API_ERROR_UPSTREAM_FAILED,
          "HTTP 200 (server_error): Failed to parse input at pos 112: <tool_call>",
          "" },
        { "llamacpp-stream-length.sse", API_ERROR_MODEL_OUTPUT_LIMIT, "finish_reason \"length\"", "" },
};

static void check_failure(const CapturedFailure *c, int r, const Seen *seen, const LlmError *err) {
        ASSERT_EQ_STR(seen->tools, c->tools);
        if (r != -EBADMSG || err->code != c->error || !strstr(err->message, c->needle)) {
                fprintf(stderr,
                        "%s: expected %s \"%s\", got %d %s\n",
                        c->file,
                        api_error_to_string(c->error),
                        c->needle,
                        r,
                        r == -EBADMSG ? err->message : "");
                abort();
        }
}

static void check_reply(const Captured *c, int r, const Seen *seen, const LlmReply *reply, const LlmError *err) {
        char calls[1024] = "", ids[1024] = "";

        ASSERT_EQ_STR(seen->tools, c->tools);
        if (r != 0) {
                fprintf(stderr, "%s: %d %s\n", c->file, r, r == -EBADMSG ? err->message : "");
                abort();
        }
        if (c->content)
                ASSERT_EQ_STR(reply->content, c->content);
        else
                ASSERT_TRUE(!reply->content);
        /* the live text is the content */
        ASSERT_EQ_STR(seen->text, reply->content ? reply->content : "");
        for (size_t i = 0; i < reply->n_tool_calls; i++) {
                size_t l = strlen(calls), k = strlen(ids);

                (void) snprintf(
                        calls + l,
                        sizeof(calls) - l,
                        "%s%s=%s",
                        i ? "|" : "",
                        reply->tool_calls[i].name,
                        reply->tool_calls[i].arguments);
                (void) snprintf(ids + k, sizeof(ids) - k, "%s%s", i ? "|" : "", reply->tool_calls[i].id);
        }
        ASSERT_EQ_STR(calls, c->calls);
        if (c->ids)
                ASSERT_EQ_STR(ids, c->ids);
        ASSERT_EQ_STR(reply->finish_reason, c->finish);
        ASSERT_EQ_INT(reply->has_usage, c->has_usage);
        ASSERT_EQ_INT(reply->prompt_tokens, c->prompt);
        ASSERT_EQ_INT(reply->completion_tokens, c->completion);
}

/* Each capture under every line end, with and without a BOM, and every
 * split: check() is told what came out. */
typedef void (*CheckCapture)(const void *c, int r, const Seen *seen, const LlmReply *reply, const LlmError *err);

static void run_capture(const char *file, const void *c, CheckCapture check) {
        static const char *const eols[] = { "\n", "\r\n", "\r" };
        _cleanup_free_ char *body = NULL;
        size_t n;

        body = read_data(file, &n);
        ASSERT_TRUE(body);
        for (size_t e = 0; e < ELEMENTSOF(eols); e++)
                for (int bom = 0; bom <= 1; bom++)
                        for (Split split = 0; split < _SPLIT_MAX; split++) {
                                _cleanup_free_ char *b = NULL;
                                LlmReply reply;
                                LlmError err;
                                Seen seen;
                                size_t m;
                                int r;

                                b = with_line_ends(body, n, eols[e], bom, &m);
                                r = run(b, m, split, &limits, &seen, &reply, &err, NULL);
                                check(c, r, &seen, &reply, &err);
                                llm_reply_done(&reply);
                                llm_error_done(&err);
                        }
}

static void check_reply_cb(const void *c, int r, const Seen *seen, const LlmReply *reply, const LlmError *err) {
        check_reply(c, r, seen, reply, err);
}

static void check_failure_cb(const void *c, int r, const Seen *seen, const LlmReply *reply, const LlmError *err) {
        check_failure(c, r, seen, err);
}

TEST(captured) {
        for (size_t i = 0; i < ELEMENTSOF(captured); i++)
                run_capture(captured[i].file, &captured[i], check_reply_cb);
        for (size_t i = 0; i < ELEMENTSOF(captured_failures); i++)
                run_capture(captured_failures[i].file, &captured_failures[i], check_failure_cb);
}

/* The generated ids when a server sends none (older llama.cpp) or the same
 * twice. */
TEST(ids) {
        static const char body[] =
                "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"\","
                "\"function\":{\"name\":\"wiki_read\",\"arguments\":\"{}\"}},{\"index\":1,\"id\":\"x\","
                "\"function\":{\"name\":\"wiki_read\",\"arguments\":\"{}\"}}]}}]}\n\n"
                "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":2,\"id\":\"x\","
                "\"function\":{\"name\":\"wiki_search\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n";
        LlmReply reply;
        LlmError err;
        Seen seen;

        ASSERT_OK(run(body, strlen(body), SPLIT_WHOLE, &limits, &seen, &reply, &err, NULL));
        ASSERT_EQ_INT(reply.n_tool_calls, 3);
        ASSERT_EQ_STR(reply.tool_calls[0].id, "ww0040000");
        ASSERT_EQ_STR(reply.tool_calls[1].id, "x");
        ASSERT_EQ_STR(reply.tool_calls[2].id, "ww0040002");
        ASSERT_EQ_STR(reply.tool_calls[2].arguments, "{}"); /* none sent: an empty object */
        ASSERT_TRUE(!reply.content);                        /* no content member at all */
        llm_reply_done(&reply);
}

/* The event-stream rules of HTML 9.2.6 that servers do not usually use. */
TEST(event_stream_rules) {
        static const struct {
                const char *body;
                const char *content;
                const char *error; /* NULL: success */
        } cases[] = {
                /* multi-line data is one JSON document with "\n" inside */
                { "data: {\"choices\":[{\"index\":0,\n"
                  "data: \"delta\":{\"content\":\"a\"},\"finish_reason\":\"stop\"}]}\n\n",
                  "a",
                  NULL },
                /* no space after the colon; comments; id, retry, unknown fields; a
                 * named event other than error */
                { ": keep-alive\nid: 7\nretry: 1000\nfoo: bar\nevent: message\n"
                  "data:{\"choices\":[{\"delta\":{\"content\":\"b\"},\"finish_reason\":\"stop\"}]}\n\n",
                  "b",
                  NULL },
                /* empty data lines and events without data are keep-alives */
                { "data:\n\n\n\nevent: x\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"c\"}}]}\n\n"
                  "data: {\"choices\":[{\"finish_reason\":\"stop\",\"delta\":{}}]}\n\n",
                  "c",
                  NULL },
                /* a field without a colon */
                { "data\n\ndata: {\"choices\":[{\"finish_reason\":\"stop\",\"delta\":{\"content\":\"d\"}}]}\n\n",
                  "d",
                  NULL },
                /* the last event without its empty line is not dispatched */
                { "data: {\"choices\":[{\"delta\":{\"content\":\"e\"}}]}\n\n"
                  "data: {\"choices\":[{\"finish_reason\":\"stop\",\"delta\":{}}]}\n",
                  NULL,
                  "ended before a finish_reason" },
                /* a finish_reason and a cut usage chunk: complete */
                { "data: {\"choices\":[{\"finish_reason\":\"stop\",\"delta\":{\"content\":\"f\"}}]}\n\ndata: {\"usa",
                  "f",
                  NULL },
                /* [DONE] without a finish_reason */
                { "data: {\"choices\":[{\"delta\":{\"content\":\"g\"}}]}\n\ndata: [DONE]\n\n",
                  NULL,
                  "ended before a finish_reason (2 events, then [DONE])" },
                /* bytes after [DONE] are ignored */
                { "data: {\"choices\":[{\"finish_reason\":\"stop\",\"delta\":{\"content\":\"h\"}}]}\n\n"
                  "data: [DONE]\n\ndata: not json\n\n",
                  "h",
                  NULL },
                /* event: error with a JSON error, and with plain text */
                { "event: error\ndata: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\"}}\n\n",
                  NULL,
                  "HTTP 200 (server_error): overloaded" },
                { "event: error\ndata: it broke\n\n", NULL, "reported an error in its stream: it broke" },
                /* vLLM's flat error */
                { "data: {\"object\":\"error\",\"message\":\"boom\",\"type\":\"InternalServerError\",\"code\":500}\n\n",
                  NULL,
                  "(InternalServerError): boom" },
                /* the choice numbered 0 counts, others are ignored */
                { "data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"no\"}},{\"index\":0,\"delta\":"
                  "{\"content\":\"yes\"},\"finish_reason\":\"stop\"}]}\n\n",
                  "yes",
                  NULL },
                /* content as an array of parts */
                { "data: {\"choices\":[{\"delta\":{\"content\":[{\"type\":\"text\",\"text\":\"p\"},{\"text\":\"q\"}]},"
                  "\"finish_reason\":\"stop\"}]}\n\n",
                  "pq",
                  NULL },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                for (Split split = 0; split < _SPLIT_MAX; split++) {
                        LlmReply reply;
                        LlmError err;
                        Seen seen;
                        int r;

                        r = run(cases[i].body, strlen(cases[i].body), split, &limits, &seen, &reply, &err, NULL);
                        if (cases[i].error) {
                                if (r != -EBADMSG || !strstr(err.message, cases[i].error)) {
                                        fprintf(stderr,
                                                "case %zu: expected \"%s\", got %d %s\n",
                                                i,
                                                cases[i].error,
                                                r,
                                                r == -EBADMSG ? err.message : "");
                                        abort();
                                }
                                llm_error_done(&err);
                                continue;
                        }
                        if (r != 0) {
                                fprintf(stderr, "case %zu: %d %s\n", i, r, r == -EBADMSG ? err.message : "");
                                abort();
                        }
                        ASSERT_EQ_STR(reply.content, cases[i].content);
                        llm_reply_done(&reply);
                }
}

/* The output budget is enforced the moment it is passed: the text handler
 * never hears the delta that passes it, and feeding stops there. */
TEST(output_budget) {
        const LlmReplyLimits small = { .max_output_bytes = 10, .step = 1 };
        static const char content[] =
                "data: {\"choices\":[{\"delta\":{\"content\":\"12345\"}}]}\n\n"
                "data: {\"choices\":[{\"delta\":{\"content\":\"67890\"}}]}\n\n"
                "data: {\"choices\":[{\"delta\":{\"content\":\"!\"}}]}\n\n"
                "data: {\"choices\":[{\"delta\":{\"content\":\"more\"},\"finish_reason\":\"stop\"}]}\n\n";
        static const char arguments[] =
                "data: {\"choices\":[{\"delta\":{\"content\":\"1234\",\"tool_calls\":[{\"index\":0,"
                "\"function\":{\"name\":\"wiki_read\",\"arguments\":\"{\\\"t\\\":\"}}]}}]}\n\n"
                "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":"
                "\"\\\"Apple\\\"}\"}}]}}]}\n\n";
        static const char exact[] =
                "data: {\"choices\":[{\"delta\":{\"content\":\"1234567890\"},\"finish_reason\":\"stop\"}]}\n\n";
        LlmReply reply;
        LlmError err;
        Seen seen;
        int feed, r;

        r = run(content, strlen(content), SPLIT_WHOLE, &small, &seen, &reply, &err, &feed);
        ASSERT_EQ_INT(feed, -EBADMSG);
        ASSERT_EQ_INT(r, -EBADMSG);
        ASSERT_EQ_INT(err.code, API_ERROR_MODEL_OUTPUT_LIMIT);
        ASSERT_TRUE(strstr(err.message, "11 bytes of content and arguments (at most 10)"));
        ASSERT_EQ_STR(seen.text, "1234567890");
        llm_error_done(&err);

        r = run(arguments, strlen(arguments), SPLIT_BYTES, &small, &seen, &reply, &err, &feed);
        ASSERT_EQ_INT(r, -EBADMSG);
        ASSERT_EQ_INT(err.code, API_ERROR_MODEL_OUTPUT_LIMIT);
        ASSERT_EQ_STR(seen.tools, "0:wiki_read");
        llm_error_done(&err);

        ASSERT_OK(run(exact, strlen(exact), SPLIT_UNEVEN, &small, &seen, &reply, &err, &feed));
        ASSERT_EQ_STR(reply.content, "1234567890");
        llm_reply_done(&reply);
}

TEST(too_many_calls) {
        char body[65536];
        size_t n = 0;
        LlmReply reply;
        LlmError err;
        Seen seen;

        for (int i = 0; i <= LLM_REPLY_MAX_TOOL_CALLS; i++)
                n += (size_t) snprintf(
                        body + n,
                        sizeof(body) - n,
                        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":%d,\"function\":"
                        "{\"name\":\"wiki_read\",\"arguments\":\"{}\"}}]}}]}\n\n",
                        i * 1000);
        ASSERT_EQ_INT(run(body, n, SPLIT_WHOLE, &limits, &seen, &reply, &err, NULL), -EBADMSG);
        ASSERT_EQ_INT(err.code, API_ERROR_MODEL_OUTPUT_LIMIT);
        ASSERT_TRUE(strstr(err.message, "65 tool calls"));
        llm_error_done(&err);
}

/* Hostile bytes: each a clear upstream_failed, never a crash. */
TEST(hostile) {
        static const struct {
                const char *body;
                size_t n; /* 0: strlen */
                const char *needle;
        } cases[] = {
                { "data: not json\n\n", 0, "unusable chunk: not JSON" },
                { "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]} trailing\n\n",
                  0,
                  "bytes after the JSON" },
                { "data: \xff\xfe\n\n", 0, "not valid UTF-8" },
                { "data: {\"a\":\"\xc3\"}\n\n", 0, "not valid UTF-8" },
                { "data: [1,2]\n\n", 0, "not a JSON object" },
                { "data: {\"choices\":{}}\n\n", 0, "choices of the wrong type" },
                { "data: {\"choices\":[[]]}\n\n", 0, "choice that is not an object" },
                { "data: {\"choices\":[{\"delta\":[]}]}\n\n", 0, "delta that is not an object" },
                { "data: {\"choices\":[{\"delta\":{\"content\":5}}]}\n\n", 0, "content of the wrong type" },
                { "data: {\"choices\":[{\"delta\":{\"tool_calls\":{}}}]}\n\n",
                  0,
                  "tool_calls of the wrong type" },
                { "data: {\"choices\":[{\"delta\":{\"tool_calls\":[5]}}]}\n\n", 0, "malformed tool call" },
                { "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":7}]}}]}\n\n",
                  0,
                  "malformed tool call" },
                { "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":-1}]}}]}\n\n",
                  0,
                  "index out of range" },
                { "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":4294967296}]}}]}\n\n",
                  0,
                  "index out of range" },
                { "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":\"0\"}]}}]}\n\n",
                  0,
                  "index that is not an integer" },
                { "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0.5}]}}]}\n\n",
                  0,
                  "index that is not an integer" },
                { "data: {\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}\n\n",
                  0,
                  "nested too deeply" },
                { "data: {\"a\":\"b\0c\"}\n\n", 19, "not JSON" },
                { "\0\0\0\n\n", 5, "ended before a finish_reason" },
                /* found by fuzz-sse: bad bytes in an error event, quoted as valid UTF-8 */
                { "error: {\"message\":\x86\x86\"x\"}\n\n", 0, "reported an error in its stream: {\"message\":" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                size_t n = cases[i].n ? cases[i].n : strlen(cases[i].body);
                LlmReply reply;
                LlmError err;
                Seen seen;
                int r;

                r = run(cases[i].body, n, SPLIT_UNEVEN, &limits, &seen, &reply, &err, NULL);
                if (r != -EBADMSG || err.code != API_ERROR_UPSTREAM_FAILED ||
                    !strstr(err.message, cases[i].needle)) {
                        fprintf(stderr,
                                "case %zu: expected \"%s\", got %d %s\n",
                                i,
                                cases[i].needle,
                                r,
                                r == -EBADMSG ? err.message : "");
                        abort();
                }
                ASSERT_TRUE(utf8_is_valid(err.message, strlen(err.message)));
                llm_error_done(&err);
        }
}

/* Lines, events and names beyond their caps. */
TEST(caps) {
        const LlmReplyLimits l = { .max_output_bytes = 1024, .step = 1 };
        size_t max = LLM_STREAM_LINE_MAX(1024), n;
        _cleanup_free_ char *body = malloc(max * 2 + 64);
        char name[LLM_STREAM_NAME_MAX + 200];
        LlmReply reply;
        LlmError err;
        Seen seen;

        ASSERT_TRUE(body);
        /* one line past the cap, whole and in slices */
        memcpy(body, "data: ", 6);
        memset(body + 6, 'a', max);
        body[max + 6] = '\n';
        for (Split split = SPLIT_WHOLE; split < _SPLIT_MAX; split += 2) {
                ASSERT_EQ_INT(run(body, max + 7, split, &l, &seen, &reply, &err, NULL), -EBADMSG);
                ASSERT_TRUE(strstr(err.message, "a line longer than"));
                llm_error_done(&err);
        }
        /* an unfinished line past the cap */
        ASSERT_EQ_INT(run(body, max + 6, SPLIT_UNEVEN, &l, &seen, &reply, &err, NULL), -EBADMSG);
        ASSERT_TRUE(strstr(err.message, "a line longer than"));
        llm_error_done(&err);

        /* an event of many short lines past the cap */
        n = 0;
        while (n < max / 10 * 16) { /* 11 bytes of data per 17 */
                memcpy(body + n, "data: aaaaaaaaaa\n", 17);
                n += 17;
        }
        ASSERT_EQ_INT(run(body, n, SPLIT_WHOLE, &l, &seen, &reply, &err, NULL), -EBADMSG);
        ASSERT_TRUE(strstr(err.message, "an event longer than"));
        llm_error_done(&err);

        /* a name in many pieces */
        memset(name, 0, sizeof(name));
        n = 0;
        for (int i = 0; i < 60; i++)
                n += (size_t) snprintf(
                        body + n,
                        max * 2 - n,
                        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":"
                        "{\"name\":\"abcdef%02d\"}}]}}]}\n\n",
                        i);
        ASSERT_EQ_INT(run(body, n, SPLIT_WHOLE, &l, &seen, &reply, &err, NULL), -EBADMSG);
        ASSERT_TRUE(strstr(err.message, "overlong name"));
        llm_error_done(&err);
}

/* A stream that failed ignores later bytes; one that ended too. */
TEST(after_the_end) {
        _cleanup_(llm_stream_freep) LlmStream *s = NULL;
        static const char bad[] = "data: x\n\n",
                          good[] = "data: {\"choices\":[{\"finish_reason\":\"stop\"}]}\n\n";
        LlmReply reply = { .content = NULL };
        LlmError err = { .message = NULL };

        ASSERT_OK(llm_stream_new(&limits, NULL, &s));
        ASSERT_TRUE(!llm_stream_complete(s));
        ASSERT_EQ_INT(llm_stream_feed(s, good, strlen(good)), 0);
        ASSERT_TRUE(llm_stream_complete(s));
        ASSERT_EQ_INT(llm_stream_feed(s, "data: [DONE]\n\n", 14), 1);
        ASSERT_EQ_INT(llm_stream_feed(s, bad, strlen(bad)), 1);
        ASSERT_EQ_INT(llm_stream_events(s), 2);
        ASSERT_OK(llm_stream_finish(s, &reply, &err));
        ASSERT_EQ_STR(reply.finish_reason, "stop");
        ASSERT_TRUE(!reply.content);
        llm_reply_done(&reply);
        s = llm_stream_free(s);

        ASSERT_OK(llm_stream_new(&limits, NULL, &s));
        ASSERT_EQ_INT(llm_stream_feed(s, bad, strlen(bad)), -EBADMSG);
        ASSERT_TRUE(llm_stream_failed(s) && !llm_stream_complete(s));
        ASSERT_EQ_INT(llm_stream_feed(s, good, strlen(good)), -EBADMSG);
        ASSERT_EQ_INT(llm_stream_finish(s, &reply, &err), -EBADMSG);
        ASSERT_EQ_INT(err.code, API_ERROR_UPSTREAM_FAILED);
        llm_error_done(&err);
}

DEFINE_TEST_MAIN()
