/* SPDX-License-Identifier: MIT */
/* src/shared/source.c: a record's sources and citations from their stored
 * JSON and back, byte for byte; hostile stored text (not an array, wrong
 * types, missing fields, huge arrays). */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shared/json-util.h"
#include "shared/macro.h"
#include "shared/source.h"
#include "shared/strbuf.h"
#include "tests.h"

/* What the pipeline stores (the agent's sources, citation_answer()'s list). */
static const char stored_sources[] =
        "[{\"title\":\"B\\u00e4r \\/ \\\"x\\\"\",\"url\":\"https:\\/\\/w.example\\/wiki\\/B%C3%A4r\","
        "\"revision_id\":9007199254740993},{\"title\":\"Apple\",\"url\":\"\",\"revision_id\":0}]";
static const char stored_citations[] =
        "[{\"n\":1,\"title\":\"Apple\",\"revision_id\":7,\"quote\":\"Apples are pomes.\",\"status\":\"verified\","
        "\"url\":\"http://w.example/index.php?oldid=7#:~:text=Apples\",\"section\":\"Fruit\"},"
        "{\"n\":2,\"title\":\"Nope\",\"revision_id\":null,\"quote\":\"\\u0001 \xe2\x82\xac\",\"status\":\"not_read\","
        "\"url\":null,\"section\":null},"
        "{\"n\":3,\"title\":\"Apple\",\"revision_id\":7,\"quote\":\"x\",\"status\":\"too_short\","
        "\"url\":\"http://w.example/index.php?oldid=7\",\"section\":null},"
        "{\"n\":999,\"title\":\"Apple\",\"revision_id\":18446744073709551615,\"quote\":\"y\",\"status\":\"not_found\","
        "\"url\":\"u\",\"section\":null}]";

/* text through json-c alone, as the record's JSON showed it before the
 * struct: the bytes the writers must give. */
static char *json_c_round_trip(const char *text) {
        _cleanup_(json_object_putp) json_object *o = json_tokener_parse(text);

        ASSERT_TRUE(o);
        return strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
}

static char *sources_text(const char *text) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        Source *s = NULL;
        size_t n = 0;

        ASSERT_OK(source_parse_array(text, &s, &n));
        o = source_to_json(s, n);
        ASSERT_TRUE(o);
        source_free_many(s, n);
        return strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
}

static char *citations_text(const char *text) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        SourceCitation *c = NULL;
        size_t n = 0;

        ASSERT_OK(source_citation_parse_array(text, &c, &n));
        o = source_citation_to_json(c, n);
        ASSERT_TRUE(o);
        source_citation_free_many(c, n);
        return strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
}

TEST(sources_round_trip) {
        _cleanup_free_ char *want = json_c_round_trip(stored_sources), *got = sources_text(stored_sources);
        Source *s = NULL;
        size_t n = 0;

        ASSERT_EQ_STR(got, want);

        ASSERT_OK(source_parse_array(stored_sources, &s, &n));
        ASSERT_EQ_INT(n, 2);
        ASSERT_EQ_STR(s[0].title, "B\xc3\xa4r / \"x\"");
        ASSERT_EQ_STR(s[0].url, "https://w.example/wiki/B%C3%A4r");
        ASSERT_TRUE(s[0].has_revision_id);
        ASSERT_TRUE(s[0].revision_id == 9007199254740993ULL);
        ASSERT_EQ_STR(s[1].url, "");
        ASSERT_TRUE(s[1].has_revision_id && s[1].revision_id == 0);
        source_free_many(s, n);
}

