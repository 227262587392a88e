/* SPDX-License-Identifier: MIT */
#include <stdint.h>

#include "shared/macro.h"
#include "shared/base64url.h"
#include "tests.h"

static void check(const char *in, size_t n, const char *expected) {
        char out[64];

        ASSERT_EQ_INT(base64url_encoded_len(n), strlen(expected));
        memset(out, 'X', sizeof out);
        base64url_encode((const uint8_t *) in, n, out);
        ASSERT_EQ_STR(out, expected);
}

/* RFC 4648 section 10, without padding, and the two characters that
 * differ from base64. */
TEST(encode) {
        check("", 0, "");
        check("f", 1, "Zg");
        check("fo", 2, "Zm8");
        check("foo", 3, "Zm9v");
        check("foob", 4, "Zm9vYg");
        check("fooba", 5, "Zm9vYmE");
        check("foobar", 6, "Zm9vYmFy");
        check("\xfb\xff", 2, "-_8");
        check("\xff\xff\xff", 3, "____");
        check("\0\0\0\0", 4, "AAAAAA");
        ASSERT_EQ_INT(base64url_encoded_len(32), 43);
}

TEST(char_is_valid) {
        unsigned n = 0;

        for (int c = -128; c < 128; c++)
                n += base64url_char_is_valid((char) c);
        ASSERT_EQ_INT(n, 64);
        ASSERT_TRUE(base64url_char_is_valid('-'));
        ASSERT_TRUE(base64url_char_is_valid('_'));
        ASSERT_TRUE(!base64url_char_is_valid('+'));
        ASSERT_TRUE(!base64url_char_is_valid('/'));
        ASSERT_TRUE(!base64url_char_is_valid('='));
        ASSERT_TRUE(!base64url_char_is_valid('\0'));
}

DEFINE_TEST_MAIN()
