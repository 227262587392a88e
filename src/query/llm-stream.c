/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <json-c/json.h>
#include <limits.h>

#include "query/llm-internal.h"
#include "query/llm-stream.h"
#include "shared/json-util.h"
#include "shared/macro.h"
#include "shared/utf8.h"

typedef enum LlmStreamState {
        LLM_STREAM_RUNNING,
        LLM_STREAM_DONE,   /* "[DONE]" read: later bytes are ignored */
        LLM_STREAM_FAILED, /* s->error holds why */
} LlmStreamState;

/* A growable byte buffer with a hard cap, always NUL-terminated once
 * allocated (curl's dynbuf). */
typedef struct Buf {
        char *p;
        size_t len, alloc;
} Buf;

/* A tool call as its deltas build it. */
typedef struct StreamCall {
        int64_t index; /* the server's */
        char *id;      /* the first non-empty one */
        Buf name;
        Buf arguments;
        bool arguments_seen;
        bool announced;
} StreamCall;

struct LlmStream {
        LlmReplyLimits limits;
        LlmStreamHandlers handlers;
        size_t line_max;
        LlmStreamState state;
        LlmError error; /* FAILED */
        bool finished;

        /* The event stream. */
        unsigned bom;  /* bytes of a leading BOM matched; 3: past the start */
        bool skip_lf;  /* the last line ended in CR: a following LF belongs to it */
        Buf line;      /* an unfinished line */
        Buf data;      /* the event's data lines, each + "\n" */
        bool is_error; /* "event: error", or llama.cpp's "error:" field */
        uint64_t events;

        /* The reply. */
        Buf content;
        bool has_content; /* a content member was seen, "" included */
        StreamCall calls[LLM_REPLY_MAX_TOOL_CALLS];
        size_t n_calls;
        StreamCall *last_call;
        LlmReply reply; /* finish_reason and usage so far */
        uint64_t output;
};

static const char bom_bytes[3] = { '\xEF', '\xBB', '\xBF' };

static void buf_done(Buf *b) {
        free(b->p);
        *b = (Buf){ .p = NULL };
}

/* Append n bytes; -E2BIG when the buffer would pass max, -ENOMEM. */
static int buf_append(Buf *b, const char *p, size_t n, size_t max) {
        if (n > max || b->len > max - n)
                return -E2BIG;
        if (b->len + n + 1 > b->alloc) {
                size_t a = MAX(b->alloc, (size_t) 64);
                char *q;

                while (a < b->len + n + 1)
                        a = a > SIZE_MAX / 2 ? SIZE_MAX : a * 2;
                a = MIN(a, max + 1);
                q = realloc(b->p, a);
                if (!q)
                        return -ENOMEM;
                b->p = q;
                b->alloc = a;
        }
        if (n > 0)
                memcpy(b->p + b->len, p, n);
        b->len += n;
        b->p[b->len] = 0;
        return 0;
}

/* The buffer's string, taken: "" when nothing was appended. */
static char *buf_take(Buf *b) {
        char *p = b->p ? TAKE_PTR(b->p) : strdup("");

        *b = (Buf){ .p = NULL };
        return p;
}

int llm_stream_new(const LlmReplyLimits *limits, const LlmStreamHandlers *handlers, LlmStream **ret) {
        LlmStream *s;

        assert(limits);
        assert(ret);

        s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->limits = *limits;
        if (handlers)
                s->handlers = *handlers;
        s->line_max = LLM_STREAM_LINE_MAX(MIN(limits->max_output_bytes, (uint64_t) SIZE_MAX / 8));
        s->state = LLM_STREAM_RUNNING;
        *ret = s;
        return 0;
}

LlmStream *llm_stream_free(LlmStream *s) {
        if (!s)
                return NULL;
        llm_error_done(&s->error);
        buf_done(&s->line);
        buf_done(&s->data);
        buf_done(&s->content);
        for (size_t i = 0; i < s->n_calls; i++) {
                free(s->calls[i].id);
                buf_done(&s->calls[i].name);
                buf_done(&s->calls[i].arguments);
        }
        llm_reply_done(&s->reply);
        free(s);
        return NULL;
}

bool llm_stream_complete(const LlmStream *s) {
        assert(s);
        return s->state != LLM_STREAM_FAILED && s->reply.finish_reason;
}

