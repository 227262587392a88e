/* SPDX-License-Identifier: MIT */
/* history_parse_list_arguments() on arbitrary query arguments: the input is
 * split at its first NUL byte into limit (before) and cursor (after); without
 * a NUL there is no cursor (NULL). Each part is also tried alone, with NULL
 * for the other. Checks: on success 1 <= limit <= 100, and on failure a
 * message naming the bad argument and *ret_limit untouched; and the verdict
 * and the limit agree with a deliberately plain reference of the grammar
 * (decimal digits, no sign, spaces or leading zeros; limit 1..100, cursor
 * 1..INT64_MAX). */

#include <stdint.h>

#include "shared/macro.h"
#include "store/history.h"
#include "fuzz.h"

/* The reference: a canonical decimal, compared as text against the bound. */
static bool reference_valid(const char *s, const char *max) {
        size_t n = strlen(s), n_max = strlen(max);

        if (n == 0 || n > n_max || s[0] == '0')
                return false;
        for (size_t i = 0; i < n; i++)
                if (s[i] < '0' || s[i] > '9')
                        return false;
        return n < n_max || strcmp(s, max) <= 0;
}

static void check(const char *limit, const char *cursor) {
        bool limit_ok = !limit || reference_valid(limit, "100");
        bool cursor_ok = !cursor || reference_valid(cursor, "9223372036854775807");
        unsigned expected = HISTORY_LIMIT_DEFAULT, got = 12345;
        const char *message = NULL;
        int r;

        if (limit && limit_ok) {
                expected = 0;
                for (const char *p = limit; *p; p++)
                        expected = expected * 10 + (unsigned) (*p - '0');
        }

        r = history_parse_list_arguments(limit, cursor, &got, &message);
        if (r == 0) {
                if (got < HISTORY_LIMIT_MIN || got > HISTORY_LIMIT_MAX)
                        abort();
                if (!limit_ok || !cursor_ok || got != expected)
                        abort();
        } else if (r == -EINVAL) {
                if (!message || got != 12345)
                        abort();
                if (limit_ok && cursor_ok)
                        abort();
                /* The message names the argument at fault (limit first). */
                if (!strstr(message, limit_ok ? "cursor" : "limit"))
                        abort();
        } else
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const uint8_t *nul = memchr(data, 0, size);
        size_t n_limit = nul ? (size_t) (nul - data) : size;
        char *limit, *cursor = NULL;

        /* Exact-size copies, so that ASan sees any read past the end. */
        limit = malloc(n_limit + 1);
        if (!limit)
                return 0;
        memcpy(limit, data, n_limit);
        limit[n_limit] = '\0';
        if (nul) {
                size_t n_cursor = size - n_limit - 1;

                cursor = malloc(n_cursor + 1);
                if (!cursor) {
                        free(limit);
                        return 0;
                }
                memcpy(cursor, nul + 1, n_cursor);
                cursor[n_cursor] = '\0';
        }

        check(limit, cursor);
        check(limit, NULL);
        check(NULL, cursor);

        free(cursor);
        free(limit);
        return 0;
}
