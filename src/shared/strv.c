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
