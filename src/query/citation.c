/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include "query/citation.h"
#include "shared/json-util.h"
#include "shared/strbuf.h"
#include "shared/utf8.h"

static int buf_putc(StrBuf *b, char c) {
        return strbuf_put(b, &c, 1);
}

static int buf_put_cp(StrBuf *b, uint32_t cp) {
        char u[4];
        size_t n;

        if (cp < 0x80) {
                u[0] = (char) cp;
                n = 1;
        } else if (cp < 0x800) {
                u[0] = (char) (0xc0 | cp >> 6);
                u[1] = (char) (0x80 | (cp & 0x3f));
                n = 2;
        } else if (cp < 0x10000) {
                u[0] = (char) (0xe0 | cp >> 12);
                u[1] = (char) (0x80 | ((cp >> 6) & 0x3f));
                u[2] = (char) (0x80 | (cp & 0x3f));
                n = 3;
        } else {
                u[0] = (char) (0xf0 | cp >> 18);
                u[1] = (char) (0x80 | ((cp >> 12) & 0x3f));
                u[2] = (char) (0x80 | ((cp >> 6) & 0x3f));
                u[3] = (char) (0x80 | (cp & 0x3f));
                n = 4;
        }
        return strbuf_put(b, u, n);
}

void citation_done(Citation *c) {
        if (!c)
                return;
        free(c->title);
        free(c->quote);
        *c = (Citation){ 0 };
}

void citation_free_many(Citation *c, size_t n) {
        for (size_t i = 0; c && i < n; i++)
                citation_done(&c[i]);
        free(c);
}

void citation_text_done(CitationText *t) {
        if (!t)
                return;
        free(t->text);
        free(t->offsets);
        for (size_t i = 0; i < t->n_headings; i++)
                free(t->headings[i]);
        free(t->headings);
        *t = (CitationText){ 0 };
}

void citation_check_done(CitationCheck *c) {
        if (!c)
                return;
        free(c->section);
        free(c->reader_quote);
        *c = (CitationCheck){ 0 };
}

/* ---- The citation lines ---- */

static bool is_blank(char c) {
        return c == ' ' || c == '\t' || c == '\r';
}

static void trim(const char **s, size_t *n) {
        while (*n > 0 && is_blank((*s)[0])) {
                (*s)++;
                (*n)--;
        }
        while (*n > 0 && is_blank((*s)[*n - 1]))
                (*n)--;
}

static bool has_prefix(const char *s, size_t n, const char *p) {
        size_t k = strlen(p);

        return n >= k && memcmp(s, p, k) == 0;
}

static bool has_suffix(const char *s, size_t n, const char *p) {
        size_t k = strlen(p);

        return n >= k && memcmp(s + n - k, p, k) == 0;
}

/* The quotation marks a quote may open with, and the ones it may close with. */
static const char *const open_quotes[] = { "\"",
                                           "\xe2\x80\x9c" /* “ */,
                                           "\xe2\x80\x9e" /* „ */,
                                           "\xc2\xab" /* « */ };
static const char *const close_quotes[] = {
        "\"", "\xe2\x80\x9d" /* ” */, "\xe2\x80\x9c" /* “ */, "\xc2\xbb" /* » */
};

static size_t open_quote_at(const char *s, size_t n) {
        for (size_t i = 0; i < ELEMENTSOF(open_quotes); i++)
                if (has_prefix(s, n, open_quotes[i]))
                        return strlen(open_quotes[i]);
        return 0;
}

static size_t close_quote_at_end(const char *s, size_t n) {
        for (size_t i = 0; i < ELEMENTSOF(close_quotes); i++)
                if (has_suffix(s, n, close_quotes[i]))
                        return strlen(close_quotes[i]);
        return 0;
}

static bool has_control(const char *s, size_t n) {
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) s[i] < 0x20 || s[i] == 0x7f)
                        return true;
        return false;
}

/* One line "[n] Title: "quote"", leniently (citation.h). */
static bool citation_parse_line(const char *s, size_t n, Citation *ret) {
        const char *title, *quote;
        size_t title_n, quote_n, k, close;
        unsigned num = 0;
        ssize_t sep = -1;
        size_t open = 0;

        if (n > CITATION_TITLE_MAX + CITATION_QUOTE_MAX + 64)
                return false;
        trim(&s, &n);
        if (n > 0 && (s[0] == '-' || s[0] == '*' || s[0] == '+')) {
                s++;
                n--;
        } else if (has_prefix(s, n, "\xe2\x80\xa2")) { /* • */
                s += 3;
                n -= 3;
        }
        trim(&s, &n);
        if (n < 3 || s[0] != '[')
                return false;
        for (k = 1; k < n && k <= 3 && s[k] >= '0' && s[k] <= '9'; k++)
                num = num * 10 + (unsigned) (s[k] - '0');
        if (k == 1 || k >= n || s[k] != ']' || num < 1 || num > CITATION_N_MAX)
                return false;
        s += k + 1;
        n -= k + 1;
        if (n > 0 && (s[0] == ':' || s[0] == '.'))
                s++, n--;
        trim(&s, &n);
        /* A full stop after the closing quotation mark is read too. */
        if (n > 0 && s[n - 1] == '.' && close_quote_at_end(s, n - 1) > 0)
                n--;
        close = close_quote_at_end(s, n);
        if (close == 0)
                return false;

        /* The separator: the last ':' followed by blanks and an opening
         * quotation mark, before the closing one. */
        for (size_t i = n - close; i-- > 0;) {
                size_t j = i + 1, o;

                if (s[i] != ':')
                        continue;
                while (j < n && is_blank(s[j]))
                        j++;
                o = open_quote_at(s + j, n - j);
                if (o == 0 || j + o > n - close)
                        continue;
                sep = (ssize_t) i;
                open = j + o;
                break;
        }
        if (sep < 0)
                return false;

        title = s;
        title_n = (size_t) sep;
        trim(&title, &title_n);
        /* "**Title**" and "[[Title]]" are read as Title. */
        if (title_n >= 4 && has_prefix(title, title_n, "**") && has_suffix(title, title_n, "**")) {
                title += 2;
                title_n -= 4;
        }
        if (title_n >= 4 && has_prefix(title, title_n, "[[") && has_suffix(title, title_n, "]]")) {
                title += 2;
                title_n -= 4;
        }
        trim(&title, &title_n);
        quote = s + open;
        quote_n = n - close - open;
        trim(&quote, &quote_n);
        if (title_n == 0 || title_n > CITATION_TITLE_MAX || has_control(title, title_n))
                return false;
        if (quote_n == 0 || quote_n > CITATION_QUOTE_MAX || has_control(quote, quote_n))
                return false;

        *ret = (Citation){
                .n = num,
                .title = strndup(title, title_n),
                .quote = strndup(quote, quote_n),
        };
        return true;
}

