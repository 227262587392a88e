/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <stdint.h>

#include "shared/macro.h"
#include "shared/sanitize.h"

/* How it works: one pass over the input, stopping early once the output is
 * longer than the limit.
 *
 * Rules 2 and 3 only ever match ASCII characters, and rule 0 never folds an
 * ASCII byte into a U+FFFD (a maximal subpart holds only bytes >= 0x80). So
 * both rules can match directly on the input bytes: every byte >= 0x80 belongs
 * to some non-ASCII character, valid or replaced, and those are neither word
 * nor token characters, exactly as with re.ASCII.
 *
 * The stages are chained: rules 0 and 2 feed rule 3, which feeds rules 4 and
 * 5. Each stage only appends to the next and never takes anything back, so
 * once the output holds more than SANITIZE_MAX_BYTES bytes nothing later can
 * change the part that is kept.
 *
 * Rule 3 works per maximal run of [A-Za-z0-9_-]. A match cannot cross a
 * character outside the run, so it lies within one run. With backtracking,
 * a match starting at offset s ends at the largest \b offset e in the run with
 * e - s >= 32; the leftmost start is tried first. So if f is the first and l
 * the last offset of the run where \b holds, the run holds a match iff
 * l - f >= 32, that match is [f, l), and no second one fits after it (it would
 * need a \b beyond l). Before f and after l the run holds only '-'. */

/* Rule 3: the shortest token that is redacted. */
#define TOKEN_MIN_CHARS 32

/* Output bytes collected: one more than the limit, so that rule 5 can see
 * whether the character at the limit ends within it. */
#define OUT_CAP (SANITIZE_MAX_BYTES + 1)

#define BEARER "bearer" /* in lower case */
#define REDACTED "[REDACTED]"
#define BEARER_REDACTED "Bearer " REDACTED
#define UTF8_REPLACEMENT "\xEF\xBF\xBD" /* U+FFFD */

typedef struct Sanitizer {
        /* Rule 3: the current run of [A-Za-z0-9_-] in the output of rule 2.
         * Only its first OUT_CAP bytes are kept: no more of it can ever be
         * output. Offsets are from the start of the run. */
        char run[OUT_CAP];
        size_t run_len;        /* of the whole run, kept or not */
        size_t first_boundary; /* first offset where \b holds, SIZE_MAX if none yet */
        size_t last_boundary;  /* last offset where \b holds, SIZE_MAX if none yet */
        bool run_last_word;    /* the last character of the run is a word character */

        /* Rules 4 and 5: what will be output, before the cut. */
        char out[OUT_CAP];
        size_t out_len;
} Sanitizer;

