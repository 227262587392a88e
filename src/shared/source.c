/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "shared/json-util.h"
#include "shared/source.h"

static const char *const citation_status_table[_CITATION_STATUS_MAX] = {
        [CITATION_VERIFIED] = "verified",
        [CITATION_NOT_FOUND] = "not_found",
        [CITATION_NOT_READ] = "not_read",
        [CITATION_TOO_SHORT] = "too_short",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(citation_status, CitationStatus)

CitationStatus citation_status_from_string(const char *s) {
        if (!s)
                return _CITATION_STATUS_INVALID;
        for (CitationStatus st = 0; st < _CITATION_STATUS_MAX; st++)
                if (streq(s, citation_status_table[st]))
                        return st;
        return _CITATION_STATUS_INVALID;
}

Source *source_free_many(Source *sources, size_t n) {
        for (size_t i = 0; sources && i < n; i++) {
                free(sources[i].title);
                free(sources[i].url);
        }
        free(sources);
        return NULL;
}

SourceCitation *source_citation_free_many(SourceCitation *citations, size_t n) {
        for (size_t i = 0; citations && i < n; i++) {
                free(citations[i].title);
                free(citations[i].quote);
                free(citations[i].url);
                free(citations[i].section);
        }
        free(citations);
        return NULL;
}

/* A copy of s in *ret, NULL for NULL. Returns 0 or -ENOMEM. */
static int source_strdup(const char *s, char **ret) {
        *ret = NULL;
        if (!s)
                return 0;
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

int source_copy_many(const Source *sources, size_t n, Source **ret) {
        Source *c;

        assert(sources || n == 0);
        assert(ret);

        if (n == 0) {
                *ret = NULL;
                return 0;
        }
        c = calloc(n, sizeof *c);
        if (!c)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                c[i] = (Source){
                        .revision_id = sources[i].revision_id,
                        .has_revision_id = sources[i].has_revision_id,
                };
                if (source_strdup(sources[i].title, &c[i].title) < 0 ||
                    source_strdup(sources[i].url, &c[i].url) < 0) {
                        source_free_many(c, n);
                        return -ENOMEM;
                }
        }
        *ret = c;
        return 0;
}

/* ---- parsing ---- */

/* o[key] when it is a string, else NULL (borrowed from o). */
static const char *source_get_string(json_object *o, const char *key) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
                return NULL;
        return json_object_get_string(v);
}

/* o[key] when it is an integer from 0 to max. */
static bool source_get_uint(json_object *o, const char *key, uint64_t max, uint64_t *ret) {
        json_object *v;
        int64_t i;

        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
                return false;
        /* json-c keeps what is above INT64_MAX as a uint64, the rest as an int64. */
        i = json_object_get_int64(v);
        if (i == INT64_MAX) {
                uint64_t u = json_object_get_uint64(v);

                if (u > max)
                        return false;
                *ret = u;
                return true;
        }
        if (i < 0 || (uint64_t) i > max)
                return false;
        *ret = (uint64_t) i;
        return true;
}

static int source_parse_text(const char *text, json_object **ret) {
        _cleanup_(json_tokener_freep) json_tokener *tok = NULL;
        json_object *o;
        size_t n;

        if (!text) {
                *ret = NULL;
                return 0;
        }
        n = strlen(text);
        if (n > INT_MAX)
                return -EINVAL;
        tok = json_tokener_new();
        if (!tok)
                return -ENOMEM;
        o = json_tokener_parse_ex(tok, text, (int) n);
        if (!o || json_tokener_get_error(tok) != json_tokener_success ||
            !json_object_is_type(o, json_type_array) ||
            !json_rest_is_whitespace(text, json_tokener_get_parse_end(tok), n)) {
                json_object_put(o);
                return -EINVAL;
        }
        *ret = o;
        return 0;
}

/* The entries of array to read: at most SOURCES_MAX. */
static size_t source_entries(json_object *array) {
        return MIN(json_object_array_length(array), (size_t) SOURCES_MAX);
}

/* Reads one entry e into t: 1 if it is one, 0 if it is skipped (t is left
 * zero), -ENOMEM with t partly filled (freed with the others). */
typedef int (*SourceEntryRead)(json_object *e, void *t);
typedef void (*SourceFreeMany)(void *entries, size_t n);

/* The entries of array read into one allocation of up to SOURCES_MAX
 * elements of size bytes: NULL and 0 when none is kept. */