/* "Sources:", "**Citations**", "## References", "Quotes:" … */
static bool citation_is_heading(const char *s, size_t n) {
        static const char *const words[] = { "sources",  "source",     "citations",
                                             "citation", "references", "quotes" };

        trim(&s, &n);
        while (n > 0 && s[0] == '#') {
                s++;
                n--;
        }
        trim(&s, &n);
        for (unsigned pass = 0; pass < 2; pass++) {
                while (n > 0 && (s[0] == '*' || s[0] == '_')) {
                        s++;
                        n--;
                }
                while (n > 0 && (s[n - 1] == '*' || s[n - 1] == '_'))
                        n--;
                if (n > 0 && s[n - 1] == ':')
                        n--;
                trim(&s, &n);
        }
        for (size_t i = 0; i < ELEMENTSOF(words); i++)
                if (n == strlen(words[i]) && strncasecmp(s, words[i], n) == 0)
                        return true;
        return false;
}

static int citation_cmp(const void *a, const void *b) {
        const Citation *x = a, *y = b;

        return x->n < y->n ? -1 : x->n > y->n;
}

typedef struct Line {
        const char *s;
        size_t n;
        bool drop;
        bool citation;
} Line;

/* The citations found so far, freed with their strings unless taken. */
typedef struct Citations {
        Citation *c;
        size_t n;
} Citations;

static void citations_done(Citations *l) {
        citation_free_many(l->c, l->n);
        *l = (Citations){ 0 };
}

int citation_parse_answer(const char *answer, size_t size, char **ret_answer, Citation **ret, size_t *ret_n) {
        _cleanup_free_ char *text = NULL;
        _cleanup_free_ Line *lines = NULL;
        _cleanup_(citations_done) Citations cs = { 0 };
        size_t n_lines = 0, len;
        bool seen[CITATION_N_MAX + 1] = { 0 };
        _cleanup_(strbuf_done) StrBuf out = { 0 };
        int r;

        assert(answer || size == 0);
        assert(ret_answer);
        assert(ret);
        assert(ret_n);

        r = utf8_make_valid(answer ? answer : "", size, &text, &len);
        if (r < 0)
                return r;

        for (size_t i = 0; i <= len; i++)
                if (i == len || text[i] == '\n')
                        n_lines++;
        lines = calloc(n_lines, sizeof(Line));
        cs.c = calloc(CITATION_MAX, sizeof(Citation));
        if (!lines || !cs.c)
                return -ENOMEM;
        for (size_t i = 0, start = 0, k = 0; i <= len; i++)
                if (i == len || text[i] == '\n') {
                        lines[k++] = (Line){ .s = text + start, .n = i - start };
                        start = i + 1;
                }

        for (size_t i = 0; i < n_lines; i++) {
                Citation c = { 0 };

                if (cs.n >= CITATION_MAX)
                        break;
                if (!citation_parse_line(lines[i].s, lines[i].n, &c))
                        continue;
                if (!c.title || !c.quote) {
                        citation_done(&c);
                        return -ENOMEM;
                }
                lines[i].drop = lines[i].citation = true;
                if (seen[c.n]) {
                        citation_done(&c);
                        continue;
                }
                seen[c.n] = true;
                cs.c[cs.n++] = c;
        }

        /* The heading line just above each run of citation lines, and the
         * blank lines between them. */
        for (size_t i = 0; i < n_lines; i++) {
                size_t j = i, blank_n;
                const char *b;

                if (!lines[i].citation || (i > 0 && lines[i - 1].citation))
                        continue;
                while (j > 0) {
                        b = lines[j - 1].s;
                        blank_n = lines[j - 1].n;
                        trim(&b, &blank_n);
                        if (blank_n > 0)
                                break;
                        j--;
                }
                if (j > 0 && !lines[j - 1].citation && citation_is_heading(lines[j - 1].s, lines[j - 1].n))
                        for (size_t k = j - 1; k < i; k++)
                                lines[k].drop = true;
        }
        /* Blank lines between two citation lines go with them. */
        for (size_t i = 0; i < n_lines; i++) {
                size_t j = i;
                const char *b;
                size_t bn;

                if (!lines[i].citation)
                        continue;
                for (j = i + 1; j < n_lines; j++) {
                        b = lines[j].s;
                        bn = lines[j].n;
                        trim(&b, &bn);
                        if (bn > 0)
                                break;
                }
                if (j < n_lines && lines[j].citation)
                        for (size_t k = i + 1; k < j; k++)
                                lines[k].drop = true;
        }

        for (size_t i = 0, kept = 0; i < n_lines; i++) {
                if (lines[i].drop)
                        continue;
                if (kept++ > 0) {
                        r = buf_putc(&out, '\n');
                        if (r < 0)
                                return r;
                }
                r = strbuf_put(&out, lines[i].s, lines[i].n);
                if (r < 0)
                        return r;
        }
        /* No trailing blank lines. */
        while (out.len > 0 && (out.data[out.len - 1] == '\n' || is_blank(out.data[out.len - 1])))
                out.data[--out.len] = 0;

        qsort(cs.c, cs.n, sizeof(Citation), citation_cmp);
        *ret_answer = strbuf_steal(&out);
        if (!*ret_answer)
                return -ENOMEM;
        if (cs.n == 0)
                cs.c = mfree(cs.c);
        *ret = TAKE_PTR(cs.c);
        *ret_n = cs.n;
        cs.n = 0;
        return 0;
}

