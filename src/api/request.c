/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdarg.h>
#include <strings.h>

#include "api/request.h"
#include "shared/parse-util.h"
#include "shared/json-util.h"
#include "shared/macro.h"
#include "shared/strbuf.h"
#include "shared/strv.h"
#include "shared/utf8.h"
#include "store/report.h"

/* Set *ret_message to a copy of a fixed message and return -EINVAL, or
 * -ENOMEM if even that fails. Messages never contain request bytes except
 * a field name that passed field_name_is_printable(). */
static int fail(char **ret_message, const char *message) {
        if (ret_message) {
                char *m = strdup(message);
                if (!m)
                        return -ENOMEM;
                *ret_message = m;
        }
        return -EINVAL;
}

_printf_(2, 3) static int failf(char **ret_message, const char *format, ...) {
        if (ret_message) {
                va_list ap;
                char *m;

                va_start(ap, format);
                m = strdup_vprintf(format, ap);
                va_end(ap);
                if (!m)
                        return -ENOMEM;
                *ret_message = m;
        }
        return -EINVAL;
}

static bool is_ows(char c) {
        return c == ' ' || c == '\t';
}

static bool is_tchar(char c) {
        /* RFC 9110 section 5.6.2 token characters. */
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                (c && strchr("!#$%&'*+-.^_`|~", c));
}

bool request_content_type_is_json(const char *content_type) {
        const char *p = content_type;

        if (!p)
                return false;

        while (is_ows(*p))
                p++;
        if (strncasecmp(p, "application/json", STRLEN("application/json")) != 0)
                return false;
        p += STRLEN("application/json");

        /* parameters = *( OWS ";" OWS [ parameter ] ), RFC 9110 section 5.6.6 */
        for (;;) {
                const char *name;
                size_t name_len;

                while (is_ows(*p))
                        p++;
                if (*p == '\0')
                        return true;
                if (*p != ';')
                        return false; /* "application/jsonx", "application/json x" */
                p++;
                while (is_ows(*p))
                        p++;
                if (*p == ';' || *p == '\0')
                        continue; /* an empty parameter */

                name = p;
                while (is_tchar(*p))
                        p++;
                name_len = (size_t) (p - name);
                if (name_len != STRLEN("charset") || strncasecmp(name, "charset", name_len) != 0)
                        return false; /* any other parameter: we do not know what it means */
                if (*p++ != '=')
                        return false;

                if (*p == '"') {
                        if (strncasecmp(p, "\"utf-8\"", STRLEN("\"utf-8\"")) != 0)
                                return false;
                        p += STRLEN("\"utf-8\"");
                } else {
                        if (strncasecmp(p, "utf-8", STRLEN("utf-8")) != 0)
                                return false;
                        p += STRLEN("utf-8");
                        if (is_tchar(*p))
                                return false; /* "utf-8x" */
                }
        }
}

/* A strict RFC 8259 validator. json-c's JSON_TOKENER_STRICT still accepts
 * single-quoted strings, raw control characters in strings, NaN, Infinity,
 * "1." and unpaired surrogate escapes (which it silently turns into
 * U+FFFD), and keeps the last of duplicate keys; so the body is checked
 * here first and json-c only builds the tree of a document already known to
 * be good. The input has been checked to be valid UTF-8, so bytes >= 0x80
 * are only ever inside strings. Recursion is bounded by
 * REQUEST_JSON_MAX_DEPTH. */
typedef enum JsonScanError {
        JSON_SCAN_OK,
        JSON_SCAN_SYNTAX,
        JSON_SCAN_TOO_DEEP,
        JSON_SCAN_SURROGATE, /* well-formed JSON, but an escape no UTF-8 text can hold */
} JsonScanError;

typedef struct JsonScan {
        const uint8_t *p, *end;
        size_t n_keys;       /* object members seen, at any depth */
        bool key_has_nul;    /* some key contains \u0000 */
        bool string_has_nul; /* the last string scanned contains \u0000 */
        JsonScanError error;
} JsonScan;

