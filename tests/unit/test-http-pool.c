/* SPDX-License-Identifier: MIT */
/* http/pool.c: the arithmetic of libmicrohttpd 0.9.75's connection pool
 * (the e2e sweep in tests/e2e/test_hostile.py checks it against the real
 * library, byte by byte). */
#include "http/pool.h"
#include "tests.h"

static void test_used(void) {
        HttpPoolUse u = { .head_bytes = 100, .n_records = 3 };

        /* 100 + 16 unseen, rounded to 16; a 64-byte record each. */
        ASSERT_EQ_INT(HTTP_POOL_ALIGN, 16);
        ASSERT_EQ_INT(HTTP_POOL_RECORD_BYTES, 64);
        ASSERT_EQ_INT(http_pool_used(&u), 128 + 3 * 64);

        /* The Cookie copy holds the value and a NUL, rounded up. */
        u.has_cookie = true;
        u.cookie_size = 15;
        ASSERT_EQ_INT(http_pool_used(&u), 128 + 3 * 64 + 16);
        u.cookie_size = 16;
        ASSERT_EQ_INT(http_pool_used(&u), 128 + 3 * 64 + 32);
        u.cookie_size = 0;
        ASSERT_EQ_INT(http_pool_used(&u), 128 + 3 * 64 + 16);
}

static void test_fits_at_the_byte(void) {
        HttpPoolUse u = { .head_bytes = 8192, .n_records = 10 };
        size_t used = http_pool_used(&u), pool = 24576;

        /* The head and the byte of MHD's Date check. */
        ASSERT_TRUE(http_pool_fits(&u, pool - used - 1, pool));
        ASSERT_TRUE(!http_pool_fits(&u, pool - used, pool));
        /* More records than the pool: never fits, no wrap-around. */
        u.n_records = 1000;
        ASSERT_TRUE(!http_pool_fits(&u, 0, pool));
}

int main(void) {
        test_used();
        test_fits_at_the_byte();
        return 0;
}
