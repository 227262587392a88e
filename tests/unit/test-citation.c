/* SPDX-License-Identifier: MIT */
#include <stdlib.h>
#include <string.h>

#include "query/citation.h"
#include "tests.h"

/* Wikitext of the fixture wiki (tests/fixtures/mediawiki.py, PAGES). */
static const char apple[] =
        "'''Apple''' is a fruit. It is number 1 in the orchard inventory.\n\n"
        "== Growing ==\nThe apple tree likes sun and well-drained soil. "
        "Harvest usually happens in month 1.\n\n[[Category:Fruit]]\n";
static const char orchard[] =
        "The orchard grows fruit: [[Apple]], [[Banana]], [[Cherry]] and more. "
        "Production figures are in [[Fruit production]].\n";
static const char production[] =
        "Fruit production of the orchard, in kilograms per year.\n\n"
        "{| class=\"wikitable\"\n! Fruit !! 2021 !! 2022 !! 2023\n"
        "|-\n| Apple || 1200 || 1350 || 1410\n"
        "|-\n| Banana || 300 || 280 || 310\n"
        "|}\n\nTotals are audited every spring.\n";
static const char tokyo[] = "東京 (Tokyo) is the capital of Japan. The orchard exports fruit to 東京.\n";

static char *normalized(const char *wikitext) {
        CitationText t = { 0 };
        char *s;

        ASSERT_OK(citation_normalize(wikitext, strlen(wikitext), &t));
        s = strdup(t.text);
        ASSERT_TRUE(s);
        citation_text_done(&t);
        return s;
}

#define ASSERT_NORMALIZED(in, out)         \
        do {                               \
                char *_s = normalized(in); \
                ASSERT_EQ_STR(_s, out);    \
                free(_s);                  \
        } while (0)

/* The status of quote against the page wikitext (NULL: not read), and its section. */
static CitationStatus check(const char *wikitext, const char *quote, char **ret_section) {
        CitationText t = { 0 };
        CitationCheck c = { 0 };
        CitationStatus s;

        if (wikitext)
                ASSERT_OK(citation_normalize(wikitext, strlen(wikitext), &t));
        ASSERT_OK(citation_verify(wikitext ? &t : NULL, quote, &c));
        s = c.status;
        if (ret_section)
                *ret_section = c.section ? strdup(c.section) : NULL;
        citation_check_done(&c);
        citation_text_done(&t);
        return s;
}

TEST(status_names) {
        ASSERT_EQ_STR(citation_status_to_string(CITATION_VERIFIED), "verified");
        ASSERT_EQ_STR(citation_status_to_string(CITATION_NOT_FOUND), "not_found");
        ASSERT_EQ_STR(citation_status_to_string(CITATION_NOT_READ), "not_read");
        ASSERT_EQ_STR(citation_status_to_string(CITATION_TOO_SHORT), "too_short");
        ASSERT_TRUE(!citation_status_to_string(_CITATION_STATUS_MAX));
        ASSERT_TRUE(!citation_status_to_string(-1));
}

TEST(normalize_fixture_pages) {
        ASSERT_NORMALIZED(
                apple,
                "Apple is a fruit. It is number 1 in the orchard inventory. Growing The apple tree likes "
                "sun and well-drained soil. Harvest usually happens in month 1.");
        ASSERT_NORMALIZED(
                orchard,
                "The orchard grows fruit: Apple, Banana, Cherry and more. Production figures are in "
                "Fruit production.");
        ASSERT_NORMALIZED(
                production,
                "Fruit production of the orchard, in kilograms per year. Fruit 2021 2022 2023 Apple 1200 "
                "1350 1410 Banana 300 280 310 Totals are audited every spring.");
        ASSERT_NORMALIZED(tokyo, "東京 (Tokyo) is the capital of Japan. The orchard exports fruit to 東京.");
}