TEST(citations_round_trip) {
        _cleanup_free_ char *want = json_c_round_trip(stored_citations),
                            *got = citations_text(stored_citations);
        SourceCitation *c = NULL;
        size_t n = 0;

        ASSERT_EQ_STR(got, want);

        ASSERT_OK(source_citation_parse_array(stored_citations, &c, &n));
        ASSERT_EQ_INT(n, 4);
        ASSERT_EQ_INT(c[0].n, 1);
        ASSERT_TRUE(c[0].status == CITATION_VERIFIED);
        ASSERT_EQ_STR(c[0].section, "Fruit");
        ASSERT_TRUE(!c[1].has_revision_id && c[1].url == NULL && c[1].section == NULL);
        ASSERT_TRUE(c[1].status == CITATION_NOT_READ);
        ASSERT_EQ_STR(c[1].quote, "\x01 \xe2\x82\xac");
        ASSERT_TRUE(c[2].status == CITATION_TOO_SHORT);
        ASSERT_TRUE(c[3].status == CITATION_NOT_FOUND);
        ASSERT_TRUE(c[3].has_revision_id && c[3].revision_id == UINT64_MAX);
        ASSERT_EQ_INT(c[3].n, 999);
        source_citation_free_many(c, n);
}

TEST(empty) {
        _cleanup_free_ char *a = sources_text("[]"), *b = citations_text(" [ ]\n");
        Source *s = (Source *) 1;
        size_t n = 1;

        ASSERT_EQ_STR(a, "[]");
        ASSERT_EQ_STR(b, "[]");
        /* NULL is what an old record without the column has: none. */
        ASSERT_OK(source_parse_array(NULL, &s, &n));
        ASSERT_TRUE(s == NULL && n == 0);
        ASSERT_OK(source_parse_array("[]", &s, &n));
        ASSERT_TRUE(s == NULL && n == 0);
}

/* Text that is not exactly one array: -EINVAL, *ret untouched. */
TEST(not_an_array) {
        static const char *const bad[] = {
                "",       " ",         "{}", "nope", "1",     "null",
                "\"[]\"", "[1] x",     "[",  "[]]",  "[] []", "[{\"title\":\"x\"}",
                "\xff",   "[\"\xff\"",
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                Source *s = (Source *) 1;
                SourceCitation *c = (SourceCitation *) 1;
                size_t n = 7;

                ASSERT_EQ_INT(source_parse_array(bad[i], &s, &n), -EINVAL);
                ASSERT_EQ_INT(source_citation_parse_array(bad[i], &c, &n), -EINVAL);
                ASSERT_TRUE(s == (Source *) 1 && c == (SourceCitation *) 1 && n == 7);
        }
        ASSERT_EQ_INT(source_from_json(NULL, &(Source *){ NULL }, &(size_t){ 0 }), -EINVAL);
}

/* Entries that are not objects or lack their title (a citation: its quote
 * too) are skipped; a value of the wrong type is null. */
TEST(wrong_types_and_missing_fields) {
        /* json-c reads an integer past UINT64_MAX as UINT64_MAX (D), and
         * the last of two equal keys (F). */
        static const char sources[] =
                "[1, \"x\", null, [], {}, {\"title\": 5}, {\"title\": null},"
                " {\"title\": \"A\", \"url\": 7, \"revision_id\": \"12\"},"
                " {\"title\": \"B\", \"revision_id\": -1},"
                " {\"title\": \"C\", \"revision_id\": 1.5e3, \"extra\": [true]},"
                " {\"title\": \"D\", \"revision_id\": 18446744073709551616},"
                " {\"url\": \"u\", \"revision_id\": 3}, {\"title\": \"E\", \"title\": \"F\"}]";
        static const char citations[] =
                "[{\"title\": \"no quote\"}, {\"quote\": \"no title\"},"
                " {\"n\": \"1\", \"title\": \"A\", \"quote\": \"q\", \"status\": \"maybe\", \"url\": [],"
                " \"section\": 3, \"revision_id\": true},"
                " {\"n\": -4, \"title\": \"B\", \"quote\": \"\", \"status\": 1},"
                " {\"n\": 4294967296, \"title\": \"C\", \"quote\": \"q\", \"status\": \"VERIFIED\"}]";
        _cleanup_free_ char *s_text = sources_text(sources), *c_text = citations_text(citations);

        ASSERT_EQ_STR(
                s_text,
                "[{\"title\":\"A\",\"url\":null,\"revision_id\":null},{\"title\":\"B\",\"url\":null,\"revision_id\":"
                "null},{\"title\":\"C\",\"url\":null,\"revision_id\":null},{\"title\":\"D\",\"url\":null,"
                "\"revision_id\":18446744073709551615},{\"title\":\"F\",\"url\":null,\"revision_id\":null}]");
        ASSERT_EQ_STR(
                c_text,
                "[{\"n\":0,\"title\":\"A\",\"revision_id\":null,\"quote\":\"q\",\"status\":null,\"url\":null,"
                "\"section\":null},{\"n\":0,\"title\":\"B\",\"revision_id\":null,\"quote\":\"\",\"status\":null,"
                "\"url\":null,\"section\":null},{\"n\":0,\"title\":\"C\",\"revision_id\":null,\"quote\":\"q\","
                "\"status\":null,\"url\":null,\"section\":null}]");
}

