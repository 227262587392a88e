/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "shared/macro.h"
#include "shared/strv.h"
#include "shared/utf8.h"
#include "store/wording.h"

/* Stop words of English, German, French and Spanish, case-folded, as they
 * are after the separators split them (no apostrophes). Sorted on first
 * use for bsearch(). */
static const char *stop_words[] = {
        /* English */
        "a",
        "about",
        "all",
        "also",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "for",
        "from",
        "get",
        "had",
        "has",
        "have",
        "he",
        "her",
        "here",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "know",
        "me",
        "my",
        "need",
        "of",
        "on",
        "or",
        "our",
        "please",
        "she",
        "should",
        "so",
        "some",
        "tell",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "to",
        "want",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "whose",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        /* German */
        "aber",
        "auf",
        "aus",
        "bei",
        "das",
        "dem",
        "den",
        "der",
        "des",
        "die",
        "du",
        "ein",
        "eine",
        "einem",
        "einen",
        "einer",
        "eines",
        "er",
        "es",
        "für",
        "gibt",
        "hat",
        "ich",
        "im",
        "ist",
        "kann",
        "mit",
        "nach",
        "oder",
        "sind",
        "über",
        "und",
        "von",
        "wann",
        "warum",
        "was",
        "welche",
        "welcher",
        "welches",
        "wer",
        "wie",
        "wir",
        "wo",
        "zu",
        "zum",
        "zur",
        /* French */
        "au",
        "aux",
        "avec",
        "ce",
        "ces",
        "cette",
        "comment",
        "dans",
        "de",
        "des",
        "du",
        "elle",
        "est",
        "et",
        "il",
        "je",
        "la",
        "le",
        "les",
        "leur",
        "ma",
        "mes",
        "mon",
        "nous",
        "ou",
        "où",
        "par",
        "pour",
        "pourquoi",
        "quand",
        "que",
        "quel",
        "quelle",
        "quelles",
        "quels",
        "qui",
        "quoi",
        "sa",
        "ses",
        "son",
        "sont",
        "sur",
        "un",
        "une",
        "vous",
        /* Spanish */
        "al",
        "como",
        "con",
        "cuál",
        "cuáles",
        "cuándo",
        "cómo",
        "del",
        "donde",
        "dónde",
        "el",
        "ella",
        "en",
        "hay",
        "las",
        "lo",
        "los",
        "mi",
        "mis",
        "para",
        "pero",
        "por",
        "quién",
        "qué",
        "se",
        "sin",
        "son",
        "su",
        "sus",
        "una",
        "unas",
        "uno",
        "unos",
        "y",
        "yo",
};

static int compare_strings(const void *a, const void *b) {
        return strcmp(*(const char *const *) a, *(const char *const *) b);
}

static bool is_stop_word(const char *w) {
        static bool sorted = false;

        if (!sorted) {
                qsort_safe(stop_words, ELEMENTSOF(stop_words), sizeof stop_words[0], compare_strings);
                sorted = true;
        }
        return bsearch(&w, stop_words, ELEMENTSOF(stop_words), sizeof stop_words[0], compare_strings);
}