TEST(normalize_markup) {
        ASSERT_NORMALIZED("[[Target page|the label]] and [[Plain]]s", "the label and Plains");
        ASSERT_NORMALIZED("a ''b'' '''c''' '''''d''''' ''''e''''", "a b c d 'e'");
        ASSERT_NORMALIZED("x<ref>a note [[y]]</ref> z<ref name=\"n\" /> w", "x z w");
        ASSERT_NORMALIZED("x<REF name=a>cut</Ref> y", "x y");
        ASSERT_NORMALIZED("a {{Infobox|x={{nested|y}}|z}} b", "a b");
        ASSERT_NORMALIZED("a <!-- hidden --> b <!-- unterminated", "a b");
        ASSERT_NORMALIZED("<span style=\"x\">in</span> <b>bold</b>line<br/>next", "in boldline next");
        ASSERT_NORMALIZED(
                "a &amp; b &lt;c&gt; &#233;&#x00E9; &nbsp;d &bogus; &#0; &#xD800;",
                "a & b <c> éé d &bogus; &#0; &#xD800;");
        ASSERT_NORMALIZED("[https://example.org the site] and [https://example.org]", "the site and");
        ASSERT_NORMALIZED("[[File:x.png|thumb|a [[caption]]]]after [[Category:Fruit]]", "after");
        ASSERT_NORMALIZED("* one\n# two\n: three\n----\n__TOC__ four", "one two three four");
        ASSERT_NORMALIZED("  many \t\n\n spaces\xc2\xa0here\xe2\x80\x83too  ", "many spaces here too");
        ASSERT_NORMALIZED("soft\xc2\xadhy\xe2\x80\x8bphen", "softhyphen");
        ASSERT_NORMALIZED("", "");
        ASSERT_NORMALIZED("[[", "");
        ASSERT_NORMALIZED("]] ]]", "]] ]]");
        ASSERT_NORMALIZED("< not a tag > a<b", "< not a tag > a<b");
}

TEST(normalize_nfc) {
        /* e + combining acute is é (U+00E9) */
        ASSERT_NORMALIZED("Cafe\xcc\x81", "Caf\xc3\xa9");
        /* an entity's combining mark composes too */
        ASSERT_NORMALIZED("Cafe&#x301;", "Caf\xc3\xa9");
        /* Angstrom sign U+212B is A with ring U+00C5 */
        ASSERT_NORMALIZED("\xe2\x84\xab", "\xc3\x85");
}

TEST(normalize_headings) {
        CitationText t = { 0 };
        const char *w = "Intro text.\n== First ==\nOne.\n=== [[Sub|Second]] ===\nTwo.\n=not a heading\n";

        ASSERT_OK(citation_normalize(w, strlen(w), &t));
        ASSERT_EQ_STR(t.text, "Intro text. First One. Second Two. =not a heading");
        ASSERT_EQ_INT(t.n_headings, 2);
        ASSERT_EQ_STR(t.headings[0], "First");
        ASSERT_EQ_STR(t.headings[1], "Second");
        ASSERT_TRUE(strncmp(t.text + t.offsets[0], "First", 5) == 0);
        ASSERT_TRUE(strncmp(t.text + t.offsets[1], "Second", 6) == 0);
        citation_text_done(&t);
}

TEST(normalize_hostile) {
        CitationText t = { 0 };
        size_t n = 1 << 20;
        char *big = malloc(n);
        const char *pieces[] = { "[[", "{{", "<ref>", "<a", "&#", "''", "==", "[http://", "<!--" };

        ASSERT_TRUE(big);
        for (size_t p = 0; p < ELEMENTSOF(pieces); p++) {
                size_t k = strlen(pieces[p]);

                for (size_t i = 0; i + k <= n; i += k)
                        memcpy(big + i, pieces[p], k);
                ASSERT_OK(citation_normalize(big, n - n % k, &t));
                citation_text_done(&t);
        }
        /* invalid UTF-8 and NUL bytes */
        ASSERT_OK(citation_normalize("a\xff\x00\xc0 b", 6, &t));
        ASSERT_EQ_STR(t.text, "a\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd b");
        citation_text_done(&t);
        free(big);
}

