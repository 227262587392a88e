/* SPDX-License-Identifier: MIT */
/* Fuzz target for the sanitizer (API.md section 2). Besides memory errors it
 * checks properties every output must have, and aborts if one fails:
 *  - at most SANITIZE_MAX_BYTES bytes, NUL-terminated, the same through both
 *    entry points;
 *  - valid UTF-8 (checked here by decoding code points, not the way
 *    sanitize.c does it);
 *  - no CR or LF;
 *  - no match of rule 2's pattern is left (rule 3 and the cut cannot create
 *    one: "[" and "]" are not token characters);
 *  - no token rule 3 would redact is left: in every maximal run of
 *    [A-Za-z0-9_-], the first and last \b are less than 32 apart (the cut
 *    only shortens a run, and cannot move its last \b further out);
 *  - an input that none of the rules touch comes out unchanged.
 * The output is not idempotent in general, so that is not checked. */

#include <stdint.h>
#include <strings.h>

#include "shared/macro.h"
#include "shared/sanitize.h"
#include "fuzz.h"

static bool is_word(uint8_t c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static bool is_run(uint8_t c) {
        return is_word(c) || c == '-';
}

static bool is_space(uint8_t c) {
        return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* Strict UTF-8: decode each code point and reject overlong forms,
 * surrogates and values above U+10FFFF. */
static bool valid_utf8(const uint8_t *p, size_t n) {
        for (size_t i = 0; i < n;) {
                uint32_t cp;
                size_t len;

                if (p[i] < 0x80) {
                        i++;
                        continue;
                }
                if ((p[i] & 0xE0) == 0xC0) {
                        len = 2;
                        cp = p[i] & 0x1F;
                } else if ((p[i] & 0xF0) == 0xE0) {
                        len = 3;
                        cp = p[i] & 0x0F;
                } else if ((p[i] & 0xF8) == 0xF0) {
                        len = 4;
                        cp = p[i] & 0x07;
                } else
                        return false;
                if (n - i < len)
                        return false;
                for (size_t k = 1; k < len; k++) {
                        if ((p[i + k] & 0xC0) != 0x80)
                                return false;
                        cp = cp << 6 | (p[i + k] & 0x3F);
                }
                if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
                    (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
                        return false;
                i += len;
        }
        return true;
}

/* Does Bearer\s+[A-Za-z0-9_.-]+ (ASCII case-insensitive) match anywhere? */
static bool has_bearer_match(const uint8_t *p, size_t n) {
        for (size_t i = 0; i + 6 < n; i++) {
                size_t j = i + 6;

                if (strncasecmp((const char *) p + i, "bearer", 6) != 0)
                        continue;
                while (j < n && is_space(p[j]))
                        j++;
                if (j > i + 6 && j < n && (is_run(p[j]) || p[j] == '.'))
                        return true;
        }
        return false;
}

/* Is there a maximal run of [A-Za-z0-9_-] with \b at two offsets at least 32
 * apart, i.e. something \b[A-Za-z0-9_-]{32,}\b matches? */
static bool has_token(const uint8_t *p, size_t n) {
        for (size_t i = 0; i < n;) {
                size_t start = i, first = SIZE_MAX, last = SIZE_MAX;

                if (!is_run(p[i])) {
                        i++;
                        continue;
                }
                for (; i <= n; i++) {
                        bool before = i > start && is_word(p[i - 1]);
                        bool after = i < n && is_word(p[i]);

                        if (before != after) {
                                if (first == SIZE_MAX)
                                        first = i;
                                last = i;
                        }
                        if (i == n || !is_run(p[i]))
                                break;
                }
                if (first != SIZE_MAX && last - first >= 32)
                        return true;
        }
        return false;
}

/* Would no rule change this input (apart from the cut)? */
static bool untouched_by_rules(const uint8_t *p, size_t n) {
        return valid_utf8(p, n) && !memchr(p, '\r', n) && !memchr(p, '\n', n) && !has_bearer_match(p, n) &&
                !has_token(p, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *out = NULL, *out2 = NULL;
        const uint8_t *o;
        size_t len;

        if (sanitize_message_full((const char *) data, size, &out, &len) < 0)
                return 0; /* -ENOMEM: nothing to check */
        o = (const uint8_t *) out;

        CHECK(len <= SANITIZE_MAX_BYTES);
        CHECK(out[len] == '\0');
        CHECK(size > 0 || len == 0);
        CHECK(valid_utf8(o, len));
        CHECK(!memchr(o, '\r', len));
        CHECK(!memchr(o, '\n', len));
        CHECK(!has_bearer_match(o, len));
        CHECK(!has_token(o, len));

        if (untouched_by_rules(data, size)) {
                /* Only the cut applies: a prefix, shorter by less than one
                 * character (4 bytes), and the whole input if it fits. */
                CHECK(memcmp(o, data, len) == 0);
                CHECK(len == MIN(size, (size_t) SANITIZE_MAX_BYTES) ||
                      (size > SANITIZE_MAX_BYTES && len > SANITIZE_MAX_BYTES - 4));
        }

        if (sanitize_message((const char *) data, size, &out2) >= 0)
                CHECK(strcmp(out2, out) == 0);
        return 0;
}