static bool json_is_ws(uint8_t c) {
        return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static void json_skip_ws(JsonScan *s) {
        while (s->p < s->end && json_is_ws(*s->p))
                s->p++;
}

static bool json_fail(JsonScan *s, JsonScanError e) {
        if (s->error == JSON_SCAN_OK)
                s->error = e;
        return false;
}

/* "\uXXXX" at s->p (after the backslash and 'u' have been consumed: s->p at
 * the first hex digit). */
static bool json_scan_hex4(JsonScan *s, uint32_t *ret) {
        uint32_t v = 0;

        if (s->end - s->p < 4)
                return json_fail(s, JSON_SCAN_SYNTAX);
        for (size_t i = 0; i < 4; i++) {
                int h = unhexchar((char) s->p[i]);
                if (h < 0)
                        return json_fail(s, JSON_SCAN_SYNTAX);
                v = v << 4 | (uint32_t) h;
        }
        s->p += 4;
        *ret = v;
        return true;
}

static bool json_scan_string(JsonScan *s) {
        s->p++; /* the opening quote */
        s->string_has_nul = false;

        for (;;) {
                uint8_t c;

                if (s->p >= s->end)
                        return json_fail(s, JSON_SCAN_SYNTAX);
                c = *s->p++;

                if (c == '"')
                        return true;
                if (c < 0x20)
                        return json_fail(s, JSON_SCAN_SYNTAX); /* raw control character */
                if (c != '\\')
                        continue;

                if (s->p >= s->end)
                        return json_fail(s, JSON_SCAN_SYNTAX);
                c = *s->p++;
                if (strchr("\"\\/bfnrt", c) && c != '\0')
                        continue;
                if (c != 'u')
                        return json_fail(s, JSON_SCAN_SYNTAX);

                uint32_t u;
                if (!json_scan_hex4(s, &u))
                        return false;
                if (u == 0)
                        s->string_has_nul = true;
                if (u >= 0xdc00 && u <= 0xdfff)
                        return json_fail(s, JSON_SCAN_SURROGATE); /* a low surrogate alone */
                if (u >= 0xd800 && u <= 0xdbff) {
                        /* A high surrogate must be followed by an escaped low one. */
                        if (s->end - s->p < 2)
                                return json_fail(s, JSON_SCAN_SYNTAX); /* cut short */
                        if (s->p[0] != '\\' || s->p[1] != 'u')
                                return json_fail(s, JSON_SCAN_SURROGATE);
                        s->p += 2;
                        if (!json_scan_hex4(s, &u))
                                return false;
                        if (u < 0xdc00 || u > 0xdfff)
                                return json_fail(s, JSON_SCAN_SURROGATE);
                }
        }
}

static bool json_scan_digits(JsonScan *s) {
        const uint8_t *start = s->p;

        while (s->p < s->end && *s->p >= '0' && *s->p <= '9')
                s->p++;
        return s->p > start || json_fail(s, JSON_SCAN_SYNTAX);
}

/* number = [ "-" ] int [ frac ] [ exp ], int = "0" / digit1-9 *DIGIT */
static bool json_scan_number(JsonScan *s) {
        if (*s->p == '-')
                s->p++;
        if (s->p >= s->end)
                return json_fail(s, JSON_SCAN_SYNTAX);
        if (*s->p == '0')
                s->p++;
        else if (!json_scan_digits(s))
                return false;

        if (s->p < s->end && *s->p == '.') {
                s->p++;
                if (!json_scan_digits(s))
                        return false;
        }
        if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
                s->p++;
                if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
                        s->p++;
                if (!json_scan_digits(s))
                        return false;
        }
        return true;
}

static bool json_scan_literal(JsonScan *s, const char *word) {
        size_t l = strlen(word);

        if ((size_t) (s->end - s->p) < l || memcmp(s->p, word, l) != 0)
                return json_fail(s, JSON_SCAN_SYNTAX);
        s->p += l;
        return true;
}

static bool json_scan_value(JsonScan *s, unsigned depth);

