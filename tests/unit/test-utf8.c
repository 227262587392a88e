/* SPDX-License-Identifier: MIT */
#include "shared/macro.h"
#include "shared/utf8.h"
#include "tests.h"

TEST(valid) {
        ASSERT_TRUE(utf8_is_valid("", 0));
        ASSERT_TRUE(utf8_is_valid("a\0b", 3));
        ASSERT_TRUE(utf8_is_valid("\xc3\xa9\xe2\x82\xac\xf0\x9f\x8d\x8e", 9));
        ASSERT_TRUE(!utf8_is_valid("\xc3", 1));             /* truncated */
        ASSERT_TRUE(!utf8_is_valid("\xc0\xaf", 2));         /* overlong */
        ASSERT_TRUE(!utf8_is_valid("\xe0\x80\xaf", 3));     /* overlong */
        ASSERT_TRUE(!utf8_is_valid("\xed\xa0\x80", 3));     /* surrogate */
        ASSERT_TRUE(!utf8_is_valid("\xf4\x90\x80\x80", 4)); /* above U+10FFFF */
        ASSERT_TRUE(!utf8_is_valid("\x80", 1));
        ASSERT_TRUE(!utf8_is_valid("\xff", 1));
}

TEST(decode_no_c1) {
        ASSERT_EQ_INT(utf8_decode_no_c1((const uint8_t *) "a", 1), 1);
        ASSERT_EQ_INT(utf8_decode_no_c1((const uint8_t *) "\xc2\xa0", 2), 2);     /* U+00A0: not C1 */
        ASSERT_EQ_INT(utf8_decode_no_c1((const uint8_t *) "\xc2\x80", 2), 0);     /* U+0080: C1 */
        ASSERT_EQ_INT(utf8_decode_no_c1((const uint8_t *) "\xc2\x9f", 2), 0);     /* U+009F: C1 */
        ASSERT_EQ_INT(utf8_decode_no_c1((const uint8_t *) "\xe2\x82\xac", 3), 3); /* € */
        ASSERT_EQ_INT(utf8_decode_no_c1((const uint8_t *) "\xf0\x9f\x8d\x8e", 4), 4);
        ASSERT_EQ_INT(utf8_decode_no_c1((const uint8_t *) "\xe2\x82\xac", 2), 0); /* truncated */
        ASSERT_EQ_INT(utf8_decode_no_c1((const uint8_t *) "\xed\xa0\x80", 3), 0); /* surrogate */
        ASSERT_EQ_INT(utf8_decode_no_c1((const uint8_t *) "\xc0\xaf", 2), 0);     /* overlong */
}

TEST(cut_count) {
        const char *s = "a\xc3\xa9\xe2\x82\xac"; /* a é € : 1 + 2 + 3 bytes */

        ASSERT_EQ_INT(utf8_count(s, 6), 3);
        ASSERT_EQ_INT(utf8_cut(s, 6, 100), 6);
        ASSERT_EQ_INT(utf8_cut(s, 6, 6), 6);
        ASSERT_EQ_INT(utf8_cut(s, 6, 5), 3);
        ASSERT_EQ_INT(utf8_cut(s, 6, 4), 3);
        ASSERT_EQ_INT(utf8_cut(s, 6, 3), 3);
        ASSERT_EQ_INT(utf8_cut(s, 6, 2), 1);
        ASSERT_EQ_INT(utf8_cut(s, 6, 1), 1);
        ASSERT_EQ_INT(utf8_cut(s, 6, 0), 0);
}

TEST(make_valid) {
        char *r;
        size_t n;

        ASSERT_OK(utf8_make_valid(
                "a\xff"
                "b\0c\xc3\xa9",
                7,
                &r,
                &n));
        ASSERT_EQ_STR(
                r,
                "a\xef\xbf\xbd"
                "b\xef\xbf\xbd"
                "c\xc3\xa9");
        ASSERT_EQ_INT(n, strlen(r));
        ASSERT_TRUE(utf8_is_valid(r, n));
        free(r);
        ASSERT_OK(utf8_make_valid("", 0, &r, &n));
        ASSERT_EQ_STR(r, "");
        ASSERT_EQ_INT(n, 0);
        free(r);
        ASSERT_OK(utf8_make_valid("\xe2\x82", 2, &r, NULL));
        ASSERT_EQ_STR(r, "\xef\xbf\xbd\xef\xbf\xbd");
        free(r);
}

DEFINE_TEST_MAIN()
