/* SPDX-License-Identifier: MIT */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shared/macro.h"
#include "shared/source.h"

/* Verified citations (docs/QUERY.md "Citations", API.md 9): pure, bytes in,
 * structs out, no I/O.
 *
 * The model ends its answer with one line per marker,
 *     [n] Page title: "exact quote"
 * citation_parse_answer() takes those lines (and a heading line such as
 * "Sources:" just above them) out of the answer; citation_normalize() turns
 * wikitext into the text a reader sees; citation_verify() looks the quote
 * up in the text of the revision the query read and builds the permalink
 * with a text fragment (citation_text_fragment()). */

#define CITATION_MAX 64             /* citation lines read from one answer; later ones stay in the answer */
#define CITATION_N_MAX 999          /* the largest marker number */
#define CITATION_TITLE_MAX 255      /* bytes, as MediaWiki's own limit */
#define CITATION_QUOTE_MAX 2000     /* bytes of a quote as written; a longer line is not a citation line */
#define CITATION_QUOTE_MIN_CHARS 12 /* code points of a normalized quote; a shorter one is never verified */

/* CitationStatus, the status of a record's citation, is shared/source.h's. */

typedef struct Citation {
        unsigned n;  /* 1..CITATION_N_MAX */
        char *title; /* as the model wrote it, trimmed */
        char *quote; /* as the model wrote it, without its quotation marks */
} Citation;

void citation_done(Citation *c);
void citation_free_many(Citation *c, size_t n);

/* Reads the citation lines of an answer (size bytes of valid UTF-8) leniently:
 * a list bullet ("-", "*", "+", "•") before "[n]", typographic quotes
 * (“…”, „…“, «…», "…"), a title that contains ": " (the separator is the
 * last ': "' of the line), one heading line ("Sources:", "**Citations**",
 * "## References", …) just above a run of citation lines. Each such line
 * and its heading line are taken out; every other line stays as written.
 * A marker number seen before keeps its first line (the later line is
 * taken out too). Citations are returned in the order of n.
 * Returns 0, the rest of the answer in *ret_answer (trailing blank lines
 * dropped; NUL-terminated), the citations in *ret (NULL when none, free with
 * citation_free_many()) and their number in *ret_n; -ENOMEM. */
int citation_parse_answer(const char *answer, size_t size, char **ret_answer, Citation **ret, size_t *ret_n);

typedef struct CitationText {
        char *text; /* reader text: NFC, whitespace folded to single spaces, no markup; NUL-terminated */
        size_t size;
        /* the headings, in order: heading i starts at offsets[i] in text and
         * is headings[i] (normalized the same way) */
        size_t *offsets;
        char **headings;
        size_t n_headings;
} CitationText;

void citation_text_done(CitationText *t);

/* Turns size bytes of wikitext (any bytes: invalid UTF-8 is made valid
 * first) into the text a reader sees, as docs/QUERY.md describes:
 * [[target|label]] -> label, [[target]] -> target, File/Image/Category
 * links, templates {{…}}, <ref>…</ref>, comments and magic words dropped,
 * HTML tags dropped (their content kept), '' and ''' dropped, external links
 * to their label, list and table markup at the start of a line dropped,
 * entities decoded, invisible format characters (soft hyphen, zero-width
 * and direction marks) dropped, Unicode NFC, every run of whitespace one
 * space, no space at either end. Linear in size. Returns 0; -ENOMEM; -EIO
 * when normalization fails. */
int citation_normalize(const char *wikitext, size_t size, CitationText *ret);

/* The Text Fragments directive (WICG scroll-to-text-fragment) for a quote
 * in reader text: "#:~:text=" and the quote percent-encoded (every byte
 * outside A-Z a-z 0-9 . _ ~ as %XX, so '-', ',' and '&' are escaped); a
 * quote of more than 10 words as "start,end" (its first 5 and last 5
 * words). Returns 0 and a new string; -ENOMEM. */
int citation_text_fragment(const char *quote, char **ret);

/* The permalink of a revision from the wiki's api.php URL: its last path
 * segment replaced by index.php, query and fragment dropped, then
 * "?oldid=REV". Returns 0 and a new string; -EINVAL (not an http(s) URL);
 * -ENOMEM. */
int citation_permalink(const char *api_url, uint64_t revision_id, char **ret);

typedef struct CitationCheck {
        CitationStatus status;
        char *section;      /* the heading above the quote; NULL when none or not verified */
        char *reader_quote; /* the quote normalized, NULL when the normalization failed */
} CitationCheck;

void citation_check_done(CitationCheck *c);

/* Looks quote up in page (the normalized text of the revision read; NULL:
 * the page was not read). A match must start and end on a character that is
 * not a combining mark on either side (no half of a base letter with its
 * accents). The first occurrence decides the section. Returns 0 and *ret;
 * -ENOMEM; -EIO. */
int citation_verify(const CitationText *page, const char *quote, CitationCheck *ret);

/* A page this query read, as the citations see it (borrowed). */
typedef struct CitationSource {
        const char *title;           /* after redirects */
        const char *redirected_from; /* the title asked for, or NULL */
        uint64_t revision_id;
        const char *text; /* the wikitext read; NULL: not kept (over the query's budget) */
        size_t size;
} CitationSource;

/* The citations of an answer (API.md 9, "citations"): the citation lines are
 * taken out of answer (citation_parse_answer()), each cited title is looked
 * up among the pages read (as written, with '_' as ' ' and the first letter
 * upper-case, or as the title asked for before a redirect), its quote
 * verified in that page's text (citation_verify()), and the result written
 * as the JSON array of the record: {"n", "title", "revision_id", "quote",
 * "status", "url", "section"} in the order of n; "title" is the page's when
 * it was read, the model's otherwise; "url" is the permalink of the revision
 * (api_url's index.php?oldid=REV), with the text fragment of the quote when
 * verified, null when the page was not read. Counts per status are added to
 * counts (may be NULL). Returns 0, the answer without the citation lines in
 * *ret_answer and the array in *ret_json (both new); -ENOMEM; -EIO. */
int citation_answer(
        const char *answer,
        const CitationSource *pages,
        size_t n_pages,
        const char *api_url,
        char **ret_answer,
        char **ret_json,
        unsigned counts[_CITATION_STATUS_MAX]);
