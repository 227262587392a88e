/* SPDX-License-Identifier: MIT */
/* The sanitizer (API.md section 2): every vector of
 * data/sanitizer-vectors.json, then the cases the vectors leave out: invalid
 * UTF-8, NUL bytes, the cut inside a character, and inputs of megabytes. The
 * exhaustive comparison with Python's re is sanitize_diff.py. */

#include <json-c/json.h>
#include <time.h>

#include "shared/macro.h"
#include "shared/sanitize.h"
#include "tests.h"

#define FFFD "\xEF\xBF\xBD"
#define BIG_BYTES ((size_t) 10 * 1024 * 1024)

/* Sanitize n bytes and compare with the expected n_expected bytes. */
static void check_n(const char *in, size_t n, const char *expected, size_t n_expected) {
        _cleanup_free_ char *out = NULL;
        size_t out_len = SIZE_MAX;

        ASSERT_OK(sanitize_message_full(in, n, &out, &out_len));
        ASSERT_TRUE(out);
        ASSERT_EQ_INT(out[out_len], '\0');
        if (out_len != n_expected || memcmp(out, expected, n_expected) != 0) {
                fprintf(stderr, "input (%zu bytes): \"%.*s\"\n", n, (int) MIN(n, (size_t) 200), in);
                ASSERT_EQ_INT(out_len, n_expected);
                ASSERT_EQ_STR(out, expected);
                ASSERT_TRUE(false);
        }
}

static void check(const char *in, const char *expected) {
        _cleanup_free_ char *out = NULL;

        check_n(in, strlen(in), expected, strlen(expected));
        ASSERT_OK(sanitize_message(in, strlen(in), &out));
        ASSERT_EQ_STR(out, expected);
}

/* A string of n copies of c, NUL-terminated. */
static char *repeat(char c, size_t n) {
        char *s = malloc(n + 1);

        ASSERT_TRUE(s);
        memset(s, c, n);
        s[n] = '\0';
        return s;
}

/* a + b, NUL-terminated. */
static char *concat(const char *a, const char *b) {
        size_t na = strlen(a), nb = strlen(b);
        char *s = malloc(na + nb + 1);

        ASSERT_TRUE(s);
        memcpy(s, a, na);
        memcpy(s + na, b, nb + 1);
        return s;
}

