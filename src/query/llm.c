/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdarg.h>

#include "shared/json-util.h"
#include "shared/macro.h"
#include "shared/strbuf.h"
#include "shared/utf8.h"
#include "query/llm-internal.h"
#include "query/llm.h"


/* Serialization used for every body: compact, "/" not escaped. json-c
 * writes UTF-8 as it is and escapes control characters. */
#define LLM_JSON_FLAGS (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)

static char *memdup_suffix0(const void *p, size_t n) {
        char *q;

        if (n == SIZE_MAX)
                return NULL;
        q = malloc(n + 1);
        if (!q)
                return NULL;
        memcpy(q, p, n);
        q[n] = '\0';
        return q;
}

static const char *const llm_role_table[_LLM_ROLE_MAX] = {
        [LLM_ROLE_SYSTEM] = "system",
        [LLM_ROLE_USER] = "user",
        [LLM_ROLE_ASSISTANT] = "assistant",
        [LLM_ROLE_TOOL] = "tool",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(llm_role, LlmRole)

void llm_tool_call_done(LlmToolCall *c) {
        if (!c)
                return;
        free(c->id);
        free(c->name);
        free(c->arguments);
        *c = (LlmToolCall){ .id = NULL };
}

static void tool_calls_free(LlmToolCall *calls, size_t n) {
        for (size_t i = 0; i < n; i++)
                llm_tool_call_done(&calls[i]);
        free(calls);
}

void llm_message_done(LlmMessage *m) {
        if (!m)
                return;
        free(m->content);
        tool_calls_free(m->tool_calls, m->n_tool_calls);
        free(m->tool_call_id);
        *m = (LlmMessage){ .content = NULL };
}

void llm_request_body_done(LlmRequestBody *b) {
        if (!b)
                return;
        free(b->body);
        *b = (LlmRequestBody){ .body = NULL };
}

void llm_reply_done(LlmReply *r) {
        if (!r)
                return;
        free(r->content);
        tool_calls_free(r->tool_calls, r->n_tool_calls);
        free(r->finish_reason);
        *r = (LlmReply){ .content = NULL };
}

void llm_error_done(LlmError *e) {
        if (!e)
                return;
        free(e->message);
        *e = (LlmError){ .message = NULL };
}

uint64_t llm_estimate_prompt_tokens(size_t size) {
        return (uint64_t) size / LLM_BYTES_PER_TOKEN + (size % LLM_BYTES_PER_TOKEN != 0);
}

uint64_t llm_max_tokens(uint64_t context_tokens, uint64_t max_output_bytes, uint64_t prompt_tokens_estimate) {
        uint64_t m = max_output_bytes / LLM_BYTES_PER_TOKEN;

        /* vLLM refuses a request whose prompt plus max_tokens exceeds its
         * context (400 "maximum context length"), so ask for no more than
         * what is left by our own estimate. */
        if (prompt_tokens_estimate >= context_tokens)
                return 1;
        m = MIN(m, context_tokens - prompt_tokens_estimate);
        return MAX(m, (uint64_t) 1);
}

/* ---- building ---- */

/* Builds the JSON of items[i] (an array of one type) into *ret. */
typedef int (*BuildItem)(const void *items, size_t i, json_object **ret);

/* o[key] = [ build(items, 0), ..., build(items, n - 1) ]. */
static int add_built_array(json_object *o, const char *key, const void *items, size_t n, BuildItem build) {
        _cleanup_(json_object_putp) json_object *a = json_object_new_array();
        int r;

        if (!a)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                json_object *e;

                r = build(items, i, &e);
                if (r < 0)
                        return r;
                r = json_append(a, e);
                if (r < 0)
                        return r;
        }
        return json_add(o, key, TAKE_PTR(a));
}

static int build_tool_call(const void *items, size_t i, json_object **ret) {
        const LlmToolCall *c = (const LlmToolCall *) items + i;
        _cleanup_(json_object_putp) json_object *o = json_object_new_object(), *f = json_object_new_object();
        int r;

        if (!o || !f)
                return -ENOMEM;
        r = json_add(f, "name", json_string(c->name));
        if (r < 0)
                return r;
        /* Always a JSON string, also when the model sent an object: Ollama
         * refuses anything else in an incoming assistant message. */
        r = json_add(f, "arguments", json_string(c->arguments ? c->arguments : "{}"));
        if (r < 0)
                return r;
        r = json_add(o, "id", json_string(c->id));
        if (r < 0)
                return r;
        r = json_add(o, "type", json_string("function"));
        if (r < 0)
                return r;
        r = json_add(o, "function", TAKE_PTR(f));
        if (r < 0)
                return r;
        *ret = TAKE_PTR(o);
        return 0;
}