/* An object or array at s->p, containers being nested depth deep around it. */
static bool json_scan_container(JsonScan *s, unsigned depth) {
        bool object = *s->p == '{';
        uint8_t close = object ? '}' : ']';

        if (depth >= REQUEST_JSON_MAX_DEPTH)
                return json_fail(s, JSON_SCAN_TOO_DEEP);
        s->p++;

        json_skip_ws(s);
        if (s->p < s->end && *s->p == close) {
                s->p++;
                return true;
        }

        for (;;) {
                if (object) {
                        json_skip_ws(s);
                        if (s->p >= s->end || *s->p != '"')
                                return json_fail(s, JSON_SCAN_SYNTAX);
                        if (!json_scan_string(s))
                                return false;
                        if (s->string_has_nul)
                                s->key_has_nul = true;
                        json_skip_ws(s);
                        if (s->p >= s->end || *s->p != ':')
                                return json_fail(s, JSON_SCAN_SYNTAX);
                        s->p++;
                        s->n_keys++;
                }
                if (!json_scan_value(s, depth + 1))
                        return false;
                json_skip_ws(s);
                if (s->p >= s->end)
                        return json_fail(s, JSON_SCAN_SYNTAX);
                if (*s->p == close) {
                        s->p++;
                        return true;
                }
                if (*s->p != ',')
                        return json_fail(s, JSON_SCAN_SYNTAX);
                s->p++;
        }
}

static bool json_scan_value(JsonScan *s, unsigned depth) {
        json_skip_ws(s);
        if (s->p >= s->end)
                return json_fail(s, JSON_SCAN_SYNTAX);

        switch (*s->p) {
        case '{':
        case '[':
                return json_scan_container(s, depth);
        case '"':
                return json_scan_string(s);
        case 't':
                return json_scan_literal(s, "true");
        case 'f':
                return json_scan_literal(s, "false");
        case 'n':
                return json_scan_literal(s, "null");
        default:
                if (*s->p == '-' || (*s->p >= '0' && *s->p <= '9'))
                        return json_scan_number(s);
                return json_fail(s, JSON_SCAN_SYNTAX);
        }
}

/* Sum of the member counts of all objects in the tree. Equal to the
 * validator's n_keys exactly when no object had a duplicate key: json-c
 * keeps one member per distinct key (dropping the earlier values, and with
 * them any members nested inside those). */
static size_t json_count_members(json_object *o) {
        size_t n = 0;

        switch (json_object_get_type(o)) {
        case json_type_object: {
                json_object_object_foreach(o, key, value) {
                        (void) key;
                        n += 1 + json_count_members(value);
                }
                break;
        }
        case json_type_array:
                for (size_t i = 0; i < json_object_array_length(o); i++)
                        n += json_count_members(json_object_array_get_idx(o, i));
                break;
        default:
                break;
        }
        return n;
}

static const char *json_scan_message(const JsonScan *s) {
        switch (s->error) {
        case JSON_SCAN_TOO_DEEP:
                return "body is nested too deeply";
        case JSON_SCAN_SURROGATE:
                return "body contains an unpaired UTF-16 surrogate escape";
        default:
                return "body is not valid JSON";
        }
}

/* The common part of both bodies: UTF-8, strict JSON, a single object,
 * nothing after it but whitespace, no duplicate keys. Returns 0 and the
 * object in *ret, or -EINVAL/-ENOMEM as documented in request.h. */
