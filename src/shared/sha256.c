/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <errno.h>
#include <openssl/evp.h>
#include <string.h>

#include "shared/sha256.h"

int sha256_init(Sha256Ctx *ctx) {
        EVP_MD_CTX *md;

        assert(ctx);

        md = EVP_MD_CTX_new();
        if (!md)
                return -ENOMEM;
        if (EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
                EVP_MD_CTX_free(md);
                return -EIO;
        }
        ctx->md_ctx = md;
        return 0;
}

int sha256_update(Sha256Ctx *ctx, const void *data, size_t len) {
        assert(ctx && ctx->md_ctx);
        assert(data || len == 0);

        if (len == 0)
                return 0;
        return EVP_DigestUpdate(ctx->md_ctx, data, len) == 1 ? 0 : -EIO;
}

int sha256_final(Sha256Ctx *ctx, uint8_t ret[static SHA256_DIGEST_SIZE]) {
        unsigned n = 0;
        int r;

        assert(ctx && ctx->md_ctx);

        r = EVP_DigestFinal_ex(ctx->md_ctx, ret, &n) == 1 && n == SHA256_DIGEST_SIZE ? 0 : -EIO;
        sha256_done(ctx);
        return r;
}

void sha256_done(Sha256Ctx *ctx) {
        if (!ctx)
                return;
        /* EVP_MD_CTX_free() cleanses the digest state: nothing of the
         * message is left behind. */
        EVP_MD_CTX_free(ctx->md_ctx);
        ctx->md_ctx = NULL;
}

int sha256(const void *data, size_t len, uint8_t ret[static SHA256_DIGEST_SIZE]) {
        uint8_t d[SHA256_DIGEST_SIZE];
        unsigned n = 0;

        assert(data || len == 0);

        if (EVP_Digest(len > 0 ? data : "", len, d, &n, EVP_sha256(), NULL) != 1 || n != SHA256_DIGEST_SIZE)
                return -ENOMEM; /* the one way EVP_Digest fails for SHA-256 */
        memcpy(ret, d, sizeof d);
        return 0;
}

void sha256_to_hex(const uint8_t d[static SHA256_DIGEST_SIZE], char ret[static 65]) {
        static const char hex[] = "0123456789abcdef";

        for (size_t i = 0; i < SHA256_DIGEST_SIZE; i++) {
                ret[2 * i] = hex[d[i] >> 4];
                ret[2 * i + 1] = hex[d[i] & 0xf];
        }
        ret[2 * SHA256_DIGEST_SIZE] = '\0';
}

int hmac_sha256(
        const void *key, size_t key_len, const void *data, size_t len, uint8_t ret[static SHA256_DIGEST_SIZE]) {
        uint8_t d[SHA256_DIGEST_SIZE];
        size_t n = 0;

        assert(key || key_len == 0);
        assert(data || len == 0);

        /* EVP_Q_mac(): OpenSSL 3's one-shot MAC (HMAC() is kept but
         * deprecated for its context type). */
        if (!EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, key, key_len, data, len, d, sizeof d, &n) ||
            n != SHA256_DIGEST_SIZE)
                return -EIO;
        memcpy(ret, d, sizeof d);
        explicit_bzero(d, sizeof d);
        return 0;
}