static int source_array_read(
        json_object *array, size_t size, SourceEntryRead read, SourceFreeMany free_many, void **ret, size_t *ret_n) {
        char *v = NULL;
        size_t n = 0, m;

        assert(ret);
        assert(ret_n);

        if (!json_object_is_type(array, json_type_array))
                return -EINVAL;
        m = source_entries(array);
        if (m > 0) {
                v = calloc(m, size);
                if (!v)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < m; i++) {
                int r = read(json_object_array_get_idx(array, i), v + n * size);

                if (r == 0)
                        continue;
                n++;
                if (r < 0) {
                        free_many(v, n);
                        return r;
                }
        }
        if (n == 0) {
                free(v);
                v = NULL;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

static int source_entry_read(json_object *e, void *p) {
        const char *title = source_get_string(e, "title");
        Source *t = p;

        if (!json_object_is_type(e, json_type_object) || !title)
                return 0;
        t->has_revision_id = source_get_uint(e, "revision_id", UINT64_MAX, &t->revision_id);
        if (source_strdup(title, &t->title) < 0 || source_strdup(source_get_string(e, "url"), &t->url) < 0)
                return -ENOMEM;
        return 1;
}

static void source_free_many_void(void *p, size_t n) {
        source_free_many(p, n);
}

int source_from_json(json_object *array, Source **ret, size_t *ret_n) {
        void *v = NULL;
        int r;

        assert(ret);
        r = source_array_read(array, sizeof(Source), source_entry_read, source_free_many_void, &v, ret_n);
        if (r < 0)
                return r;
        *ret = v;
        return 0;
}

static int source_citation_entry_read(json_object *e, void *p) {
        const char *title = source_get_string(e, "title"), *quote = source_get_string(e, "quote");
        SourceCitation *t = p;
        uint64_t num = 0;

        if (!json_object_is_type(e, json_type_object) || !title || !quote)
                return 0;
        (void) source_get_uint(e, "n", INT_MAX, &num);
        t->n = (unsigned) num;
        t->has_revision_id = source_get_uint(e, "revision_id", UINT64_MAX, &t->revision_id);
        t->status = citation_status_from_string(source_get_string(e, "status"));
        if (source_strdup(title, &t->title) < 0 || source_strdup(quote, &t->quote) < 0 ||
            source_strdup(source_get_string(e, "url"), &t->url) < 0 ||
            source_strdup(source_get_string(e, "section"), &t->section) < 0)
                return -ENOMEM;
        return 1;
}

static void source_citation_free_many_void(void *p, size_t n) {
        source_citation_free_many(p, n);
}

int source_citation_from_json(json_object *array, SourceCitation **ret, size_t *ret_n) {
        void *v = NULL;
        int r;

        assert(ret);
        r = source_array_read(
                array,
                sizeof(SourceCitation),
                source_citation_entry_read,
                source_citation_free_many_void,
                &v,
                ret_n);
        if (r < 0)
                return r;
        *ret = v;
        return 0;
}

/* text read as source_array_read() reads an array; none for NULL or empty text. */
static int source_array_parse(
        const char *text, size_t size, SourceEntryRead read, SourceFreeMany free_many, void **ret, size_t *ret_n) {
        _cleanup_(json_object_putp) json_object *a = NULL;
        int r;

        assert(ret);
        assert(ret_n);

        r = source_parse_text(text, &a);
        if (r < 0)
                return r;
        if (!a) {
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        return source_array_read(a, size, read, free_many, ret, ret_n);
}

int source_parse_array(const char *text, Source **ret, size_t *ret_n) {
        void *v = NULL;
        int r;

        assert(ret);
        r = source_array_parse(text, sizeof(Source), source_entry_read, source_free_many_void, &v, ret_n);
        if (r < 0)
                return r;
        *ret = v;
        return 0;
}

int source_citation_parse_array(const char *text, SourceCitation **ret, size_t *ret_n) {
        void *v = NULL;
        int r;

        assert(ret);
        r = source_array_parse(
                text, sizeof(SourceCitation), source_citation_entry_read, source_citation_free_many_void, &v, ret_n);
        if (r < 0)
                return r;
        *ret = v;
        return 0;
}

/* ---- writing ---- */

/* o[key] = s, a JSON null for NULL. */
static int source_add_string(json_object *o, const char *key, const char *s) {
        if (!s)
                return json_object_object_add(o, key, NULL) < 0 ? -ENOMEM : 0;
        return json_add(o, key, json_string(s));
}

static int source_add_revision(json_object *o, bool known, uint64_t revision_id) {
        if (!known)
                return json_object_object_add(o, "revision_id", NULL) < 0 ? -ENOMEM : 0;
        return json_add(o, "revision_id", json_object_new_uint64(revision_id));
}

static json_object *source_entry_to_json(const Source *s) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();

        if (!o || json_add(o, "title", json_string(s->title)) < 0 || source_add_string(o, "url", s->url) < 0 ||
            source_add_revision(o, s->has_revision_id, s->revision_id) < 0)
                return NULL;
        return TAKE_PTR(o);
}

static json_object *source_citation_entry_to_json(const SourceCitation *c) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();

        if (!o || json_add(o, "n", json_object_new_int((int) MIN(c->n, (unsigned) INT_MAX))) < 0 ||
            json_add(o, "title", json_string(c->title)) < 0 ||
            source_add_revision(o, c->has_revision_id, c->revision_id) < 0 ||
            json_add(o, "quote", json_string(c->quote)) < 0 ||
            source_add_string(o, "status", citation_status_to_string(c->status)) < 0 ||
            source_add_string(o, "url", c->url) < 0 || source_add_string(o, "section", c->section) < 0)
                return NULL;
        return TAKE_PTR(o);
}

json_object *source_to_json(const Source *sources, size_t n) {
        _cleanup_(json_object_putp) json_object *a = json_object_new_array_ext((int) MIN(n, (size_t) INT_MAX));

        assert(sources || n == 0);

        if (!a)
                return NULL;
        for (size_t i = 0; i < n; i++)
                if (json_append(a, source_entry_to_json(&sources[i])) < 0)
                        return NULL;
        return TAKE_PTR(a);
}

json_object *source_citation_to_json(const SourceCitation *citations, size_t n) {
        _cleanup_(json_object_putp) json_object *a = json_object_new_array_ext((int) MIN(n, (size_t) INT_MAX));

        assert(citations || n == 0);

        if (!a)
                return NULL;
        for (size_t i = 0; i < n; i++)
                if (json_append(a, source_citation_entry_to_json(&citations[i])) < 0)
                        return NULL;
        return TAKE_PTR(a);
}
