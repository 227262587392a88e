/* SPDX-License-Identifier: MIT */
#include <stdint.h>

#include "shared/macro.h"
#include "shared/random-util.h"
#include "tests.h"

TEST(random_bytes) {
        uint8_t a[64] = { 0 }, b[64] = { 0 }, big[100000];
        size_t zeros = 0;

        ASSERT_OK(random_bytes(a, sizeof a));
        ASSERT_OK(random_bytes(b, sizeof b));
        /* 2^-512: never, unless nothing was written. */
        ASSERT_TRUE(memcmp(a, b, sizeof a) != 0);
        ASSERT_OK(random_bytes(a, 0));

        /* More than one getrandom() may return in one go. */
        memset(big, 0, sizeof big);
        ASSERT_OK(random_bytes(big, sizeof big));
        for (size_t i = 0; i < sizeof big; i++)
                zeros += big[i] == 0;
        ASSERT_TRUE(zeros < 1000); /* expected ~390 */
}

static void check_id(const char *id, const char *prefix) {
        size_t l = strlen(prefix);

        ASSERT_EQ_INT(strlen(id), l + 32);
        ASSERT_TRUE(strneq(id, prefix, l));
        for (size_t i = l; i < l + 32; i++)
                ASSERT_TRUE((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f'));
}

TEST(random_id) {
        char a[40], b[40], small[35];

        ASSERT_OK(random_id("tk_", a, sizeof a));
        check_id(a, "tk_");
        ASSERT_OK(random_id("qr_", b, sizeof b));
        check_id(b, "qr_");
        ASSERT_TRUE(strcmp(a + 3, b + 3) != 0);
        ASSERT_OK(random_id("af_", a, 36)); /* exactly enough */
        check_id(a, "af_");
        ASSERT_OK(random_id("", a, 33));
        check_id(a, "");

        memset(small, 'X', sizeof small);
        ASSERT_EQ_INT(random_id("tk_", small, sizeof small), -ENOBUFS);
        ASSERT_EQ_INT(small[0], 'X'); /* untouched */
        ASSERT_EQ_INT(random_id(NULL, a, sizeof a), -EINVAL);
}

DEFINE_TEST_MAIN()
