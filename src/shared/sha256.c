/* SPDX-License-Identifier: MIT */
#include <stdint.h>

#include "shared/macro.h"
#include "shared/sha256.h"

/* A straightforward FIPS 180-4 implementation: clarity over speed, since
 * the inputs are small (tokens) or bounded (artifacts). */

static const uint32_t K[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static inline uint32_t ror32(uint32_t x, unsigned n) {
        return (x >> n) | (x << (32 - n));
}

static inline uint32_t load_be32(const uint8_t *p) {
        return (uint32_t) p[0] << 24 | (uint32_t) p[1] << 16 | (uint32_t) p[2] << 8 | (uint32_t) p[3];
}

static inline void store_be32(uint8_t *p, uint32_t v) {
        p[0] = (uint8_t) (v >> 24);
        p[1] = (uint8_t) (v >> 16);
        p[2] = (uint8_t) (v >> 8);
        p[3] = (uint8_t) v;
}

static void sha256_block(uint32_t state[static 8], const uint8_t block[static SHA256_BLOCK_SIZE]) {
        uint32_t w[64], a, b, c, d, e, f, g, h;

        for (size_t i = 0; i < 16; i++)
                w[i] = load_be32(block + 4 * i);
        for (size_t i = 16; i < 64; i++) {
                uint32_t s0 = ror32(w[i - 15], 7) ^ ror32(w[i - 15], 18) ^ (w[i - 15] >> 3);
                uint32_t s1 = ror32(w[i - 2], 17) ^ ror32(w[i - 2], 19) ^ (w[i - 2] >> 10);
                w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }

        a = state[0], b = state[1], c = state[2], d = state[3];
        e = state[4], f = state[5], g = state[6], h = state[7];

        for (size_t i = 0; i < 64; i++) {
                uint32_t S1 = ror32(e, 6) ^ ror32(e, 11) ^ ror32(e, 25);
                uint32_t ch = (e & f) ^ (~e & g);
                uint32_t t1 = h + S1 + ch + K[i] + w[i];
                uint32_t S0 = ror32(a, 2) ^ ror32(a, 13) ^ ror32(a, 22);
                uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
                uint32_t t2 = S0 + maj;

                h = g;
                g = f;
                f = e;
                e = d + t1;
                d = c;
                c = b;
                b = a;
                a = t1 + t2;
        }

        state[0] += a, state[1] += b, state[2] += c, state[3] += d;
        state[4] += e, state[5] += f, state[6] += g, state[7] += h;
}

void sha256_init(Sha256Ctx *ctx) {
        *ctx = (Sha256Ctx){
                .state = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 },
        };
}

void sha256_update(Sha256Ctx *ctx, const void *data, size_t len) {
        const uint8_t *p = data;

        if (len == 0)
                return;

        ctx->total_bytes += len;

        if (ctx->buffer_len > 0) {
                size_t n = MIN(len, SHA256_BLOCK_SIZE - ctx->buffer_len);

                memcpy(ctx->buffer + ctx->buffer_len, p, n);
                ctx->buffer_len += n;
                p += n;
                len -= n;
                if (ctx->buffer_len < SHA256_BLOCK_SIZE)
                        return;
                sha256_block(ctx->state, ctx->buffer);
                ctx->buffer_len = 0;
        }

        for (; len >= SHA256_BLOCK_SIZE; p += SHA256_BLOCK_SIZE, len -= SHA256_BLOCK_SIZE)
                sha256_block(ctx->state, p);

        if (len > 0) {
                memcpy(ctx->buffer, p, len);
                ctx->buffer_len = len;
        }
}

void sha256_final(Sha256Ctx *ctx, uint8_t ret[static SHA256_DIGEST_SIZE]) {
        /* The length in bits, taken before padding changes total_bytes. */
        uint64_t bits = ctx->total_bytes * 8;
        uint8_t pad[SHA256_BLOCK_SIZE * 2] = { 0x80 };
        size_t pad_len;

        /* Pad with 0x80, zeros, and the 64-bit big-endian length so that the
         * total is a multiple of 64 bytes. */
        pad_len = (ctx->buffer_len < 56 ? 56 : 120) - ctx->buffer_len;
        for (size_t i = 0; i < 8; i++)
                pad[pad_len + i] = (uint8_t) (bits >> (56 - 8 * i));
        sha256_update(ctx, pad, pad_len + 8);

        for (size_t i = 0; i < 8; i++)
                store_be32(ret + 4 * i, ctx->state[i]);

        /* Leave nothing of the message behind. */
        explicit_bzero(ctx, sizeof *ctx);
}

void sha256(const void *data, size_t len, uint8_t ret[static SHA256_DIGEST_SIZE]) {
        Sha256Ctx ctx;

        sha256_init(&ctx);
        sha256_update(&ctx, data, len);
        sha256_final(&ctx, ret);
}

void sha256_to_hex(const uint8_t d[static SHA256_DIGEST_SIZE], char ret[static 65]) {
        static const char hex[] = "0123456789abcdef";

        for (size_t i = 0; i < SHA256_DIGEST_SIZE; i++) {
                ret[2 * i] = hex[d[i] >> 4];
                ret[2 * i + 1] = hex[d[i] & 0xf];
        }
        ret[2 * SHA256_DIGEST_SIZE] = '\0';
}