static double now_sec(void) {
        struct timespec ts;

        ASSERT_TRUE(clock_gettime(CLOCK_MONOTONIC, &ts) == 0);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

TEST(vectors) {
        char path[4096];
        json_object *root, *vectors;
        size_t count;

        ASSERT_TRUE(
                (size_t) snprintf(path, sizeof(path), "%s/sanitizer-vectors.json", test_data_dir()) <
                sizeof(path));
        root = json_object_from_file(path);
        if (!root) {
                fprintf(stderr, "cannot read %s: %s\n", path, json_util_get_last_err());
                ASSERT_TRUE(root);
        }
        ASSERT_TRUE(json_object_object_get_ex(root, "vectors", &vectors));
        ASSERT_TRUE(json_object_is_type(vectors, json_type_array));
        count = json_object_array_length(vectors);
        ASSERT_TRUE(count > 0);

        for (size_t i = 0; i < count; i++) {
                json_object *v = json_object_array_get_idx(vectors, i), *in, *out;

                ASSERT_TRUE(json_object_object_get_ex(v, "input", &in));
                ASSERT_TRUE(json_object_object_get_ex(v, "output", &out));
                check_n(json_object_get_string(in),
                        (size_t) json_object_get_string_len(in),
                        json_object_get_string(out),
                        (size_t) json_object_get_string_len(out));
        }
        printf("%zu vectors passed\n", count);
        json_object_put(root);
}

TEST(rule_0_invalid_utf8) {
        /* One U+FFFD per maximal subpart, as Python's "replace" handler. */
        check("\xff", FFFD);
        check("a\x80z", "a" FFFD "z");
        check("\xc0\xaf", FFFD FFFD);                   /* overlong, C0 never valid */
        check("\xe0\x80\x80", FFFD FFFD FFFD);          /* overlong 3-byte: E0 needs A0..BF */
        check("\xe0\xa0\x80", "\xe0\xa0\x80");          /* U+0800 */
        check("\xed\xa0\x80", FFFD FFFD FFFD);          /* surrogate */
        check("\xed\x9f\xbf", "\xed\x9f\xbf");          /* U+D7FF */
        check("\xf0\x8f\xbf\xbf", FFFD FFFD FFFD FFFD); /* overlong 4-byte */
        check("\xf4\x90\x80\x80", FFFD FFFD FFFD FFFD); /* above U+10FFFF */
        check("\xf4\x8f\xbf\xbf", "\xf4\x8f\xbf\xbf");  /* U+10FFFF */
        check("\xf5\x80", FFFD FFFD);
        check("\xe2\x82", FFFD);      /* truncated euro sign at the end */
        check("\xe2\x82z", FFFD "z"); /* ... and before an ASCII byte */
        check("\xf0\x9f\x98", FFFD);  /* truncated emoji */
        check("\xf0\x9f\x98\xf0\x9f\x98\x80", FFFD "\xf0\x9f\x98\x80");
        check("\xe2\x82\xac\x82", "\xe2\x82\xac" FFFD);

        /* Replaced bytes are not word characters: they bound a token... */
        check("\xff"
              "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
              "\xff",
              FFFD "[REDACTED]" FFFD);
        /* ... and split one, also right after a Bearer. */
        check("aaaaaaaaaaaaaaaa\x80"
              "aaaaaaaaaaaaaaaa",
              "aaaaaaaaaaaaaaaa" FFFD "aaaaaaaaaaaaaaaa");
        check("Bearer\xa0tok", "Bearer" FFFD "tok");
        check("Bearer tok\xe2\x82\xac", "Bearer [REDACTED]\xe2\x82\xac");
}

TEST(nul_bytes) {
        static const char in[] = "a\0b\r\n\0";
        _cleanup_free_ char *out = NULL, *tok = NULL, *two = NULL;

        /* U+0000 is valid UTF-8: kept, and not a word character. */
        check_n(in, sizeof(in) - 1, "a\0b  \0", 6);
        ASSERT_OK(sanitize_message(in, sizeof(in) - 1, &out));
        ASSERT_EQ_STR(out, "a");

        tok = repeat('k', 20);
        two = malloc(41);
        ASSERT_TRUE(two);
        memcpy(two, tok, 20);
        two[20] = '\0';
        memcpy(two + 21, tok, 20);
        check_n(two, 41, two, 41);
        check_n("Bearer\0tok", 10, "Bearer\0tok", 10);
        check_n("Bearer tok\0Bearer tok", 21, "Bearer [REDACTED]\0Bearer [REDACTED]", 35);

        /* NULL is fine for an empty message. */
        check_n(NULL, 0, "", 0);
}

TEST(rule_2_bearer) {
        check("Bearer", "Bearer");
        check("Bearer ", "Bearer ");
        check("Bearertok", "Bearertok");
        check("BEARER tok", "Bearer [REDACTED]");
        check("bEaReR\v\f\t \r\n.", "Bearer [REDACTED]");
        check("Bearer \x1ctok", "Bearer \x1ctok"); /* \x1c is \s only in Unicode mode */
        check("Bearer \xc2\xa0tok", "Bearer \xc2\xa0tok");
        check("Bearer a.b,c", "Bearer [REDACTED],c");
        check("Bearer a b", "Bearer [REDACTED] b");
        check("bearerbearer x", "bearerBearer [REDACTED]");
        check("Bearer Bearer x", "Bearer [REDACTED] x");
        check("Bearer x Bearer y", "Bearer [REDACTED] Bearer [REDACTED]");
        check("Authorization: Bearer eyJ.abc-def_0\r\nHost: x", "Authorization: Bearer [REDACTED]  Host: x");
        check("beare r", "beare r");
        check("Bearer\t\n", "Bearer\t ");
}

/* check() on an allocated input, then free it. */
static void check_free(char *in, const char *expected) {
        check(in, expected);
        free(in);
}

TEST(rule_3_tokens) {
        _cleanup_free_ char *a31 = repeat('a', 31), *a32 = repeat('a', 32), *d40 = repeat('-', 40),
                            *u32 = repeat('_', 32), *x26 = repeat('x', 26);

        check(a31, a31);
        check(a32, "[REDACTED]");
        check(u32, "[REDACTED]"); /* '_' is a word character */
        check(d40, d40);          /* '-' is not: no \b anywhere */

        /* The match needs \b at both ends; '-' is in the run but not a word
         * character, so the match shrinks to the word characters. */
        check_free(concat(a32, "-"), "[REDACTED]-");
        check_free(concat("--", a32), "--[REDACTED]");
        check_free(concat(a31, "-"), "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-");
        check_free(concat("-", a31), "-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");

        /* Dashes inside a run are part of the match. */
        check("aaaaaaaaaaaaaaa--bbbbbbbbbbbbbbb", "[REDACTED]"); /* 32 chars, \b at 0 and 32 */
        check("aaaaaaaaaaaaaaa--bbbbbbbbbbbbbb", "aaaaaaaaaaaaaaa--bbbbbbbbbbbbbb");
        check("-aaaaaaaaaaaaaaa---bbbbbbbbbbbbbbbb-", "-[REDACTED]-"); /* 34 from \b to \b */

        /* \b needs a word character on exactly one side; the ends of the
         * text and non-ASCII characters count as non-word. */
        check("\xc3\xa9"
              "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\xc3\xa9",
              "\xc3\xa9[REDACTED]\xc3\xa9");
        check("key=ZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZ;", "key=[REDACTED];");

        /* Runs separated by any other character are separate. */
        check("aaaaaaaaaaaaaaaa.aaaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaaa.aaaaaaaaaaaaaaaa");

        /* Rule 3 sees the output of rule 2: "Bearer" joins the run before it. */
        check_free(concat(x26, "Bearer tok"), "[REDACTED] [REDACTED]");
        check_free(concat(x26 + 1, "Bearer tok"), "xxxxxxxxxxxxxxxxxxxxxxxxxBearer [REDACTED]");
}

TEST(rule_4_newlines) {
        check("\r", " ");
        check("\n", " ");
        check("a\r\nb\n\rc", "a  b  c");
        check("\v\f\t", "\v\f\t");
}

/* Rule 5: n filler bytes (not word characters) and then tail. */
static void check_cut(size_t n, const char *tail, size_t expected_len) {
        _cleanup_free_ char *fill = repeat('.', n), *in = concat(fill, tail), *out = NULL;
        size_t out_len;

        ASSERT_OK(sanitize_message_full(in, strlen(in), &out, &out_len));
        ASSERT_EQ_INT(out_len, expected_len);
        ASSERT_EQ_INT(strlen(out), expected_len);
        ASSERT_TRUE(memcmp(out, in, MIN(expected_len, n)) == 0);
}

TEST(rule_5_cut) {
        _cleanup_free_ char *big = repeat('.', 5000), *out = NULL;

        check_cut(1024, "", 1024);
        check_cut(1025, "", 1024);
        check_cut(1021, "\xe2\x82\xac", 1024);     /* fits exactly */
        check_cut(1022, "\xe2\x82\xac", 1022);     /* 2 of 3 bytes fit: dropped */
        check_cut(1023, "\xe2\x82\xac", 1023);     /* 1 of 3 bytes fits: dropped */
        check_cut(1020, "\xf0\x9f\x98\x80", 1024); /* 4-byte character fits */
        check_cut(1021, "\xf0\x9f\x98\x80", 1021);
        check_cut(1023, "\xc3\xa9", 1023);
        check_cut(1022, "\xc3\xa9", 1024);
        check_cut(1022, "\xff", 1022); /* the U+FFFD counts, 3 bytes */
        check_cut(1021, "\xff", 1024);
        check_cut(1023, "\r\n", 1024); /* CR LF became spaces first */

        /* The cut comes last: a token across the limit is redacted whole, and
         * a Bearer across it too. */
        check_cut(1000, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 1010);
        check_cut(1000, "Bearer xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", 1017);
        check_cut(1020, "Bearer xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", 1024);

        ASSERT_OK(sanitize_message(big, strlen(big), &out));
        ASSERT_EQ_INT(strlen(out), SANITIZE_MAX_BYTES);
}

/* Inputs of 10 MB must take linear time (a backtracking regex engine would
 * take quadratic time on some) and constant memory. */
static void check_big(
        const char *what, const char *in, size_t n, const char *expected_prefix, size_t expected_len) {
        _cleanup_free_ char *out = NULL;
        size_t out_len;
        double t0 = now_sec(), dt;

        ASSERT_OK(sanitize_message_full(in, n, &out, &out_len));
        dt = now_sec() - t0;
        printf("%-40s %zu bytes -> %zu bytes in %.3f s\n", what, n, out_len, dt);
        ASSERT_EQ_INT(out_len, expected_len);
        ASSERT_TRUE(strncmp(out, expected_prefix, strlen(expected_prefix)) == 0);
        /* Generous, for slow sanitizer builds on a busy machine; anything
         * quadratic would take hours. */
        ASSERT_TRUE(dt < 5.0);
}

TEST(big_inputs) {
        _cleanup_free_ char *buf = malloc(BIG_BYTES + 1);
        size_t n = BIG_BYTES;

        ASSERT_TRUE(buf);

        /* One token of 10 MB: the whole run must be read before the output. */
        memset(buf, 'x', n);
        check_big("one token", buf, n, "[REDACTED]", 10);

        /* A token, then a dash run; \b only at both ends of the x's. */
        memset(buf + n / 2, '-', n / 2);
        check_big("token then dashes", buf, n, "[REDACTED]---", 1024);

        /* A short word then dashes: no match, the run is output as it is. */
        memset(buf, '-', n);
        memset(buf + 100, 'x', 31);
        check_big("31 word chars in dashes", buf, n, "----", 1024);

        /* Alternating word characters and dashes: \b everywhere. */
        for (size_t i = 0; i < n; i++)
                buf[i] = i % 2 ? '-' : 'a';
        check_big("a-a-a-...", buf, n, "[REDACTED]-", 11);

        /* A Bearer with a token of 10 MB. */
        memset(buf, '.', n);
        memcpy(buf, "Bearer ", 7);
        check_big("Bearer token", buf, n, "Bearer [REDACTED]", 17);

        /* Many spaces after Bearer and no token, many times over. */
        memset(buf, ' ', n);
        for (size_t i = 0; i + 4096 <= n; i += 4096) {
                memcpy(buf + i, "BEARER", 6);
                buf[i + 4095] = ',';
        }
        check_big("Bearer and spaces", buf, n, "BEARER  ", 1024);

        /* Invalid UTF-8 throughout: 341 U+FFFD fit. */
        memset(buf, '\xff', n);
        check_big("invalid UTF-8", buf, n, FFFD FFFD, 1023);

        /* Truncated 3-byte sequences and NUL bytes. */
        for (size_t i = 0; i < n; i++)
                buf[i] = "\xe2\x82\0"[i % 3];
        check_big("truncated sequences and NUL", buf, n, FFFD, 1024);

        /* Many short tokens, each redacted. */
        for (size_t i = 0; i < n; i++)
                buf[i] = i % 40 == 39 ? ' ' : 'k';
        check_big("many tokens", buf, n, "[REDACTED] [REDACTED]", 1024);

        /* Early stop: plain text, only the start is needed. */
        memset(buf, ' ', n);
        check_big("spaces", buf, n, "    ", 1024);
}

DEFINE_TEST_MAIN()
