/* SPDX-License-Identifier: MIT */
#include <assert.h>

#include "shared/macro.h"
#include "shared/base64url.h"

static const char table[64] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

size_t base64url_encoded_len(size_t n) {
        /* Written to not overflow for any n a caller could have in memory. */
        return n / 3 * 4 + (n % 3 == 0 ? 0 : n % 3 + 1);
}

void base64url_encode(const uint8_t *data, size_t n, char *ret) {
        char *o = ret;
        size_t i = 0;

        assert(data || n == 0);
        assert(ret);

        for (; i + 3 <= n; i += 3) {
                uint32_t v = (uint32_t) data[i] << 16 | (uint32_t) data[i + 1] << 8 | data[i + 2];

                *o++ = table[(v >> 18) & 63];
                *o++ = table[(v >> 12) & 63];
                *o++ = table[(v >> 6) & 63];
                *o++ = table[v & 63];
        }

        if (n - i == 1) {
                uint32_t v = (uint32_t) data[i] << 16;

                *o++ = table[(v >> 18) & 63];
                *o++ = table[(v >> 12) & 63];
        } else if (n - i == 2) {
                uint32_t v = (uint32_t) data[i] << 16 | (uint32_t) data[i + 1] << 8;

                *o++ = table[(v >> 18) & 63];
                *o++ = table[(v >> 12) & 63];
                *o++ = table[(v >> 6) & 63];
        }

        *o = '\0';
}

bool base64url_char_is_valid(char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
                c == '_';
}
