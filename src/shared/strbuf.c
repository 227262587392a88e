/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>

#include "shared/macro.h"
#include "shared/strbuf.h"

static int strbuf_fail(StrBuf *b) {
        b->failed = true;
        return -ENOMEM;
}

int strbuf_reserve(StrBuf *b, size_t more) {
        size_t want, cap;
        char *d;

        if (b->failed)
                return -ENOMEM;
        if (more > SIZE_MAX / 2 - b->len)
                return strbuf_fail(b);
        want = b->len + more + 1;
        if (want <= b->cap)
                return 0;
        cap = MAX(b->cap * 2, (size_t) 256);
        cap = MAX(cap, want);
        d = realloc(b->data, cap);
        if (!d)
                return strbuf_fail(b);
        b->data = d;
        b->cap = cap;
        return 0;
}

int strbuf_put(StrBuf *b, const char *s, size_t n) {
        int r = strbuf_reserve(b, n);

        if (r < 0)
                return r;
        memcpy(b->data + b->len, s, n);
        b->len += n;
        b->data[b->len] = 0;
        return 0;
}

char *strdup_vprintf(const char *format, va_list ap) {
        char *s;

        if (vasprintf(&s, format, ap) < 0)
                return NULL;
        return s;
}

char *strdup_printf(const char *format, ...) {
        va_list ap;
        char *s;

        va_start(ap, format);
        s = strdup_vprintf(format, ap);
        va_end(ap);
        return s;
}

int strbuf_printf(StrBuf *b, const char *format, ...) {
        _cleanup_free_ char *s = NULL;
        va_list ap;

        va_start(ap, format);
        s = strdup_vprintf(format, ap);
        va_end(ap);
        if (!s) {
                b->failed = true;
                return -ENOMEM;
        }
        return strbuf_put(b, s, strlen(s));
}

char *strbuf_steal(StrBuf *b) {
        char *d;

        if (b->failed) {
                strbuf_done(b);
                return NULL;
        }
        d = b->data ? b->data : strdup("");
        *b = (StrBuf){ 0 };
        return d;
}

void strbuf_done(StrBuf *b) {
        free(b->data);
        *b = (StrBuf){ 0 };
}
