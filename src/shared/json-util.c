/* SPDX-License-Identifier: MIT */
#include <assert.h>

#include "shared/json-util.h"

char *json_quote(const char *s) {
        size_t n, k = 0;
        char *out;

        assert(s);

        n = strlen(s);
        out = malloc(n * 6 + 3);
        if (!out)
                return NULL;
        out[k++] = '"';
        for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
                if (*p == '"' || *p == '\\') {
                        out[k++] = '\\';
                        out[k++] = (char) *p;
                } else if (*p < 0x20 || *p == 0x7f) {
                        k += (size_t) snprintf(out + k, 7, "\\u%04x", *p);
                } else
                        out[k++] = (char) *p;
        }
        out[k++] = '"';
        out[k] = 0;
        return out;
}
