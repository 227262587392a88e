/* SPDX-License-Identifier: MIT */
/* llm_parse_reply() as a filter, for tests in Python (test_fake_llm.py):
 * argv[1] is the HTTP status, stdin the body; prints one JSON object:
 *   {"ok": true, "content", "tool_calls": [{"id", "name", "arguments"}],
 *    "finish_reason", "usage": [prompt, completion] or null}
 *   {"ok": false, "code", "message"}
 * Exit 0 either way, 1 on a usage or system error. */

#include <json-c/json.h>

#include "query/llm.h"
#include "shared/macro.h"
#include "shared/parse-util.h"

static json_object *string_or_null(const char *s) {
        return s ? json_object_new_string(s) : NULL;
}

int main(int argc, char *argv[]) {
        LlmReplyLimits limits = { .max_output_bytes = 65536, .step = 1 };
        LlmReply reply = { .content = NULL };
        LlmError err = { .message = NULL };
        json_object *out = json_object_new_object();
        size_t size = 0, allocated = 0;
        uint8_t *body = NULL;
        uint64_t status;
        int r;

        if (argc != 2 || parse_uint64_range(argv[1], 100, 599, &status) < 0) {
                fprintf(stderr, "usage: %s STATUS < body\n", argv[0]);
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

        r = llm_parse_reply((unsigned) status, body, size, &limits, &reply, &err);
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
        free(body);
        return 0;
}
