/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <stdint.h>

#include "shared/macro.h"
#include "shared/utf8.h"

size_t utf8_decode(const uint8_t *s, size_t n, uint32_t *ret_cp) {
        uint32_t cp;
        size_t len;

        if (s[0] < 0x80) {
                if (ret_cp)
                        *ret_cp = s[0];
                return 1;
        }
        if (s[0] >= 0xc2 && s[0] <= 0xdf) {
                len = 2;
                cp = s[0] & 0x1f;
        } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
                len = 3;
                cp = s[0] & 0x0f;
        } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
                len = 4;
                cp = s[0] & 0x07;
        } else
                return 0; /* a continuation byte, C0/C1 (always overlong), F5..FF */

        if (n < len)
                return 0;
        for (size_t i = 1; i < len; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
                cp = cp << 6 | (s[i] & 0x3f);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || (cp >= 0xd800 && cp <= 0xdfff) ||
            cp > 0x10ffff)
                return 0;
        if (ret_cp)
                *ret_cp = cp;
        return len;
}

size_t utf8_decode_no_c1(const uint8_t *s, size_t n) {
        uint32_t cp;
        size_t len = utf8_decode(s, n, &cp);

        /* C1 controls (U+0080..U+009F) are controls too. */
        if (len == 2 && cp < 0xa0)
                return 0;
        return len;
}

bool utf8_is_valid(const char *s, size_t n) {
        const uint8_t *p = (const uint8_t *) s;

        assert(s || n == 0);

        for (size_t i = 0; i < n;) {
                size_t l;

                if (p[i] < 0x80) { /* the common case, byte by byte */
                        i++;
                        continue;
                }
                l = utf8_decode(p + i, n - i, NULL);
                if (l == 0)
                        return false;
                i += l;
        }
        return true;
}

size_t utf8_count(const char *s, size_t n) {
        size_t count = 0;

        for (size_t i = 0; i < n; i++)
                count += ((uint8_t) s[i] & 0xc0) != 0x80;
        return count;
}

size_t utf8_cut(const char *s, size_t n, size_t max) {
        if (max >= n)
                return n;
        /* Back up over continuation bytes: s[max] is then the first byte of
         * a character, so cutting before it splits nothing. */
        while (max > 0 && ((uint8_t) s[max] & 0xc0) == 0x80)
                max--;
        return max;
}

#define UTF8_REPLACEMENT "\xEF\xBF\xBD"

int utf8_make_valid(const char *s, size_t n, char **ret, size_t *ret_len) {
        const uint8_t *p = (const uint8_t *) s;
        char *buf, *q;

        assert(s || n == 0);
        assert(ret);

        /* Each input byte becomes at most 3 output bytes. */
        if (n > (SIZE_MAX - 1) / 3)
                return -ENOMEM;
        buf = malloc(n * 3 + 1);
        if (!buf)
                return -ENOMEM;
        q = buf;
        for (size_t i = 0; i < n;) {
                size_t l = p[i] == 0 ? 0 : utf8_decode(p + i, n - i, NULL);

                if (l == 0) {
                        memcpy(q, UTF8_REPLACEMENT, 3);
                        q += 3;
                        i++;
                        continue;
                }
                memcpy(q, p + i, l);
                q += l;
                i += l;
        }
        *q = '\0';
        if (ret_len)
                *ret_len = (size_t) (q - buf);
        *ret = buf;
        return 0;
}