bool llm_stream_failed(const LlmStream *s) {
        assert(s);
        return s->state == LLM_STREAM_FAILED;
}

uint64_t llm_stream_events(const LlmStream *s) {
        assert(s);
        return s->events;
}

/* r from an llm_fail*() call: -EBADMSG makes the stream FAILED (the error
 * is in s->error), -ENOMEM stays what it is. */
static int stream_failed(LlmStream *s, int r) {
        if (r == -EBADMSG)
                s->state = LLM_STREAM_FAILED;
        return r;
}

#define STREAM_FAIL(s, code, ...) stream_failed((s), llm_fail(&(s)->error, (code), __VA_ARGS__))

static int stream_event_too_long(LlmStream *s) {
        return STREAM_FAIL(
                s,
                API_ERROR_UPSTREAM_FAILED,
                "model server's stream has an event longer than %zu bytes",
                s->line_max);
}

static int stream_malformed(LlmStream *s, const char *what) {
        return STREAM_FAIL(s, API_ERROR_UPSTREAM_FAILED, "model server's stream has %s", what);
}

/* Count n more bytes of content or arguments against the budget: the reply
 * fails the moment it passes it, not at its end. */
static int stream_count_output(LlmStream *s, size_t n) {
        s->output += n;
        if (s->output > s->limits.max_output_bytes)
                return stream_failed(
                        s, llm_fail_output_budget(&s->error, s->output, s->limits.max_output_bytes));
        return 0;
}

static int stream_content(LlmStream *s, json_object *c) {
        _cleanup_free_ char *text = NULL;
        size_t n = 0, at;
        int r;

        if (!c)
                return 0;
        r = llm_parse_content(c, &text, &n);
        if (r == -EBADMSG)
                return stream_malformed(s, "a content of the wrong type");
        if (r < 0)
                return r;
        s->has_content = true;
        if (n == 0)
                return 0;
        r = stream_count_output(s, n);
        if (r < 0)
                return r;
        at = s->content.len;
        r = buf_append(&s->content, text, n, SIZE_MAX - 1);
        if (r < 0)
                return -ENOMEM;
        if (s->handlers.text)
                s->handlers.text(s->content.p + at, n, s->handlers.userdata);
        return 0;
}

static StreamCall *stream_find_call(LlmStream *s, int64_t index) {
        for (size_t i = 0; i < s->n_calls; i++)
                if (s->calls[i].index == index)
                        return &s->calls[i];
        return NULL;
}

static bool stream_has_id(const LlmStream *s, const char *id) {
        for (size_t i = 0; i < s->n_calls; i++)
                if (s->calls[i].id && streq(s->calls[i].id, id))
                        return true;
        return false;
}

/* The call a delta belongs to, created when new. Returns 0 and *ret, or a
 * failure. */
static int stream_call_for(LlmStream *s, json_object *index, const char *id, StreamCall **ret) {
        StreamCall *c = NULL;
        int64_t i;

        if (index) {
                if (!json_object_is_type(index, json_type_int))
                        return stream_malformed(s, "a tool call with an index that is not an integer");
                errno = 0;
                i = json_object_get_int64(index);
                if (errno != 0 || i < 0 || i > INT32_MAX)
                        return stream_malformed(s, "a tool call with an index out of range");
                c = stream_find_call(s, i);
        } else if ((!id || !*id || stream_has_id(s, id)) && s->last_call)
                /* No index (older Ollama): the same call goes on unless a new
                 * id starts another. */
                c = s->last_call;
        else {
                i = 0;
                for (size_t k = 0; k < s->n_calls; k++)
                        i = MAX(i, s->calls[k].index + 1);
        }

        if (!c) {
                if (s->n_calls >= LLM_REPLY_MAX_TOOL_CALLS)
                        return stream_failed(s, llm_fail_too_many_calls(&s->error, s->n_calls + 1));
                c = &s->calls[s->n_calls++];
                *c = (StreamCall){ .index = i };
        }
        *ret = c;
        return 0;
}

