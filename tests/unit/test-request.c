/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdint.h>

#include "shared/macro.h"
#include "api/request.h"
#include "tests.h"

#define JSON "application/json"

TEST(content_type) {
        static const char *const good[] = {
                "application/json",
                "APPLICATION/JSON",
                "Application/Json",
                "application/json;charset=utf-8",
                "application/json;charset=UTF-8",
                "application/json; charset=utf-8",
                "application/json ; charset=utf-8",
                "application/json;\tcharset=utf-8",
                "application/json; CHARSET=UTF-8",
                "application/json; charset=\"utf-8\"",
                "application/json; charset=\"UTF-8\"",
                "application/json; charset=utf-8; charset=utf-8",
                "application/json;",
                "application/json; ",
                "application/json;;charset=utf-8",
                " application/json ",
                "\tapplication/json\t",
        };
        static const char *const bad[] = {
                "",
                " ",
                "text/plain",
                "text/json",
                "application/jso",
                "application/jsonx",
                "application/json x",
                "application/json+x",
                "application/json-patch+json",
                "application/ld+json",
                "application/x-www-form-urlencoded",
                "multipart/form-data; boundary=x",
                "application/json; charset=latin1",
                "application/json; charset=iso-8859-1",
                "application/json; charset=utf-16",
                "application/json; charset=utf-8x",
                "application/json; charset=utf8",
                "application/json; charset=",
                "application/json; charset",
                "application/json; charset = utf-8",
                "application/json; charset=\"utf-8",
                "application/json; charset=\"utf-8\"x",
                "application/json; charset='utf-8'",
                "application/json; boundary=x",
                "application/json; charset=utf-8; q=1",
                "application/json; charset=utf-8, text/plain",
                "application/json, text/plain",
                "application / json",
                "application/json\r\n",
                "application/json\x01",
                "\377application/json",
        };

        for (size_t i = 0; i < ELEMENTSOF(good); i++)
                if (!request_content_type_is_json(good[i])) {
                        fprintf(stderr, "rejected: \"%s\"\n", good[i]);
                        abort();
                }
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                if (request_content_type_is_json(bad[i])) {
                        fprintf(stderr, "accepted: \"%s\"\n", bad[i]);
                        abort();
                }
        ASSERT_TRUE(!request_content_type_is_json(NULL));
}

/* Parse body (size bytes) and expect success. */
static void ok_n(const char *ct, const char *body, size_t size, QueryBody *ret) {
        char *msg = NULL;
        int r = request_parse_query(ct, (const uint8_t *) body, size, ret, &msg);

        if (r != 0) {
                fprintf(stderr, "rejected (%d, %s): %.200s\n", r, msg ? msg : "-", body);
                abort();
        }
        ASSERT_TRUE(!msg);
        ASSERT_TRUE(ret->question);
        ASSERT_TRUE(ret->pages);
        ASSERT_TRUE(!ret->pages[ret->n_pages]);
}

#define OK(body, ret) ok_n(JSON, (body), STRLEN(body), (ret))

/* Parse and expect -EINVAL with exactly this message. */
static void bad_n(const char *ct, const char *body, size_t size, const char *expected) {
        QueryBody q = { .question = (char *) "untouched" };
        char *msg = NULL;
        int r = request_parse_query(ct, (const uint8_t *) body, size, &q, &msg);

        if (r != -EINVAL || !msg || !streq(msg, expected)) {
                fprintf(stderr,
                        "body %.200s\n  got %d \"%s\", expected \"%s\"\n",
                        body,
                        r,
                        msg ? msg : "(null)",
                        expected);
                abort();
        }
        ASSERT_EQ_STR(q.question, "untouched");
        free(msg);

        /* Without a message pointer too. */
        ASSERT_EQ_INT(request_parse_query(ct, (const uint8_t *) body, size, &q, NULL), -EINVAL);
}

#define BAD(body, expected) bad_n(JSON, (body), STRLEN(body), (expected))

