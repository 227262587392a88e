/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "shared/strbuf.h"
#include "tests.h"

TEST(put_and_steal) {
        StrBuf b = { 0 };
        char *s;

        s = strbuf_steal(&b);
        ASSERT_EQ_STR(s, "");
        free(s);
        for (int i = 0; i < 1000; i++)
                ASSERT_TRUE(strbuf_put_literal(&b, "ab") == 0);
        ASSERT_TRUE(strbuf_puts(&b, "c") == 0);
        ASSERT_TRUE(b.len == 2001 && b.data[2001] == 0 && b.data[2000] == 'c');
        s = strbuf_steal(&b);
        ASSERT_TRUE(strlen(s) == 2001);
        ASSERT_TRUE(!b.data && b.len == 0 && !b.failed);
        free(s);
}

/* A failed allocation stays failed: later puts fail, and there is no string. */
TEST(failure_is_sticky) {
        StrBuf b = { 0 };

        ASSERT_TRUE(strbuf_puts(&b, "secret") == 0);
        ASSERT_TRUE(strbuf_reserve(&b, SIZE_MAX) == -ENOMEM);
        ASSERT_TRUE(b.failed);
        ASSERT_TRUE(strbuf_puts(&b, "x") == -ENOMEM);
        ASSERT_TRUE(strbuf_steal(&b) == NULL);
        ASSERT_TRUE(!b.data && !b.failed);
        strbuf_done(&b);
}

/* A formatted put appends, and fails once the buffer has failed. */
TEST(printf) {
        StrBuf b = { 0 };
        char *s;

        ASSERT_TRUE(strbuf_puts(&b, "n=") == 0);
        ASSERT_TRUE(strbuf_printf(&b, "%d, %s", 42, "forty-two") == 0);
        ASSERT_TRUE(b.len == strlen("n=42, forty-two"));
        s = strbuf_steal(&b);
        ASSERT_EQ_STR(s, "n=42, forty-two");
        free(s);
        ASSERT_TRUE(strbuf_reserve(&b, SIZE_MAX) == -ENOMEM);
        ASSERT_TRUE(strbuf_printf(&b, "%d", 1) == -ENOMEM);
        ASSERT_TRUE(strbuf_steal(&b) == NULL);
}

TEST(strdup_printf) {
        _cleanup_free_ char *s = strdup_printf("%s=%d", "slots", 4);
        _cleanup_free_ char *e = strdup_printf("%s", "");

        ASSERT_EQ_STR(s, "slots=4");
        ASSERT_EQ_STR(e, "");
}

DEFINE_TEST_MAIN()
