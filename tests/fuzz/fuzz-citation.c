/* SPDX-License-Identifier: MIT */
/* Fuzz target for the citations (src/query/citation.c): the input is cut at
 * its first NUL byte into an answer and a page (no NUL: both are the whole
 * input). Besides memory errors it checks:
 *  - the parser returns at most CITATION_MAX citations, in increasing n,
 *    each with a non-empty title and quote of bounded length, and an answer
 *    no longer than the input;
 *  - the normalizer's text is valid UTF-8 with no control character, no two
 *    spaces in a row and no space at either end; the headings' offsets are
 *    increasing and inside the text, each heading found at its offset;
 *  - normalizing the normalized text changes nothing except where markup
 *    characters that came from entities (&lt; …) form new markup, so that is
 *    checked only for text without such characters;
 *  - every citation's verification ends in a status, verified only when its
 *    normalized quote is in the text; its fragment starts "#:~:text=" and
 *    holds no '-', ',', '&' or space except the one start,end comma. */

#include <string.h>

#include "fuzz.h"
#include "query/citation.h"
#include "shared/macro.h"
#include "shared/utf8.h"

static void check_text(const CitationText *t) {
        CHECK(t->text);
        CHECK(strlen(t->text) == t->size);
        CHECK(utf8_is_valid(t->text, t->size));
        for (size_t i = 0; i < t->size; i++) {
                CHECK((unsigned char) t->text[i] >= 0x20 && t->text[i] != 0x7f);
                CHECK(!(t->text[i] == ' ' && i + 1 < t->size && t->text[i + 1] == ' '));
        }
        CHECK(t->size == 0 || (t->text[0] != ' ' && t->text[t->size - 1] != ' '));
        for (size_t h = 0; h < t->n_headings; h++) {
                CHECK(t->offsets[h] <= t->size);
                CHECK(h == 0 || t->offsets[h] >= t->offsets[h - 1]);
                CHECK(strncmp(t->text + t->offsets[h], t->headings[h], strlen(t->headings[h])) == 0);
        }
}

static void check_fragment(const char *quote) {
        _cleanup_free_ char *f = NULL;
        unsigned commas = 0;

        CHECK(citation_text_fragment(quote, &f) >= 0);
        CHECK(strncmp(f, "#:~:text=", 9) == 0);
        for (const char *p = f + 9; *p; p++) {
                CHECK(*p != '-' && *p != '&' && *p != ' ' && (unsigned char) *p < 0x80);
                commas += *p == ',';
        }
        CHECK(commas <= 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *s = (const char *) data;
        const char *nul = memchr(s, 0, size);
        size_t answer_n = nul ? (size_t) (nul - s) : size;
        const char *page = nul ? nul + 1 : s;
        size_t page_n = nul ? size - answer_n - 1 : size;
        _cleanup_free_ char *rest = NULL;
        CitationText t = { 0 }, again = { 0 };
        Citation *c = NULL;
        size_t n = 0;

        if (size > 256 * 1024)
                return 0;

        if (citation_parse_answer(s, answer_n, &rest, &c, &n) < 0)
                return 0;
        CHECK(n <= CITATION_MAX);
        CHECK(strlen(rest) <= answer_n * 3); /* U+FFFD for each invalid byte */
        for (size_t i = 0; i < n; i++) {
                CHECK(c[i].n >= 1 && c[i].n <= CITATION_N_MAX);
                CHECK(i == 0 || c[i].n > c[i - 1].n);
                CHECK(c[i].title[0] && strlen(c[i].title) <= CITATION_TITLE_MAX);
                CHECK(c[i].quote[0] && strlen(c[i].quote) <= CITATION_QUOTE_MAX);
        }

        if (citation_normalize(page, page_n, &t) < 0)
                goto finish;
        check_text(&t);
        if (!strpbrk(t.text, "<>[]{}'&=|!*#:;_-") && citation_normalize(t.text, t.size, &again) >= 0) {
                CHECK(streq(again.text, t.text));
                citation_text_done(&again);
        }
        check_fragment(t.text);

        for (size_t i = 0; i < n; i++) {
                CitationCheck k = { 0 };

                if (citation_verify(&t, c[i].quote, &k) < 0)
                        continue;
                CHECK(k.status >= 0 && k.status < _CITATION_STATUS_MAX);
                CHECK(k.reader_quote);
                if (k.status == CITATION_VERIFIED)
                        CHECK(strstr(t.text, k.reader_quote));
                check_fragment(k.reader_quote);
                citation_check_done(&k);
        }

finish:
        citation_text_done(&t);
        citation_free_many(c, n);
        return 0;
}