TEST(query_basic) {
        QueryBody q;

        OK("{\"question\":\"What is an apple?\"}", &q);
        ASSERT_EQ_STR(q.question, "What is an apple?");
        ASSERT_EQ_INT(q.n_pages, 0);
        query_body_done(&q);
        ASSERT_TRUE(!q.question && !q.pages);
        query_body_done(&q); /* twice is fine */

        OK(" \t\r\n{ \"question\" : \"x\" , \"pages\" : [ \"Apple\" , \"Pear\" ] } \n", &q);
        ASSERT_EQ_STR(q.question, "x");
        ASSERT_EQ_INT(q.n_pages, 2);
        ASSERT_EQ_STR(q.pages[0], "Apple");
        ASSERT_EQ_STR(q.pages[1], "Pear");
        query_body_done(&q);

        OK("{\"pages\":[],\"question\":\"x\"}", &q);
        ASSERT_EQ_INT(q.n_pages, 0);
        ASSERT_TRUE(q.pages && !q.pages[0]);
        query_body_done(&q);

        /* Escapes are decoded; a surrogate pair is one character. */
        OK("{\"question\":\"\\u00e9\\ud83d\\ude00\\\"\\\\\\/\\n\"}", &q);
        ASSERT_EQ_STR(q.question, "\xc3\xa9\xf0\x9f\x98\x80\"\\/");
        query_body_done(&q);

        /* With a charset parameter. */
        ok_n("application/json; charset=UTF-8", "{\"question\":\"x\"}", 16, &q);
        query_body_done(&q);
}

TEST(query_content_type) {
        static const char body[] = "{\"question\":\"x\"}";

        bad_n(NULL, body, sizeof body - 1, "Content-Type must be application/json");
        bad_n("text/plain", body, sizeof body - 1, "Content-Type must be application/json");
        bad_n("application/json; charset=latin1", body, sizeof body - 1, "Content-Type must be application/json");
        bad_n("", body, sizeof body - 1, "Content-Type must be application/json");
        /* The content type is checked before anything else. */
        bad_n("text/plain", "\xff", 1, "Content-Type must be application/json");
}

TEST(query_utf8) {
        BAD("{\"question\":\"\xc0\xaf\"}", "body is not valid UTF-8");         /* overlong '/' */
        BAD("{\"question\":\"\xe0\x80\xaf\"}", "body is not valid UTF-8");     /* overlong, 3 bytes */
        BAD("{\"question\":\"\xf0\x80\x80\xaf\"}", "body is not valid UTF-8"); /* overlong, 4 bytes */
        BAD("{\"question\":\"\xc1\xbf\"}", "body is not valid UTF-8");
        BAD("{\"question\":\"\xed\xa0\x80\"}", "body is not valid UTF-8");     /* U+D800 */
        BAD("{\"question\":\"\xed\xbf\xbf\"}", "body is not valid UTF-8");     /* U+DFFF */
        BAD("{\"question\":\"\xf4\x90\x80\x80\"}", "body is not valid UTF-8"); /* > U+10FFFF */
        BAD("{\"question\":\"\xf5\x80\x80\x80\"}", "body is not valid UTF-8");
        BAD("{\"question\":\"\xff\"}", "body is not valid UTF-8");
        BAD("{\"question\":\"\x80\"}", "body is not valid UTF-8"); /* lone continuation */
        BAD("{\"question\":\"\xc3\"}", "body is not valid UTF-8"); /* truncated */
        BAD("{\"question\":\"\xe2\x82\"}", "body is not valid UTF-8");
        BAD("{\"question\":\"x\"}\xc3", "body is not valid UTF-8"); /* truncated at the end */
        BAD("\xef\xbb\xbf{\"question\":\"x\"}",
            "body is not valid JSON"); /* a BOM is valid UTF-8 but not JSON */

        /* The edges that are valid. */
        {
                QueryBody q;

                OK("{\"question\":\"\xed\x9f\xbf\xee\x80\x80\xf4\x8f\xbf\xbf\xc2\x80\xe0\xa0\x80\xf0\x90\x80\x80\"}",
                   &q);
                query_body_done(&q);
        }

        /* NUL bytes, anywhere. */
        bad_n(JSON, "{\"question\":\"a\0b\"}", 18, "body contains a NUL byte");
        bad_n(JSON, "{\"question\":\"ab\"}\0", 18, "body contains a NUL byte");
        bad_n(JSON, "\0", 1, "body contains a NUL byte");

        /* Unpaired surrogate escapes: json-c would turn them into U+FFFD. */
        BAD("{\"question\":\"\\ud800\"}", "body contains an unpaired UTF-16 surrogate escape");
        BAD("{\"question\":\"\\udc00\"}", "body contains an unpaired UTF-16 surrogate escape");
        BAD("{\"question\":\"\\ud800x\"}", "body contains an unpaired UTF-16 surrogate escape");
        BAD("{\"question\":\"\\ud800\\u0041\"}", "body contains an unpaired UTF-16 surrogate escape");
        BAD("{\"question\":\"\\ud800\\ud800\"}", "body contains an unpaired UTF-16 surrogate escape");
        BAD("{\"question\":\"\\ude00\\ud83d\"}", "body contains an unpaired UTF-16 surrogate escape");
        BAD("{\"question\":\"\\ud83d\\", "body is not valid JSON");

        /* An escaped NUL is valid JSON, but no question contains one. */
        BAD("{\"question\":\"a\\u0000b\"}", "question: must not contain NUL characters");
}

