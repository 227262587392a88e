/* SPDX-License-Identifier: MIT */
#pragma once

/* A minimal test harness: each failed check prints where and why and aborts,
 * so a failure is never silent. Exit code 77 means "skipped" to meson; set
 * WIKIWEB_TEST_NO_SKIP=1 (CI does) to turn every skip into a failure. */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ASSERT_TRUE(expr)                                                                                          \
        do {                                                                                                       \
                if (!(expr)) {                                                                                     \
                        fprintf(stderr, "%s:%d: %s: assertion failed: %s\n", __FILE__, __LINE__, __func__, #expr); \
                        abort();                                                                                   \
                }                                                                                                  \
        } while (0)

#define ASSERT_EQ_INT(a, b)                                                   \
        do {                                                                  \
                long long _a = (long long) (a), _b = (long long) (b);         \
                if (_a != _b) {                                               \
                        fprintf(stderr,                                       \
                                "%s:%d: %s: %s == %s failed: %lld != %lld\n", \
                                __FILE__,                                     \
                                __LINE__,                                     \
                                __func__,                                     \
                                #a,                                           \
                                #b,                                           \
                                _a,                                           \
                                _b);                                          \
                        abort();                                              \
                }                                                             \
        } while (0)

#define ASSERT_EQ_STR(a, b)                                                          \
        do {                                                                         \
                const char *_a = (a), *_b = (b);                                     \
                if (!_a || !_b || strcmp(_a, _b) != 0) {                             \
                        fprintf(stderr,                                              \
                                "%s:%d: %s: %s == %s failed:\n  \"%s\"\n  \"%s\"\n", \
                                __FILE__,                                            \
                                __LINE__,                                            \
                                __func__,                                            \
                                #a,                                                  \
                                #b,                                                  \
                                _a ? _a : "(null)",                                  \
                                _b ? _b : "(null)");                                 \
                        abort();                                                     \
                }                                                                    \
        } while (0)

#define ASSERT_OK(expr)                                              \
        do {                                                         \
                long long _r = (long long) (expr);                   \
                if (_r < 0) {                                        \
                        fprintf(stderr,                              \
                                "%s:%d: %s: %s failed: %lld (%s)\n", \
                                __FILE__,                            \
                                __LINE__,                            \
                                __func__,                            \
                                #expr,                               \
                                _r,                                  \
                                strerror((int) -_r));                \
                        abort();                                     \
                }                                                    \
        } while (0)

static inline int test_skip(const char *why) {
        const char *e = getenv("WIKIWEB_TEST_NO_SKIP");

        fprintf(stderr, "SKIP: %s\n", why);
        if (e && strcmp(e, "1") == 0) {
                fprintf(stderr, "WIKIWEB_TEST_NO_SKIP=1: a skip is a failure\n");
                return 1;
        }
        return 77;
}

/* Directory of checked-in test data (tests/unit/data), from the build. */
static inline const char *test_data_dir(void) {
        const char *e = getenv("WIKIWEB_TEST_DATA");
        return e ? e : "tests/unit/data";
}