/* The case-folded code point, or 0 for a separator. */
static uint32_t fold(uint32_t cp) {
        if (cp < 0x80) {
                if (cp >= 'A' && cp <= 'Z')
                        return cp + 0x20;
                if ((cp >= 'a' && cp <= 'z') || (cp >= '0' && cp <= '9'))
                        return cp;
                return 0;
        }
        /* Latin-1 punctuation and symbols, the multiplication and division signs. */
        if (cp <= 0xbf || cp == 0xd7 || cp == 0xf7)
                return 0;
        if (cp >= 0xc0 && cp <= 0xde)
                return cp + 0x20;
        if ((cp >= 0x100 && cp <= 0x137) || (cp >= 0x14a && cp <= 0x177))
                return cp | 1;
        if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17e))
                return (cp & 1) ? cp + 1 : cp;
        if (cp == 0x178)
                return 0xff;
        if (cp >= 0x391 && cp <= 0x3a9)
                return cp + 0x20;
        if (cp >= 0x410 && cp <= 0x42f)
                return cp + 0x20;
        if (cp >= 0x400 && cp <= 0x40f)
                return cp + 0x50;
        /* General punctuation, arrows, mathematical and other symbols, CJK
         * and fullwidth punctuation. */
        if ((cp >= 0x2000 && cp <= 0x206f) || (cp >= 0x2190 && cp <= 0x2bff) ||
            (cp >= 0x3000 && cp <= 0x303f) || (cp >= 0xfe30 && cp <= 0xfe4f) ||
            (cp >= 0xff00 && cp <= 0xff0f) || (cp >= 0xff1a && cp <= 0xff20) ||
            (cp >= 0xff3b && cp <= 0xff40) || (cp >= 0xff5b && cp <= 0xff65))
                return 0;
        return cp;
}

static size_t encode(uint32_t cp, char *out) {
        if (cp < 0x80) {
                out[0] = (char) cp;
                return 1;
        }
        if (cp < 0x800) {
                out[0] = (char) (0xc0 | cp >> 6);
                out[1] = (char) (0x80 | (cp & 0x3f));
                return 2;
        }
        if (cp < 0x10000) {
                out[0] = (char) (0xe0 | cp >> 12);
                out[1] = (char) (0x80 | ((cp >> 6) & 0x3f));
                out[2] = (char) (0x80 | (cp & 0x3f));
                return 3;
        }
        out[0] = (char) (0xf0 | cp >> 18);
        out[1] = (char) (0x80 | ((cp >> 12) & 0x3f));
        out[2] = (char) (0x80 | ((cp >> 6) & 0x3f));
        out[3] = (char) (0x80 | (cp & 0x3f));
        return 4;
}

static bool ends_with(const char *w, size_t l, const char *suffix) {
        size_t k = strlen(suffix);

        return l >= k && memcmp(w + l - k, suffix, k) == 0;
}

static bool is_ascii_word(const char *w, size_t l) {
        for (size_t i = 0; i < l; i++)
                if ((unsigned char) w[i] >= 0x80)
                        return false;
        return true;
}

/* English plurals, in place: "policies" -> "policy", "classes" -> "class",
 * "visitors" -> "visitor"; not "bus", "analysis", "class". */
static void stem(char *w) {
        size_t l = strlen(w);

        if (l <= 3 || !is_ascii_word(w, l))
                return;
        if (l > 4 && ends_with(w, l, "ies")) {
                w[l - 3] = 'y';
                w[l - 2] = 0;
                return;
        }
        if (ends_with(w, l, "sses")) {
                w[l - 2] = 0;
                return;
        }
        if (w[l - 1] == 's' && !ends_with(w, l, "ss") && !ends_with(w, l, "us") && !ends_with(w, l, "is"))
                w[l - 1] = 0;
}

typedef struct Words {
        char **words;
        size_t n;
} Words;

static void words_done(Words *w) {
        for (size_t i = 0; i < w->n; i++)
                free(w->words[i]);
        free(w->words);
        *w = (Words){ 0 };
}

static int words_add(Words *w, const char *s, size_t l) {
        char **n = reallocarray(w->words, w->n + 1, sizeof(char *));

        if (!n)
                return -ENOMEM;
        w->words = n;
        w->words[w->n] = strndup(s, l);
        if (!w->words[w->n])
                return -ENOMEM;
        w->n++;
        return 0;
}

/* Sorted, duplicates removed, joined by spaces, at most
 * WORDING_KEY_MAX_BYTES. */