TEST(query_syntax) {
        static const char *const bad_json[] = {
                "",
                " ",
                "{",
                "}",
                "{\"question\":\"x\"",
                "{\"question\":\"x}",
                "{\"question\":\"x\",}",
                "{,\"question\":\"x\"}",
                "{\"question\" \"x\"}",
                "{\"question\":}",
                "{question:\"x\"}",
                "{'question':'x'}",
                "{\"question\":'x'}",
                "{\"question\":\"x\"} x",
                "{\"question\":\"x\"}}",
                "{\"question\":\"x\"}{\"question\":\"y\"}",
                "{\"question\":\"x\"} {}",
                "{\"question\":\"x\"}\x0b", /* VT is not JSON whitespace */
                "\x0c{\"question\":\"x\"}", /* nor is FF */
                "/*c*/{\"question\":\"x\"}",
                "{\"question\":\"x\"}//c",
                "{\"question\":\"x\"}#",
                "{\"question\":\"x\" /* c */}",
                "{\"question\":\"a\tb\"}", /* raw control characters in strings */
                "{\"question\":\"a\nb\"}",
                "{\"question\":\"a\x01\"}",
                "{\"question\":\"a\x1f\"}",
                "{\"question\":\"\\x41\"}",
                "{\"question\":\"\\'\"}",
                "{\"question\":\"\\u12\"}",
                "{\"question\":\"\\u12g4\"}",
                "{\"question\":\"\\U0041\"}",
                "{\"question\":\"\\",
                "{\"question\":NaN}",
                "{\"question\":Infinity}",
                "{\"question\":-Infinity}",
                "{\"question\":nan}",
                "{\"question\":01}",
                "{\"question\":1.}",
                "{\"question\":.5}",
                "{\"question\":+1}",
                "{\"question\":-}",
                "{\"question\":1e}",
                "{\"question\":1e+}",
                "{\"question\":0x10}",
                "{\"question\":TRUE}",
                "{\"question\":True}",
                "{\"question\":tru}",
                "{\"question\":nul}",
                "{\"question\":Null}",
                "{\"question\":undefined}",
                "{\"question\":[1,]}",
                "{\"question\":[,1]}",
                "{\"question\":[1 2]}",
                "{\"question\":\"x\" \"pages\":[]}",
                "{\"question\":\"x\",,\"pages\":[]}",
                "{\"question\"::\"x\"}",
                "{\"question\":\"x\":\"y\"}",
                "[",
                "x",
                "\"",
        };

        for (size_t i = 0; i < ELEMENTSOF(bad_json); i++)
                bad_n(JSON,
                      bad_json[i],
                      strlen(bad_json[i]),
                      strlen(bad_json[i]) == 0 ? "body is empty" : "body is not valid JSON");

        /* Valid JSON, but not an object. */
        BAD("[]", "body must be a JSON object");
        BAD("[{\"question\":\"x\"}]", "body must be a JSON object");
        BAD("\"question\"", "body must be a JSON object");
        BAD("1", "body must be a JSON object");
        BAD(" null ", "body must be a JSON object");
        BAD("true", "body must be a JSON object");
        /* ...and two values are not one. */
        BAD("1 2", "body is not valid JSON");
        BAD("[] []", "body is not valid JSON");
}

