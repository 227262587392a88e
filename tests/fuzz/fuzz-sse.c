/* SPDX-License-Identifier: MIT */
/* The chunk-stream parser (llm-stream.h) on arbitrary bodies. The first
 * byte picks how the body is cut into slices and the output budget; the
 * rest is the body. Checks the contract, not just the absence of crashes:
 *   - the result does not depend on how the body is cut: fed whole and fed
 *     in the chosen slices, the outcome, the error code, the content and
 *     the tool calls are the same;
 *   - the live text is exactly the reply's content, valid UTF-8 without NUL,
 *     and never passes the budget;
 *   - a reply has valid UTF-8 strings, at most LLM_REPLY_MAX_TOOL_CALLS
 *     calls with usable, unique ids and stays within the output budget; a
 *     failure is one of the three codes with a bounded message. */

#include <stdint.h>
#include <string.h>

#include "query/llm-stream.h"
#include "shared/macro.h"
#include "shared/utf8.h"
#include "fuzz.h"

typedef struct Live {
        char *text;
        size_t len;
        size_t max;
        bool overflow;
} Live;

static void on_text(const char *delta, size_t n, void *userdata) {
        Live *l = userdata;

        CHECK(n > 0);
        CHECK(utf8_is_valid(delta, n));
        CHECK(!memchr(delta, 0, n));
        if (l->len + n > l->max) {
                l->overflow = true;
                return;
        }
        memcpy(l->text + l->len, delta, n);
        l->len += n;
}

static void on_tool_call(size_t index, const char *name, void *userdata) {
        CHECK(name && *name);
        CHECK(strlen(name) <= LLM_STREAM_NAME_MAX);
        CHECK(utf8_is_valid(name, strlen(name)));
}

static void check_string(const char *s) {
        CHECK(s);
        CHECK(utf8_is_valid(s, strlen(s)));
}

/* Feed data in slices of sizes from seed (0: whole); returns the finish
 * result and fills reply or err. */
static int
        run(const uint8_t *data,
            size_t size,
            unsigned seed,
            const LlmReplyLimits *limits,
            Live *live,
            LlmReply *reply,
            LlmError *err) {
        LlmStreamHandlers h = { .text = on_text, .tool_call = on_tool_call, .userdata = live };
        LlmStream *s = NULL;
        size_t at = 0;
        int r;

        *reply = (LlmReply){ .content = NULL };
        *err = (LlmError){ .message = NULL };
        if (llm_stream_new(limits, &h, &s) < 0)
                return -ENOMEM;
        while (at < size) {
                size_t k = seed == 0 ? size - at : MIN((size_t) (seed % 13) + 1, size - at);

                r = llm_stream_feed(s, data + at, k);
                CHECK(r == 0 || r == 1 || r == -EBADMSG || r == -ENOMEM);
                if (r == -ENOMEM) {
                        llm_stream_free(s);
                        return r;
                }
                at += k;
                seed = seed * 1103515245u + 12345u;
        }
        r = llm_stream_finish(s, reply, err);
        llm_stream_free(s);
        return r;
}

static void check_reply(const LlmReply *reply, const LlmReplyLimits *limits, const Live *live) {
        size_t output = 0;

        if (reply->content) {
                check_string(reply->content);
                output += strlen(reply->content);
                CHECK(live->len == strlen(reply->content));
                CHECK(memcmp(live->text, reply->content, live->len) == 0);
        } else
                CHECK(live->len == 0);
        CHECK(reply->n_tool_calls <= LLM_REPLY_MAX_TOOL_CALLS);
        CHECK((reply->n_tool_calls > 0) == !!reply->tool_calls);
        for (size_t i = 0; i < reply->n_tool_calls; i++) {
                const LlmToolCall *c = &reply->tool_calls[i];

                check_string(c->id);
                check_string(c->name);
                check_string(c->arguments);
                CHECK(strlen(c->id) >= 1 && strlen(c->id) <= LLM_TOOL_CALL_ID_MAX);
                for (size_t j = 0; j < i; j++)
                        CHECK(!streq(c->id, reply->tool_calls[j].id));
                output += strlen(c->arguments);
        }
        CHECK(output <= limits->max_output_bytes);
        CHECK(reply->finish_reason && !streq(reply->finish_reason, "length"));
}

static bool same_string(const char *a, const char *b) {
        return (!a && !b) || (a && b && streq(a, b));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        LlmReplyLimits limits = { .max_output_bytes = 4096, .step = 5 };
        LlmReply whole, cut;
        LlmError whole_err, cut_err;
        Live live_whole = { 0 }, live_cut = { 0 };
        unsigned seed;
        int a, b;

        if (size < 1)
                return 0;
        seed = data[0] | 1u;
        if (data[0] & 0x80)
                limits.max_output_bytes = 16;
        data++, size--;

        live_whole.max = live_cut.max = limits.max_output_bytes + 1;
        live_whole.text = malloc(live_whole.max);
        live_cut.text = malloc(live_cut.max);
        if (!live_whole.text || !live_cut.text)
                goto out;

        a = run(data, size, 0, &limits, &live_whole, &whole, &whole_err);
        b = run(data, size, seed, &limits, &live_cut, &cut, &cut_err);
        if (a == -ENOMEM || b == -ENOMEM) {
                if (a == 0)
                        llm_reply_done(&whole);
                if (b == 0)
                        llm_reply_done(&cut);
                llm_error_done(&whole_err);
                llm_error_done(&cut_err);
                goto out;
        }
        CHECK(a == b);
        CHECK(!live_whole.overflow && !live_cut.overflow);
        if (a == 0) {
                check_reply(&whole, &limits, &live_whole);
                check_reply(&cut, &limits, &live_cut);
                CHECK(same_string(whole.content, cut.content));
                CHECK(whole.n_tool_calls == cut.n_tool_calls);
                for (size_t i = 0; i < whole.n_tool_calls; i++) {
                        CHECK(streq(whole.tool_calls[i].id, cut.tool_calls[i].id));
                        CHECK(streq(whole.tool_calls[i].name, cut.tool_calls[i].name));
                        CHECK(streq(whole.tool_calls[i].arguments, cut.tool_calls[i].arguments));
                }
                CHECK(whole.has_usage == cut.has_usage);
                llm_reply_done(&whole);
                llm_reply_done(&cut);
        } else {
                CHECK(a == -EBADMSG);
                CHECK(whole_err.code == cut_err.code);
                CHECK(whole_err.message && strlen(whole_err.message) <= LLM_ERROR_QUOTE_MAX + 128);
                CHECK(utf8_is_valid(whole_err.message, strlen(whole_err.message)));
                CHECK(whole_err.code == API_ERROR_UPSTREAM_FAILED ||
                      whole_err.code == API_ERROR_MODEL_CONTEXT_EXCEEDED ||
                      whole_err.code == API_ERROR_MODEL_OUTPUT_LIMIT);
                llm_error_done(&whole_err);
                llm_error_done(&cut_err);
        }
out:
        free(live_whole.text);
        free(live_cut.text);
        return 0;
}
