/* SPDX-License-Identifier: MIT */
#pragma once

/* Small macros used everywhere, after systemd's macro.h and fd-util.h.
 * Include this after the system headers: it ends with banned.h. */

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _noreturn_ __attribute__((noreturn))
#define _likely_(x) (__builtin_expect(!!(x), 1))
#define _unlikely_(x) (__builtin_expect(!!(x), 0))
#define _warn_unused_result_ __attribute__((warn_unused_result))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

/* name##_to_string() for an enum whose names are name##_table, indexed by
 * its values: NULL for a value outside the table (_FOO_INVALID included),
 * as systemd's DEFINE_STRING_TABLE_LOOKUP_TO_STRING(). */
#define DEFINE_STRING_TABLE_LOOKUP_TO_STRING(name, type)    \
        const char *name##_to_string(type i) {              \
                if ((size_t) i >= ELEMENTSOF(name##_table)) \
                        return NULL;                        \
                return name##_table[i];                     \
        }

#define MIN(a, b)                           \
        __extension__({                     \
                const __auto_type _a = (a); \
                const __auto_type _b = (b); \
                _a < _b ? _a : _b;          \
        })
#define MAX(a, b)                           \
        __extension__({                     \
                const __auto_type _a = (a); \
                const __auto_type _b = (b); \
                _a > _b ? _a : _b;          \
        })

/* Whether x equals one of the values (systemd's IN_SET). */
#define IN_SET(x, ...)                                                       \
        __extension__({                                                      \
                const __auto_type _in_x = (x);                               \
                const __typeof__(_in_x) _in_set[] = { __VA_ARGS__ };         \
                bool _in_found = false;                                      \
                for (size_t _in_i = 0; _in_i < ELEMENTSOF(_in_set); _in_i++) \
                        if (_in_set[_in_i] == _in_x) {                       \
                                _in_found = true;                            \
                                break;                                       \
                        }                                                    \
                _in_found;                                                   \
        })

#define STRLEN(s) (sizeof("" s "") - 1)
#define streq(a, b) (strcmp((a), (b)) == 0)
#define strneq(a, b, n) (strncmp((a), (b), (n)) == 0)

/* Return -errno for the current errno, but never 0 (so a caller's "r < 0"
 * check holds even for libraries that forget to set errno). */
static inline int negative_errno(void) {
        return errno > 0 ? -errno : -EIO;
}

/* Free p and return NULL: "p = mfree(p);" leaves nothing dangling. */
static inline void *mfree(void *p) {
        free(p);
        return NULL;
}

static inline void freep(void *p) {
        free(*(void **) p);
}
#define _cleanup_free_ _cleanup_(freep)

static inline void closep(int *fd) {
        if (*fd >= 0) {
                int saved = errno;
                (void) close(*fd);
                errno = saved;
        }
}
#define _cleanup_close_ _cleanup_(closep)

static inline void fclosep(FILE **f) {
        if (*f)
                (void) fclose(*f);
}
#define _cleanup_fclose_ _cleanup_(fclosep)

/* Hand an owned pointer over to somebody else, leaving NULL behind. */
#define TAKE_PTR(p)                    \
        __extension__({                \
                __auto_type _p_ = (p); \
                (p) = NULL;            \
                _p_;                   \
        })
#define TAKE_FD(fd)              \
        __extension__({          \
                int _fd_ = (fd); \
                (fd) = -1;       \
                _fd_;            \
        })

/* Use with a trailing semicolon, like a declaration. */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func) \
        static inline void func##p(type *p) {   \
                if (*p)                         \
                        func(*p);               \
        }                                       \
        struct __useless_struct_to_allow_trailing_semicolon__

/* qsort() of n items at base, where an empty array may be NULL: qsort()
 * must not be given NULL even for none (its argument is declared nonnull;
 * UBSan says so), as systemd's qsort_safe(). */
static inline void qsort_safe(void *base, size_t n, size_t size, int (*compare)(const void *, const void *)) {
        if (n <= 1)
                return;
        qsort(base, n, size, compare);
}

#include "shared/banned.h"
