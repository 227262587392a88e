/* SPDX-License-Identifier: MIT */
/* Fuzz target for the sandbox's byte parsers: what a run writes to stdout
 * and stderr (output.h: the capped head/tail buffer and its sanitizer), and
 * the names that come from the wiki or the container (files.h: the /data
 * file name rule, the artifact name). The first byte picks the cap and how
 * the input is cut into writes. Besides memory errors it checks:
 *  - the rendered text is valid UTF-8, has no control character but LF and
 *    TAB, and is at most OUTPUT_RENDER_MAX(cap) bytes;
 *  - nothing is lost from the count: head + tail + dropped == total;
 *  - without a cut, sanitizing the whole input equals the rendered text;
 *  - a /data name is at most 255 bytes, ends in ".wiki", and has only
 *    the rule's bytes, '%' and '~';
 *  - an artifact name is valid UTF-8 without controls or '/', 1..255 bytes. */

#include <limits.h>
#include <stdint.h>

#include "sandbox/files.h"
#include "sandbox/output.h"
#include "shared/wiki-page.h"
#include "shared/macro.h"
#include "fuzz.h"

/* Decode UTF-8 independently of the code under test; -1 if invalid. */
static long next_code_point(const uint8_t *s, size_t len, size_t *i) {
        uint8_t c = s[*i];
        size_t n;
        long cp;

        if (c < 0x80) {
                (*i)++;
                return c;
        }
        if ((c & 0xe0) == 0xc0)
                n = 2, cp = c & 0x1f;
        else if ((c & 0xf0) == 0xe0)
                n = 3, cp = c & 0x0f;
        else if ((c & 0xf8) == 0xf0)
                n = 4, cp = c & 0x07;
        else
                return -1;
        if (*i + n > len)
                return -1;
        for (size_t k = 1; k < n; k++) {
                if ((s[*i + k] & 0xc0) != 0x80)
                        return -1;
                cp = (cp << 6) | (s[*i + k] & 0x3f);
        }
        if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
            (cp >= 0xd800 && cp <= 0xdfff))
                return -1;
        *i += n;
        return cp;
}

static void check_text(const char *t, size_t len, bool allow_lf_tab) {
        size_t i = 0;

        CHECK(strlen(t) == len);
        while (i < len) {
                long cp = next_code_point((const uint8_t *) t, len, &i);
                CHECK(cp >= 0);
                if (allow_lf_tab && (cp == '\n' || cp == '\t'))
                        continue;
                CHECK(cp >= 0x20 && cp != 0x7f && !(cp >= 0x80 && cp < 0xa0));
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        OutputBuffer b;
        size_t cap, step, len;
        char *text = NULL, *whole = NULL, *name = NULL, *title;

        if (size < 1)
                return 0;
        cap = 2 + (size_t) data[0] * 3;
        step = 1 + (size_t) (data[0] % 7) * 13;
        data++;
        size--;

        CHECK(output_buffer_init(&b, cap) == 0);
        for (size_t i = 0; i < size; i += step)
                output_buffer_append(&b, data + i, MIN(step, size - i));
        CHECK(b.total == size);
        CHECK(b.head_len + b.tail_len + output_buffer_dropped(&b) == b.total);
        CHECK(output_buffer_render(&b, &text, &len) == 0);
        CHECK(len <= OUTPUT_RENDER_MAX(cap));
        check_text(text, len, true);
        if (output_buffer_dropped(&b) == 0) {
                size_t wl;
                CHECK(output_sanitize(data, size, &whole, &wl) == 0);
                CHECK(wl == len && memcmp(whole, text, len) == 0);
                free(whole);
        }
        free(text);
        output_buffer_done(&b);

        if (size > 0 && wiki_page_data_file_name((const char *) data, size, &name) == 0) {
                size_t n = strlen(name);
                CHECK(n <= NAME_MAX && n > 5 && streq(name + n - 5, ".wiki"));
                for (size_t i = 0; i < n; i++)
                        CHECK(strchr(
                                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.(),%~",
                                name[i]));
                free(name);
        }

        /* A directory entry name: no NUL, at most 255 bytes. */
        title = strndup((const char *) data, MIN(size, (size_t) NAME_MAX));
        CHECK(title);
        CHECK(sandbox_artifact_name(title, &name) == 0);
        len = strlen(name);
        CHECK(len >= 1 && len <= NAME_MAX && !strchr(name, '/'));
        CHECK(!streq(name, ".") && !streq(name, ".."));
        check_text(name, len, false);
        free(name);
        free(title);
        return 0;
}
