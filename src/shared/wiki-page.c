/* SPDX-License-Identifier: MIT */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shared/macro.h"
#include "shared/sha256.h"
#include "shared/wiki-page.h"

void wiki_page_done(WikiPage *p) {
        if (!p)
                return;
        free(p->title);
        free(p->redirected_from);
        free(p->url);
        free(p->content);
        *p = (WikiPage){ 0 };
}

static bool data_name_byte_ok(unsigned char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
                c == '-' || c == '.' || c == '(' || c == ')' || c == ',';
}

#define WIKI_SUFFIX ".wiki"
#define HASH_MARK_LEN (1 + 16) /* "~" + 16 hex digits */

int wiki_page_data_file_name(const char *title, size_t len, char **ret) {
        static const char hex[] = "0123456789ABCDEF";
        _cleanup_free_ char *s = NULL;
        size_t o = 0, limit = NAME_MAX - STRLEN(WIKI_SUFFIX);

        if (len == 0)
                return -EINVAL;
        if (len > (SIZE_MAX - 32) / 3)
                return -ENOMEM;
        s = malloc(3 * len + HASH_MARK_LEN + STRLEN(WIKI_SUFFIX) + 1);
        if (!s)
                return -ENOMEM;
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char) title[i];

                if (c == ' ')
                        s[o++] = '_';
                else if (data_name_byte_ok(c))
                        s[o++] = (char) c;
                else {
                        s[o++] = '%';
                        s[o++] = hex[c >> 4];
                        s[o++] = hex[c & 15];
                }
        }
        if (o > limit) {
                /* Too long for one directory entry: cut, never inside an
                 * escape, and name the whole title by its hash. */
                uint8_t d[SHA256_DIGEST_SIZE];
                char h[65];
                int r;

                o = limit - HASH_MARK_LEN;
                if (s[o - 1] == '%')
                        o -= 1;
                else if (s[o - 2] == '%')
                        o -= 2;
                r = sha256(title, len, d);
                if (r < 0)
                        return r;
                sha256_to_hex(d, h);
                s[o++] = '~';
                memcpy(s + o, h, 16);
                o += 16;
        }
        memcpy(s + o, WIKI_SUFFIX, STRLEN(WIKI_SUFFIX) + 1);
        *ret = TAKE_PTR(s);
        return 0;
}
