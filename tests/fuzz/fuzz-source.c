/* SPDX-License-Identifier: MIT */
/* A record's stored sources and citations (shared/source.h) from arbitrary
 * bytes: the text the store reads back from a file that is not the
 * daemon's alone. The first byte picks the list (even: sources, odd:
 * citations), the rest is the text (cut at its first NUL, as SQLite's text
 * would be). Checks: the result is 0, -EINVAL or -ENOMEM; on success at
 * most SOURCES_MAX entries, each with its title (a citation: its quote
 * too), a status in range or invalid; the writer's JSON parses back to
 * the same entries and writes the same bytes again (a record read, shown
 * and read again does not change); and the Markdown export of a record
 * with them is made. */

#include <stdint.h>
#include <string.h>

#include "api/export.h"
#include "shared/json-util.h"
#include "shared/macro.h"
#include "shared/source.h"
#include "fuzz.h"

static char *text_of(json_object *o) {
        const char *t = o ? json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN) : NULL;

        return t ? strdup(t) : NULL;
}

static void export_record(const Source *s, size_t n_s, const SourceCitation *c, size_t n_c) {
        HistoryRecord r = {
                .id = (char *) "qr_x",
                .status = (char *) "succeeded",
                .question = (char *) "q",
                .answer = (char *) "a",
                .sources = (Source *) s,
                .n_sources = n_s,
                .citations = (SourceCitation *) c,
                .n_citations = n_c,
        };
        char *md = NULL;

        CHECK(export_markdown(&r, 1, "/a/", &md) >= 0 || md == NULL);
        free(md);
}

static void check_sources(const char *text) {
        Source *s = NULL, *again = NULL;
        size_t n = 0, n_again = 0;
        json_object *o;
        char *first, *second;
        int r;

        r = source_parse_array(text, &s, &n);
        CHECK(r == 0 || r == -EINVAL || r == -ENOMEM);
        if (r < 0)
                return;
        CHECK(n <= SOURCES_MAX);
        CHECK((n == 0) == (s == NULL));
        for (size_t i = 0; i < n; i++)
                CHECK(s[i].title);
        o = source_to_json(s, n);
        first = text_of(o);
        json_object_put(o);
        if (first) {
                CHECK(source_parse_array(first, &again, &n_again) >= 0);
                CHECK(n_again == n);
                for (size_t i = 0; i < n; i++) {
                        CHECK(strcmp(again[i].title, s[i].title) == 0);
                        CHECK(!again[i].url == !s[i].url);
                        CHECK(!s[i].url || strcmp(again[i].url, s[i].url) == 0);
                        CHECK(again[i].has_revision_id == s[i].has_revision_id);
                        CHECK(!s[i].has_revision_id || again[i].revision_id == s[i].revision_id);
                }
                o = source_to_json(again, n_again);
                second = text_of(o);
                json_object_put(o);
                CHECK(!second || strcmp(first, second) == 0);
                free(second);
                source_free_many(again, n_again);
                free(first);
        }
        export_record(s, n, NULL, 0);
        source_free_many(s, n);
}

static void check_citations(const char *text) {
        SourceCitation *c = NULL, *again = NULL;
        size_t n = 0, n_again = 0;
        json_object *o;
        char *first, *second;
        int r;

        r = source_citation_parse_array(text, &c, &n);
        CHECK(r == 0 || r == -EINVAL || r == -ENOMEM);
        if (r < 0)
                return;
        CHECK(n <= SOURCES_MAX);
        CHECK((n == 0) == (c == NULL));
        for (size_t i = 0; i < n; i++) {
                CHECK(c[i].title && c[i].quote);
                CHECK(c[i].status == _CITATION_STATUS_INVALID ||
                      (c[i].status >= 0 && c[i].status < _CITATION_STATUS_MAX));
        }
        o = source_citation_to_json(c, n);
        first = text_of(o);
        json_object_put(o);
        if (first) {
                CHECK(source_citation_parse_array(first, &again, &n_again) >= 0);
                CHECK(n_again == n);
                for (size_t i = 0; i < n; i++) {
                        CHECK(again[i].n == c[i].n && again[i].status == c[i].status);
                        CHECK(strcmp(again[i].quote, c[i].quote) == 0);
                        CHECK(!again[i].section == !c[i].section);
                }
                o = source_citation_to_json(again, n_again);
                second = text_of(o);
                json_object_put(o);
                CHECK(!second || strcmp(first, second) == 0);
                free(second);
                source_citation_free_many(again, n_again);
                free(first);
        }
        export_record(NULL, 0, c, n);
        source_citation_free_many(c, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *text;

        if (size < 1 || size > 1024 * 1024)
                return 0;
        text = strndup((const char *) data + 1, size - 1);
        if (!text)
                return 0;
        if (data[0] % 2 == 0)
                check_sources(text);
        else
                check_citations(text);
        free(text);
        return 0;
}