TEST(query_duplicates) {
        BAD("{\"question\":\"x\",\"question\":\"y\"}", "body has a duplicate field");
        BAD("{\"question\":\"x\",\"question\":\"x\"}", "body has a duplicate field");
        BAD("{\"question\":\"x\",\"pages\":[],\"pages\":[]}", "body has a duplicate field");
        BAD("{\"pages\":[],\"question\":\"x\",\"pages\":[\"a\"]}", "body has a duplicate field");
        /* The same key spelled differently is the same key. */
        BAD("{\"question\":\"x\",\"\\u0071uestion\":\"y\"}", "body has a duplicate field");
        /* Duplicates in nested objects count too (even if the outer one is
         * then rejected for other reasons, this one is found first). */
        BAD("{\"question\":\"x\",\"pages\":[{\"a\":1,\"a\":2}]}", "body has a duplicate field");
        BAD("{\"question\":{\"a\":{\"b\":1,\"b\":1}}}", "body has a duplicate field");
        /* A duplicate whose first value held an object with members. */
        BAD("{\"question\":{\"a\":1,\"b\":2},\"question\":\"x\"}", "body has a duplicate field");
        /* Not duplicates: the same key in different objects. */
        BAD("{\"question\":\"x\",\"pages\":[{\"a\":1},{\"a\":1}]}", "pages[0]: must be a string");
}

TEST(query_fields) {
        BAD("{}", "question: is required");
        BAD("{\"pages\":[]}", "question: is required");
        BAD("{\"question\":\"x\",\"foo\":1}", "unknown field \"foo\"");
        BAD("{\"foo\":1,\"question\":\"x\"}", "unknown field \"foo\"");
        BAD("{\"Question\":\"x\"}", "unknown field \"Question\"");
        BAD("{\"question \":\"x\"}", "unknown field");
        BAD("{\"\":\"x\"}", "unknown field");
        BAD("{\"a\\u0000b\":\"x\"}", "unknown field");
        /* json-c would cut these keys at the NUL: they must not pass for ours. */
        BAD("{\"question\\u0000x\":\"x\"}", "unknown field");
        BAD("{\"question\":\"x\",\"pages\\u0000\":[]}", "unknown field");
        BAD("{\"question\":\"x\",\"question\\u0000\":\"y\"}", "unknown field");
        BAD("{\"<script>\":\"x\"}", "unknown field");
        BAD("{\"sk-abcdefghijklmnopqrstuvwxyz0123456789\":\"x\"}", "unknown field"); /* never echoed */
        BAD("{\"abcdefghijklmnopqrstuvwxyz012345\":1}", "unknown field"); /* 32 bytes: too long to name */
        BAD("{\"abcdefghijklmnopqrstuvwxyz01234\":1}",
            "unknown field \"abcdefghijklmnopqrstuvwxyz01234\""); /* 31 */

        /* Wrong types. */
        BAD("{\"question\":1}", "question: must be a string");
        BAD("{\"question\":1e999}", "question: must be a string");
        BAD("{\"question\":-1e999}", "question: must be a string");
        BAD("{\"question\":123456789012345678901234567890}", "question: must be a string");
        BAD("{\"question\":null}", "question: must be a string");
        BAD("{\"question\":true}", "question: must be a string");
        BAD("{\"question\":[\"x\"]}", "question: must be a string");
        BAD("{\"question\":{}}", "question: must be a string");
        BAD("{\"question\":\"x\",\"pages\":null}", "pages: must be an array of strings");
        BAD("{\"question\":\"x\",\"pages\":\"Apple\"}", "pages: must be an array of strings");
        BAD("{\"question\":\"x\",\"pages\":{}}", "pages: must be an array of strings");
        BAD("{\"question\":\"x\",\"pages\":1}", "pages: must be an array of strings");
        BAD("{\"question\":\"x\",\"pages\":[1]}", "pages[0]: must be a string");
        BAD("{\"question\":\"x\",\"pages\":[\"a\",null]}", "pages[1]: must be a string");
        BAD("{\"question\":\"x\",\"pages\":[\"a\",[\"b\"]]}", "pages[1]: must be a string");
        BAD("{\"question\":\"x\",\"pages\":[\"a\",1e999]}", "pages[1]: must be a string");
}

/* A JSON string of n copies of the UTF-8 sequence c, wrapped into a query. */
static char *question_of(const char *pre, const char *c, size_t n, const char *post) {
        size_t l = strlen(c), total = STRLEN("{\"question\":\"") + strlen(pre) + n * l + strlen(post) + 3;
        char *b = malloc(total), *p;

        ASSERT_TRUE(b);
        p = stpcpy(b, "{\"question\":\"");
        p = stpcpy(p, pre);
        for (size_t i = 0; i < n; i++)
                p = stpcpy(p, c);
        p = stpcpy(p, post);
        p = stpcpy(p, "\"}");
        return b;
}