static int parse_json_object(const uint8_t *body, size_t size, json_object **ret, char **ret_message) {
        _cleanup_(json_tokener_freep) struct json_tokener *tok = NULL;
        _cleanup_(json_object_putp) json_object *o = NULL;
        const uint8_t *start, *value_end;
        JsonScan s;

        /* json-c takes an int length; the caller's limit is far below. */
        if (size > INT_MAX / 2)
                return fail(ret_message, "body is too large");
        if (size == 0)
                return fail(ret_message, "body is empty");
        if (memchr(body, '\0', size))
                return fail(ret_message, "body contains a NUL byte");
        if (!utf8_is_valid((const char *) body, size))
                return fail(ret_message, "body is not valid UTF-8");

        s = (JsonScan){ .p = body, .end = body + size };
        json_skip_ws(&s);
        start = s.p;
        if (s.p < s.end && *s.p != '{') {
                /* Say "not an object" only for something that is JSON. */
                if (!json_scan_value(&s, 0) || (json_skip_ws(&s), s.p != s.end))
                        return fail(ret_message, json_scan_message(&s));
                return fail(ret_message, "body must be a JSON object");
        }
        if (!json_scan_value(&s, 0))
                return fail(ret_message, json_scan_message(&s));
        value_end = s.p;
        json_skip_ws(&s);
        if (s.p != s.end)
                return fail(ret_message, "body is not valid JSON");

        /* Only the object itself goes to json-c: its idea of whitespace is
         * wider than JSON's, and we have checked what surrounds it. The
         * depth is set above ours so that our limit is the one that bites. */
        tok = json_tokener_new_ex(REQUEST_JSON_MAX_DEPTH + 2);
        if (!tok)
                return -ENOMEM;
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
        o = json_tokener_parse_ex(tok, (const char *) start, (int) (value_end - start));
        if (!o) {
                /* Should not happen after our validation, except on OOM,
                 * which json-c does not tell apart. */
                if (json_tokener_get_error(tok) == json_tokener_success)
                        return -ENOMEM;
                return fail(ret_message, "body is not valid JSON");
        }
        if (!json_object_is_type(o, json_type_object))
                return fail(ret_message, "body must be a JSON object");

        /* json-c keeps keys as C strings, so "question\u0000x" would
         * become "question": such a key is never one we know. */
        if (s.key_has_nul)
                return fail(ret_message, "unknown field");

        if (json_count_members(o) != s.n_keys)
                return fail(ret_message, "body has a duplicate field");

        *ret = TAKE_PTR(o);
        return 0;
}

/* A field name short and plain enough to be named in a message: it cannot
 * carry markup, control characters or anything the sanitizer would have to
 * redact. */
static bool field_name_is_printable(const char *s) {
        size_t l = strlen(s);

        if (l == 0 || l > 31)
                return false;
        for (; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
                      *s == '_' || *s == '-' || *s == '.'))
                        return false;
        return true;
}

static int fail_unknown_field(char **ret_message, const char *key) {
        if (field_name_is_printable(key))
                return failf(ret_message, "unknown field \"%s\"", key);
        return fail(ret_message, "unknown field");
}

static bool is_ascii_space(char c) {
        return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

static int parse_question(json_object *v, char **ret, char **ret_message) {
        const char *s, *e;
        size_t n_chars;
        char *q;

        if (!json_object_is_type(v, json_type_string))
                return fail(ret_message, "question: must be a string");

        s = json_object_get_string(v);
        e = s + json_object_get_string_len(v);

        /* \u0000 decodes to a NUL, which would silently cut the question
         * short wherever it is used as a C string. */
        if (memchr(s, '\0', (size_t) (e - s)))
                return fail(ret_message, "question: must not contain NUL characters");

        while (s < e && is_ascii_space(*s))
                s++;
        while (e > s && is_ascii_space(e[-1]))
                e--;

        /* Characters are code points; the decoded string is valid UTF-8
         * since the body was and unpaired surrogates were refused, but
         * counting checks it once more. */
        if (!utf8_is_valid(s, (size_t) (e - s)))
                return fail(ret_message, "question: is not valid Unicode");
        n_chars = utf8_count(s, (size_t) (e - s));
        if (n_chars < 1 || n_chars > QUERY_QUESTION_MAX_CHARS)
                return fail(ret_message, "question: must be 1 to 4000 characters");

        q = strndup(s, (size_t) (e - s));
        if (!q)
                return -ENOMEM;
        *ret = q;
        return 0;
}

/* C0 controls, DEL and the C1 controls (U+0080..U+009F). */
static bool title_has_control(const uint8_t *s, size_t n) {
        for (size_t i = 0; i < n;) {
                uint32_t cp;
                size_t l = utf8_decode(s + i, n - i, &cp);

                if (l == 0)
                        return true; /* not reached: validated before */
                if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f))
                        return true;
                i += l;
        }
        return false;
}