TEST(verify_fixture) {
        _cleanup_free_ char *section = NULL;

        ASSERT_EQ_INT(check(apple, "It is number 1 in the orchard inventory.", &section), CITATION_VERIFIED);
        ASSERT_TRUE(!section);
        /* across bold */
        ASSERT_EQ_INT(check(apple, "Apple is a fruit.", NULL), CITATION_VERIFIED);
        /* under a heading */
        ASSERT_EQ_INT(check(apple, "The apple tree likes sun", &section), CITATION_VERIFIED);
        ASSERT_EQ_STR(section, "Growing");
        /* across link markup, the quote as reader text or as wikitext */
        ASSERT_EQ_INT(
                check(orchard, "The orchard grows fruit: Apple, Banana, Cherry and more.", NULL),
                CITATION_VERIFIED);
        ASSERT_EQ_INT(check(orchard, "grows fruit: [[Apple]], [[Banana]]", NULL), CITATION_VERIFIED);
        ASSERT_EQ_INT(check(orchard, "  The   orchard\ngrows fruit ", NULL), CITATION_VERIFIED);
        ASSERT_EQ_INT(check(orchard, "The orchard grows only pears.", NULL), CITATION_NOT_FOUND);
        /* case matters */
        ASSERT_EQ_INT(check(orchard, "the orchard grows fruit", NULL), CITATION_NOT_FOUND);
        ASSERT_EQ_INT(check(NULL, "The orchard grows fruit", NULL), CITATION_NOT_READ);
        ASSERT_EQ_INT(check(tokyo, "is the capital of Japan", NULL), CITATION_VERIFIED);
        ASSERT_EQ_INT(check(tokyo, "exports fruit to 東京", NULL), CITATION_VERIFIED);
        ASSERT_EQ_INT(check(production, "Apple 1200 1350 1410", NULL), CITATION_VERIFIED);
}

TEST(verify_hostile) {
        _cleanup_free_ char *section = NULL;
        const char *twice = "Top.\n== A ==\nThe same sentence here.\n== B ==\nThe same sentence here.\n";
        const char *rtl = "שלום עולם, זוהי בדיקה של טקסט.\n";
        const char *combining = "The people Zoe\xcc\x88 and q\xcc\x81uite a bit more text.\n";

        /* too short to mean anything, even when it occurs */
        ASSERT_EQ_INT(check(apple, "Apple", NULL), CITATION_TOO_SHORT);
        ASSERT_EQ_INT(check(apple, "'''Apple''' is", NULL), CITATION_TOO_SHORT);
        ASSERT_EQ_INT(check(apple, "[[x|]]", NULL), CITATION_TOO_SHORT);
        /* a quote that occurs twice: the first decides the section */
        ASSERT_EQ_INT(check(twice, "The same sentence here.", &section), CITATION_VERIFIED);
        ASSERT_EQ_STR(section, "A");
        free(section);
        section = NULL;
        /* right-to-left text, with and without direction marks */
        ASSERT_EQ_INT(check(rtl, "שלום עולם, זוהי בדיקה", NULL), CITATION_VERIFIED);
        ASSERT_EQ_INT(check(rtl, "\xe2\x80\x8fשלום עולם, זוהי בדיקה\xe2\x80\x8e", NULL), CITATION_VERIFIED);
        /* combining characters: decomposed in the quote, composed in the page */
        ASSERT_EQ_INT(check("Zoë and the other people.", "Zoe\xcc\x88 and the other", NULL), CITATION_VERIFIED);
        /* a match may not cut a letter from its mark: q + U+0301 has no composed form */
        ASSERT_EQ_INT(check(combining, "and q", NULL), CITATION_TOO_SHORT);
        ASSERT_EQ_INT(check(combining, "The people Zoë and q", NULL), CITATION_NOT_FOUND);
        ASSERT_EQ_INT(check(combining, "The people Zoë and q\xcc\x81uite", NULL), CITATION_VERIFIED);
        ASSERT_EQ_INT(check(combining, "\xcc\x81uite a bit more text", NULL), CITATION_NOT_FOUND);
        /* entities and templates and refs inside the quoted span */
        ASSERT_EQ_INT(
                check("Fish &amp; chips{{citation needed}} are<ref>x</ref> served hot.",
                      "Fish & chips are served hot.",
                      NULL),
                CITATION_VERIFIED);
        /* markup in the quote cannot smuggle a match */
        ASSERT_EQ_INT(
                check(apple, "<script>It is number 1</script> in the orchard inventory.", NULL),
                CITATION_VERIFIED);
        ASSERT_EQ_INT(check(apple, "It is number 1 {{unclosed", NULL), CITATION_VERIFIED);
        ASSERT_EQ_INT(check(apple, "number 1 {{x}}", NULL), CITATION_TOO_SHORT);
}

