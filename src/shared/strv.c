/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "shared/strv.h"

char **strv_free(char **l) {
        for (char **p = l; p && *p; p++)
                free(*p);
        free(l);
        return NULL;
}

size_t strv_length(char *const *l) {
        size_t n = 0;

        for (char *const *p = l; p && *p; p++)
                n++;
        return n;
}

char **strv_copy(char *const *l) {
        size_t n = strv_length(l);
        char **c = calloc(n + 1, sizeof(char *));

        if (!c)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                c[i] = strdup(l[i]);
                if (!c[i])
                        return strv_free(c);
        }
        return c;
}

bool strv_contains(char *const *l, const char *s) {
        for (; l && *l; l++)
                if (streq(*l, s))
                        return true;
        return false;
}

int strv_extend_unique(char ***l, size_t *n, const char *s) {
        _cleanup_free_ char *c = NULL;
        char **m;

        assert(l && n && s);

        if (strv_contains(*l, s))
                return 0;
        c = strdup(s);
        if (!c)
                return -ENOMEM;
        m = reallocarray(*l, *n + 2, sizeof(char *));
        if (!m)
                return -ENOMEM;
        m[(*n)++] = TAKE_PTR(c);
        m[*n] = NULL;
        *l = m;
        return 0;
}

int strv_split_list(const char *s, char ***ret) {
        _cleanup_(strv_freep) char **l = NULL;
        size_t n = 0;

        assert(ret);

        l = calloc(1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        for (const char *p = s; p && *p;) {
                const char *e = strchrnul(p, ',');
                const char *b = p, *t = e;
                char **m;

                while (b < t && (*b == ' ' || *b == '\t'))
                        b++;
                while (t > b && (t[-1] == ' ' || t[-1] == '\t'))
                        t--;
                if (t > b) {
                        m = reallocarray(l, n + 2, sizeof(char *));
                        if (!m)
                                return -ENOMEM;
                        l = m;
                        l[n] = strndup(b, (size_t) (t - b));
                        if (!l[n])
                                return -ENOMEM;
                        l[++n] = NULL;
                }
                p = *e ? e + 1 : e;
        }
        *ret = TAKE_PTR(l);
        return 0;
}