static int parse_pages(json_object *v, char ***ret, size_t *ret_n, char **ret_message) {
        _cleanup_(strv_freep) char **pages = NULL;
        size_t n;

        if (!json_object_is_type(v, json_type_array))
                return fail(ret_message, "pages: must be an array of strings");

        n = json_object_array_length(v);
        if (n > QUERY_PAGES_MAX)
                return fail(ret_message, "pages: at most 20 titles");

        pages = calloc(n + 1, sizeof(char *));
        if (!pages)
                return -ENOMEM;

        for (size_t i = 0; i < n; i++) {
                json_object *item = json_object_array_get_idx(v, i);
                const char *t;
                size_t l;

                if (!json_object_is_type(item, json_type_string))
                        return failf(ret_message, "pages[%zu]: must be a string", i);

                t = json_object_get_string(item);
                l = (size_t) json_object_get_string_len(item);
                if (l < 1 || l > QUERY_PAGE_TITLE_MAX_BYTES)
                        return failf(ret_message, "pages[%zu]: must be 1 to 255 bytes", i);
                if (!utf8_is_valid(t, l))
                        return failf(ret_message, "pages[%zu]: is not valid Unicode", i);
                if (title_has_control((const uint8_t *) t, l))
                        return failf(ret_message, "pages[%zu]: must not contain control characters", i);

                pages[i] = strndup(t, l);
                if (!pages[i])
                        return -ENOMEM;
        }

        *ret = TAKE_PTR(pages);
        *ret_n = n;
        return 0;
}

/* "qr_" and 32 lowercase hex digits: a record id as the API hands them
 * out. Anything else cannot name a record. */
static int parse_follow_up(json_object *v, char **ret, char **ret_message) {
        const char *s;
        size_t l;

        if (!json_object_is_type(v, json_type_string))
                return fail(ret_message, "follow_up: must be a string");
        s = json_object_get_string(v);
        l = (size_t) json_object_get_string_len(v);
        if (l != QUERY_FOLLOW_UP_LEN || !strneq(s, "qr_", 3))
                return fail(ret_message, "follow_up: must be a query id (qr_ and 32 lowercase hex digits)");
        for (size_t i = 3; i < l; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return fail(
                                ret_message,
                                "follow_up: must be a query id (qr_ and 32 lowercase hex digits)");
        *ret = strndup(s, l);
        return *ret ? 0 : -ENOMEM;
}

/* A field a body may carry, and where its value goes: JSON null is a NULL
 * json_object, so presence is kept apart. */
typedef struct BodyField {
        const char *name;
        json_object **value;
        bool *present;
} BodyField;

/* A body that is one JSON object of the fields named and no other:
 * Content-Type application/json, the object in *ret (the fields' values
 * belong to it), each field's value and presence filled in. Unknown fields
 * are looked for first, in document order, so the message names the first
 * offending one whatever else is wrong. */
static int parse_body_fields(
        const char *content_type,
        const uint8_t *body,
        size_t size,
        const BodyField *fields,
        size_t n_fields,
        json_object **ret,
        char **ret_message) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        int r;

        if (!request_content_type_is_json(content_type))
                return fail(ret_message, "Content-Type must be application/json");
        assert(body || size == 0);

        r = parse_json_object(body, size, &o, ret_message);
        if (r < 0)
                return r;

        json_object_object_foreach(o, key, value) {
                size_t i;

                for (i = 0; i < n_fields && !streq(key, fields[i].name); i++)
                        ;
                if (i == n_fields)
                        return fail_unknown_field(ret_message, key);
                *fields[i].value = value;
                *fields[i].present = true;
        }
        *ret = TAKE_PTR(o);
        return 0;
}

void query_body_done(QueryBody *b) {
        if (!b)
                return;
        free(b->follow_up);
        free(b->question);
        strv_free(b->pages);
        *b = (QueryBody){ .question = NULL };
}

