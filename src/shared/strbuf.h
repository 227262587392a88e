/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "shared/macro.h"

/* A growable string, NUL-terminated once it holds anything; zero it to
 * start empty. A failed allocation is sticky: every later put fails too
 * and strbuf_steal() gives NULL, so that a run of puts may be checked
 * once, at the end. */
typedef struct StrBuf {
        char *data;
        size_t len, cap;
        bool failed;
} StrBuf;

/* Room for `more` bytes after len (and the NUL): 0, or -ENOMEM. */
int strbuf_reserve(StrBuf *b, size_t more);

/* Append the n bytes at s: 0, or -ENOMEM. */
int strbuf_put(StrBuf *b, const char *s, size_t n);

static inline int strbuf_puts(StrBuf *b, const char *s) {
        return strbuf_put(b, s, strlen(s));
}

/* Append a formatted string: 0, or -ENOMEM (sticky, as every put). */
_printf_(2, 3) int strbuf_printf(StrBuf *b, const char *format, ...);

/* A new formatted string, freed by the caller; NULL when out of memory.
 * The one vasprintf() of the tree: every "format a message" helper calls
 * it. */
_printf_(1, 0) char *strdup_vprintf(const char *format, va_list ap);
_printf_(1, 2) char *strdup_printf(const char *format, ...);

/* A string literal, its length known at compile time. */
#define strbuf_put_literal(b, s) strbuf_put((b), "" s "", sizeof(s) - 1)

/* The string, handed over to the caller ("" when nothing was put); NULL
 * when an allocation failed. b is empty again either way. */
char *strbuf_steal(StrBuf *b);

void strbuf_done(StrBuf *b);