static int build_message(const void *items, size_t i, json_object **ret) {
        const LlmMessage *m = (const LlmMessage *) items + i;
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        const char *role = llm_role_to_string(m->role);
        int r;

        if (!role)
                return -EINVAL;
        if (!o)
                return -ENOMEM;
        r = json_add(o, "role", json_string(role));
        if (r < 0)
                return r;
        /* A string in every message: "" beside tool calls is accepted by all
         * four servers, null is not by every chat template. */
        r = json_add(o, "content", json_string(m->content));
        if (r < 0)
                return r;

        if (m->role == LLM_ROLE_ASSISTANT && m->n_tool_calls > 0) {
                r = add_built_array(o, "tool_calls", m->tool_calls, m->n_tool_calls, build_tool_call);
                if (r < 0)
                        return r;
        }
        if (m->role == LLM_ROLE_TOOL) {
                r = json_add(o, "tool_call_id", json_string(m->tool_call_id));
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(o);
        return 0;
}

static int build_tool(const void *items, size_t i, json_object **ret) {
        const LlmTool *t = (const LlmTool *) items + i;
        _cleanup_(json_object_putp) json_object *o = json_object_new_object(), *f = json_object_new_object();
        json_object *schema;
        int r;

        if (!o || !f)
                return -ENOMEM;
        schema = json_tokener_parse(t->parameters);
        if (!schema || !json_object_is_type(schema, json_type_object)) {
                json_object_put(schema);
                return -EINVAL;
        }
        r = json_add(f, "name", json_string(t->name));
        if (r < 0)
                return r;
        r = json_add(f, "description", json_string(t->description));
        if (r < 0)
                return r;
        r = json_add(f, "parameters", schema);
        if (r < 0)
                return r;
        r = json_add(o, "type", json_string("function"));
        if (r < 0)
                return r;
        r = json_add(o, "function", TAKE_PTR(f));
        if (r < 0)
                return r;
        *ret = TAKE_PTR(o);
        return 0;
}

static int json_serialize(json_object *o, char **ret, size_t *ret_size) {
        const char *s;
        size_t n;
        char *copy;

        s = json_object_to_json_string_length(o, LLM_JSON_FLAGS, &n);
        if (!s)
                return -ENOMEM;
        copy = memdup_suffix0(s, n);
        if (!copy)
                return -ENOMEM;
        *ret = copy;
        *ret_size = n;
        return 0;
}

int llm_build_request(const LlmRequest *req, LlmRequestBody *ret) {
        _cleanup_(json_object_putp) json_object *root = json_object_new_object();
        _cleanup_free_ char *body = NULL;
        uint64_t estimate, max_tokens;
        size_t size;
        int r;

        assert(req);
        assert(ret);

        if (req->stream < 0 || req->stream >= _LLM_STREAM_MODE_MAX)
                return -EINVAL;
        if (!root)
                return -ENOMEM;

        r = json_add(root, "model", json_string(req->model));
        if (r < 0)
                return r;
        r = add_built_array(root, "messages", req->messages, req->n_messages, build_message);
        if (r < 0)
                return r;

        if (req->n_tools > 0) {
                r = add_built_array(root, "tools", req->tools, req->n_tools, build_tool);
                if (r < 0)
                        return r;
                /* Only beside tools: OpenAI refuses tool_choice without them. */
                r = json_add(root, "tool_choice", json_string("auto"));
                if (r < 0)
                        return r;
        }

        /* max_tokens depends on the estimate, which depends on the body:
         * measure with 0, then reserve room for the largest number (20
         * digits), so the final body's estimate is never above the one
         * max_tokens was computed from. */
        r = json_add(root, "max_tokens", json_object_new_uint64(0));
        if (r < 0)
                return r;
        r = json_add(root, "stream", json_object_new_boolean(req->stream != LLM_STREAM_OFF));
        if (r < 0)
                return r;
        if (req->stream == LLM_STREAM_WITH_USAGE) {
                /* Usage comes in a last chunk with empty choices only when
                 * asked for (OpenAI, vLLM, Ollama; llama.cpp sends it anyway). */
                _cleanup_(json_object_putp) json_object *o = json_object_new_object();

                if (!o)
                        return -ENOMEM;
                r = json_add(o, "include_usage", json_object_new_boolean(true));
                if (r < 0)
                        return r;
                r = json_add(root, "stream_options", TAKE_PTR(o));
                if (r < 0)
                        return r;
        }
        r = json_serialize(root, &body, &size);
        if (r < 0)
                return r;
        estimate = llm_estimate_prompt_tokens(size + 19);
        max_tokens = llm_max_tokens(req->context_tokens, req->max_output_bytes, estimate);
        free(TAKE_PTR(body));

        r = json_add(root, "max_tokens", json_object_new_uint64(max_tokens));
        if (r < 0)
                return r;
        r = json_serialize(root, &body, &size);
        if (r < 0)
                return r;

        estimate = llm_estimate_prompt_tokens(size);
        *ret = (LlmRequestBody){
                .body = TAKE_PTR(body),
                .size = size,
                .prompt_tokens_estimate = estimate,
                .max_tokens = max_tokens,
        };
        return estimate > req->context_tokens ? -EOVERFLOW : 0;
}

/* ---- parsing: the pieces llm-stream.c shares (llm-internal.h) ---- */

int llm_fail(LlmError *ret_error, ApiError code, const char *format, ...) {
        va_list ap;
        char *m;

        va_start(ap, format);
        m = strdup_vprintf(format, ap);
        va_end(ap);
        if (!m)
                return -ENOMEM;
        *ret_error = (LlmError){ .code = code, .message = m };
        return -EBADMSG;
}

json_object *llm_json_get(json_object *o, const char *key) {
        json_object *v = NULL;

        if (!json_object_is_type(o, json_type_object))
                return NULL;
        if (!json_object_object_get_ex(o, key, &v))
                return NULL;
        return v; /* NULL also for a JSON null */
}

const char *llm_json_get_string(json_object *o, const char *key) {
        json_object *v = llm_json_get(o, key);

        return json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

int llm_dup_json_string(json_object *s, char **ret, size_t *ret_len) {
        /* The tokener validated the UTF-8 already; this replaces NUL. */
        return utf8_make_valid(json_object_get_string(s), (size_t) json_object_get_string_len(s), ret, ret_len);
}

/* At most max bytes of s for a message, cut at a character boundary. */
static int quote(const char *s, size_t n, size_t max, char **ret) {
        size_t l = utf8_cut(s, n, max);
        char *q = memdup_suffix0(s, l);

        if (!q)
                return -ENOMEM;
        *ret = q;
        return 0;
}

static const char *first_of(const char *a, const char *b, const char *c, const char *d) {
        return a ? a : b ? b : c ? c : d;
}

static bool object_is_error(json_object *obj) {
        const char *o = llm_json_get_string(obj, "object");

        return o && streq(o, "error");
}

bool llm_is_error_body(json_object *obj) {
        return llm_json_get(obj, "error") || object_is_error(obj);
}

static bool is_context_error(const char *type, const char *code, const char *message) {
        if (type && streq(type, "exceed_context_size_error")) /* llama.cpp since PR #15780 */
                return true;
        if (code && streq(code, "context_length_exceeded")) /* OpenAI */
                return true;
        if (!message)
                return false;
        /* vLLM (nested and flat) and OpenAI: "This model's maximum context
         * length is X tokens…"; Ollama: "the prompt is longer than the
         * context length…"; older llama.cpp: "the request exceeds the
         * available context size…". */
        return strcasestr(message, "maximum context length") ||
                strcasestr(message, "longer than the context length") ||
                strcasestr(message, "exceeds the available context size");
}

/* An error body, in any of the shapes of upstreams.md. Returns true and
 * fills what it found, or false when obj does not look like one. The
 * strings are borrowed from obj. */
static bool error_body_fields(
        json_object *obj, const char **ret_message, const char **ret_type, const char **ret_code) {
        json_object *e = llm_json_get(obj, "error");
        const char *message = NULL, *type = NULL, *code = NULL;
        json_object *container = NULL;

        if (json_object_is_type(e, json_type_object))
                container = e; /* OpenAI, llama.cpp, vLLM (also inside a stream), Ollama */
        else if (json_object_is_type(e, json_type_string))
                message = json_object_get_string(e); /* vLLM's 401 {"error": "Unauthorized"} */
        else if (object_is_error(obj) || json_object_is_type(llm_json_get(obj, "message"), json_type_string))
                container = obj; /* vLLM < 0.10.1: {"object": "error", "message", "type", "code"} */
        else if (json_object_is_type(llm_json_get(obj, "detail"), json_type_string))
                message = llm_json_get_string(obj, "detail"); /* FastAPI (vLLM's routes) */
        else if (!e)
                return false;

        if (container) {
                json_object *c = llm_json_get(container, "code");

                message = llm_json_get_string(container, "message");
                type = llm_json_get_string(container, "type");
                /* "code" is a string (OpenAI) or a number (llama.cpp, vLLM) */
                if (json_object_is_type(c, json_type_string))
                        code = json_object_get_string(c);
        }
        *ret_message = message;
        *ret_type = type;
        *ret_code = code;
        return true;
}

int llm_fail_error_body(unsigned http_status, json_object *obj, LlmError *ret_error) {
        const char *message = NULL, *type = NULL, *code = NULL;
        _cleanup_free_ char *q = NULL, *what = NULL;
        int r;

        if (!error_body_fields(obj, &message, &type, &code)) {
                /* JSON, but not an error we know: quote the document. */
                _cleanup_free_ char *text = NULL;
                size_t n;

                r = json_serialize(obj, &text, &n);
                if (r < 0)
                        return r;
                r = quote(text, n, LLM_ERROR_QUOTE_MAX, &q);
                if (r < 0)
                        return r;
                return llm_fail(
                        ret_error,
                        API_ERROR_UPSTREAM_FAILED,
                        "model server answered HTTP %u: %s",
                        http_status,
                        q);
        }

        if (message) {
                r = quote(message, strlen(message), LLM_ERROR_QUOTE_MAX, &q);
                if (r < 0)
                        return r;
        }
        if (is_context_error(type, code, message))
                return llm_fail(
                        ret_error,
                        API_ERROR_MODEL_CONTEXT_EXCEEDED,
                        "model context window exceeded (HTTP %u): %s",
                        http_status,
                        first_of(q, type, code, "no message"));

        if (type || code) {
                const char *w = first_of(type, code, NULL, NULL);

                r = quote(w, strlen(w), 64, &what);
                if (r < 0)
                        return r;
        }
        return llm_fail(
                ret_error,
                API_ERROR_UPSTREAM_FAILED,
                "model server answered HTTP %u%s%s%s: %s",
                http_status,
                what ? " (" : "",
                what ? what : "",
                what ? ")" : "",
                q && *q ? q : "no message");
}

int llm_props_url(const char *llm_url, char **ret) {
        const char *authority;
        size_t n;
        char *s;

        assert(llm_url);
        assert(ret);

        authority = strstr(llm_url, "://");
        if (!authority)
                return -EINVAL;
        authority += 3;
        /* The authority ends at the path, the query or the fragment. */
        n = (size_t) (authority - llm_url) + strcspn(authority, "/?#");
        if (asprintf(&s, "%.*s/props", (int) n, llm_url) < 0)
                return -ENOMEM;
        *ret = s;
        return 0;
}

int llm_parse_props_total_slots(const uint8_t *body, size_t size, unsigned *ret) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_object *v;
        const char *why;
        int64_t n;

        assert(ret);

        o = llm_parse_json(body, size, &why);
        if (!o || !json_object_is_type(o, json_type_object))
                return -ENODATA;
        if (!json_object_object_get_ex(o, "total_slots", &v) || !json_object_is_type(v, json_type_int))
                return -ENODATA;
        n = json_object_get_int64(v);
        /* json-c saturates what does not fit in 64 bits; the range check
         * refuses those too. */
        if (n < 1 || n > (int64_t) LLM_PROPS_SLOTS_MAX)
                return -ENODATA;
        *ret = (unsigned) n;
        return 0;
}

json_object *llm_parse_json(const uint8_t *body, size_t size, const char **ret_why) {
        _cleanup_(json_tokener_freep) struct json_tokener *tok = NULL;
        json_object *obj;
        enum json_tokener_error jerr;
        size_t end;

        if (size == 0) {
                *ret_why = "empty body";
                return NULL;
        }
        if (size > INT_MAX) {
                *ret_why = "body too large";
                return NULL;
        }
        if (!utf8_is_valid((const char *) body, size)) {
                *ret_why = "not valid UTF-8";
                return NULL;
        }
        tok = json_tokener_new_ex(LLM_REPLY_MAX_DEPTH);
        if (!tok) {
                *ret_why = "out of memory";
                return NULL;
        }
        /* Not JSON_TOKENER_STRICT: Python servers write NaN and Infinity
         * (logprobs), which json-c reads only when not strict. UTF-8 was
         * checked above; trailing bytes are checked below. */
        obj = json_tokener_parse_ex(tok, (const char *) body, (int) size);
        jerr = json_tokener_get_error(tok);
        if (!obj || jerr != json_tokener_success) {
                json_object_put(obj);
                *ret_why = jerr == json_tokener_error_depth ? "nested too deeply" :
                        jerr == json_tokener_continue       ? "truncated JSON" :
                                                              "not JSON";
                return NULL;
        }
        end = json_tokener_get_parse_end(tok);
        if (!json_rest_is_whitespace((const char *) body, end, size)) {
                json_object_put(obj);
                *ret_why = "bytes after the JSON document";
                return NULL;
        }
        return obj;
}

/* usage.{prompt,completion}_tokens: integers 0..2^53; anything else counts
 * as absent (usage is informative, never a reason to fail). */
static uint64_t usage_number(json_object *usage, const char *key) {
        json_object *v = llm_json_get(usage, key);
        int64_t i;

        if (!json_object_is_type(v, json_type_int))
                return 0;
        errno = 0;
        i = json_object_get_int64(v);
        if (i < 0 || i > (INT64_C(1) << 53) || errno != 0)
                return 0;
        return (uint64_t) i;
}

void llm_reply_set_usage(LlmReply *r, json_object *usage) {
        if (!json_object_is_type(usage, json_type_object))
                return;
        r->has_usage = true;
        r->prompt_tokens = usage_number(usage, "prompt_tokens");
        r->completion_tokens = usage_number(usage, "completion_tokens");
}

int llm_fail_finish_length(LlmError *ret_error) {
        /* Also beside tool calls: llama.cpp does not parse them then, and
         * any call may be cut off. */
        return llm_fail(
                ret_error,
                API_ERROR_MODEL_OUTPUT_LIMIT,
                "the model's reply was cut off at max_tokens (finish_reason \"length\")");
}

int llm_fail_too_many_calls(LlmError *ret_error, size_t n) {
        return llm_fail(
                ret_error,
                API_ERROR_MODEL_OUTPUT_LIMIT,
                "the model asked for %zu tool calls in one reply (at most %d)",
                n,
                LLM_REPLY_MAX_TOOL_CALLS);
}

int llm_fail_output_budget(LlmError *ret_error, uint64_t output, uint64_t max) {
        return llm_fail(
                ret_error,
                API_ERROR_MODEL_OUTPUT_LIMIT,
                "the model's reply holds %" PRIu64 " bytes of content and arguments (at most %" PRIu64 ")",
                output,
                max);
}

static bool id_is_usable(const char *id) {
        size_t n = strlen(id);

        if (n == 0 || n > LLM_TOOL_CALL_ID_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (id[i] <= 0x20 || id[i] >= 0x7f)
                        return false;
        return true;
}

int llm_parse_content(json_object *c, char **ret, size_t *ret_len) {
        _cleanup_free_ char *joined = NULL;
        size_t n = 0;

        if (!c) {
                *ret = NULL;
                *ret_len = 0;
                return 0;
        }
        if (json_object_is_type(c, json_type_string))
                return llm_dup_json_string(c, ret, ret_len);
        if (!json_object_is_type(c, json_type_array))
                return -EBADMSG;

        joined = strdup("");
        if (!joined)
                return -ENOMEM;
        for (size_t i = 0; i < json_object_array_length(c); i++) {
                json_object *part = json_object_array_get_idx(c, i), *t = llm_json_get(part, "text");
                _cleanup_free_ char *s = NULL;
                size_t l;
                char *p;
                int r;

                if (!json_object_is_type(t, json_type_string))
                        continue;
                r = llm_dup_json_string(t, &s, &l);
                if (r < 0)
                        return r;
                p = realloc(joined, n + l + 1);
                if (!p)
                        return -ENOMEM;
                joined = p;
                memcpy(joined + n, s, l + 1);
                n += l;
        }
        *ret = TAKE_PTR(joined);
        *ret_len = n;
        return 0;
}

int llm_parse_arguments(json_object *args, char **ret, size_t *ret_len) {
        _cleanup_free_ char *text = NULL;
        size_t n;
        int r;

        if (json_object_is_type(args, json_type_string))
                return llm_dup_json_string(args, ret, ret_len);

        /* Ollama's native shape: an object. Any other JSON value is kept as
         * its text, and argument validation says what is wrong. */
        r = json_serialize(args, &text, &n);
        if (r < 0)
                return r;
        return utf8_make_valid(text, n, ret, ret_len);
}

static int parse_tool_call(json_object *c, LlmToolCall *ret, size_t *ret_bytes) {
        json_object *f, *name, *args, *id;
        _cleanup_(llm_tool_call_done) LlmToolCall call = { .id = NULL };
        size_t n = 0;
        int r;

        if (!json_object_is_type(c, json_type_object))
                return -EBADMSG;
        f = llm_json_get(c, "function");
        if (f && !json_object_is_type(f, json_type_object))
                return -EBADMSG;
        name = llm_json_get(f, "name");
        args = llm_json_get(f, "arguments");
        id = llm_json_get(c, "id");

        if (json_object_is_type(name, json_type_string))
                r = llm_dup_json_string(name, &call.name, NULL);
        else
                r = (call.name = strdup("")) ? 0 : -ENOMEM;
        if (r < 0)
                return r;

        if (!args)
                r = (call.arguments = strdup("{}")) ? 0 : -ENOMEM;
        else
                r = llm_parse_arguments(args, &call.arguments, &n);
        if (r < 0)
                return r;

        if (json_object_is_type(id, json_type_string)) {
                r = llm_dup_json_string(id, &call.id, NULL);
                if (r < 0)
                        return r;
        }

        *ret = call;
        call = (LlmToolCall){ .id = NULL };
        *ret_bytes = n;
        return 0;
}

static bool id_taken(const LlmToolCall *calls, size_t n, const char *id) {
        for (size_t j = 0; j < n; j++)
                if (calls[j].id && streq(calls[j].id, id))
                        return true;
        return false;
}

/* Of the n + 1 numbers i .. i + n at most n - 1 are taken by the other
 * calls, so one is always free: 9 alphanumerics, which Mistral templates
 * in vLLM demand. */
int llm_fix_tool_call_ids(LlmToolCall *calls, size_t n, unsigned step) {
        for (size_t i = 0; i < n; i++) {
                if (calls[i].id && id_is_usable(calls[i].id) && !id_taken(calls, i, calls[i].id))
                        continue;

                calls[i].id = mfree(calls[i].id);
                for (size_t k = 0; k <= n; k++) {
                        char id[16];

                        (void) snprintf(
                                id, sizeof(id), "ww%03u%04u", step % 1000, (unsigned) ((i + k) % 10000));
                        if (id_taken(calls, n, id))
                                continue;
                        calls[i].id = strdup(id);
                        if (!calls[i].id)
                                return -ENOMEM;
                        break;
                }
                assert(calls[i].id);
        }
        return 0;
}

/* ---- parsing a whole reply ---- */

bool llm_refuses_stream_options(unsigned http_status, const uint8_t *body, size_t size) {
        static const char needle[] = "stream_options";

        assert(body || size == 0);

        /* A refusal is a client error: 400 (OpenAI-style servers, Azure's
         * "Unrecognized request argument supplied: stream_options") or 422
         * (FastAPI/pydantic "extra_forbidden" with loc [..., "stream_options"]).
         * The body must name the option; any other 4xx is another problem. */
        if (http_status != 400 && http_status != 422)
                return false;
        return size >= sizeof(needle) - 1 && memmem(body, size, needle, sizeof(needle) - 1);
}

int llm_parse_reply(
        unsigned http_status,
        const uint8_t *body,
        size_t size,
        const LlmReplyLimits *limits,
        LlmReply *ret,
        LlmError *ret_error) {

        _cleanup_(json_object_putp) json_object *obj = NULL;
        _cleanup_(llm_reply_done) LlmReply reply = { .content = NULL };
        json_object *choices, *choice, *message, *calls;
        const char *why = NULL, *finish;
        size_t content_len = 0, output = 0;
        int r;

        assert(body || size == 0);
        assert(limits);
        assert(ret);
        assert(ret_error);

        obj = llm_parse_json(body, size, &why);

        if (http_status < 200 || http_status > 299) {
                _cleanup_free_ char *q = NULL;

                if (obj)
                        return llm_fail_error_body(http_status, obj, ret_error);
                /* Not JSON (a proxy's HTML page, a plain-text error). The
                 * raw bytes are quoted; the caller sanitizes. */
                r = quote((const char *) body, size, LLM_ERROR_QUOTE_MAX, &q);
                if (r < 0)
                        return r;
                return llm_fail(
                        ret_error,
                        API_ERROR_UPSTREAM_FAILED,
                        "model server answered HTTP %u%s%s",
                        http_status,
                        *q ? ": " : " with an empty body",
                        q);
        }

        if (!obj)
                return llm_fail(
                        ret_error,
                        API_ERROR_UPSTREAM_FAILED,
                        "model server's reply (HTTP %u) is unusable: %s",
                        http_status,
                        why);
        if (!json_object_is_type(obj, json_type_object))
                return llm_fail(
                        ret_error, API_ERROR_UPSTREAM_FAILED, "model server's reply is not a JSON object");

        /* An error object with a success status: older llama.cpp did this
         * (in streams); treat it as the error it is. */
        if (llm_is_error_body(obj))
                return llm_fail_error_body(http_status, obj, ret_error);

        choices = llm_json_get(obj, "choices");
        if (!json_object_is_type(choices, json_type_array) || json_object_array_length(choices) == 0)
                return llm_fail(ret_error, API_ERROR_UPSTREAM_FAILED, "model server's reply has no choices");
        choice = json_object_array_get_idx(choices, 0);
        message = llm_json_get(choice, "message");
        if (!json_object_is_type(message, json_type_object))
                return llm_fail(ret_error, API_ERROR_UPSTREAM_FAILED, "model server's reply has no message");

        finish = llm_json_get_string(choice, "finish_reason");
        if (finish && streq(finish, "length"))
                return llm_fail_finish_length(ret_error);
        if (finish) {
                reply.finish_reason = strdup(finish);
                if (!reply.finish_reason)
                        return -ENOMEM;
        }

        r = llm_parse_content(llm_json_get(message, "content"), &reply.content, &content_len);
        if (r == -EBADMSG)
                return llm_fail(
                        ret_error,
                        API_ERROR_UPSTREAM_FAILED,
                        "model server's reply has a content of the wrong type");
        if (r < 0)
                return r;
        output = content_len;

        calls = llm_json_get(message, "tool_calls");
        if (calls && !json_object_is_type(calls, json_type_array))
                return llm_fail(
                        ret_error,
                        API_ERROR_UPSTREAM_FAILED,
                        "model server's reply has tool_calls of the wrong type");
        if (calls && json_object_array_length(calls) > LLM_REPLY_MAX_TOOL_CALLS)
                return llm_fail_too_many_calls(ret_error, json_object_array_length(calls));
        if (calls && json_object_array_length(calls) > 0) {
                size_t n = json_object_array_length(calls);

                reply.tool_calls = calloc(n, sizeof(LlmToolCall));
                if (!reply.tool_calls)
                        return -ENOMEM;
                for (size_t i = 0; i < n; i++) {
                        size_t bytes = 0;

                        r = parse_tool_call(json_object_array_get_idx(calls, i), &reply.tool_calls[i], &bytes);
                        if (r == -EBADMSG)
                                return llm_fail(
                                        ret_error,
                                        API_ERROR_UPSTREAM_FAILED,
                                        "model server's reply has a malformed tool call");
                        if (r < 0)
                                return r;
                        reply.n_tool_calls++;
                        output += bytes;
                }
                r = llm_fix_tool_call_ids(reply.tool_calls, reply.n_tool_calls, limits->step);
                if (r < 0)
                        return r;
        }

        if (output > limits->max_output_bytes)
                return llm_fail_output_budget(ret_error, output, limits->max_output_bytes);

        llm_reply_set_usage(&reply, llm_json_get(obj, "usage"));

        *ret = reply;
        reply = (LlmReply){ .content = NULL };
        return 0;
}