static void parse(const char *answer, char **ret_answer, Citation **ret, size_t *ret_n) {
        ASSERT_OK(citation_parse_answer(answer, strlen(answer), ret_answer, ret, ret_n));
}

TEST(parse_plain) {
        _cleanup_free_ char *rest = NULL;
        Citation *c = NULL;
        size_t n = 0;

        parse("Apples are fruit [1] and grow in the orchard [2].\n\n"
              "Sources:\n"
              "[1] Apple: \"Apple is a fruit.\"\n"
              "[2] Orchard: \"The orchard grows fruit: Apple, Banana\"\n",
              &rest,
              &c,
              &n);
        ASSERT_EQ_STR(rest, "Apples are fruit [1] and grow in the orchard [2].");
        ASSERT_EQ_INT(n, 2);
        ASSERT_EQ_INT(c[0].n, 1);
        ASSERT_EQ_STR(c[0].title, "Apple");
        ASSERT_EQ_STR(c[0].quote, "Apple is a fruit.");
        ASSERT_EQ_INT(c[1].n, 2);
        ASSERT_EQ_STR(c[1].title, "Orchard");
        ASSERT_EQ_STR(c[1].quote, "The orchard grows fruit: Apple, Banana");
        citation_free_many(c, n);
}

TEST(parse_lenient) {
        _cleanup_free_ char *rest = NULL;
        Citation *c = NULL;
        size_t n = 0;

        parse("Text [2][1][3].\n"
              "**Citations:**\n\n"
              "- [2] Projects/Alpha: Budget: \xe2\x80\x9cThe budget is \"small\".\xe2\x80\x9d\n"
              "\n"
              "* [1] **Zürich**: \xe2\x80\x9eZürich is the largest city\xe2\x80\x9c\n"
              "\xe2\x80\xa2 [3] [[Apple]]: \"quoted\".\n"
              "[1] Apple: \"a second [1] is dropped\"\n"
              "More text after.\n",
              &rest,
              &c,
              &n);
        ASSERT_EQ_STR(rest, "Text [2][1][3].\nMore text after.");
        ASSERT_EQ_INT(n, 3);
        ASSERT_EQ_INT(c[0].n, 1);
        ASSERT_EQ_STR(c[0].title, "Zürich");
        ASSERT_EQ_STR(c[0].quote, "Zürich is the largest city");
        ASSERT_EQ_INT(c[1].n, 2);
        ASSERT_EQ_STR(c[1].title, "Projects/Alpha: Budget");
        ASSERT_EQ_STR(c[1].quote, "The budget is \"small\".");
        ASSERT_EQ_INT(c[2].n, 3);
        ASSERT_EQ_STR(c[2].title, "Apple");
        ASSERT_EQ_STR(c[2].quote, "quoted");
        citation_free_many(c, n);
}