static int words_join(Words *w, char **ret) {
        size_t k = 0;
        char *out;

        qsort_safe(w->words, w->n, sizeof(char *), compare_strings);
        out = malloc(WORDING_KEY_MAX_BYTES + 1);
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < w->n; i++) {
                size_t l = strlen(w->words[i]);

                if (i > 0 && streq(w->words[i], w->words[i - 1]))
                        continue;
                if (k + (k > 0) + l > WORDING_KEY_MAX_BYTES)
                        break;
                if (k > 0)
                        out[k++] = ' ';
                memcpy(out + k, w->words[i], l);
                k += l;
        }
        out[k] = 0;
        *ret = out;
        return 0;
}

int wording_key(const char *question, char **ret) {
        _cleanup_free_ char *word = NULL;
        Words content = { 0 }, all = { 0 };
        const uint8_t *p;
        size_t n, wl = 0;
        int r = 0;

        assert(question);
        assert(ret);

        n = strlen(question);
        /* Each code point folds to at most 4 bytes. */
        word = malloc(n * 4 + 1);
        if (!word)
                return -ENOMEM;
        p = (const uint8_t *) question;

        for (size_t i = 0; i <= n && r >= 0;) {
                uint32_t cp = 0, f = 0;
                size_t l = 1;

                if (i < n) {
                        l = utf8_decode(p + i, n - i, &cp);
                        if (l == 0)
                                l = 1; /* an invalid byte: a separator */
                        else
                                f = fold(cp);
                }
                i += l;
                if (f != 0) {
                        wl += encode(f, word + wl);
                        continue;
                }
                if (wl == 0) {
                        if (i > n)
                                break;
                        continue;
                }
                word[wl] = 0;
                /* A lone ASCII letter ("l'", "parking's") means nothing. */
                if (!(wl == 1 && word[0] >= 'a' && word[0] <= 'z')) {
                        r = words_add(&all, word, wl);
                        if (r >= 0 && !is_stop_word(word)) {
                                stem(word);
                                r = words_add(&content, word, strlen(word));
                        }
                }
                wl = 0;
                if (i > n)
                        break;
        }
        if (r >= 0)
                r = words_join(content.n > 0 ? &content : &all, ret);
        words_done(&content);
        words_done(&all);
        return r;
}

/* The words of a key: pointers into a copy. */
static size_t split(char *key, const char **words, size_t max) {
        size_t n = 0;

        for (char *s = key, *save = NULL, *w; n < max && (w = strtok_r(s, " ", &save)); s = NULL)
                words[n++] = w;
        return n;
}

#define WORDS_MAX (WORDING_KEY_MAX_BYTES / 2 + 1)

/* Both sorted and distinct (as keys are): a merge. */
static double jaccard(const char *const *a, size_t na, const char *const *b, size_t nb) {
        size_t i = 0, j = 0, common = 0;

        if (na == 0 && nb == 0)
                return 1.0;
        while (i < na && j < nb) {
                int c = strcmp(a[i], b[j]);

                if (c == 0) {
                        common++;
                        i++;
                        j++;
                } else if (c < 0)
                        i++;
                else
                        j++;
        }
        return (double) common / (double) (na + nb - common);
}

double wording_similarity(const char *key_a, const char *key_b) {
        _cleanup_free_ char *a = strdup(key_a), *b = strdup(key_b);
        _cleanup_free_ const char **wa = NULL, **wb = NULL;
        size_t na, nb;

        wa = calloc(WORDS_MAX, sizeof(char *));
        wb = calloc(WORDS_MAX, sizeof(char *));
        if (!a || !b || !wa || !wb)
                return 0.0;
        na = split(a, wa, WORDS_MAX);
        nb = split(b, wb, WORDS_MAX);
        return jaccard(wa, na, wb, nb);
}

/* ---- grouping ---- */

/* A founding key, split. */
typedef struct Founder {
        char *copy;
        const char **words;
        size_t n_words;
} Founder;

/* Open addressing: word -> the groups whose founding key has it, in
 * founding order. */
typedef struct Posting {
        const char *word; /* NULL: empty slot; points into a key's copy that outlives the index */
        size_t *groups;
        size_t n, cap;
        size_t frequency; /* keys with this word */
} Posting;

