/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* SHA-256 (FIPS 180-4), self-contained: the project links no crypto
 * library. Used for session keys (API.md 3) and artifact digests (API.md 9).
 * Not constant-time with respect to anything secret beyond what SHA-256
 * itself is; no key material goes through it except session tokens, whose
 * digest is the point. */

#define SHA256_DIGEST_SIZE 32
#define SHA256_BLOCK_SIZE 64

typedef struct Sha256Ctx {
        uint32_t state[8];
        uint64_t total_bytes; /* message length so far */
        uint8_t buffer[SHA256_BLOCK_SIZE];
        size_t buffer_len; /* 0..63 bytes waiting in buffer */
} Sha256Ctx;

/* Incremental API: init, any number of updates, final. After final the
 * context is wiped; init it again to reuse it. */
void sha256_init(Sha256Ctx *ctx);
void sha256_update(Sha256Ctx *ctx, const void *data, size_t len);
void sha256_final(Sha256Ctx *ctx, uint8_t ret[static SHA256_DIGEST_SIZE]);

/* One-shot digest of len bytes at data (data may be NULL when len is 0). */
void sha256(const void *data, size_t len, uint8_t ret[static SHA256_DIGEST_SIZE]);

/* 64 lowercase hex digits and a NUL into ret. */
void sha256_to_hex(const uint8_t d[static SHA256_DIGEST_SIZE], char ret[static 65]);