TEST(parse_not_citations) {
        static const char *const answers[] = {
                "No citations here.",
                "[1] Apple \"no separator\"",
                "[0] Apple: \"zero\"",
                "[1000] Apple: \"too big\"",
                "[x] Apple: \"not a number\"",
                "[1] : \"no title\"",
                "[1] Apple: \"\"",
                "[1] Apple: \"unterminated",
                "Sources:\nnothing below",
                "text [1] Apple: \"inline is not a line\"",
        };

        for (size_t i = 0; i < ELEMENTSOF(answers); i++) {
                _cleanup_free_ char *rest = NULL;
                Citation *c = NULL;
                size_t n = 1;

                parse(answers[i], &rest, &c, &n);
                ASSERT_EQ_INT(n, 0);
                ASSERT_TRUE(!c);
                ASSERT_EQ_STR(rest, answers[i]);
        }
}

TEST(parse_hostile) {
        _cleanup_free_ char *rest = NULL, *many = NULL;
        Citation *c = NULL;
        size_t n = 0, len = 0;

        /* more lines than CITATION_MAX: the later ones stay */
        many = malloc(100 * 32);
        ASSERT_TRUE(many);
        for (unsigned i = 1; i <= 100; i++)
                len += (size_t) snprintf(many + len, 32, "[%u] Apple: \"q%u\"\n", i, i);
        parse(many, &rest, &c, &n);
        ASSERT_EQ_INT(n, CITATION_MAX);
        ASSERT_EQ_INT(c[CITATION_MAX - 1].n, CITATION_MAX);
        ASSERT_TRUE(strncmp(rest, "[65] Apple", 10) == 0);
        citation_free_many(c, n);
        free(rest);
        rest = NULL;

        /* a control character in the title, invalid UTF-8 */
        ASSERT_OK(citation_parse_answer("[1] A\x01pple: \"q\"\n[2] \xff: \"x\xfe\"", 27, &rest, &c, &n));
        ASSERT_EQ_INT(n, 1);
        ASSERT_EQ_STR(c[0].title, "\xef\xbf\xbd");
        ASSERT_EQ_STR(c[0].quote, "x\xef\xbf\xbd");
        citation_free_many(c, n);
}

TEST(text_fragment) {
        _cleanup_free_ char *a = NULL, *b = NULL, *d = NULL, *e = NULL;

        /* the specification's examples: '-', ',' and '&' escaped */
        ASSERT_OK(citation_text_fragment("an example text fragment", &a));
        ASSERT_EQ_STR(a, "#:~:text=an%20example%20text%20fragment");
        ASSERT_OK(citation_text_fragment("Mr. Darcy, the well-known & rich", &b));
        ASSERT_EQ_STR(b, "#:~:text=Mr.%20Darcy%2C%20the%20well%2Dknown%20%26%20rich");
        ASSERT_OK(citation_text_fragment("one two three four five six seven eight nine ten eleven twelve", &d));
        ASSERT_EQ_STR(d, "#:~:text=one%20two%20three%20four%20five,eight%20nine%20ten%20eleven%20twelve");
        ASSERT_OK(citation_text_fragment("東京", &e));
        ASSERT_EQ_STR(e, "#:~:text=%E6%9D%B1%E4%BA%AC");
}

TEST(permalink) {
        _cleanup_free_ char *a = NULL, *b = NULL, *d = NULL;
        char *x = NULL;

        ASSERT_OK(citation_permalink("https://en.wikipedia.org/w/api.php", 42, &a));
        ASSERT_EQ_STR(a, "https://en.wikipedia.org/w/index.php?oldid=42");
        ASSERT_OK(citation_permalink("http://127.0.0.1:8080/api.php?x=1#f", 7, &b));
        ASSERT_EQ_STR(b, "http://127.0.0.1:8080/index.php?oldid=7");
        ASSERT_OK(citation_permalink("http://wiki.example", 7, &d));
        ASSERT_EQ_STR(d, "http://wiki.example/index.php?oldid=7");
        ASSERT_EQ_INT(citation_permalink("ftp://x/api.php", 1, &x), -EINVAL);
        ASSERT_TRUE(!x);
}

