/* SPDX-License-Identifier: MIT */
/* src/api/export.c: a conversation as Markdown, pinned, and hostile text
 * in questions, titles, quotes and URLs. */

#include <stdlib.h>
#include <string.h>

#include "api/export.h"
#include "shared/macro.h"
#include "shared/source.h"
#include "tests.h"

/* The record's lists from their stored text, as the store reads them. */
static void parse_lists(HistoryRecord *r, const char *sources, const char *citations) {
        ASSERT_OK(source_parse_array(sources, &r->sources, &r->n_sources));
        ASSERT_OK(source_citation_parse_array(citations, &r->citations, &r->n_citations));
}

static void free_lists(HistoryRecord *r) {
        r->sources = source_free_many(r->sources, r->n_sources);
        r->citations = source_citation_free_many(r->citations, r->n_citations);
}

TEST(pinned) {
        HistoryArtifactInfo art = {
                .id = (char *) "af_0123456789abcdef0123456789abcdef",
                .name = (char *) "kg [1].csv",
                .media_type = (char *) "text/csv",
                .size_bytes = 12,
                .sha256 = (char *) "ab",
        };
        HistoryRecord turns[] = {
                {
                        .id = (char *) "qr_1",
                        .status = (char *) "succeeded",
                        .question = (char *) "Who *roasts*\nin Lyon?",
                        .answer = (char *) "**Ines** roasts [1]. <script>",
                        .artifacts = &art,
                        .n_artifacts = 1,
                        .created_at = 0,
                },
                {
                        .id = (char *) "qr_2",
                        .status = (char *) "failed",
                        .question = (char *) "And [then](javascript:x)?",
                        .error_message = (char *) "timed out",
                        .created_at = 1000000,
                },
        };
        _cleanup_free_ char *md = NULL;

        parse_lists(
                &turns[0],
                "[{\"title\":\"Lyon\",\"url\":\"https://w.example/wiki/Lyon\",\"revision_id\":7}]",
                "[{\"n\":1,\"title\":\"Lyon\",\"revision_id\":7,"
                "\"quote\":\"Ines roasts.\",\"status\":\"verified\","
                "\"url\":\"https://w.example/index.php?oldid=7#:~:text=Ines%20roasts.\"},"
                "{\"n\":2,\"title\":\"Paris\",\"revision_id\":null,"
                "\"quote\":\"x\",\"status\":\"not_read\",\"url\":null}]");
        parse_lists(&turns[1], "[]", "[]");
        ASSERT_OK(export_markdown(turns, 2, "/api/v1/shared/sh_x/artifacts/", &md));
        ASSERT_EQ_STR(
                md,
                "# Who \\*roasts\\* in Lyon?\n"
                "\n## Question 1\n\n"
                "> Who \\*roasts\\*\n> in Lyon?\n"
                "\nAsked 1970-01-01T00:00:00.000Z\n"
                "\n**Answer**\n\n"
                "**Ines** roasts [1]. \\<script>\n"
                "\n**Citations**\n\n"
                "- \\[1\\] \"Ines roasts\\.\", [Lyon, revision 7](<https://w.example/index.php?oldid=7#:~:text=Ines%20roasts.>), "
                "verified\n"
                "- \\[2\\] \"x\", Paris, not verified (not\\_read)\n"
                "\n**Sources**\n\n"
                "- [Lyon](<https://w.example/wiki/Lyon>), revision 7\n"
                "\n**Files**\n\n"
                "- [kg \\[1\\]\\.csv](</api/v1/shared/sh_x/artifacts/af_0123456789abcdef0123456789abcdef>) (text/csv, 12 "
                "bytes, SHA\\-256 ab)\n"
                "\n## Question 2\n\n"
                "> And \\[then\\]\\(javascript\\:x\\)?\n"
                "\nAsked 1970-01-01T00:00:01.000Z\n"
                "\n**Answer**\n\n"
                "(No answer: timed out)\n");

        ASSERT_EQ_INT(export_markdown(turns, 0, NULL, &md), -EINVAL);
        free_lists(&turns[0]);
        free_lists(&turns[1]);
}

/* Links only to http(s), destinations that cannot be broken out of. */
TEST(hostile_links) {
        HistoryRecord t = {
                .id = (char *) "qr_1",
                .status = (char *) "succeeded",
                .question = (char *) "q",
                .answer = (char *) "a",
        };
        _cleanup_free_ char *md = NULL;

        parse_lists(
                &t,
                "[{\"title\":\"](x)\",\"url\":\"javascript:alert(1)\"},"
                "{\"title\":\"T\",\"url\":\"https://w.example/a b>c<d\\\\e\\n\"}]",
                "[{\"n\":1,\"title\":\"T\",\"quote\":\"q\",\"status\":\"verified\","
                "\"url\":\"data:text/html,x\"}]");
        ASSERT_OK(export_markdown(&t, 1, NULL, &md));
        ASSERT_TRUE(!strstr(md, "javascript"));
        ASSERT_TRUE(!strstr(md, "data:"));
        ASSERT_TRUE(strstr(md, "- \\]\\(x\\)\n"));
        ASSERT_TRUE(strstr(md, "(<https://w.example/a%20b%3Ec%3Cd%5Ce%0A>)"));
        /* Verified, but not a web address: said, not linked. */
        ASSERT_TRUE(strstr(md, "- \\[1\\] \"q\", T, verified\n"));
        free_lists(&t);
}

DEFINE_TEST_MAIN()