typedef struct Index {
        Posting *slots;
        size_t cap, used;
} Index;

static uint64_t hash(const char *s) {
        uint64_t h = 14695981039346656037ULL; /* FNV-1a */

        for (; *s; s++)
                h = (h ^ (uint8_t) *s) * 1099511628211ULL;
        return h;
}

static Posting *index_find(Index *x, const char *word, bool create) {
        size_t i = (size_t) hash(word) & (x->cap - 1);

        for (;; i = (i + 1) & (x->cap - 1)) {
                if (!x->slots[i].word) {
                        if (!create)
                                return NULL;
                        x->slots[i].word = word;
                        x->used++;
                        return &x->slots[i];
                }
                if (streq(x->slots[i].word, word))
                        return &x->slots[i];
        }
}

static int index_grow(Index *x) {
        Index bigger = { .cap = x->cap ? x->cap * 2 : 1024 };

        bigger.slots = calloc(bigger.cap, sizeof(Posting));
        if (!bigger.slots)
                return -ENOMEM;
        for (size_t i = 0; i < x->cap; i++)
                if (x->slots[i].word)
                        *index_find(&bigger, x->slots[i].word, true) = x->slots[i];
        free(x->slots);
        *x = bigger;
        return 0;
}

static int index_add(Index *x, const char *word, size_t group) {
        Posting *p;
        int r;

        if (x->used * 2 >= x->cap) {
                r = index_grow(x);
                if (r < 0)
                        return r;
        }
        p = index_find(x, word, true);
        if (p->n > 0 && p->groups[p->n - 1] == group)
                return 0;
        if (p->n == p->cap) {
                size_t cap = p->cap ? p->cap * 2 : 4, *g = reallocarray(p->groups, cap, sizeof(size_t));

                if (!g)
                        return -ENOMEM;
                p->groups = g;
                p->cap = cap;
        }
        p->groups[p->n++] = group;
        return 0;
}

/* The words of a key most worth looking up: the rarest ones first (fewest
 * keys have them; ties by the word). */
typedef struct RareWord {
        const char *word;
        size_t frequency;
} RareWord;

static int compare_rare(const void *a, const void *b) {
        const RareWord *x = a, *y = b;

        if (x->frequency != y->frequency)
                return x->frequency < y->frequency ? -1 : 1;
        return strcmp(x->word, y->word);
}

/* Prefix filtering (Chaudhuri et al. 2006; Bayardo et al. 2007): two sets
 * with a Jaccard similarity of at least t share a word among the first
 * |X| - ceil(t |X|) + 1 of each, in one global order (here: rarest first).
 * Only those words are indexed and looked up, so a word most keys have
 * ("policy") does not make every group a candidate. The prefix of words
 * (sorted alphabetically) into ret; its length. */
static size_t rare_prefix(Index *counts, const char *const *words, size_t n, RareWord *ret) {
        size_t k;

        for (size_t i = 0; i < n; i++) {
                Posting *p = index_find(counts, words[i], false);

                ret[i] = (RareWord){ .word = words[i], .frequency = p ? p->frequency : 0 };
        }
        qsort_safe(ret, n, sizeof(RareWord), compare_rare);
        /* |X| - ceil(t |X|) + 1 with t = 1/2. */
        k = n - (n + 1) / 2 + 1;
        return MIN(k, n);
}

/* The groups founded so far: each founder's copy of its key and words. */
typedef struct Founders {
        Founder *f;
        size_t n;
} Founders;

static void founders_done(Founders *l) {
        for (size_t g = 0; l->f && g < l->n; g++) {
                free(l->f[g].copy);
                free(l->f[g].words);
        }
        free(l->f);
        *l = (Founders){ 0 };
}

static void index_done(Index *x) {
        for (size_t i = 0; x->slots && i < x->cap; i++)
                free(x->slots[i].groups);
        free(x->slots);
        *x = (Index){ 0 };
}