/* c is one character, decoded_bytes long in UTF-8 once decoded. */
static void check_question_len(const char *c, size_t decoded_bytes, size_t n, bool good) {
        char *b = question_of("", c, n, "");
        QueryBody q;

        if (good) {
                ok_n(JSON, b, strlen(b), &q);
                ASSERT_EQ_INT(strlen(q.question), n * decoded_bytes);
                query_body_done(&q);
        } else
                bad_n(JSON, b, strlen(b), "question: must be 1 to 4000 characters");
        free(b);
}

TEST(query_question) {
        QueryBody q;
        char *b;

        /* Length in code points, not bytes. */
        check_question_len("a", 1, 4000, true);
        check_question_len("a", 1, 4001, false);
        check_question_len("\xc3\xa9", 2, 4000, true); /* é: 8000 bytes */
        check_question_len("\xc3\xa9", 2, 4001, false);
        check_question_len("\xe2\x82\xac", 3, 4000, true);     /* € */
        check_question_len("\xf0\x9f\x98\x80", 4, 4000, true); /* 😀: 16000 bytes */
        check_question_len("\xf0\x9f\x98\x80", 4, 4001, false);
        check_question_len("\\u00e9", 2, 4000, true); /* escaped: 24000 bytes of JSON */
        check_question_len("\\ud83d\\ude00", 4, 4000, true);
        check_question_len("\\ud83d\\ude00", 4, 4001, false);
        check_question_len("a", 1, 1, true);

        /* Trimming: ASCII whitespace at both ends, not counted. */
        b = question_of(" \\t\\n\\u000b\\f\\r", "a", 4000, "\\r\\f\\u000b\\n\\t ");
        ok_n(JSON, b, strlen(b), &q);
        ASSERT_EQ_INT(strlen(q.question), 4000);
        query_body_done(&q);
        free(b);

        OK("{\"question\":\"  What is\\tan apple?\\n \"}", &q);
        ASSERT_EQ_STR(q.question, "What is\tan apple?");
        query_body_done(&q);

        /* Inner whitespace counts. */
        b = question_of("a", " ", 3998, "a");
        ok_n(JSON, b, strlen(b), &q);
        query_body_done(&q);
        free(b);
        b = question_of("a", " ", 3999, "a");
        bad_n(JSON, b, strlen(b), "question: must be 1 to 4000 characters");
        free(b);

        /* Empty and whitespace-only. */
        BAD("{\"question\":\"\"}", "question: must be 1 to 4000 characters");
        BAD("{\"question\":\" \"}", "question: must be 1 to 4000 characters");
        BAD("{\"question\":\" \\t\\n\\r\\f\\u000b \"}", "question: must be 1 to 4000 characters");

        /* Non-ASCII whitespace is not trimmed (only ASCII is): it counts. */
        OK("{\"question\":\"\\u00a0\"}", &q);
        ASSERT_EQ_STR(q.question, "\xc2\xa0");
        query_body_done(&q);
        OK("{\"question\":\"\xe3\x80\x80x\xe3\x80\x80\"}", &q);
        ASSERT_EQ_STR(q.question, "\xe3\x80\x80x\xe3\x80\x80");
        query_body_done(&q);
}

