/* SPDX-License-Identifier: MIT */
#include <stdint.h>

#include "shared/macro.h"
#include "shared/sha256.h"
#include "tests.h"

static void check(const void *data, size_t len, const char *expected) {
        uint8_t d[SHA256_DIGEST_SIZE];
        char hex[65];

        ASSERT_OK(sha256(data, len, d));
        sha256_to_hex(d, hex);
        ASSERT_EQ_STR(hex, expected);

        /* The same through the incremental API, fed in uneven pieces that
         * straddle block boundaries. */
        for (size_t step = 1; step <= 130; step += 43) {
                Sha256Ctx ctx;
                const uint8_t *p = data;

                ASSERT_OK(sha256_init(&ctx));
                for (size_t i = 0; i < len; i += step)
                        ASSERT_OK(sha256_update(&ctx, p + i, MIN(step, len - i)));
                ASSERT_OK(sha256_final(&ctx, d));
                ASSERT_TRUE(!ctx.md_ctx);
                sha256_to_hex(d, hex);
                ASSERT_EQ_STR(hex, expected);
        }
}

/* FIPS 180-2 appendix B and the NIST example vectors. */
TEST(vectors) {
        check("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        check("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        check("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
              56,
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
        check("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
              112,
              "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(million_a) {
        static const char expected[] = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
        size_t n = 1000000;
        uint8_t *buf = malloc(n), d[SHA256_DIGEST_SIZE];
        Sha256Ctx ctx;
        char hex[65];

        ASSERT_TRUE(buf);
        memset(buf, 'a', n);
        check(buf, n, expected);

        /* And a byte at a time. */
        ASSERT_OK(sha256_init(&ctx));
        for (size_t i = 0; i < n; i++)
                ASSERT_OK(sha256_update(&ctx, "a", 1));
        ASSERT_OK(sha256_final(&ctx, d));
        sha256_to_hex(d, hex);
        ASSERT_EQ_STR(hex, expected);
        free(buf);
}

/* Padding edge cases: lengths around 55/56/63/64 bytes, against digests
 * computed with coreutils' sha256sum. */
TEST(padding_edges) {
        static const struct {
                size_t len;
                const char *hex;
        } v[] = {
                { 55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318" },
                { 56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a" },
                { 63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34" },
                { 64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb" },
                { 65, "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0" },
        };
        char buf[65];

        memset(buf, 'a', sizeof buf);
        for (size_t i = 0; i < ELEMENTSOF(v); i++)
                check(buf, v[i].len, v[i].hex);
}

TEST(to_hex) {
        uint8_t d[SHA256_DIGEST_SIZE];
        char hex[65];

        for (size_t i = 0; i < sizeof d; i++)
                d[i] = (uint8_t) (i * 8 + 7);
        sha256_to_hex(d, hex);
        ASSERT_EQ_STR(hex, "070f171f272f373f474f575f676f777f878f979fa7afb7bfc7cfd7dfe7eff7ff");
}

/* done is safe on a zeroed, a live and an already freed context. */
TEST(done) {
        Sha256Ctx ctx = { 0 };

        sha256_done(&ctx);
        ASSERT_OK(sha256_init(&ctx));
        ASSERT_OK(sha256_update(&ctx, "abc", 3));
        sha256_done(&ctx);
        ASSERT_TRUE(!ctx.md_ctx);
        sha256_done(&ctx);
        sha256_done(NULL);
}

DEFINE_TEST_MAIN()