static int stream_call_name(LlmStream *s, StreamCall *c, json_object *name) {
        _cleanup_free_ char *n = NULL;
        size_t len;
        int r;

        if (!json_object_is_type(name, json_type_string))
                return 0;
        r = llm_dup_json_string(name, &n, &len);
        if (r < 0)
                return r;
        if (len == 0)
                return 0;
        /* Servers send the name whole in the first delta; some repeat it in
         * later ones, which must not double it; pieces are joined. */
        if (c->name.len > 0 && streq(c->name.p, n))
                return 0;
        r = buf_append(&c->name, n, len, LLM_STREAM_NAME_MAX);
        if (r == -E2BIG)
                return stream_malformed(s, "a tool call with an overlong name");
        if (r < 0)
                return r;
        if (!c->announced) {
                c->announced = true;
                if (s->handlers.tool_call)
                        s->handlers.tool_call((size_t) c->index, c->name.p, s->handlers.userdata);
        }
        return 0;
}

static int stream_tool_call(LlmStream *s, json_object *d) {
        json_object *f, *args;
        const char *id;
        StreamCall *c = NULL;
        int r;

        if (!json_object_is_type(d, json_type_object))
                return stream_malformed(s, "a malformed tool call");
        f = llm_json_get(d, "function");
        if (f && !json_object_is_type(f, json_type_object))
                return stream_malformed(s, "a malformed tool call");
        id = llm_json_get_string(d, "id");

        r = stream_call_for(s, llm_json_get(d, "index"), id, &c);
        if (r < 0)
                return r;
        s->last_call = c;

        if (id && *id && !c->id) {
                r = llm_dup_json_string(llm_json_get(d, "id"), &c->id, NULL);
                if (r < 0)
                        return r;
        }
        r = stream_call_name(s, c, llm_json_get(f, "name"));
        if (r < 0)
                return r;

        args = llm_json_get(f, "arguments");
        if (args) {
                _cleanup_free_ char *text = NULL;
                size_t n;

                r = llm_parse_arguments(args, &text, &n);
                if (r < 0)
                        return r;
                c->arguments_seen = true;
                r = stream_count_output(s, n);
                if (r < 0)
                        return r;
                r = buf_append(&c->arguments, text, n, SIZE_MAX - 1);
                if (r < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* One chunk object. */
static int stream_chunk(LlmStream *s, json_object *obj) {
        json_object *choices, *choice = NULL, *delta, *calls;
        const char *finish;
        int r;

        if (!json_object_is_type(obj, json_type_object))
                return stream_malformed(s, "a chunk that is not a JSON object");
        /* An error inside the 200 stream (llama.cpp since PR #16109, vLLM,
         * OpenAI): the error it is, classified as a whole reply would be. */
        if (llm_is_error_body(obj))
                return stream_failed(s, llm_fail_error_body(200, obj, &s->error));

        llm_reply_set_usage(&s->reply, llm_json_get(obj, "usage"));

        choices = llm_json_get(obj, "choices");
        if (!choices)
                return 0;
        if (!json_object_is_type(choices, json_type_array))
                return stream_malformed(s, "choices of the wrong type");
        /* We ask for one choice: the one numbered 0 (or unnumbered). */
        for (size_t i = 0; i < json_object_array_length(choices); i++) {
                json_object *c = json_object_array_get_idx(choices, i), *index = llm_json_get(c, "index");

                if (!index ||
                    (json_object_is_type(index, json_type_int) && json_object_get_int64(index) == 0)) {
                        choice = c;
                        break;
                }
        }
        if (!choice)
                return 0; /* a usage chunk: "choices": [] */
        if (!json_object_is_type(choice, json_type_object))
                return stream_malformed(s, "a choice that is not an object");

        delta = llm_json_get(choice, "delta");
        if (!delta)
                delta = llm_json_get(choice, "message"); /* a whole message in a chunk: read it the same way */
        if (delta && !json_object_is_type(delta, json_type_object))
                return stream_malformed(s, "a delta that is not an object");

        r = stream_content(s, llm_json_get(delta, "content"));
        if (r < 0)
                return r;

        calls = llm_json_get(delta, "tool_calls");
        if (calls && !json_object_is_type(calls, json_type_array))
                return stream_malformed(s, "tool_calls of the wrong type");
        for (size_t i = 0; calls && i < json_object_array_length(calls); i++) {
                r = stream_tool_call(s, json_object_array_get_idx(calls, i));
                if (r < 0)
                        return r;
        }

        finish = llm_json_get_string(choice, "finish_reason");
        if (finish && streq(finish, "length"))
                return stream_failed(s, llm_fail_finish_length(&s->error));
        if (finish) {
                char *f = strdup(finish);

                if (!f)
                        return -ENOMEM;
                free(s->reply.finish_reason);
                s->reply.finish_reason = f;
        }
        return 0;
}

static bool is_done_marker(const char *p, size_t n) {
        while (n > 0 && strchr(" \t", p[n - 1]))
                n--;
        return n == 6 && memcmp(p, "[DONE]", 6) == 0;
}

/* One event's data (without its last "\n"). */
static int stream_event(LlmStream *s, const char *p, size_t n, bool is_error) {
        _cleanup_(json_object_putp) json_object *obj = NULL;
        const char *why = NULL;

        s->events++;
        if (!is_error && is_done_marker(p, n)) {
                s->state = LLM_STREAM_DONE;
                return 0;
        }
        if (n == 0)
                return 0; /* "data:" alone, a keep-alive some servers send */

        obj = llm_parse_json((const uint8_t *) p, n, &why);
        if (is_error) {
                _cleanup_free_ char *q = NULL;
                int r;

                if (json_object_is_type(obj, json_type_object))
                        return stream_failed(s, llm_fail_error_body(200, obj, &s->error));
                /* Any bytes: quoted as valid UTF-8 (a bad byte becomes
                 * U+FFFD, up to 3 bytes), cut to the quote's length. */
                r = utf8_make_valid(p, MIN(n, (size_t) LLM_ERROR_QUOTE_MAX / 3), &q, NULL);
                if (r < 0)
                        return r;
                return STREAM_FAIL(
                        s, API_ERROR_UPSTREAM_FAILED, "model server reported an error in its stream: %s", q);
        }
        if (!obj)
                return STREAM_FAIL(
                        s, API_ERROR_UPSTREAM_FAILED, "model server's stream has an unusable chunk: %s", why);
        return stream_chunk(s, obj);
}

/* The end of an event (an empty line). */
static int stream_dispatch(LlmStream *s) {
        bool is_error = s->is_error;
        size_t n = s->data.len;

        s->is_error = false;
        if (n == 0)
                return 0; /* no data: nothing to dispatch */
        s->data.len = 0;
        /* The data buffer ends in "\n" (each data line adds one): drop it. */
        return stream_event(s, s->data.p, n - 1, is_error);
}

static bool field_is(const char *f, size_t n, const char *name) {
        return n == strlen(name) && memcmp(f, name, n) == 0;
}

/* One line, without its end. */
static int stream_line(LlmStream *s, const char *p, size_t n) {
        const char *colon, *value;
        size_t flen, vlen;
        int r;

        if (n == 0)
                return stream_dispatch(s);
        if (p[0] == ':')
                return 0; /* a comment (": keep-alive", ": ping") */

        colon = memchr(p, ':', n);
        flen = colon ? (size_t) (colon - p) : n;
        value = colon ? colon + 1 : p + n;
        vlen = n - (size_t) (value - p);
        if (vlen > 0 && *value == ' ') {
                value++;
                vlen--;
        }

        if (field_is(p, flen, "event")) {
                s->is_error = field_is(value, vlen, "error");
                return 0;
        }
        if (!field_is(p, flen, "data") && !field_is(p, flen, "error"))
                return 0; /* id, retry and unknown fields */
        if (field_is(p, flen, "error"))
                s->is_error = true; /* llama.cpp before PR #16109 */

        r = buf_append(&s->data, value, vlen, s->line_max);
        if (r == -E2BIG)
                return stream_event_too_long(s);
        if (r < 0)
                return r;
        /* The line's end counts against the cap too. */
        r = buf_append(&s->data, "\n", 1, s->line_max);
        if (r == -E2BIG)
                return stream_event_too_long(s);
        return r;
}

static int stream_line_too_long(LlmStream *s) {
        return STREAM_FAIL(
                s,
                API_ERROR_UPSTREAM_FAILED,
                "model server's stream has a line longer than %zu bytes",
                s->line_max);
}

static int stream_result(const LlmStream *s) {
        switch (s->state) {
        case LLM_STREAM_RUNNING:
                return 0;
        case LLM_STREAM_DONE:
                return 1;
        default:
                return -EBADMSG;
        }
}

int llm_stream_feed(LlmStream *s, const void *data, size_t n) {
        const char *p = data, *end = p + n;
        int r;

        assert(s);
        assert(data || n == 0);
        assert(!s->finished);

        while (p < end && s->state == LLM_STREAM_RUNNING) {
                const char *eol;

                /* One BOM at the start is not part of the stream; matched
                 * bytes of something else are. */
                if (s->bom < 3) {
                        if (*p == bom_bytes[s->bom]) {
                                s->bom++;
                                p++;
                                continue;
                        }
                        r = buf_append(&s->line, bom_bytes, s->bom, s->line_max);
                        s->bom = 3;
                        if (r < 0)
                                return r == -E2BIG ? stream_line_too_long(s) : r;
                }
                if (s->skip_lf) {
                        s->skip_lf = false;
                        if (*p == '\n') {
                                p++;
                                continue;
                        }
                }

                for (eol = p; eol < end && *eol != '\n' && *eol != '\r'; eol++)
                        ;
                if (eol == end) {
                        /* An unfinished line: keep it for the next slice. */
                        r = buf_append(&s->line, p, (size_t) (end - p), s->line_max);
                        if (r < 0)
                                return r == -E2BIG ? stream_line_too_long(s) : r;
                        break;
                }
                s->skip_lf = *eol == '\r';
                if (s->line.len > 0) {
                        /* The rest of a line begun in an earlier slice. */
                        r = buf_append(&s->line, p, (size_t) (eol - p), s->line_max);
                        if (r < 0)
                                return r == -E2BIG ? stream_line_too_long(s) : r;
                        r = stream_line(s, s->line.p, s->line.len);
                        s->line.len = 0;
                } else if ((size_t) (eol - p) > s->line_max)
                        return stream_line_too_long(s);
                else
                        r = stream_line(s, p, (size_t) (eol - p));
                if (r < 0 && r != -EBADMSG)
                        return r;
                p = eol + 1;
        }
        return stream_result(s);
}

int llm_stream_finish(LlmStream *s, LlmReply *ret, LlmError *ret_error) {
        _cleanup_(llm_reply_done) LlmReply reply = { .content = NULL };
        int r;

        assert(s);
        assert(ret);
        assert(ret_error);
        assert(!s->finished);
        s->finished = true;

        /* An unfinished event at the end is not dispatched (HTML 9.2.6). */
        if (s->state == LLM_STREAM_FAILED) {
                *ret_error = s->error;
                s->error = (LlmError){ .message = NULL };
                return -EBADMSG;
        }
        if (!s->reply.finish_reason)
                return llm_fail(
                        ret_error,
                        API_ERROR_UPSTREAM_FAILED,
                        "model server's stream ended before a finish_reason (%" PRIu64 " events%s)",
                        s->events,
                        s->state == LLM_STREAM_DONE ? ", then [DONE]" : ", no [DONE]");

        reply = s->reply;
        s->reply = (LlmReply){ .content = NULL };
        if (s->has_content) {
                reply.content = buf_take(&s->content);
                if (!reply.content)
                        return -ENOMEM;
        }
        if (s->n_calls > 0) {
                reply.tool_calls = calloc(s->n_calls, sizeof(LlmToolCall));
                if (!reply.tool_calls)
                        return -ENOMEM;
        }
        /* In the order of the servers' indexes (calls may have started out
         * of order): a selection over at most LLM_REPLY_MAX_TOOL_CALLS. */
        for (size_t k = 0; k < s->n_calls; k++) {
                StreamCall *c = NULL;
                LlmToolCall *t = &reply.tool_calls[k];

                for (size_t i = 0; i < s->n_calls; i++)
                        if (s->calls[i].index >= 0 && (!c || s->calls[i].index < c->index))
                                c = &s->calls[i];
                assert(c);
                reply.n_tool_calls++;
                t->id = TAKE_PTR(c->id);
                t->name = buf_take(&c->name);
                t->arguments = c->arguments_seen ? buf_take(&c->arguments) : strdup("{}");
                c->index = -1; /* taken */
                if (!t->name || !t->arguments)
                        return -ENOMEM;
        }
        r = llm_fix_tool_call_ids(reply.tool_calls, reply.n_tool_calls, s->limits.step);
        if (r < 0)
                return r;

        *ret = reply;
        reply = (LlmReply){ .content = NULL };
        return 0;
}