TEST(answer_record) {
        const CitationSource pages[] = {
                { .title = "Apple",
                  .redirected_from = "Apples",
                  .revision_id = 11,
                  .text = apple,
                  .size = sizeof(apple) - 1 },
                { .title = "Orchard", .revision_id = 22, .text = orchard, .size = sizeof(orchard) - 1 },
        };
        _cleanup_free_ char *rest = NULL, *json = NULL, *none = NULL, *none_json = NULL;
        unsigned counts[_CITATION_STATUS_MAX] = { 0 };

        ASSERT_OK(citation_answer(
                "Apples grow [1][2], pears do not [3][4][5].\n\nSources:\n"
                "[2] orchard: \"The orchard grows fruit: Apple, Banana, Cherry\"\n"
                "[1] Apples: \"The apple tree likes sun and well-drained soil.\"\n"
                "[3] Apple: \"Pears are the best fruit of all.\"\n"
                "[4] Pear: \"Pears are the best fruit of all.\"\n"
                "[5] Apple_: \"fruit\"\n",
                pages,
                ELEMENTSOF(pages),
                "http://127.0.0.1:8080/w/api.php",
                &rest,
                &json,
                counts));
        ASSERT_EQ_STR(rest, "Apples grow [1][2], pears do not [3][4][5].");
        ASSERT_EQ_STR(
                json,
                "[{\"n\":1,\"title\":\"Apple\",\"revision_id\":11,\"quote\":\"The apple tree likes sun and "
                "well-drained soil.\",\"status\":\"verified\",\"url\":\"http://127.0.0.1:8080/w/"
                "index.php?oldid=11#:~:text=The%20apple%20tree%20likes%20sun%20and%20well%2Ddrained%20soil."
                "\",\"section\":\"Growing\"},"
                "{\"n\":2,\"title\":\"Orchard\",\"revision_id\":22,\"quote\":\"The orchard grows fruit: "
                "Apple, Banana, Cherry\",\"status\":\"verified\",\"url\":\"http://127.0.0.1:8080/w/"
                "index.php?oldid=22#:~:text=The%20orchard%20grows%20fruit%3A%20Apple%2C%20Banana%2C%20Cherry"
                "\",\"section\":null},"
                "{\"n\":3,\"title\":\"Apple\",\"revision_id\":11,\"quote\":\"Pears are the best fruit of "
                "all.\",\"status\":\"not_found\",\"url\":\"http://127.0.0.1:8080/w/index.php?oldid=11\","
                "\"section\":null},"
                "{\"n\":4,\"title\":\"Pear\",\"revision_id\":null,\"quote\":\"Pears are the best fruit of "
                "all.\",\"status\":\"not_read\",\"url\":null,\"section\":null},"
                "{\"n\":5,\"title\":\"Apple_\",\"revision_id\":null,\"quote\":\"fruit\",\"status\":\"not_"
                "read\",\"url\":null,\"section\":null}]");
        ASSERT_EQ_INT(counts[CITATION_VERIFIED], 2);
        ASSERT_EQ_INT(counts[CITATION_NOT_FOUND], 1);
        ASSERT_EQ_INT(counts[CITATION_NOT_READ], 2);

        /* no citations: the answer as it was, an empty list */
        ASSERT_OK(citation_answer("Just text.", NULL, 0, NULL, &none, &none_json, NULL));
        ASSERT_EQ_STR(none, "Just text.");
        ASSERT_EQ_STR(none_json, "[]");
}

DEFINE_TEST_MAIN()