/* Character classes, in ASCII regardless of the locale. */
static bool is_word_char(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Rule 3's [A-Za-z0-9_-] */
static bool is_run_char(char c) {
        return is_word_char(c) || c == '-';
}

/* Rule 2's [A-Za-z0-9_.-] */
static bool is_bearer_token_char(char c) {
        return is_run_char(c) || c == '.';
}

/* Rule 2's \s: space, TAB, LF, VT, FF, CR (Python's \s with re.ASCII). */
static bool is_space_char(char c) {
        return c == ' ' || (c >= '\t' && c <= '\r');
}

static bool out_full(const Sanitizer *s) {
        return s->out_len >= OUT_CAP;
}

/* Rules 4 and 5: CR and LF become a space; bytes beyond OUT_CAP are dropped. */
static void out_put(Sanitizer *s, char c) {
        if (out_full(s))
                return;
        s->out[s->out_len++] = c == '\r' || c == '\n' ? ' ' : c;
}

static void out_put_n(Sanitizer *s, const char *p, size_t n) {
        for (size_t i = 0; i < n && !out_full(s); i++)
                out_put(s, p[i]);
}

static void out_put_repeat(Sanitizer *s, char c, size_t n) {
        for (size_t i = 0; i < n && !out_full(s); i++)
                out_put(s, c);
}

static void run_reset(Sanitizer *s) {
        s->run_len = 0;
        s->first_boundary = s->last_boundary = SIZE_MAX;
        s->run_last_word = false;
}

static void run_put(Sanitizer *s, char c) {
        bool word = is_word_char(c);

        /* \b before c: c and the character before it differ in being word
         * characters. Before the first character of the run stands a
         * character outside it, which is not a word character. */
        if (word != (s->run_len > 0 && s->run_last_word)) {
                if (s->first_boundary == SIZE_MAX)
                        s->first_boundary = s->run_len;
                s->last_boundary = s->run_len;
        }
        if (s->run_len < sizeof(s->run))
                s->run[s->run_len] = c;
        s->run_len++;
        s->run_last_word = word;
}

/* The run has ended: apply rule 3 to it and pass it on. */
static void run_flush(Sanitizer *s) {
        if (s->run_len == 0)
                return;

        /* \b after the run if it ends in a word character, since what follows
         * is not one. (Then a \b was also seen before its first word
         * character, so first_boundary is set.) */
        if (s->run_last_word)
                s->last_boundary = s->run_len;

        if (s->first_boundary != SIZE_MAX && s->last_boundary - s->first_boundary >= TOKEN_MIN_CHARS) {
                /* Only '-' lies outside [first_boundary, last_boundary). */
                out_put_repeat(s, '-', s->first_boundary);
                out_put_n(s, REDACTED, STRLEN(REDACTED));
                out_put_repeat(s, '-', s->run_len - s->last_boundary);
        } else
                out_put_n(s, s->run, MIN(s->run_len, sizeof(s->run)));

        run_reset(s);
}

/* Rule 3's input: the output of rule 2, one byte at a time. */
static void redact_put(Sanitizer *s, char c) {
        if (is_run_char(c))
                run_put(s, c);
        else {
                run_flush(s);
                out_put(s, c);
        }
}

static void redact_put_n(Sanitizer *s, const char *p, size_t n) {
        for (size_t i = 0; i < n; i++)
                redact_put(s, p[i]);
}

/* Rule 2: the length of the match of Bearer\s+[A-Za-z0-9_.-]+ at p, or 0.
 * The two character classes are disjoint, so greedy matching with
 * backtracking comes down to: all the spaces, then all the token
 * characters, at least one of each. */
static size_t bearer_match(const char *p, size_t n) {
        size_t i, token;

        if (n < STRLEN(BEARER))
                return 0;
        for (i = 0; i < STRLEN(BEARER); i++) {
                char c = p[i] >= 'A' && p[i] <= 'Z' ? (char) (p[i] - 'A' + 'a') : p[i];

                if (c != BEARER[i])
                        return 0;
        }
        while (i < n && is_space_char(p[i]))
                i++;
        if (i == STRLEN(BEARER))
                return 0;
        token = i;
        while (i < n && is_bearer_token_char(p[i]))
                i++;
        if (i == token)
                return 0;
        return i;
}

/* Rule 0: at p (n > 0 bytes) starts either a valid UTF-8 character, then
 * returns true and its length in *ret_len, or an invalid sequence, then
 * returns false and in *ret_len the length of its maximal subpart (at least
 * 1), which becomes one U+FFFD. This is the Unicode "maximal subpart"
 * practice that WHATWG and Python's decoder follow. Valid sequences are those
 * of Unicode table 3-7: no overlong forms, no surrogates, nothing above
 * U+10FFFF. */
static bool utf8_next(const uint8_t *p, size_t n, size_t *ret_len) {
        uint8_t lo = 0x80, hi = 0xBF; /* range of the next continuation byte */
        size_t need, k;

        if (p[0] < 0x80) {
                *ret_len = 1;
                return true;
        }
        if (p[0] >= 0xC2 && p[0] <= 0xDF)
                need = 1;
        else if (p[0] >= 0xE0 && p[0] <= 0xEF) {
                need = 2;
                if (p[0] == 0xE0)
                        lo = 0xA0; /* overlong */
                else if (p[0] == 0xED)
                        hi = 0x9F; /* surrogates */
        } else if (p[0] >= 0xF0 && p[0] <= 0xF4) {
                need = 3;
                if (p[0] == 0xF0)
                        lo = 0x90; /* overlong */
                else if (p[0] == 0xF4)
                        hi = 0x8F; /* above U+10FFFF */
        } else {
                /* A continuation byte, C0, C1 or F5..FF: never valid anywhere. */
                *ret_len = 1;
                return false;
        }

        for (k = 1; k <= need; k++) {
                if (k >= n || p[k] < lo || p[k] > hi) {
                        *ret_len = k;
                        return false;
                }
                lo = 0x80;
                hi = 0xBF;
        }
        *ret_len = k;
        return true;
}

int sanitize_message_full(const char *msg, size_t len, char **ret, size_t *ret_len) {
        const uint8_t *p = (const uint8_t *) msg;
        Sanitizer s;
        size_t n;
        char *r;

        assert(msg || len == 0);
        assert(ret);

        s.out_len = 0;
        run_reset(&s);

        for (size_t i = 0; i < len && !out_full(&s); i += n) {
                if (p[i] < 0x80) {
                        /* Rule 2; a match can start only at an ASCII byte. */
                        n = bearer_match(msg + i, len - i);
                        if (n > 0)
                                redact_put_n(&s, BEARER_REDACTED, STRLEN(BEARER_REDACTED));
                        else {
                                redact_put(&s, msg[i]);
                                n = 1;
                        }
                } else {
                        /* Rule 0. Not a word character: it ends any run. */
                        run_flush(&s);
                        if (utf8_next(p + i, len - i, &n))
                                out_put_n(&s, msg + i, n);
                        else
                                out_put_n(&s, UTF8_REPLACEMENT, STRLEN(UTF8_REPLACEMENT));
                }
        }
        run_flush(&s);

        /* Rule 5: the output is valid UTF-8, so if the byte at the limit is a
         * continuation byte, the character it belongs to started before the
         * limit and does not fit: cut before it. */
        n = s.out_len;
        if (n > SANITIZE_MAX_BYTES) {
                n = SANITIZE_MAX_BYTES;
                while (n > 0 && ((uint8_t) s.out[n] & 0xC0) == 0x80)
                        n--;
        }

        r = malloc(n + 1);
        if (!r)
                return -ENOMEM;
        memcpy(r, s.out, n);
        r[n] = '\0';

        *ret = r;
        if (ret_len)
                *ret_len = n;
        return 0;
}

int sanitize_message(const char *msg, size_t len, char **ret) {
        return sanitize_message_full(msg, len, ret, NULL);
}