TEST(query_pages) {
        char body[16384], *p;
        QueryBody q;

        OK("{\"question\":\"x\",\"pages\":[\"Apple\",\"Caf\\u00e9\",\"\xe6\x97\xa5\xe6\x9c\xac\",\" spaced \"]}",
           &q);
        ASSERT_EQ_INT(q.n_pages, 4);
        ASSERT_EQ_STR(q.pages[1], "Caf\xc3\xa9");
        ASSERT_EQ_STR(q.pages[2], "\xe6\x97\xa5\xe6\x9c\xac");
        ASSERT_EQ_STR(q.pages[3], " spaced "); /* kept as sent */
        ASSERT_TRUE(!q.pages[4]);
        query_body_done(&q);

        /* 20 titles, then 21. */
        for (size_t n = 20; n <= 21; n++) {
                p = stpcpy(body, "{\"question\":\"x\",\"pages\":[");
                for (size_t i = 0; i < n; i++)
                        p += snprintf(p, 32, "%s\"Page %zu\"", i ? "," : "", i);
                stpcpy(p, "]}");
                if (n == 20) {
                        ok_n(JSON, body, strlen(body), &q);
                        ASSERT_EQ_INT(q.n_pages, 20);
                        ASSERT_EQ_STR(q.pages[19], "Page 19");
                        ASSERT_TRUE(!q.pages[20]);
                        query_body_done(&q);
                } else
                        bad_n(JSON, body, strlen(body), "pages: at most 20 titles");
        }

        /* Title lengths in bytes: 1 and 255 fine, 0 and 256 not. */
        for (size_t l = 0; l <= 256; l++) {
                if (l > 1 && l < 255)
                        continue;
                p = stpcpy(body, "{\"question\":\"x\",\"pages\":[\"ok\",\"");
                memset(p, 'T', l);
                p += l;
                stpcpy(p, "\"]}");
                if (l >= 1 && l <= 255) {
                        ok_n(JSON, body, strlen(body), &q);
                        ASSERT_EQ_INT(strlen(q.pages[1]), l);
                        query_body_done(&q);
                } else
                        bad_n(JSON, body, strlen(body), "pages[1]: must be 1 to 255 bytes");
        }

        /* Bytes, not characters: 127 é is 254 bytes, 128 is 256. */
        for (size_t n = 127; n <= 128; n++) {
                p = stpcpy(body, "{\"question\":\"x\",\"pages\":[\"");
                for (size_t i = 0; i < n; i++)
                        p = stpcpy(p, "\xc3\xa9");
                stpcpy(p, "\"]}");
                if (n == 127) {
                        ok_n(JSON, body, strlen(body), &q);
                        query_body_done(&q);
                } else
                        bad_n(JSON, body, strlen(body), "pages[0]: must be 1 to 255 bytes");
        }
        /* Escapes count as what they decode to. */
        p = stpcpy(body, "{\"question\":\"x\",\"pages\":[\"");
        for (size_t i = 0; i < 255; i++)
                p = stpcpy(p, "\\u0041");
        stpcpy(p, "\"]}");
        ok_n(JSON, body, strlen(body), &q);
        query_body_done(&q);

        /* Control characters. */
        BAD("{\"question\":\"x\",\"pages\":[\"a\\nb\"]}", "pages[0]: must not contain control characters");
        BAD("{\"question\":\"x\",\"pages\":[\"ok\",\"a\\tb\"]}",
            "pages[1]: must not contain control characters");
        BAD("{\"question\":\"x\",\"pages\":[\"\\u0000\"]}", "pages[0]: must not contain control characters");
        BAD("{\"question\":\"x\",\"pages\":[\"\\u001f\"]}", "pages[0]: must not contain control characters");
        BAD("{\"question\":\"x\",\"pages\":[\"\\u007f\"]}", "pages[0]: must not contain control characters");
        BAD("{\"question\":\"x\",\"pages\":[\"\x7f\"]}", "pages[0]: must not contain control characters");
        BAD("{\"question\":\"x\",\"pages\":[\"\\u0085\"]}", "pages[0]: must not contain control characters");
        BAD("{\"question\":\"x\",\"pages\":[\"\xc2\x9f\"]}", "pages[0]: must not contain control characters");
        OK("{\"question\":\"x\",\"pages\":[\"\\u00a0\\u0020~\"]}", &q);
        query_body_done(&q);

        /* An empty title among good ones. */
        BAD("{\"question\":\"x\",\"pages\":[\"a\",\"\"]}", "pages[1]: must be 1 to 255 bytes");

        /* The question is checked before the pages. */
        BAD("{\"question\":\"\",\"pages\":[1]}", "question: must be 1 to 4000 characters");
        BAD("{\"pages\":[1],\"question\":2}", "question: must be a string");
}