/* ---- The normalizer ---- */

typedef struct NamedEntity {
        const char *name;
        uint32_t cp;
} NamedEntity;

/* The entities MediaWiki pages use in practice; an unknown one stays as
 * written (docs/QUERY.md). */
static const NamedEntity named_entities[] = {
        { "amp", '&' },       { "lt", '<' },       { "gt", '>' },       { "quot", '"' },
        { "apos", '\'' },     { "nbsp", 0xa0 },    { "ndash", 0x2013 }, { "mdash", 0x2014 },
        { "hellip", 0x2026 }, { "lsquo", 0x2018 }, { "rsquo", 0x2019 }, { "ldquo", 0x201c },
        { "rdquo", 0x201d },  { "laquo", 0xab },   { "raquo", 0xbb },   { "copy", 0xa9 },
        { "reg", 0xae },      { "trade", 0x2122 }, { "deg", 0xb0 },     { "times", 0xd7 },
        { "divide", 0xf7 },   { "minus", 0x2212 }, { "plusmn", 0xb1 },  { "middot", 0xb7 },
        { "sect", 0xa7 },     { "para", 0xb6 },    { "euro", 0x20ac },  { "pound", 0xa3 },
        { "yen", 0xa5 },      { "cent", 0xa2 },    { "shy", 0xad },     { "thinsp", 0x2009 },
        { "ensp", 0x2002 },   { "emsp", 0x2003 },  { "zwj", 0x200d },   { "zwnj", 0x200c },
        { "lrm", 0x200e },    { "rlm", 0x200f },   { "bull", 0x2022 },  { "frac12", 0xbd },
        { "frac14", 0xbc },   { "frac34", 0xbe },  { "sup2", 0xb2 },    { "sup3", 0xb3 },
        { "micro", 0xb5 },    { "larr", 0x2190 },  { "rarr", 0x2192 },  { "harr", 0x2194 },
        { "eacute", 0xe9 },   { "egrave", 0xe8 },  { "aacute", 0xe1 },  { "agrave", 0xe0 },
        { "ouml", 0xf6 },     { "uuml", 0xfc },    { "auml", 0xe4 },    { "szlig", 0xdf },
        { "ccedil", 0xe7 },   { "ntilde", 0xf1 },  { "Ouml", 0xd6 },    { "Uuml", 0xdc },
        { "Auml", 0xc4 },     { "Eacute", 0xc9 },
};