int wording_group(const char *const *keys, size_t n, size_t *ret_group, size_t *ret_n_groups) {
        _cleanup_free_ size_t *candidates = NULL, *seen = NULL;
        _cleanup_free_ const char **words = NULL;
        _cleanup_free_ RareWord *rare = NULL;
        _cleanup_(strv_freep) char **copies = NULL; /* keys[0..i), NULL-terminated */
        _cleanup_(founders_done) Founders founders = { 0 };
        _cleanup_(index_done) Index x = { 0 }, counts = { 0 };
        int r = 0;

        assert(keys || n == 0);
        assert(ret_group || n == 0);
        assert(ret_n_groups);

        words = calloc(WORDS_MAX, sizeof(char *));
        rare = calloc(WORDS_MAX, sizeof(RareWord));
        copies = calloc(n + 1, sizeof(char *));
        founders.f = calloc(n + 1, sizeof(Founder));
        candidates = calloc(n + 1, sizeof(size_t));
        /* seen[g] == i + 1: group g is a candidate of key i already. */
        seen = calloc(n + 1, sizeof(size_t));
        if (!words || !rare || !copies || !founders.f || !candidates || !seen) {
                return -ENOMEM;
        }

        /* How many keys have each word: the global order of the prefixes. */
        for (size_t i = 0; i < n; i++) {
                size_t nw;

                copies[i] = strdup(keys[i]);
                if (!copies[i]) {
                        return -ENOMEM;
                }
                nw = split(copies[i], words, WORDS_MAX);
                for (size_t w = 0; w < nw; w++) {
                        Posting *p;

                        if (counts.used * 2 >= counts.cap && (r = index_grow(&counts)) < 0)
                                return r;
                        p = index_find(&counts, words[w], true);
                        p->frequency++;
                }
        }

        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *copy = strdup(keys[i]);
                size_t nw, np, nc = 0, group = SIZE_MAX;
                Founder *f;

                if (!copy) {
                        return -ENOMEM;
                }
                nw = split(copy, words, WORDS_MAX);
                np = rare_prefix(&counts, words, nw, rare);
                for (size_t w = 0; w < np; w++) {
                        Posting *p = x.cap ? index_find(&x, rare[w].word, false) : NULL;

                        for (size_t k = 0; p && k < p->n; k++)
                                if (seen[p->groups[k]] != i + 1) {
                                        seen[p->groups[k]] = i + 1;
                                        candidates[nc++] = p->groups[k];
                                }
                }
                /* The empty key shares no word: it groups with the empty key. */
                if (nw == 0)
                        for (size_t g = 0; g < founders.n; g++)
                                if (founders.f[g].n_words == 0) {
                                        candidates[nc++] = g;
                                        break;
                                }
                /* The first group in founding order that is similar enough:
                 * the smallest number among those that are. */
                for (size_t k = 0; k < nc; k++) {
                        const Founder *c = &founders.f[candidates[k]];

                        if (candidates[k] < group &&
                            jaccard(c->words, c->n_words, words, nw) >= WORDING_SIMILARITY_MIN)
                                group = candidates[k];
                }
                if (group != SIZE_MAX) {
                        ret_group[i] = group;
                        continue;
                }

                /* A new group, founded by this key. */
                group = founders.n++;
                f = &founders.f[group];
                f->copy = strdup(keys[i]);
                f->words = calloc(nw + 1, sizeof(char *));
                if (!f->copy || !f->words) {
                        return -ENOMEM;
                }
                nw = split(f->copy, f->words, nw);
                f->n_words = nw;
                np = rare_prefix(&counts, f->words, nw, rare);
                for (size_t w = 0; w < np; w++) {
                        r = index_add(&x, rare[w].word, group);
                        if (r < 0)
                                return r;
                }
                ret_group[i] = group;
        }
        *ret_n_groups = founders.n;
        return 0;
}
