/* SPDX-License-Identifier: MIT */
#include <stdio.h>

#include "shared/hashmap.h"
#include "tests.h"

TEST(hashmap_put_get_remove) {
        _cleanup_(string_hashmap_freep) StringHashmap *h = NULL;
        int one = 1, two = 2;

        ASSERT_OK(string_hashmap_new(&h));
        ASSERT_TRUE(!string_hashmap_get(h, "qr_1"));
        ASSERT_TRUE(!string_hashmap_get(h, NULL));
        ASSERT_TRUE(!string_hashmap_remove(h, "qr_1"));
        ASSERT_OK(string_hashmap_put(h, "qr_1", &one));
        ASSERT_EQ_INT(string_hashmap_put(h, "qr_1", &two), -EEXIST);
        ASSERT_OK(string_hashmap_put(h, "qr_2", &two));
        ASSERT_TRUE(string_hashmap_get(h, "qr_1") == &one);
        ASSERT_TRUE(string_hashmap_get(h, "qr_2") == &two);
        ASSERT_EQ_INT(string_hashmap_size(h), 2);
        ASSERT_TRUE(string_hashmap_remove(h, "qr_1") == &one);
        ASSERT_TRUE(!string_hashmap_get(h, "qr_1"));
        ASSERT_TRUE(string_hashmap_get(h, "qr_2") == &two);
        ASSERT_EQ_INT(string_hashmap_size(h), 1);
}

/* Against a reference (an array): many keys through growth, removals in
 * an order that exercises the backward shift across runs. */
#define N 2000
TEST(hashmap_against_reference) {
        _cleanup_(string_hashmap_freep) StringHashmap *h = NULL;
        static char keys[N][16];
        static bool in[N];
        uint32_t x = 12345;

        ASSERT_OK(string_hashmap_new(&h));
        for (size_t i = 0; i < N; i++)
                snprintf(keys[i], sizeof keys[i], "qr_%zu", i);
        for (size_t round = 0; round < 20000; round++) {
                size_t i;

                x = x * 1103515245u + 12345u;
                i = (x >> 8) % N;
                if (in[i]) {
                        ASSERT_TRUE(string_hashmap_remove(h, keys[i]) == keys[i]);
                        in[i] = false;
                } else {
                        ASSERT_OK(string_hashmap_put(h, keys[i], keys[i]));
                        in[i] = true;
                }
                if (round % 997 == 0) {
                        size_t n = 0;

                        for (size_t k = 0; k < N; k++) {
                                ASSERT_TRUE(string_hashmap_get(h, keys[k]) == (in[k] ? keys[k] : NULL));
                                n += in[k];
                        }
                        ASSERT_EQ_INT(string_hashmap_size(h), n);
                }
        }
}

DEFINE_TEST_MAIN()
