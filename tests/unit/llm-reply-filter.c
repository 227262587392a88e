/* SPDX-License-Identifier: MIT */
/* llm_parse_reply() as a filter, for tests in Python (test_fake_llm.py):
 * argv[1] is the HTTP status, stdin the body; prints one JSON object:
 *   {"ok": true, "content", "tool_calls": [{"id", "name", "arguments"}],
 *    "finish_reason", "usage": [prompt, completion] or null}
 *   {"ok": false, "code", "message"}
 * With --stream first, stdin is an event stream read by llm-stream.h, fed
 * in uneven slices; the object then also has "text" (the live deltas
 * joined) and "tools" (the names the tool-call handler heard).
 * Exit 0 either way, 1 on a usage or system error. */

#include <json-c/json.h>

#include "query/llm-stream.h"
#include "query/llm.h"
#include "shared/macro.h"
#include "shared/parse-util.h"

static json_object *string_or_null(const char *s) {
        return s ? json_object_new_string(s) : NULL;
}

typedef struct Live {
        char *text;
        size_t len;
        json_object *tools;
} Live;

static void on_text(const char *delta, size_t n, void *userdata) {
        Live *l = userdata;
        char *t = realloc(l->text, l->len + n + 1);

        if (!t)
                abort();
        memcpy(t + l->len, delta, n);
        l->len += n;
        t[l->len] = 0;
        l->text = t;
}

static void on_tool_call(size_t index, const char *name, void *userdata) {
        Live *l = userdata;

        json_object_array_add(l->tools, json_object_new_string(name));
}

/* The body through the stream parser, in slices of 1, 2, 3, … bytes. */
static int parse_stream(
        const uint8_t *body, size_t size, const LlmReplyLimits *limits, Live *live, LlmReply *reply, LlmError *err) {
        LlmStreamHandlers h = { .text = on_text, .tool_call = on_tool_call, .userdata = live };
        _cleanup_(llm_stream_freep) LlmStream *s = NULL;
        int r;

        r = llm_stream_new(limits, &h, &s);
        if (r < 0)
                return r;
        for (size_t at = 0, k = 1; at < size; at += k, k = k % 97 + 1) {
                k = MIN(k, size - at);
                r = llm_stream_feed(s, body + at, k);
                if (r == -ENOMEM)
                        return r;
        }
        return llm_stream_finish(s, reply, err);
}

int main(int argc, char *argv[]) {
        LlmReplyLimits limits = { .max_output_bytes = 65536, .step = 1 };
        LlmReply reply = { .content = NULL };
        LlmError err = { .message = NULL };
        json_object *out = json_object_new_object();
        size_t size = 0, allocated = 0;
        uint8_t *body = NULL;
        Live live = { .tools = json_object_new_array() };
        bool stream = argc == 3 && streq(argv[1], "--stream");
        uint64_t status;
        int r;

        if ((argc != 2 && !stream) || parse_uint64_range(argv[argc - 1], 100, 599, &status) < 0) {
                fprintf(stderr, "usage: %s [--stream] STATUS < body\n", argv[0]);
                return 1;
        }
        for (;;) {
                size_t n;

                if (size == allocated) {
                        allocated = allocated ? allocated * 2 : 65536;
                        body = realloc(body, allocated);
                        if (!body)
                                return 1;
                }
                n = fread(body + size, 1, allocated - size, stdin);
                if (n == 0)
                        break;
                size += n;
        }

        if (stream)
                r = parse_stream(body, size, &limits, &live, &reply, &err);
        else
                r = llm_parse_reply((unsigned) status, body, size, &limits, &reply, &err);
        if (stream) {
                json_object_object_add(out, "text", json_object_new_string(live.text ? live.text : ""));
                json_object_object_add(out, "tools", json_object_get(live.tools));
        }
        if (r == 0) {
                json_object *calls = json_object_new_array();

                json_object_object_add(out, "ok", json_object_new_boolean(true));
                json_object_object_add(out, "content", string_or_null(reply.content));
                for (size_t i = 0; i < reply.n_tool_calls; i++) {
                        json_object *c = json_object_new_object();

                        json_object_object_add(c, "id", json_object_new_string(reply.tool_calls[i].id));
                        json_object_object_add(c, "name", json_object_new_string(reply.tool_calls[i].name));
                        json_object_object_add(
                                c, "arguments", json_object_new_string(reply.tool_calls[i].arguments));
                        json_object_array_add(calls, c);
                }
                json_object_object_add(out, "tool_calls", calls);
                json_object_object_add(out, "finish_reason", string_or_null(reply.finish_reason));
                if (reply.has_usage) {
                        json_object *u = json_object_new_array();

                        json_object_array_add(u, json_object_new_uint64(reply.prompt_tokens));
                        json_object_array_add(u, json_object_new_uint64(reply.completion_tokens));
                        json_object_object_add(out, "usage", u);
                } else
                        json_object_object_add(out, "usage", NULL);
                llm_reply_done(&reply);
        } else if (r == -EBADMSG) {
                json_object_object_add(out, "ok", json_object_new_boolean(false));
                json_object_object_add(out, "code", json_object_new_string(api_error_to_string(err.code)));
                json_object_object_add(out, "message", json_object_new_string(err.message));
                llm_error_done(&err);
        } else {
                fprintf(stderr, "llm_parse_reply: %s\n", strerror(-r));
                return 1;
        }
        puts(json_object_to_json_string_ext(out, JSON_C_TO_STRING_PLAIN));
        json_object_put(out);
        json_object_put(live.tools);
        free(live.text);
        free(body);
        return 0;
}