/* An entity at s (s[0] == '&'): its length and code point, 0 when none. */
static size_t entity_at(const char *s, size_t n, uint32_t *ret_cp) {
        size_t i = 1;
        uint64_t v = 0;

        if (n > 2 && s[1] == '#') {
                bool hex = n > 3 && (s[2] == 'x' || s[2] == 'X');
                size_t digits = 0;

                i = hex ? 3 : 2;
                for (; i < n && digits < 8; i++, digits++) {
                        char c = s[i];
                        if (c >= '0' && c <= '9')
                                v = v * (hex ? 16 : 10) + (uint64_t) (c - '0');
                        else if (hex && c >= 'a' && c <= 'f')
                                v = v * 16 + (uint64_t) (c - 'a' + 10);
                        else if (hex && c >= 'A' && c <= 'F')
                                v = v * 16 + (uint64_t) (c - 'A' + 10);
                        else
                                break;
                }
                if (digits == 0 || i >= n || s[i] != ';')
                        return 0;
                /* No NUL, no surrogate, nothing above U+10FFFF: stays as written. */
                if (v == 0 || (v >= 0xd800 && v <= 0xdfff) || v > 0x10ffff)
                        return 0;
                *ret_cp = (uint32_t) v;
                return i + 1;
        }
        while (i < n && i <= 32 &&
               ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9')))
                i++;
        if (i == 1 || i >= n || s[i] != ';')
                return 0;
        for (size_t k = 0; k < ELEMENTSOF(named_entities); k++)
                if (strlen(named_entities[k].name) == i - 1 &&
                    memcmp(named_entities[k].name, s + 1, i - 1) == 0) {
                        *ret_cp = named_entities[k].cp;
                        return i + 1;
                }
        return 0;
}

static bool is_alpha(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Tags after which a reader sees a break: a space in the text. */
static bool tag_breaks(const char *name, size_t n) {
        static const char *const tags[] = { "br", "p",  "div", "li", "ul",    "ol",         "dl", "dd",
                                            "dt", "tr", "td",  "th", "table", "blockquote", "hr", "center" };

        for (size_t i = 0; i < ELEMENTSOF(tags); i++)
                if (strlen(tags[i]) == n && strncasecmp(tags[i], name, n) == 0)
                        return true;
        return false;
}

#define LINK_DEPTH_MAX 16

typedef struct LinkFrame {
        size_t out_start; /* where the link's text begins in the output */
        bool hidden;      /* File:, Image:, Category: a reader sees none of it */
        bool piped;
} LinkFrame;

typedef struct Span {
        size_t start, end;
} Span;

typedef struct Stripper {
        const char *s;
        size_t n;
        StrBuf out;
        Span *headings;
        size_t n_headings;

        /* Where the reading is, and what it is inside of. */
        size_t i;
        size_t templates; /* the depth of {{ }} */
        LinkFrame links[LINK_DEPTH_MAX];
        size_t n_links;
        bool line_start, cell_line, in_heading;
        size_t heading_end, line_end, heading;
        const char *ref_close; /* the last "</ref" found; NULL: none after it */
        bool ext;              /* in an external link's label */
} Stripper;

static void stripper_done(Stripper *st) {
        strbuf_done(&st->out);
        st->headings = mfree(st->headings);
}

static void stripper_truncate(Stripper *st, size_t len) {
        st->out.len = len;
        if (st->out.data)
                st->out.data[len] = 0;
        while (st->n_headings > 0 && st->headings[st->n_headings - 1].start > len)
                st->n_headings--;
        if (st->n_headings > 0 && st->headings[st->n_headings - 1].end > len)
                st->headings[st->n_headings - 1].end = len;
}

static bool prefix_ci(const char *s, size_t n, const char *p) {
        size_t k = strlen(p);

        return n >= k && strncasecmp(s, p, k) == 0;
}

/* Pass 1: the markup out, the entities decoded, the headings' spans
 * noted. Each byte is looked at a bounded number of times: every search
 * stops at the next '<', at the line's end, or is made once. */
/* The stripper's functions below look at the wikitext at st->i. Those
 * that return int give 1 when they consumed it (and moved st->i on), 0
 * when it is plain text to copy, or -ENOMEM. */

/* The end of a heading's text: its span closes, the rest of its line
 * ("== x ==" trailing) is skipped. */
static int stripper_end_heading(Stripper *st) {
        /* a hidden link may have taken the heading back out */
        if (st->heading < st->n_headings)
                st->headings[st->heading].end = st->out.len;
        st->in_heading = false;
        st->i = MAX(st->i, st->line_end);
        return buf_putc(&st->out, '\n');
}

/* Inside a template: nothing is kept; nested {{ }} are counted. */
static void stripper_skip_template(Stripper *st) {
        const char *s = st->s;
        size_t n = st->n, i = st->i;

        if (s[i] == '{' && i + 1 < n && s[i + 1] == '{') {
                st->templates++;
                st->i += 2;
        } else if (s[i] == '}' && i + 1 < n && s[i + 1] == '}') {
                st->templates--;
                st->i += 2;
        } else {
                if (s[i] == '\n')
                        st->line_start = true;
                st->i++;
        }
}

/* "== Heading ==" at a line's start: a span of the output opens. */
static int stripper_heading(Stripper *st) {
        const char *s = st->s;
        size_t n = st->n, i = st->i;
        const char *e = memchr(s + i, '\n', n - i);
        size_t end = e ? (size_t) (e - s) : n, last = end, lead = 0, trail = 0, level;
        Span *h;
        int r;

        while (last > i && is_blank(s[last - 1]))
                last--;
        while (i + lead < last && s[i + lead] == '=' && lead < 6)
                lead++;
        while (last - trail > i + lead && s[last - trail - 1] == '=' && trail < 6)
                trail++;
        if (lead == 0 || trail == 0 || i + lead >= last - trail)
                return 0;
        level = MIN(lead, trail);

        h = reallocarray(st->headings, st->n_headings + 1, sizeof(Span));
        if (!h)
                return -ENOMEM;
        st->headings = h;
        r = buf_putc(&st->out, '\n');
        if (r < 0)
                return r;
        st->heading = st->n_headings;
        st->headings[st->n_headings++] = (Span){ st->out.len, st->out.len };
        st->in_heading = true;
        st->heading_end = last - level;
        st->line_end = end;
        st->i += level;
        return 1;
}

/* What only means something at a line's start: a heading, list and
 * indent marks, a table's start, row and end, a cell, a rule. */
static int stripper_line_start(Stripper *st) {
        const char *s = st->s;
        size_t n = st->n, i = st->i;
        char c = s[i];
        int r;

        st->line_start = false;
        st->cell_line = false;
        if (c == '=' && !st->in_heading) {
                r = stripper_heading(st);
                if (r != 0)
                        return r;
        }
        if (c == '*' || c == '#' || c == ':' || c == ';') {
                while (i < n && (s[i] == '*' || s[i] == '#' || s[i] == ':' || s[i] == ';'))
                        i++;
                st->i = i;
                return 1;
        }
        if ((c == '{' && i + 1 < n && s[i + 1] == '|') ||
            (c == '|' && i + 1 < n && (s[i + 1] == '-' || s[i + 1] == '}'))) {
                const char *e = memchr(s + i, '\n', n - i);

                st->i = e ? (size_t) (e - s) : n;
                return 1;
        }
        if (c == '|' || c == '!') {
                st->cell_line = true;
                st->i += (c == '|' && i + 1 < n && s[i + 1] == '+') ? 2 : 1;
                r = buf_putc(&st->out, ' ');
                return r < 0 ? r : 1;
        }
        if (c == '-' && i + 3 < n && memcmp(s + i, "----", 4) == 0) {
                while (i < n && s[i] == '-')
                        i++;
                st->i = i;
                return 1;
        }
        return 0;
}

/* "[[" opens an internal link (hidden for files and categories); "[url"
 * an external one, whose label is kept. */
static int stripper_open_link(Stripper *st) {
        const char *s = st->s;
        size_t n = st->n, i = st->i;

        if (i + 1 < n && s[i + 1] == '[' && st->n_links < LINK_DEPTH_MAX) {
                size_t j = i + 2;

                while (j < n && s[j] == ' ')
                        j++;
                st->links[st->n_links++] = (LinkFrame){
                        .out_start = st->out.len,
                        .hidden = prefix_ci(s + j, n - j, "file:") || prefix_ci(s + j, n - j, "image:") ||
                                prefix_ci(s + j, n - j, "category:"),
                };
                st->i += 2;
                return 1;
        }
        if (!st->ext &&
            (prefix_ci(s + i + 1, n - i - 1, "http://") || prefix_ci(s + i + 1, n - i - 1, "https://") ||
             prefix_ci(s + i + 1, n - i - 1, "ftp://") || prefix_ci(s + i + 1, n - i - 1, "mailto:") ||
             prefix_ci(s + i + 1, n - i - 1, "//"))) {
                i++;
                while (i < n && s[i] != ' ' && s[i] != ']' && s[i] != '\n')
                        i++;
                if (i < n && s[i] == ' ') {
                        st->ext = true;
                        i++;
                } else if (i < n && s[i] == ']')
                        i++;
                st->i = i;
                return 1;
        }
        return 0;
}

/* "]]" closes an internal link, "]" an external one's label. */
static int stripper_close_link(Stripper *st) {
        const char *s = st->s;
        size_t n = st->n, i = st->i;

        if (i + 1 < n && s[i + 1] == ']' && st->n_links > 0) {
                LinkFrame *f = &st->links[--st->n_links];

                if (f->hidden)
                        stripper_truncate(st, f->out_start);
                st->i += 2;
                return 1;
        }
        if (st->ext) {
                st->ext = false;
                st->i++;
                return 1;
        }
        return 0;
}

/* "|": a link's target ends (its text follows), or "||" between cells. */
static int stripper_pipe(Stripper *st) {
        const char *s = st->s;
        size_t n = st->n, i = st->i;
        int r;

        if (st->n_links > 0 && !st->links[st->n_links - 1].piped) {
                st->links[st->n_links - 1].piped = true;
                stripper_truncate(st, st->links[st->n_links - 1].out_start);
                st->i++;
                return 1;
        }
        if (st->cell_line && i + 1 < n && s[i + 1] == '|') {
                r = buf_putc(&st->out, ' ');
                if (r < 0)
                        return r;
                st->i += 2;
                return 1;
        }
        return 0;
}

/* Two quotes and more (italic, bold) go; what is left of a longer run is
 * kept. */
static int stripper_quotes(Stripper *st) {
        const char *s = st->s;
        size_t n = st->n, i = st->i, k = 0;
        int r;

        if (i + 1 >= n || s[i + 1] != '\'')
                return 0;
        while (i + k < n && s[i + k] == '\'')
                k++;
        st->i += k;
        /* '''' is an apostrophe and bold; more than five: the rest are apostrophes */
        k = k == 4 ? 1 : k > 5 ? k - 5 : 0;
        while (k-- > 0) {
                r = buf_putc(&st->out, '\'');
                if (r < 0)
                        return r;
        }
        return 1;
}

/* A magic word: __TOC__. */
static int stripper_magic_word(Stripper *st) {
        const char *s = st->s;
        size_t n = st->n, i = st->i, j = i + 2;

        if (i + 1 >= n || s[i + 1] != '_')
                return 0;
        while (j < n && j - i < 40 && s[j] >= 'A' && s[j] <= 'Z')
                j++;
        if (j > i + 2 && j + 1 < n && s[j] == '_' && s[j + 1] == '_') {
                st->i = j + 2;
                return 1;
        }
        return 0;
}

/* A character reference: &amp;, &#233;, &#xe9;. */
static int stripper_entity(Stripper *st) {
        uint32_t cp;
        size_t k = entity_at(st->s + st->i, st->n - st->i, &cp);
        int r;

        if (k == 0)
                return 0;
        r = buf_put_cp(&st->out, cp);
        if (r < 0)
                return r;
        st->i += k;
        return 1;
}

/* A comment, a tag (a space where it breaks the text), or a <ref> with
 * its content. */
static int stripper_tag(Stripper *st) {
        const char *s = st->s;
        size_t n = st->n, i = st->i, j, name, name_n = 0;
        bool closing;
        int r;

        if (prefix_ci(s + i, n - i, "<!--")) {
                const char *e = memmem(s + i + 4, n - i - 4, "-->", 3);

                st->i = e ? (size_t) (e - s) + 3 : n;
                return 1;
        }
        closing = i + 1 < n && s[i + 1] == '/';
        j = i + 1 + closing;
        if (j >= n || !is_alpha(s[j]))
                return 0;
        while (j < n && s[j] != '>' && s[j] != '<' && s[j] != '\n')
                j++;
        if (j >= n || s[j] != '>')
                return 0;
        /* j is the tag's '>' */
        if (!closing && prefix_ci(s + i, n - i, "<ref") &&
            (s[i + 4] == ' ' || s[i + 4] == '>' || s[i + 4] == '/')) {
                if (s[j - 1] == '/') {
                        st->i = j + 1; /* <ref name="x" /> */
                        return 1;
                }
                if (st->ref_close && st->ref_close <= s + j)
                        st->ref_close = strcasestr(s + j, "</ref");
                if (st->ref_close) {
                        const char *e = memchr(st->ref_close, '>', (size_t) (s + n - st->ref_close));

                        st->i = e ? (size_t) (e - s) + 1 : n;
                } else
                        st->i = j + 1;
                return 1;
        }
        name = i + 1 + closing;
        while (name + name_n < j && is_alpha(s[name + name_n]))
                name_n++;
        if (tag_breaks(s + name, name_n)) {
                r = buf_putc(&st->out, ' ');
                if (r < 0)
                        return r;
        }
        st->i = j + 1;
        return 1;
}

/* The markup at st->i that may appear anywhere in a line. */
static int stripper_markup(Stripper *st) {
        const char *s = st->s;
        size_t n = st->n, i = st->i;
        int r;

        switch (s[i]) {
        case '\n':
                st->line_start = true;
                st->ext = false;
                r = buf_putc(&st->out, '\n');
                if (r < 0)
                        return r;
                st->i++;
                return 1;
        case '{':
                if (i + 1 < n && s[i + 1] == '{') {
                        st->templates = 1;
                        st->i += 2;
                        return 1;
                }
                return 0;
        case '[':
                return stripper_open_link(st);
        case ']':
                return stripper_close_link(st);
        case '|':
                return stripper_pipe(st);
        case '!':
                if (st->cell_line && i + 1 < n && s[i + 1] == '!') {
                        r = buf_putc(&st->out, ' ');
                        if (r < 0)
                                return r;
                        st->i += 2;
                        return 1;
                }
                return 0;
        case '\'':
                return stripper_quotes(st);
        case '_':
                return stripper_magic_word(st);
        case '&':
                return stripper_entity(st);
        case '<':
                return stripper_tag(st);
        default:
                return 0;
        }
}

static int stripper_run(Stripper *st) {
        int r;

        st->i = 0;
        st->line_start = true;
        st->ref_close = st->s;
        while (st->i < st->n) {
                if (st->in_heading && st->i >= st->heading_end) {
                        r = stripper_end_heading(st);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (st->templates > 0) {
                        stripper_skip_template(st);
                        continue;
                }
                if (st->line_start) {
                        r = stripper_line_start(st);
                        if (r < 0)
                                return r;
                        if (r > 0)
                                continue;
                }
                r = stripper_markup(st);
                if (r < 0)
                        return r;
                if (r > 0)
                        continue;
                r = buf_putc(&st->out, st->s[st->i]);
                if (r < 0)
                        return r;
                st->i++;
        }
        if (st->in_heading && st->heading < st->n_headings)
                st->headings[st->heading].end = st->out.len;
        return 0;
}

/* Whitespace a reader sees as a space, and characters a reader does not
 * see at all. */
static bool cp_is_space(uint32_t cp) {
        return cp == ' ' || (cp >= 0x09 && cp <= 0x0d) || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
                (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
                cp == 0x205f || cp == 0x3000;
}

static bool cp_is_invisible(uint32_t cp) {
        return cp < 0x20 || (cp >= 0x7f && cp < 0xa0) || cp == 0xad || (cp >= 0x200b && cp <= 0x200f) ||
                (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2060 && cp <= 0x2064) ||
                (cp >= 0x2066 && cp <= 0x2069) || cp == 0xfeff;
}

/* NFC of n bytes of valid UTF-8 (ICU's normalizer on UTF-16). */
static int nfc(const char *s, size_t n, StrBuf *out) {
        _cleanup_free_ UChar *u = NULL, *v = NULL;
        const UNormalizer2 *norm;
        UErrorCode e = U_ZERO_ERROR;
        int32_t un = 0, vn, on = 0;
        bool ascii = true;
        int r;

        for (size_t i = 0; i < n && ascii; i++)
                ascii = (unsigned char) s[i] < 0x80;
        if (ascii)
                return strbuf_put(out, s, n);
        if (n > INT32_MAX / 4)
                return -EIO;

        norm = unorm2_getNFCInstance(&e);
        if (U_FAILURE(e))
                return -EIO;
        u = malloc((n + 1) * sizeof(UChar));
        if (!u)
                return -ENOMEM;
        u_strFromUTF8(u, (int32_t) n + 1, &un, s, (int32_t) n, &e);
        if (U_FAILURE(e))
                return -EIO;
        /* NFC of UTF-16 is at most 3 times as long (Unicode's stability bound). */
        vn = un * 3 + 1;
        v = malloc((size_t) vn * sizeof(UChar));
        if (!v)
                return -ENOMEM;
        vn = unorm2_normalize(norm, u, un, v, vn, &e);
        if (U_FAILURE(e))
                return -EIO;
        u_strToUTF8(NULL, 0, &on, v, vn, &e);
        if (e != U_BUFFER_OVERFLOW_ERROR && U_FAILURE(e))
                return -EIO;
        e = U_ZERO_ERROR;
        r = strbuf_reserve(out, (size_t) on);
        if (r < 0)
                return r;
        u_strToUTF8(out->data + out->len, on + 1, NULL, v, vn, &e);
        if (U_FAILURE(e))
                return -EIO;
        out->len += (size_t) on;
        out->data[out->len] = 0;
        return 0;
}

/* Pass 2 on one span: invisible characters out, whitespace runs to one
 * space, NFC; appended to out with *pending_space carried across spans. */
static int fold_span(const char *s, size_t n, StrBuf *out, bool *pending_space) {
        _cleanup_(strbuf_done) StrBuf folded = { 0 }, normal = { 0 };
        bool space = false;
        int r = 0;

        for (size_t i = 0; i < n;) {
                uint32_t cp;
                size_t k = utf8_decode((const uint8_t *) s + i, n - i, &cp);

                if (k == 0) { /* cannot happen: the input was made valid */
                        i++;
                        continue;
                }
                if (cp_is_space(cp))
                        space = true;
                else if (!cp_is_invisible(cp)) {
                        if (space) {
                                r = buf_putc(&folded, ' ');
                                if (r < 0)
                                        return r;
                                space = false;
                        }
                        r = strbuf_put(&folded, s + i, k);
                        if (r < 0)
                                return r;
                }
                i += k;
        }
        if (space && (r = buf_putc(&folded, ' ')) < 0)
                return r;

        r = nfc(folded.data ? folded.data : "", folded.len, &normal);
        if (r < 0)
                return r;
        for (size_t i = 0; i < normal.len; i++) {
                if (normal.data[i] == ' ') {
                        *pending_space = true;
                        continue;
                }
                if (*pending_space && out->len > 0) {
                        r = buf_putc(out, ' ');
                        if (r < 0)
                                return r;
                }
                *pending_space = false;
                r = buf_putc(out, normal.data[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

int citation_normalize(const char *wikitext, size_t size, CitationText *ret) {
        _cleanup_free_ char *valid = NULL;
        _cleanup_(stripper_done) Stripper st = { 0 };
        _cleanup_(citation_text_done) CitationText t = { 0 };
        _cleanup_(strbuf_done) StrBuf out = { 0 };
        bool pending = false;
        const char *base;
        size_t pos = 0, len;
        int r;

        assert(wikitext || size == 0);
        assert(ret);

        r = utf8_make_valid(wikitext ? wikitext : "", size, &valid, &len);
        if (r < 0)
                return r;
        st = (Stripper){ .s = valid, .n = len };
        r = stripper_run(&st);
        if (r < 0)
                return r;

        if (st.n_headings > 0) {
                t.offsets = calloc(st.n_headings, sizeof(size_t));
                t.headings = calloc(st.n_headings, sizeof(char *));
                if (!t.offsets || !t.headings)
                        return -ENOMEM;
        }
        /* An empty output has no buffer: offsets from NULL are undefined. */
        base = st.out.data ? st.out.data : "";
        for (size_t h = 0; h <= st.n_headings; h++) {
                size_t end = h < st.n_headings ? st.headings[h].start : st.out.len;
                _cleanup_(strbuf_done) StrBuf heading = { 0 };
                bool hp = false;

                r = fold_span(base + pos, end - pos, &out, &pending);
                if (r < 0)
                        return r;
                if (h == st.n_headings)
                        break;
                r = fold_span(
                        base + st.headings[h].start, st.headings[h].end - st.headings[h].start, &heading, &hp);
                if (r < 0)
                        return r;
                pos = st.headings[h].end;
                /* A heading a reader does not see (all markup) is none. */
                if (heading.len == 0)
                        continue;
                /* The heading starts a new piece of text: the pending space before it. */
                if (pending && out.len > 0) {
                        r = buf_putc(&out, ' ');
                        if (r < 0)
                                return r;
                }
                t.offsets[t.n_headings] = out.len;
                t.headings[t.n_headings] = strbuf_steal(&heading);
                if (!t.headings[t.n_headings])
                        return -ENOMEM;
                t.n_headings++;
                r = strbuf_put(&out, t.headings[t.n_headings - 1], strlen(t.headings[t.n_headings - 1]));
                if (r < 0)
                        return r;
                pending = true;
        }

        t.text = strbuf_steal(&out);
        if (!t.text)
                return -ENOMEM;
        t.size = strlen(t.text);
        *ret = t;
        t = (CitationText){ 0 };
        return 0;
}

/* ---- Matching ---- */

static bool cp_is_mark(uint32_t cp) {
        return (U_GET_GC_MASK((UChar32) cp) & U_GC_M_MASK) != 0 || cp == 0x200d;
}

/* The code point at s (valid UTF-8), 0 at the end. */
static uint32_t cp_at(const char *s, size_t n) {
        uint32_t cp = 0;

        if (n == 0 || utf8_decode((const uint8_t *) s, n, &cp) == 0)
                return 0;
        return cp;
}

#define CITATION_MATCH_TRIES_MAX 1000 /* occurrences looked at, so a hostile page stays linear */

int citation_verify(const CitationText *page, const char *quote, CitationCheck *ret) {
        CitationText q = { 0 };
        CitationCheck c = { 0 };
        const char *hit = NULL;
        int r;

        assert(quote);
        assert(ret);

        r = citation_normalize(quote, strlen(quote), &q);
        if (r < 0)
                return r;
        c.reader_quote = TAKE_PTR(q.text);
        citation_text_done(&q);

        if (!page)
                c.status = CITATION_NOT_READ;
        else if (utf8_count(c.reader_quote, strlen(c.reader_quote)) < CITATION_QUOTE_MIN_CHARS)
                c.status = CITATION_TOO_SHORT;
        else if (cp_is_mark(cp_at(c.reader_quote, strlen(c.reader_quote))))
                c.status = CITATION_NOT_FOUND; /* a quote cannot start inside a character */
        else {
                size_t qn = strlen(c.reader_quote), from = 0;

                c.status = CITATION_NOT_FOUND;
                for (unsigned tries = 0; tries < CITATION_MATCH_TRIES_MAX && from + qn <= page->size; tries++) {
                        const char *m = memmem(page->text + from, page->size - from, c.reader_quote, qn);
                        size_t end;

                        if (!m)
                                break;
                        end = (size_t) (m - page->text) + qn;
                        if (!cp_is_mark(cp_at(page->text + end, page->size - end))) {
                                hit = m;
                                break;
                        }
                        from = (size_t) (m - page->text) + 1;
                }
                if (hit) {
                        size_t at = (size_t) (hit - page->text);

                        c.status = CITATION_VERIFIED;
                        for (size_t h = page->n_headings; h-- > 0;)
                                if (page->offsets[h] <= at) {
                                        c.section = strdup(page->headings[h]);
                                        if (!c.section) {
                                                citation_check_done(&c);
                                                return -ENOMEM;
                                        }
                                        break;
                                }
                }
        }
        *ret = c;
        return 0;
}

/* ---- Links ---- */

static int fragment_encode(StrBuf *b, const char *s, size_t n) {
        static const char hex[] = "0123456789ABCDEF";
        int r;

        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) s[i];
                char e[3] = { '%', hex[c >> 4], hex[c & 15] };

                if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '~')
                        r = buf_putc(b, (char) c);
                else
                        r = strbuf_put(b, e, 3);
                if (r < 0)
                        return r;
        }
        return 0;
}

#define FRAGMENT_WORDS_MAX 10 /* more words: start,end */
#define FRAGMENT_EDGE_WORDS 5

int citation_text_fragment(const char *quote, char **ret) {
        size_t n = strlen(quote), words = 0;
        _cleanup_(strbuf_done) StrBuf b = { 0 };
        int r;

        assert(ret);
        for (size_t i = 0; i < n; i++)
                if (quote[i] != ' ' && (i == 0 || quote[i - 1] == ' '))
                        words++;

        r = strbuf_put(&b, "#:~:text=", 9);
        if (r < 0)
                return r;
        if (words <= FRAGMENT_WORDS_MAX)
                r = fragment_encode(&b, quote, n);
        else {
                size_t start_end = 0, end_start = n, k = 0;

                /* the end of the 5th word, the start of the 5th word from the end */
                for (size_t i = 0; i < n; i++)
                        if (quote[i] != ' ' && (i + 1 == n || quote[i + 1] == ' ') &&
                            ++k == FRAGMENT_EDGE_WORDS) {
                                start_end = i + 1;
                                break;
                        }
                k = 0;
                for (size_t i = n; i-- > 0;)
                        if (quote[i] != ' ' && (i == 0 || quote[i - 1] == ' ') && ++k == FRAGMENT_EDGE_WORDS) {
                                end_start = i;
                                break;
                        }
                r = fragment_encode(&b, quote, start_end);
                if (r < 0)
                        return r;
                r = buf_putc(&b, ',');
                if (r < 0)
                        return r;
                r = fragment_encode(&b, quote + end_start, n - end_start);
        }
        if (r < 0)
                return r;
        *ret = strbuf_steal(&b);
        return *ret ? 0 : -ENOMEM;
}

int citation_permalink(const char *api_url, uint64_t revision_id, char **ret) {
        size_t n, path_start, slash;
        const char *p;
        char *t;

        assert(ret);
        if (!api_url)
                return -EINVAL;
        if (strncmp(api_url, "https://", 8) == 0)
                path_start = 8;
        else if (strncmp(api_url, "http://", 7) == 0)
                path_start = 7;
        else
                return -EINVAL;
        n = strcspn(api_url, "?#");
        p = memchr(api_url + path_start, '/', n - path_start);
        if (!p)
                slash = n; /* no path: index.php at the root */
        else {
                slash = (size_t) (p - api_url);
                for (size_t i = slash; i < n; i++)
                        if (api_url[i] == '/')
                                slash = i;
        }
        if (asprintf(&t, "%.*s/index.php?oldid=%" PRIu64, (int) slash, api_url, revision_id) < 0)
                return -ENOMEM;
        *ret = t;
        return 0;
}

/* ---- The record's citations ---- */

/* Whether a cited title names this title: as written, or with '_' as ' '
 * and an ASCII first letter upper-cased (MediaWiki's own title rules). */
static bool citation_title_matches(const char *cited, const char *title) {
        size_t n = strlen(cited);

        if (!title)
                return false;
        if (streq(cited, title))
                return true;
        if (n != strlen(title))
                return false;
        for (size_t i = 0; i < n; i++) {
                char a = cited[i] == '_' ? ' ' : cited[i], b = title[i] == '_' ? ' ' : title[i];

                if (i == 0 && a >= 'a' && a <= 'z')
                        a = (char) (a - 'a' + 'A');
                if (i == 0 && b >= 'a' && b <= 'z')
                        b = (char) (b - 'a' + 'A');
                if (a != b)
                        return false;
        }
        return true;
}

static const CitationSource *citation_find_source(const CitationSource *pages, size_t n, const char *title) {
        for (size_t i = 0; i < n; i++)
                if (citation_title_matches(title, pages[i].title))
                        return &pages[i];
        for (size_t i = 0; i < n; i++)
                if (citation_title_matches(title, pages[i].redirected_from))
                        return &pages[i];
        return NULL;
}

/* The record's citation c (shared/source.h) of the model's line l,
 * verified in src (NULL: not read). Returns 0 and fills *ret (zeroed by
 * the caller; partly filled on failure, for source_citation_free_many()),
 * -ENOMEM, -EIO. */
static int citation_entry(const Citation *l, const CitationSource *src, const char *api_url, SourceCitation *ret) {
        _cleanup_(citation_check_done) CitationCheck k = { 0 };
        _cleanup_(citation_text_done) CitationText t = { 0 };
        _cleanup_free_ char *url = NULL, *fragment = NULL;
        int r;

        if (src && src->text) {
                r = citation_normalize(src->text, src->size, &t);
                if (r < 0)
                        return r;
        }
        r = citation_verify(src ? &t : NULL, l->quote, &k);
        if (r < 0)
                return r;
        /* A page over the query's budget was read but its text not kept: it
         * cannot be verified. */
        if (src && !src->text && k.status == CITATION_VERIFIED)
                k.status = CITATION_NOT_FOUND;

        if (src && api_url && citation_permalink(api_url, src->revision_id, &url) >= 0 &&
            k.status == CITATION_VERIFIED) {
                char *full;

                r = citation_text_fragment(k.reader_quote, &fragment);
                if (r < 0)
                        return r;
                if (asprintf(&full, "%s%s", url, fragment) < 0)
                        return -ENOMEM;
                free(url);
                url = full;
        }

        *ret = (SourceCitation){
                .n = l->n,
                .title = strdup(src ? src->title : l->title),
                .revision_id = src ? src->revision_id : 0,
                .has_revision_id = src != NULL,
                .quote = strdup(l->quote),
                .status = k.status,
                .url = TAKE_PTR(url),
                .section = TAKE_PTR(k.section),
        };
        return ret->title && ret->quote ? 0 : -ENOMEM;
}

int citation_answer(
        const char *answer,
        const CitationSource *pages,
        size_t n_pages,
        const char *api_url,
        char **ret_answer,
        char **ret_json,
        unsigned counts[_CITATION_STATUS_MAX]) {
        _cleanup_(json_object_putp) json_object *a = NULL;
        _cleanup_free_ char *rest = NULL;
        SourceCitation *entries = NULL;
        Citation *cs = NULL;
        const char *text;
        size_t n = 0;
        char *json;
        int r;

        assert(answer);
        assert(pages || n_pages == 0);
        assert(ret_answer);
        assert(ret_json);

        r = citation_parse_answer(answer, strlen(answer), &rest, &cs, &n);
        if (r < 0)
                return r;
        if (n > 0) {
                entries = calloc(n, sizeof *entries);
                if (!entries) {
                        citation_free_many(cs, n);
                        return -ENOMEM;
                }
        }
        for (size_t i = 0; i < n; i++) {
                r = citation_entry(
                        &cs[i], citation_find_source(pages, n_pages, cs[i].title), api_url, &entries[i]);
                if (r < 0) {
                        citation_free_many(cs, n);
                        source_citation_free_many(entries, n);
                        return r;
                }
                if (counts)
                        counts[entries[i].status]++;
        }
        citation_free_many(cs, n);
        a = source_citation_to_json(entries, n);
        source_citation_free_many(entries, n);

        text = a ? json_object_to_json_string_ext(a, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE) :
                   NULL;
        json = text ? strdup(text) : NULL;
        if (!json)
                return -ENOMEM;
        *ret_answer = TAKE_PTR(rest);
        *ret_json = json;
        return 0;
}
