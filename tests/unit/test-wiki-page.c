/* SPDX-License-Identifier: MIT */
/* src/shared/wiki-page.c: the /data file name rule on hostile titles. */

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "shared/macro.h"
#include "shared/wiki-page.h"
#include "tests.h"

static void check_name(const char *title, size_t len, const char *expected) {
        _cleanup_free_ char *n = NULL;

        ASSERT_OK(wiki_page_data_file_name(title, len, &n));
        if (expected)
                ASSERT_EQ_STR(n, expected);
        ASSERT_TRUE(strlen(n) <= NAME_MAX);
        ASSERT_TRUE(strlen(n) > STRLEN(".wiki"));
        ASSERT_TRUE(!strchr(n, '/'));
        ASSERT_TRUE(!streq(n, ".") && !streq(n, ".."));
        for (const char *p = n; *p; p++)
                ASSERT_TRUE(
                        strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.(),%~", *p));
        ASSERT_TRUE(streq(n + strlen(n) - 5, ".wiki"));
}

TEST(data_file_names) {
        char *n = NULL;
        char big[300], big2[300];

        check_name("Apple", 5, "Apple.wiki");
        check_name("Apple pie/2", 11, "Apple_pie%2F2.wiki");
        check_name("..", 2, "...wiki");
        check_name(".", 1, "..wiki");
        check_name("../../etc/passwd", 16, "..%2F..%2Fetc%2Fpasswd.wiki");
        check_name("a\0b", 3, "a%00b.wiki");
        check_name("Caf\xc3\xa9 (Paris), 1-2_3", 20, "Caf%C3%A9_(Paris),_1-2_3.wiki");
        check_name("\xff\xfe invalid", 10, "%FF%FE_invalid.wiki");
        check_name("100%", 4, "100%25.wiki");
        check_name("x~y", 3, "x%7Ey.wiki");
        check_name("line\nbreak", 10, "line%0Abreak.wiki");
        ASSERT_EQ_INT(wiki_page_data_file_name("", 0, &n), -EINVAL);

        /* 300-byte titles: cut with a hash, never in the middle of an
         * escape, and two titles that differ only at the end differ. */
        memset(big, 'a', sizeof big);
        memcpy(big2, big, sizeof big);
        big2[299] = 'b';
        {
                _cleanup_free_ char *a = NULL, *b = NULL;
                ASSERT_OK(wiki_page_data_file_name(big, sizeof big, &a));
                ASSERT_OK(wiki_page_data_file_name(big2, sizeof big2, &b));
                check_name(big, sizeof big, NULL);
                ASSERT_EQ_INT(strlen(a), NAME_MAX);
                ASSERT_TRUE(strchr(a, '~'));
                ASSERT_TRUE(!streq(a, b));
        }
        for (size_t shift = 0; shift < 3; shift++) {
                _cleanup_free_ char *a = NULL;
                memset(big, '/', sizeof big); /* every byte a 3-byte escape */
                for (size_t i = 0; i < shift; i++)
                        big[i] = 'x';
                ASSERT_OK(wiki_page_data_file_name(big, sizeof big, &a));
                check_name(big, sizeof big, NULL);
                /* the byte before "~" ends an escape or is a plain byte */
                {
                        char *t = strchr(a, '~');
                        ASSERT_TRUE(t && t - a >= 3);
                        ASSERT_TRUE(t[-1] != '%' && t[-2] != '%');
                }
        }
        /* Exactly at the limit: 250 plain bytes are not cut. */
        memset(big, 'q', 250);
        {
                _cleanup_free_ char *a = NULL;
                ASSERT_OK(wiki_page_data_file_name(big, 250, &a));
                ASSERT_EQ_INT(strlen(a), 255);
                ASSERT_TRUE(!strchr(a, '~'));
        }
        /* Random bytes: the invariants hold. */
        srand(8);
        for (int i = 0; i < 20000; i++) {
                char t[320];
                size_t len = 1 + (size_t) rand() % sizeof t;
                for (size_t j = 0; j < len; j++)
                        t[j] = (char) (rand() % 256);
                check_name(t, len, NULL);
        }
}

/* The names the agent gave before there was one rule: unchanged. */
TEST(data_file_names_short) {
        static const char *const table[][2] = {
                { "Apple", "Apple.wiki" },     { "Apple pie", "Apple_pie.wiki" },
                { "A/B", "A%2FB.wiki" },       { "Caf\xc3\xa9", "Caf%C3%A9.wiki" },
                { "a:b?c", "a%3Ab%3Fc.wiki" }, { "x_(y),z-1.2", "x_(y),z-1.2.wiki" },
                { "..", "...wiki" },           { "100%", "100%25.wiki" },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_free_ char *f = NULL;

                ASSERT_OK(wiki_page_data_file_name(table[i][0], strlen(table[i][0]), &f));
                ASSERT_EQ_STR(f, table[i][1]);
        }
}

DEFINE_TEST_MAIN()