int request_parse_query(
        const char *content_type, const uint8_t *body, size_t size, QueryBody *ret, char **ret_message) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_(query_body_done) QueryBody b = { .question = NULL };
        /* JSON null is a NULL json_object: presence is tracked apart. */
        json_object *question = NULL, *pages = NULL, *follow_up = NULL;
        bool has_question = false, has_pages = false, has_follow_up = false;
        const BodyField fields[] = {
                { "question", &question, &has_question },
                { "pages", &pages, &has_pages },
                { "follow_up", &follow_up, &has_follow_up },
        };
        int r;

        r = parse_body_fields(content_type, body, size, fields, ELEMENTSOF(fields), &o, ret_message);
        if (r < 0)
                return r;

        if (!has_question)
                return fail(ret_message, "question: is required");
        r = parse_question(question, &b.question, ret_message);
        if (r < 0)
                return r;

        if (has_pages) {
                r = parse_pages(pages, &b.pages, &b.n_pages, ret_message);
                if (r < 0)
                        return r;
        } else {
                b.pages = calloc(1, sizeof(char *));
                if (!b.pages)
                        return -ENOMEM;
        }

        if (has_follow_up) {
                r = parse_follow_up(follow_up, &b.follow_up, ret_message);
                if (r < 0)
                        return r;
        }

        *ret = b;
        b = (QueryBody){ .question = NULL };
        return 0;
}

int request_parse_join(const char *content_type, const uint8_t *body, size_t size, char **ret_message) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        int r;

        /* No body at all: what most clients send for a bare POST. */
        if (size == 0)
                return 0;

        r = parse_body_fields(content_type, body, size, NULL, 0, &o, ret_message);
        return r < 0 ? r : 0;
}

void feedback_body_done(FeedbackBody *b) {
        if (!b)
                return;
        free(b->comment);
        *b = (FeedbackBody){ .rating = NULL };
}

/* Control characters a comment may not carry: C0 except tab, line feed
 * and carriage return, DEL and C1. */
