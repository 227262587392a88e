/* SPDX-License-Identifier: MIT */
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
