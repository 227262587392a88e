/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* SHA-256 through libcrypto (OpenSSL 3's EVP interface), which is on every
 * machine already as libcurl's TLS library. Used for session keys (API.md 3)
 * and artifact digests (API.md 9), and the HMAC that keys the history's
 * column of who a record belongs to (shared/user-key.h). libcrypto is used by this module only. */

#define SHA256_DIGEST_SIZE 32

typedef struct Sha256Ctx {
        void *md_ctx; /* EVP_MD_CTX *, owned; NULL before init and after final/done */
} Sha256Ctx;

/* Incremental API: init, any number of updates, final. Returns 0 or a
 * negative errno (-ENOMEM from init; -EIO if libcrypto fails, which it does
 * not for SHA-256 short of memory). final and done free the context; done
 * is safe on a context that was never initialised (zeroed), finalised or
 * already done, so it can sit in a _cleanup_ handler. After final the
 * context must be initialised again before reuse. */
int sha256_init(Sha256Ctx *ctx);
int sha256_update(Sha256Ctx *ctx, const void *data, size_t len);
int sha256_final(Sha256Ctx *ctx, uint8_t ret[static SHA256_DIGEST_SIZE]);
void sha256_done(Sha256Ctx *ctx);

/* One-shot digest of len bytes at data (data may be NULL when len is 0).
 * Returns 0, or -ENOMEM / -EIO with ret untouched. */
int sha256(const void *data, size_t len, uint8_t ret[static SHA256_DIGEST_SIZE]);

/* HMAC-SHA-256 of len bytes at data under key (RFC 2104). Returns 0, or
 * -EIO with ret untouched. */
int hmac_sha256(
        const void *key, size_t key_len, const void *data, size_t len, uint8_t ret[static SHA256_DIGEST_SIZE]);

/* 64 lowercase hex digits and a NUL into ret. */
void sha256_to_hex(const uint8_t d[static SHA256_DIGEST_SIZE], char ret[static 65]);
