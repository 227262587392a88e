/* SPDX-License-Identifier: MIT */
#pragma once

/* A minimal test harness: each failed check prints where and why and aborts,
 * so a failure is never silent. Exit code 77 means "skipped" to meson; set
 * WIKIWEB_TEST_NO_SKIP=1 (CI does) to turn every skip into a failure. */

#include <inttypes.h>
#include <stdbool.h>
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

/* The whole of the file at path, NUL-terminated (the caller frees it), its
 * length in *ret_size if ret_size is not NULL. Aborts, naming the file,
 * when it cannot be read. */
static inline char *test_read_file(const char *path, size_t *ret_size) {
        FILE *f = fopen(path, "re");
        char *buf;
        long n;

        if (!f) {
                perror(path);
                abort();
        }
        ASSERT_TRUE(fseek(f, 0, SEEK_END) == 0);
        n = ftell(f);
        ASSERT_TRUE(n >= 0);
        ASSERT_TRUE(fseek(f, 0, SEEK_SET) == 0);
        buf = malloc((size_t) n + 1);
        ASSERT_TRUE(buf);
        ASSERT_TRUE(fread(buf, 1, (size_t) n, f) == (size_t) n);
        ASSERT_TRUE(fclose(f) == 0);
        buf[n] = 0;
        if (ret_size)
                *ret_size = (size_t) n;
        return buf;
}

/* Independent test cases, after systemd's tests.h:
 *
 *     TEST(name) { ... }          a case: a function test_name(void) that
 *                                 builds its own fixture and frees it
 *     DEFINE_TEST_MAIN()          a main() that runs every case of the file
 *                                 in the order written
 *     DEFINE_TEST_MAIN_WITH_INTRO(intro)
 *                                 the same, after "int intro(void)", which
 *                                 returns 0 to go on, or the exit code (77:
 *                                 skip, via test_skip())
 *
 * "test-foo --only NAME" (repeatable) runs the named cases only; an unknown
 * name is an error, so a typo does not pass as "nothing failed". Each case
 * prints "NAME: ok" when it returns; a failed check aborts (see above). The
 * older style, a main() that calls test functions itself, still works. */

typedef struct TestCase {
        const char *name;
        void (*func)(void);
        unsigned line;
        struct TestCase *next;
} TestCase;

static TestCase *test_cases __attribute__((unused)) = NULL;

static inline void test_register(TestCase *t) {
        TestCase **p = &test_cases;

        /* Kept in source order whatever order the constructors run in. */
        while (*p && (*p)->line < t->line)
                p = &(*p)->next;
        t->next = *p;
        *p = t;
}

#define TEST(n)                                                                         \
        static void test_##n(void);                                                     \
        __attribute__((constructor)) static void test_register_##n(void) {              \
                static TestCase t = { .name = #n, .func = test_##n, .line = __LINE__ }; \
                test_register(&t);                                                      \
        }                                                                               \
        static void test_##n(void)

static inline int test_run_all(int argc, char **argv) {
        const char *program = argc > 0 ? strrchr(argv[0], '/') : NULL;
        unsigned n_run = 0;

        program = program ? program + 1 : (argc > 0 ? argv[0] : "test");
        for (int i = 1; i < argc; i++) {
                bool known = false;

                if (strcmp(argv[i], "--only") != 0 || i + 1 >= argc) {
                        fprintf(stderr, "usage: %s [--only NAME]...\n", program);
                        return 2;
                }
                i++;
                for (TestCase *t = test_cases; t; t = t->next)
                        known = known || strcmp(t->name, argv[i]) == 0;
                if (!known) {
                        fprintf(stderr, "%s: no test case \"%s\"\n", program, argv[i]);
                        return 2;
                }
        }

        for (TestCase *t = test_cases; t; t = t->next) {
                bool selected = argc <= 1;

                for (int i = 2; i < argc; i += 2)
                        selected = selected || strcmp(argv[i], t->name) == 0;
                if (!selected)
                        continue;
                t->func();
                fprintf(stderr, "%s: ok\n", t->name);
                n_run++;
        }
        printf("%s: %u case(s) ok\n", program, n_run);
        return 0;
}

#define DEFINE_TEST_MAIN_WITH_INTRO(intro)       \
        int main(int argc, char **argv) {        \
                int _r = (intro) ();             \
                if (_r != 0)                     \
                        return _r;               \
                return test_run_all(argc, argv); \
        }

static inline int test_no_intro(void) {
        return 0;
}

#define DEFINE_TEST_MAIN() DEFINE_TEST_MAIN_WITH_INTRO(test_no_intro)