TEST(query_nesting) {
        char body[256];

        /* REQUEST_JSON_MAX_DEPTH containers are fine (and then the wrong
         * type), one more is too deep. */
        for (unsigned depth = 2; depth <= REQUEST_JSON_MAX_DEPTH + 1; depth++) {
                char *p = stpcpy(body, "{\"question\":\"x\",\"pages\":");

                for (unsigned i = 1; i < depth; i++)
                        *p++ = '[';
                for (unsigned i = 1; i < depth; i++)
                        *p++ = ']';
                stpcpy(p, "}");
                if (depth == 2) {
                        QueryBody q;

                        ok_n(JSON, body, strlen(body), &q);
                        query_body_done(&q);
                } else if (depth <= REQUEST_JSON_MAX_DEPTH)
                        bad_n(JSON, body, strlen(body), "pages[0]: must be a string");
                else
                        bad_n(JSON, body, strlen(body), "body is nested too deeply");
        }

        /* Very deep nesting: no stack growth, a quick answer. */
        {
                size_t n = 100000;
                char *b = malloc(2 * n + 1);

                ASSERT_TRUE(b);
                memset(b, '[', n);
                memset(b + n, ']', n);
                bad_n(JSON, b, 2 * n, "body is nested too deeply");
                memset(b, '{', 1);
                bad_n(JSON, b, 2 * n, "body is not valid JSON");
                for (size_t i = 0; i + 5 <= 2 * n; i += 5)
                        memcpy(b + i, "{\"a\":", 5);
                bad_n(JSON, b, 2 * n, "body is nested too deeply");
                free(b);
        }
}

TEST(query_big_body) {
        /* A body of many ignored bytes: whitespace. Still fine. */
        size_t n = 60000;
        char *b = malloc(n);
        QueryBody q;

        ASSERT_TRUE(b);
        memset(b, ' ', n);
        memcpy(b + 100, "{\"question\":\"x\"}", 16);
        ok_n(JSON, b, n, &q);
        query_body_done(&q);
        free(b);
}

static void join_ok(const char *ct, const char *body, size_t size) {
        char *msg = NULL;
        int r = request_parse_join(ct, (const uint8_t *) body, size, &msg);

        if (r != 0) {
                fprintf(stderr, "join rejected (%d, %s): %s\n", r, msg ? msg : "-", body ? body : "(null)");
                abort();
        }
}

static void join_bad(const char *ct, const char *body, size_t size, const char *expected) {
        char *msg = NULL;
        int r = request_parse_join(ct, (const uint8_t *) body, size, &msg);

        if (r != -EINVAL || !msg || !streq(msg, expected)) {
                fprintf(stderr,
                        "join body %s\n  got %d \"%s\", expected \"%s\"\n",
                        body,
                        r,
                        msg ? msg : "(null)",
                        expected);
                abort();
        }
        free(msg);
        ASSERT_EQ_INT(request_parse_join(ct, (const uint8_t *) body, size, NULL), -EINVAL);
}

TEST(join) {
        /* Empty: any content type or none. */
        join_ok(NULL, NULL, 0);
        join_ok(NULL, "", 0);
        join_ok("text/plain", "", 0);
        join_ok(JSON, "", 0);
        join_ok("application/x-www-form-urlencoded", NULL, 0);

        /* {} with a JSON content type. */
        join_ok(JSON, "{}", 2);
        join_ok("application/json; charset=utf-8", "{}", 2);
        join_ok(JSON, " { } ", 5);
        join_ok(JSON, "\r\n{\t\r\n}\r\n", 9);

        join_bad(NULL, "{}", 2, "Content-Type must be application/json");
        join_bad("text/plain", "{}", 2, "Content-Type must be application/json");
        join_bad(JSON, " ", 1, "body is not valid JSON");
        join_bad(JSON, "{", 1, "body is not valid JSON");
        join_bad(JSON, "{}{}", 4, "body is not valid JSON");
        join_bad(JSON, "{} x", 4, "body is not valid JSON");
        join_bad(JSON, "[]", 2, "body must be a JSON object");
        join_bad(JSON, "null", 4, "body must be a JSON object");
        join_bad(JSON, "\"\"", 2, "body must be a JSON object");
        join_bad(JSON, "{\"a\":1}", 7, "unknown field \"a\"");
        join_bad(JSON, "{\"question\":\"x\"}", 16, "unknown field \"question\"");
        join_bad(JSON, "{\"a\":1,\"a\":1}", 13, "body has a duplicate field");
        join_bad(JSON, "{}\0", 3, "body contains a NUL byte");
        join_bad(JSON, "{}\xff", 3, "body is not valid UTF-8");
        join_bad(JSON, "\x0b{}", 3, "body is not valid JSON");
}

DEFINE_TEST_MAIN()