static bool comment_has_control(const uint8_t *s, size_t n) {
        for (size_t i = 0; i < n;) {
                uint32_t cp;
                size_t l = utf8_decode(s + i, n - i, &cp);

                if (l == 0)
                        return true;
                if ((cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') || (cp >= 0x7f && cp <= 0x9f))
                        return true;
                i += l;
        }
        return false;
}

static int parse_comment(json_object *v, char **ret, char **ret_message) {
        const char *s, *e;
        size_t n_chars;

        if (!json_object_is_type(v, json_type_string))
                return fail(ret_message, "comment: must be a string");
        s = json_object_get_string(v);
        e = s + json_object_get_string_len(v);
        if (memchr(s, '\0', (size_t) (e - s)))
                return fail(ret_message, "comment: must not contain NUL characters");
        while (s < e && is_ascii_space(*s))
                s++;
        while (e > s && is_ascii_space(e[-1]))
                e--;
        if (!utf8_is_valid(s, (size_t) (e - s)))
                return fail(ret_message, "comment: is not valid Unicode");
        n_chars = utf8_count(s, (size_t) (e - s));
        if (n_chars > FEEDBACK_COMMENT_MAX_CHARS)
                return fail(ret_message, "comment: must be at most 1000 characters");
        if (comment_has_control((const uint8_t *) s, (size_t) (e - s)))
                return fail(ret_message, "comment: must not contain control characters");
        if (n_chars == 0) {
                *ret = NULL;
                return 0;
        }
        *ret = strndup(s, (size_t) (e - s));
        return *ret ? 0 : -ENOMEM;
}

int request_parse_feedback(
        const char *content_type, const uint8_t *body, size_t size, FeedbackBody *ret, char **ret_message) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_(feedback_body_done) FeedbackBody b = { .rating = NULL };
        json_object *rating = NULL, *reason = NULL, *comment = NULL;
        bool has_rating = false, has_reason = false, has_comment = false;
        const BodyField fields[] = {
                { "rating", &rating, &has_rating },
                { "reason", &reason, &has_reason },
                { "comment", &comment, &has_comment },
        };
        ReportReason why;
        const char *v;
        int r;

        r = parse_body_fields(content_type, body, size, fields, ELEMENTSOF(fields), &o, ret_message);
        if (r < 0)
                return r;

        if (!has_rating)
                return fail(ret_message, "rating: is required");
        v = json_object_is_type(rating, json_type_string) ? json_object_get_string(rating) : NULL;
        if (!v || json_object_get_string_len(rating) != (int) strlen(v) ||
            (!streq(v, "up") && !streq(v, "down")))
                return fail(ret_message, "rating: must be \"up\" or \"down\"");
        b.rating = streq(v, "up") ? "up" : "down";

        if (has_reason) {
                v = json_object_is_type(reason, json_type_string) ? json_object_get_string(reason) : NULL;
                why = v && json_object_get_string_len(reason) == (int) strlen(v) ?
                        report_reason_from_string(v) :
                        _REPORT_REASON_INVALID;
                if (why < 0)
                        return fail(
                                ret_message,
                                "reason: must be one of \"wrong\", \"incomplete\", \"not_what_i_asked\", "
                                "\"bad_sources\", \"other\"");
                if (streq(b.rating, "up"))
                        return fail(ret_message, "reason: only with the rating \"down\"");
                b.reason = report_reason_to_string(why);
        }

        if (has_comment) {
                r = parse_comment(comment, &b.comment, ret_message);
                if (r < 0)
                        return r;
        }

        *ret = b;
        b = (FeedbackBody){ .rating = NULL };
        return 0;
}

void token_body_done(TokenBody *b) {
        b->name = mfree(b->name);
}

int request_parse_token(
        const char *content_type, const uint8_t *body, size_t size, TokenBody *ret, char **ret_message) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_(token_body_done) TokenBody b = { .name = NULL };
        json_object *name = NULL, *days = NULL;
        bool has_name = false, has_days = false;
        const BodyField fields[] = {
                { "name", &name, &has_name },
                { "expires_in_days", &days, &has_days },
        };
        const char *s;
        size_t n;
        int r;

        r = parse_body_fields(content_type, body, size, fields, ELEMENTSOF(fields), &o, ret_message);
        if (r < 0)
                return r;

        if (!has_name)
                return fail(ret_message, "name: is required");
        if (!json_object_is_type(name, json_type_string))
                return fail(ret_message, "name: must be a string");
        s = json_object_get_string(name);
        n = (size_t) json_object_get_string_len(name);
        if (memchr(s, '\0', n))
                return fail(ret_message, "name: must not contain NUL characters");
        if (!utf8_is_valid(s, n))
                return fail(ret_message, "name: is not valid Unicode");
        if (comment_has_control((const uint8_t *) s, n) || memchr(s, '\t', n) || memchr(s, '\n', n) ||
            memchr(s, '\r', n))
                return fail(ret_message, "name: must not contain control characters");
        if (n == 0 || is_ascii_space(s[0]) || is_ascii_space(s[n - 1]))
                return fail(ret_message, "name: must not be empty or begin or end with a space");
        if (utf8_count(s, n) > TOKEN_NAME_MAX_CHARS)
                return fail(ret_message, "name: must be at most 64 characters");
        b.name = strndup(s, n);
        if (!b.name)
                return -ENOMEM;

        if (has_days) {
                int64_t v;

                /* An integer as JSON writes it: 30, not 30.0 or "30". */
                if (!json_object_is_type(days, json_type_int))
                        return fail(ret_message, "expires_in_days: must be an integer");
                errno = 0;
                v = json_object_get_int64(days);
                if (errno != 0 || v < 1 || v > TOKEN_DAYS_MAX)
                        return fail(ret_message, "expires_in_days: must be an integer from 1 to 3650");
                b.expires_in_days = (unsigned) v;
        }

        *ret = b;
        b = (TokenBody){ .name = NULL };
        return 0;
}