/* A huge array: at most SOURCES_MAX entries, the rest dropped. */
TEST(huge_array) {
        _cleanup_(strbuf_done) StrBuf b = { 0 };
        _cleanup_free_ char *text = NULL;
        Source *s = NULL;
        SourceCitation *c = NULL;
        size_t n = 0;

        (void) strbuf_puts(&b, "[");
        for (unsigned i = 0; i < 3 * SOURCES_MAX; i++)
                strbuf_printf(
                        &b, "%s{\"title\":\"P%u\",\"quote\":\"q\",\"revision_id\":%u}", i ? "," : "", i, i);
        (void) strbuf_puts(&b, "]");
        text = strbuf_steal(&b);
        ASSERT_TRUE(text);

        ASSERT_OK(source_parse_array(text, &s, &n));
        ASSERT_EQ_INT(n, SOURCES_MAX);
        ASSERT_EQ_STR(s[SOURCES_MAX - 1].title, "P1023");
        source_free_many(s, n);
        ASSERT_OK(source_citation_parse_array(text, &c, &n));
        ASSERT_EQ_INT(n, SOURCES_MAX);
        source_citation_free_many(c, n);

        /* Deeper than json-c's nesting limit: not an array it can read. */
        free(text);
        text = malloc(20001);
        ASSERT_TRUE(text);
        memset(text, '[', 20000);
        text[20000] = 0;
        ASSERT_EQ_INT(source_parse_array(text, &s, &n), -EINVAL);
}

TEST(copy) {
        Source *s = NULL, *c = NULL;
        size_t n = 0;

        ASSERT_OK(source_parse_array(stored_sources, &s, &n));
        ASSERT_OK(source_copy_many(s, n, &c));
        ASSERT_TRUE(c && c != s);
        for (size_t i = 0; i < n; i++) {
                ASSERT_EQ_STR(c[i].title, s[i].title);
                ASSERT_EQ_STR(c[i].url, s[i].url);
                ASSERT_TRUE(c[i].title != s[i].title);
                ASSERT_TRUE(c[i].revision_id == s[i].revision_id);
        }
        source_free_many(c, n);
        source_free_many(s, n);
        ASSERT_OK(source_copy_many(NULL, 0, &c));
        ASSERT_TRUE(c == NULL);
}

TEST(status_names) {
        for (CitationStatus st = 0; st < _CITATION_STATUS_MAX; st++)
                ASSERT_TRUE(citation_status_from_string(citation_status_to_string(st)) == st);
        ASSERT_TRUE(citation_status_from_string(NULL) == _CITATION_STATUS_INVALID);
        ASSERT_TRUE(citation_status_from_string("Verified") == _CITATION_STATUS_INVALID);
        ASSERT_TRUE(citation_status_to_string(_CITATION_STATUS_INVALID) == NULL);
}

DEFINE_TEST_MAIN()
