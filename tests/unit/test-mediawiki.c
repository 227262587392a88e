/* SPDX-License-Identifier: MIT */
/* The MediaWiki parsers and request builders (src/query/mediawiki.c) on
 * replies captured from a real MediaWiki 1.39 (tests/unit/data/mediawiki/)
 * and on hostile ones: wrong types, huge numbers, missing fields, invalid
 * UTF-8, deep nesting, trailing garbage. */
#include "query/mediawiki.h"
#include "shared/macro.h"
#include "tests.h"

static char *load(const char *name, size_t *ret_size) {
        _cleanup_free_ char *path = NULL;

        ASSERT_TRUE(asprintf(&path, "%s/mediawiki/%s", test_data_dir(), name) >= 0);
        return test_read_file(path, ret_size);
}

#define S(lit) (lit), STRLEN(lit)

TEST(search) {
        size_t size, n;
        _cleanup_free_ char *body = load("search.json", &size);
        MediaWikiSearchHit *hits = NULL;

        ASSERT_OK(mediawiki_parse_search(body, size, &hits, &n, NULL));
        ASSERT_EQ_INT(n, 5);
        ASSERT_EQ_STR(hits[0].title, "Apple");
        /* HTML gone, entities decoded */
        ASSERT_EQ_STR(hits[0].snippet, "'''Apple''' is a fruit. It is number 1 in the orchard inventory.\n");
        mediawiki_search_hits_free(hits, n);

        {
                _cleanup_free_ char *b = load("search-empty.json", &size);
                ASSERT_OK(mediawiki_parse_search(b, size, &hits, &n, NULL));
                ASSERT_EQ_INT(n, 0);
                mediawiki_search_hits_free(hits, n);
        }
        {
                _cleanup_free_ char *b = load("search-nonascii.json", &size);
                bool found = false;
                ASSERT_OK(mediawiki_parse_search(b, size, &hits, &n, NULL));
                ASSERT_TRUE(n >= 2);
                for (size_t i = 0; i < n; i++)
                        if (streq(hits[i].title, "Zürich"))
                                found = true;
                ASSERT_TRUE(found);
                mediawiki_search_hits_free(hits, n);
        }
}

TEST(page) {
        size_t size;
        WikiPage p = { 0 };

        {
                _cleanup_free_ char *b = load("page.json", &size);
                ASSERT_OK(mediawiki_parse_page(b, size, &p, NULL));
                ASSERT_TRUE(!p.missing);
                ASSERT_EQ_STR(p.title, "Fruit production");
                ASSERT_EQ_INT(p.revision_id, 11);
                ASSERT_TRUE(p.redirected_from == NULL);
                ASSERT_TRUE(strstr(p.url, "/index.php/Fruit_production") != NULL);
                ASSERT_TRUE(strstr(p.content, "{| class=\"wikitable\"") != NULL);
                ASSERT_TRUE(strstr(p.content, "| Apple || 1200 || 1350 || 1410") != NULL);
                ASSERT_EQ_INT(p.content_size, strlen(p.content));
                wiki_page_done(&p);
        }
        {
                _cleanup_free_ char *b = load("page-redirect.json", &size);
                ASSERT_OK(mediawiki_parse_page(b, size, &p, NULL));
                ASSERT_EQ_STR(p.title, "東京");
                ASSERT_EQ_STR(p.redirected_from, "Tokyo");
                ASSERT_TRUE(p.revision_id > 0);
                ASSERT_TRUE(strstr(p.url, "%E6%9D%B1%E4%BA%AC") != NULL);
                wiki_page_done(&p);
        }
        {
                _cleanup_free_ char *b = load("page-missing.json", &size);
                ASSERT_OK(mediawiki_parse_page(b, size, &p, NULL));
                ASSERT_TRUE(p.missing);
                ASSERT_EQ_STR(p.title, "No such page here");
                ASSERT_TRUE(!p.content && !p.url && p.revision_id == 0);
                wiki_page_done(&p);
        }
        {
                _cleanup_free_ char *b = load("page-slash.json", &size);
                ASSERT_OK(mediawiki_parse_page(b, size, &p, NULL));
                ASSERT_EQ_STR(p.title, "Projects/Alpha/Budget");
                ASSERT_TRUE(strstr(p.url, "/index.php/Projects/Alpha/Budget") != NULL);
                wiki_page_done(&p);
        }
        {
                _cleanup_free_ char *b = load("page-invalid-title.json", &size);
                ASSERT_OK(mediawiki_parse_page(b, size, &p, NULL));
                ASSERT_TRUE(p.missing);
                wiki_page_done(&p);
        }
}

/* Titles that are no page of this wiki, as MediaWiki 1.39 answers them:
 * each is "missing", with the title the wiki gave. */
TEST(page_not_of_this_wiki) {
        static const struct {
                const char *file, *title;
        } cases[] = {
                { "page-interwiki.json", "wikipedia:Payroll 2026" },
                { "page-special.json", "Special:AllPages" },
                { "page-special-export.json", "Special:Export/Apple" },
                { "page-media.json", "Media:Foo.png" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                size_t size;
                _cleanup_free_ char *b = load(cases[i].file, &size);
                WikiPage p = { 0 };

                ASSERT_OK(mediawiki_parse_page(b, size, &p, NULL));
                ASSERT_TRUE(p.missing);
                ASSERT_EQ_STR(p.title, cases[i].title);
                ASSERT_TRUE(!p.content && !p.url && p.revision_id == 0);
                wiki_page_done(&p);
        }
        /* In a revisions reply a special page is missing too. */
        {
                static const char b[] =
                        "{\"query\":{\"pages\":[{\"ns\":-1,\"title\":\"Special:AllPages\",\"special\":true},"
                        "{\"ns\":0,\"title\":\"A\",\"lastrevid\":7}]}}";
                MediaWikiRevision *revs = NULL;
                size_t n;

                ASSERT_OK(mediawiki_parse_revisions(b, sizeof b - 1, &revs, &n, NULL));
                ASSERT_EQ_INT(n, 2);
                ASSERT_TRUE(revs[0].missing && !revs[1].missing);
                ASSERT_EQ_INT(revs[1].revision_id, 7);
                mediawiki_revisions_free(revs, n);
        }
}

TEST(errors) {
        static const struct {
                const char *file, *code;
        } cases[] = {
                { "readapidenied.json", "readapidenied" },
                { "assertuserfailed.json", "assertuserfailed" },
                { "badvalue.json", "badvalue" },
                { "maxlag.json", "maxlag" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                size_t size, n;
                _cleanup_free_ char *b = load(cases[i].file, &size);
                MediaWikiError e = { 0 };
                WikiPage p = { 0 };
                MediaWikiSearchHit *hits = NULL;
                MediaWikiLoginResult lr;
                char *token = NULL;

                ASSERT_EQ_INT(mediawiki_parse_error(b, size, &e), -EREMOTEIO);
                ASSERT_EQ_STR(e.code, cases[i].code);
                ASSERT_TRUE(e.info && *e.info);
                mediawiki_error_done(&e);
                /* every parser recognises an error reply */
                ASSERT_EQ_INT(mediawiki_parse_search(b, size, &hits, &n, &e), -EREMOTEIO);
                ASSERT_EQ_STR(e.code, cases[i].code);
                mediawiki_error_done(&e);
                ASSERT_EQ_INT(mediawiki_parse_page(b, size, &p, NULL), -EREMOTEIO);
                ASSERT_EQ_INT(mediawiki_parse_login_token(b, size, &token, NULL), -EREMOTEIO);
                ASSERT_EQ_INT(mediawiki_parse_login(b, size, &lr, NULL, NULL), -EREMOTEIO);
        }
        /* not an error */
        ASSERT_EQ_INT(mediawiki_parse_error(S("{\"query\":{}}"), NULL), 0);
        /* error codes that could carry anything are not passed on */
        {
                MediaWikiError e = { 0 };
                ASSERT_EQ_INT(
                        mediawiki_parse_error(S("{\"error\":{\"code\":\"a b<script>\",\"info\":\"x\"}}"), &e),
                        -EREMOTEIO);
                ASSERT_EQ_STR(e.code, "(invalid)");
                mediawiki_error_done(&e);
                ASSERT_EQ_INT(mediawiki_parse_error(S("{\"error\":{\"code\":5}}"), &e), -EREMOTEIO);
                ASSERT_EQ_STR(e.code, "(invalid)");
                ASSERT_TRUE(e.info == NULL);
                mediawiki_error_done(&e);
                ASSERT_EQ_INT(mediawiki_parse_error(S("{\"error\":\"string\"}"), &e), -EBADMSG);
        }
}

TEST(login) {
        size_t size;
        char *token = NULL, *reason = NULL;
        MediaWikiLoginResult r;

        {
                _cleanup_free_ char *b = load("login-token.json", &size);
                ASSERT_OK(mediawiki_parse_login_token(b, size, &token, NULL));
                ASSERT_EQ_INT(strlen(token), 42);
                ASSERT_TRUE(token[40] == '+' && token[41] == '\\');
                free(token);
        }
        {
                _cleanup_free_ char *b = load("login-success.json", &size);
                ASSERT_OK(mediawiki_parse_login(b, size, &r, &reason, NULL));
                ASSERT_EQ_INT(r, MEDIAWIKI_LOGIN_SUCCESS);
                ASSERT_TRUE(reason == NULL);
        }
        {
                _cleanup_free_ char *b = load("login-failed.json", &size);
                ASSERT_OK(mediawiki_parse_login(b, size, &r, &reason, NULL));
                ASSERT_EQ_INT(r, MEDIAWIKI_LOGIN_FAILED);
                ASSERT_TRUE(reason && strstr(reason, "Incorrect username or password"));
                free(reason);
        }
        {
                _cleanup_free_ char *b = load("login-wrongtoken.json", &size);
                ASSERT_OK(mediawiki_parse_login(b, size, &r, &reason, NULL));
                ASSERT_EQ_INT(r, MEDIAWIKI_LOGIN_WRONG_TOKEN);
                free(reason);
        }
        ASSERT_OK(mediawiki_parse_login(S("{\"login\":{\"result\":\"NeedToken\"}}"), &r, NULL, NULL));
        ASSERT_EQ_INT(r, MEDIAWIKI_LOGIN_NEED_TOKEN);
        ASSERT_OK(mediawiki_parse_login(
                S("{\"login\":{\"result\":\"Aborted\",\"reason\":{\"code\":\"x\"}}}"), &r, &reason, NULL));
        ASSERT_EQ_INT(r, MEDIAWIKI_LOGIN_ABORTED);
        ASSERT_EQ_STR(reason, "x");
        free(reason);
        ASSERT_OK(mediawiki_parse_login(S("{\"login\":{\"result\":\"WrongPass\"}}"), &r, NULL, NULL));
        ASSERT_EQ_INT(r, MEDIAWIKI_LOGIN_OTHER);
        ASSERT_EQ_INT(mediawiki_parse_login(S("{\"login\":{\"result\":true}}"), &r, NULL, NULL), -EBADMSG);
        ASSERT_EQ_INT(mediawiki_parse_login(S("{\"login\":[]}"), &r, NULL, NULL), -EBADMSG);
        ASSERT_EQ_INT(
                mediawiki_parse_login_token(
                        S("{\"query\":{\"tokens\":{\"logintoken\":\"+\\\\\"}}}"), &token, NULL),
                -EBADMSG);
        ASSERT_EQ_INT(
                mediawiki_parse_login_token(
                        S("{\"query\":{\"tokens\":{\"logintoken\":\"ab c+\\\\\"}}}"), &token, NULL),
                -EBADMSG);
        ASSERT_EQ_INT(
                mediawiki_parse_login_token(S("{\"query\":{\"tokens\":{\"logintoken\":123}}}"), &token, NULL),
                -EBADMSG);
}

TEST(hostile) {
        static const struct {
                const char *body;
                size_t size;
        } bad_pages[] = {
                { S("") },
                { S("null") },
                { S("[]") },
                { S("{\"query\":{\"pages\":{}}}") },
                { S("{\"query\":{\"pages\":[]}}") },
                { S("{\"query\":{\"pages\":[{\"title\":\"A\"},{\"title\":\"B\"}]}}") },
                { S("{\"query\":{\"pages\":[{\"title\":5}]}}") },
                { S("{\"query\":{\"pages\":[{\"title\":\"\"}]}}") },
                { S("{\"query\":{\"pages\":[{\"title\":\"A\"}]}}") }, /* no revisions, not missing */
                { S("{\"query\":{\"pages\":[{\"title\":\"A\",\"missing\":\"yes\"}]}}") },
                { S("{\"query\":{\"pages\":[{\"title\":\"A\",\"missing\":false}]}}") },
                { S("{\"query\":{\"pages\":[{\"title\":\"A\",\"revisions\":[{\"revid\":1,\"slots\":{\"main\":{\"content\":\"x\"}}}]}]}}") }, /* no URL */
                { S("{\"query\":{\"pages\":[{\"title\":\"A\",\"fullurl\":\"javascript:x\",\"revisions\":[{\"revid\":1,\"slots\":{\"main\":{\"content\":\"x\"}}}]}]}}") },
                { S("{\"query\":{\"pages\":[{\"title\":\"A\",\"fullurl\":\"http://w/A\",\"revisions\":[{\"revid\":99999999999999999999999,\"slots\":{\"main\":{\"content\":\"x\"}}}]}]}}") },
                { S("{\"query\":{\"pages\":[{\"title\":\"A\",\"fullurl\":\"http://w/A\",\"revisions\":[{\"revid\":-1,\"slots\":{\"main\":{\"content\":\"x\"}}}]}]}}") },
                { S("{\"query\":{\"pages\":[{\"title\":\"A\",\"fullurl\":\"http://w/A\",\"revisions\":[{\"revid\":1.5,\"slots\":{\"main\":{\"content\":\"x\"}}}]}]}}") },
                { S("{\"query\":{\"pages\":[{\"title\":\"A\",\"fullurl\":\"http://w/A\",\"revisions\":[{\"revid\":\"1\",\"slots\":{\"main\":{\"content\":\"x\"}}}]}]}}") },
                { S("{\"query\":{\"pages\":[{\"title\":\"A\",\"fullurl\":\"http://w/A\",\"revisions\":[{\"revid\":1,\"slots\":{\"main\":{\"content\":7}}}]}]}}") },
                { S("{\"query\":{\"pages\":[{\"title\":\"A\",\"fullurl\":\"http://w/A\",\"revisions\":[{\"revid\":1,\"slots\":{}}]}]}}") },
                { S("{\"query\":{\"pages\":[{\"title\":\"A\",\"fullurl\":\"http://w/A\",\"revisions\":[]}]}}") },
                { S("{\"query\":{\"pages\":[{\"title\":\"A\\u0000B\",\"missing\":true}]}}") },
                { S("{\"query\":{\"redirects\":[],\"pages\":[{\"title\":\"A\",\"missing\":true}]}}") },
                { S("{\"query\":{\"redirects\":[{\"to\":\"A\"}],\"pages\":[{\"title\":\"A\",\"missing\":true}]}}") },
                { S("{\"query\":{\"pages\":[{\"title\":\"A\",\"missing\":true}]}} x") },
                { S("{\"query\":{\"pages\":[{\"title\":\"\xff\",\"missing\":true}]}}") },
                { S("{\"query\":{\"pages\":[{\"title\":\"\xc0\xaf\",\"missing\":true}]}}") },
                { S("{\"query\":{\"pages\":[{\"title\":\"\xed\xa0\x80\",\"missing\":true}]}}") },
                { S("{\"query\":{\"pages\":[{\"title\":\"A\",\"missing\":true}]}\0}") },
                { S("{'query':1}") },
                { S("{\"query\":{\"pages\":[{\"title\":\"A\",\"missing\":true,}]}}") },
                { S("{\"query\":{\"pages\":[{\"title\":\"A\",\"missing\":tru}]}}") },
                /* Shapes near those of a title that is no page here. */
                { S("{\"query\":{\"interwiki\":[]}}") },
                { S("{\"query\":{\"interwiki\":[{\"title\":\"\"}]}}") },
                { S("{\"query\":{\"interwiki\":[{\"iw\":\"w\"}]}}") },
                { S("{\"query\":{\"interwiki\":[{\"title\":\"w:A\"},{\"title\":\"w:B\"}]}}") },
                { S("{\"query\":{\"interwiki\":{\"title\":\"w:A\"}}}") },
                { S("{\"query\":{\"interwiki\":[{\"title\":7}]}}") },
                { S("{\"query\":{\"pages\":[{\"title\":\"Special:A\",\"special\":\"yes\"}]}}") },
                { S("{\"query\":{\"pages\":[{\"title\":\"Special:A\",\"special\":false}]}}") },
                { S("{\"query\":{\"pages\":[{\"title\":\"Special:A\",\"ns\":\"-1\"}]}}") },
                { S("{\"query\":{\"pages\":[{\"title\":\"A\",\"ns\":0}]}}") },
                { S("{\"query\":{\"pages\":[{\"ns\":-1,\"special\":true}]}}") },
                { S("{\"query\":{\"pages\":[{\"title\":\"\",\"special\":true}]}}") },
        };

        for (size_t i = 0; i < ELEMENTSOF(bad_pages); i++) {
                WikiPage p = { 0 };
                int r = mediawiki_parse_page(bad_pages[i].body, bad_pages[i].size, &p, NULL);
                if (r != -EBADMSG) {
                        fprintf(stderr, "case %zu: %d\n", i, r);
                        abort();
                }
        }

        /* A long title (over 255 bytes) is refused. */
        {
                char b[1024];
                int n = snprintf(
                        b, sizeof b, "{\"query\":{\"pages\":[{\"title\":\"%0300d\",\"missing\":true}]}}", 0);
                WikiPage p = { 0 };
                ASSERT_EQ_INT(mediawiki_parse_page(b, (size_t) n, &p, NULL), -EBADMSG);
        }

        /* Deep nesting stops at the depth limit. */
        {
                size_t depth = 100000, n = 0;
                char *b = malloc(depth * 2 + 16);
                WikiPage p = { 0 };
                ASSERT_TRUE(b);
                b[n++] = '{';
                memcpy(b + n, "\"a\":", 4), n += 4;
                for (size_t i = 0; i < depth; i++)
                        b[n++] = '[';
                ASSERT_EQ_INT(mediawiki_parse_page(b, n, &p, NULL), -EBADMSG);
                free(b);
        }

        /* Searches */
        static const struct {
                const char *body;
                size_t size;
        } bad_search[] = {
                { S("{\"query\":{}}") },
                { S("{\"query\":{\"search\":{}}}") },
                { S("{\"query\":{\"search\":[{\"snippet\":\"x\"}]}}") },
                { S("{\"query\":{\"search\":[{\"title\":\"A\",\"snippet\":5}]}}") },
                { S("{\"query\":{\"search\":[5]}}") },
                { S("{\"query\":{\"search\":[{\"title\":\"A\\u0000\"}]}}") },
                /* A bad hit after a good one: the good one is released too. */
                { S("{\"query\":{\"search\":[{\"title\":\"A\",\"snippet\":\"<b>x</b>\"},{\"snippet\":\"y\"}]}}") },
        };
        for (size_t i = 0; i < ELEMENTSOF(bad_search); i++) {
                MediaWikiSearchHit *hits = NULL;
                size_t n = 0;
                int r = mediawiki_parse_search(bad_search[i].body, bad_search[i].size, &hits, &n, NULL);
                if (r != -EBADMSG) {
                        fprintf(stderr, "search case %zu: %d\n", i, r);
                        abort();
                }
        }
        /* A null snippet is an empty one. */
        {
                MediaWikiSearchHit *hits = NULL;
                size_t n = 0;
                ASSERT_OK(mediawiki_parse_search(
                        S("{\"query\":{\"search\":[{\"title\":\"A\",\"snippet\":null}]}}"), &hits, &n, NULL));
                ASSERT_EQ_INT(n, 1);
                ASSERT_EQ_STR(hits[0].snippet, "");
                mediawiki_search_hits_free(hits, n);
        }
}

TEST(snippet) {
        static const struct {
                const char *in, *out;
        } cases[] = {
                { "a <span class='searchmatch'>b</span> c", "a b c" },
                { "&lt;b&gt; &amp;amp; &quot;q&quot; &#039;s&#39; &apos;", "<b> &amp; \"q\" 's' '" },
                { "&#x41;&#X42;&#67;", "ABC" },
                { "&#0; &#xD800; &#x110000; &#99999999;",
                  "\xef\xbf\xbd \xef\xbf\xbd \xef\xbf\xbd \xef\xbf\xbd" },
                { "&unknown; & &#; &#x; &#12", "&unknown; & &#; &#x; &#12" },
                { "cut <span", "cut " },
                { "", "" },
                { "Zürich <span class=\"searchmatch\">東京</span>", "Zürich 東京" },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *out = NULL;
                ASSERT_OK(mediawiki_snippet_to_text(cases[i].in, &out));
                ASSERT_EQ_STR(out, cases[i].out);
        }
}

TEST(builders) {
        _cleanup_free_ char *s = NULL, *r = NULL, *t = NULL, *l = NULL, *u = NULL, *u2 = NULL;
        char title[300];

        ASSERT_OK(mediawiki_build_search("fruit & veg=1|2", 5, true, &s));
        ASSERT_EQ_STR(
                s,
                "action=query&list=search&srsearch=fruit%20%26%20veg%3D1%7C2&srwhat=text&srnamespace=0"
                "&srlimit=5&srprop=snippet&format=json&formatversion=2&errorformat=bc&maxlag=5&assert=user");
        ASSERT_OK(mediawiki_build_read("Projects/Alpha Ü", false, &r));
        ASSERT_EQ_STR(
                r,
                "action=query&prop=revisions%7Cinfo&titles=Projects%2FAlpha%20%C3%9C&rvslots=main"
                "&rvprop=content%7Cids&inprop=url&redirects=1&format=json&formatversion=2&errorformat=bc&maxlag=5");
        ASSERT_OK(mediawiki_build_login_token(&t));
        ASSERT_EQ_STR(
                t, "action=query&meta=tokens&type=login&format=json&formatversion=2&errorformat=bc&maxlag=5");
        ASSERT_OK(mediawiki_build_login("Bot@app", "p&ss=", "abc+\\", &l));
        ASSERT_EQ_STR(
                l,
                "action=login&lgname=Bot%40app&lgpassword=p%26ss%3D&lgtoken=abc%2B%5C&format=json"
                "&formatversion=2&errorformat=bc&maxlag=5");
        ASSERT_OK(mediawiki_url("http://w/api.php", "a=1", &u));
        ASSERT_EQ_STR(u, "http://w/api.php?a=1");
        ASSERT_OK(mediawiki_url("http://w/api.php?x=y", "a=1", &u2));
        ASSERT_EQ_STR(u2, "http://w/api.php?x=y&a=1");

        /* invalid arguments */
        char *x = NULL;
        ASSERT_EQ_INT(mediawiki_build_read("A|B", false, &x), -EINVAL); /* would ask for two pages */
        ASSERT_EQ_INT(mediawiki_build_read("", false, &x), -EINVAL);
        ASSERT_EQ_INT(mediawiki_build_read("A\nB", false, &x), -EINVAL);
        ASSERT_EQ_INT(
                mediawiki_build_read(
                        "\x1f"
                        "A",
                        false,
                        &x),
                -EINVAL);
        ASSERT_EQ_INT(mediawiki_build_read("\xff", false, &x), -EINVAL);
        memset(title, 'a', 256);
        title[256] = 0;
        ASSERT_EQ_INT(mediawiki_build_read(title, false, &x), -EINVAL);
        title[255] = 0;
        ASSERT_OK(mediawiki_build_read(title, false, &x));
        free(x);
        ASSERT_EQ_INT(mediawiki_build_search("q", 0, false, &x), -EINVAL);
        ASSERT_EQ_INT(mediawiki_build_search("q", MEDIAWIKI_SEARCH_MAX + 1, false, &x), -EINVAL);
        ASSERT_EQ_INT(mediawiki_build_search("", 1, false, &x), -EINVAL);
        ASSERT_EQ_INT(mediawiki_build_login("u", "", "t", &x), -EINVAL);
        ASSERT_TRUE(mediawiki_query_is_valid("a|b"));
        ASSERT_TRUE(!mediawiki_title_is_valid(NULL));
}

/* The read check of the extension WikiwebReadCheck (API.md "Whose
 * permissions"): its builder, the reply captured from the fixture wiki
 * (tests/fixtures/mediawiki.py, restricted=True, as Alice), and replies
 * that must fail closed. */
TEST(readcheck) {
        const char *titles[] = { "Apple", "Payroll:Salaries", "Salary table", "Special:Version", "a" };
        _cleanup_free_ char *body = NULL, *q = NULL, *anon = NULL;
        MediaWikiError e = { 0 };
        bool *readable = NULL;
        size_t size;
        char *x = NULL;

        ASSERT_OK(mediawiki_build_readcheck("Alice Ä", NULL, titles, 2, true, &q));
        ASSERT_EQ_STR(
                q,
                "action=wikiwebreadcheck&user=Alice%20%C3%84&titles=Apple%7CPayroll%3ASalaries&format=json"
                "&formatversion=2&errorformat=bc&maxlag=5&assert=user");
        /* Anonymous: no user parameter at all. */
        ASSERT_OK(mediawiki_build_readcheck(NULL, NULL, titles, 1, false, &anon));
        ASSERT_EQ_STR(
                anon,
                "action=wikiwebreadcheck&titles=Apple&format=json&formatversion=2&errorformat=bc&maxlag=5");
        ASSERT_EQ_INT(mediawiki_build_readcheck("A|B", NULL, titles, 1, false, &x), -EINVAL);
        ASSERT_EQ_INT(mediawiki_build_readcheck("A\nB", NULL, titles, 1, false, &x), -EINVAL);
        ASSERT_EQ_INT(mediawiki_build_readcheck(NULL, NULL, titles, 0, false, &x), -EINVAL);
        ASSERT_EQ_INT(mediawiki_build_readcheck(NULL, NULL, (const char *[]){ "A|B" }, 1, false, &x), -EINVAL);
        ASSERT_EQ_INT(
                mediawiki_build_readcheck(NULL, NULL, titles, MEDIAWIKI_TITLES_MAX + 1, false, &x), -EINVAL);
        ASSERT_TRUE(!x);

        body = load("readcheck.json", &size);
        ASSERT_OK(mediawiki_parse_readcheck(body, size, 5, &readable, &e));
        ASSERT_TRUE(readable[0] && !readable[1] && !readable[2] && !readable[3] && readable[4]);
        free(readable);
        readable = NULL;
        /* Not one answer per title asked: nothing is known. */
        ASSERT_EQ_INT(mediawiki_parse_readcheck(body, size, 4, &readable, &e), -EBADMSG);
        ASSERT_EQ_INT(mediawiki_parse_readcheck(body, size, 6, &readable, &e), -EBADMSG);
        ASSERT_EQ_INT(mediawiki_parse_readcheck(body, size, 0, &readable, &e), -EINVAL);
        static const char *const bad[] = {
                "{\"wikiwebreadcheck\":{\"pages\":[{\"title\":\"A\",\"readable\":\"true\"}]}}",
                "{\"wikiwebreadcheck\":{\"pages\":[{\"title\":\"A\",\"readable\":1}]}}",
                "{\"wikiwebreadcheck\":{\"pages\":[{\"title\":\"A\"}]}}",
                "{\"wikiwebreadcheck\":{\"pages\":[{\"readable\":true}]}}",
                "{\"wikiwebreadcheck\":{\"pages\":[true]}}",
                "{\"wikiwebreadcheck\":{\"pages\":{}}}",
                "{\"wikiwebreadcheck\":[]}",
                "{\"query\":{\"pages\":[{\"title\":\"A\",\"readable\":true}]}}",
                "{\"wikiwebreadcheck\":{\"pages\":[{\"title\":\"A\",\"readable\":true}]}} x",
                "[]",
                "",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                ASSERT_EQ_INT(mediawiki_parse_readcheck(bad[i], strlen(bad[i]), 1, &readable, &e), -EBADMSG);
        ASSERT_TRUE(!readable);
        {
                const char *err = "{\"error\":{\"code\":\"permissiondenied\",\"info\":\"no\"}}";
                ASSERT_EQ_INT(mediawiki_parse_readcheck(err, strlen(err), 1, &readable, &e), -EREMOTEIO);
                ASSERT_EQ_STR(e.code, "permissiondenied");
                mediawiki_error_done(&e);
        }
}

/* The read check by e-mail address: its request, and whose permissions a
 * reply says it used (API.md "Whose name"). */
TEST(readcheck_reader) {
        const char *titles[] = { "Apple" };
        _cleanup_free_ char *q = NULL, *body = NULL;
        MediaWikiReader reader = { 0 };
        char *x = NULL;
        size_t size;

        ASSERT_OK(mediawiki_build_readcheck(NULL, "jdoe@Corp.Example", titles, 1, false, &q));
        ASSERT_EQ_STR(
                q,
                "action=wikiwebreadcheck&email=jdoe%40Corp.Example&titles=Apple&format=json&formatversion=2"
                "&errorformat=bc&maxlag=5");
        ASSERT_EQ_INT(mediawiki_build_readcheck("Bob", "b@c", titles, 1, false, &x), -EINVAL);
        ASSERT_EQ_INT(mediawiki_build_readcheck(NULL, "a|b@c", titles, 1, false, &x), -EINVAL);
        ASSERT_TRUE(!x);

        /* By name (captured from the fixture wiki). */
        body = load("readcheck.json", &size);
        ASSERT_OK(mediawiki_parse_reader(body, size, false, &reader, NULL));
        ASSERT_EQ_STR(reader.user, "Alice");
        mediawiki_reader_done(&reader);
        /* Asked by address, answered without: an extension that ignored it. */
        ASSERT_EQ_INT(mediawiki_parse_reader(body, size, true, &reader, NULL), -EBADMSG);

        {
                static const struct {
                        const char *body;
                        bool by_email;
                        int r;
                        const char *user;
                        MediaWikiAccounts accounts;
                } cases[] = {
                        { "{\"wikiwebreadcheck\":{\"user\":\"Bob\",\"anonymous\":false,\"email\":\"one\",\"pages\":[]}}",
                          true,
                          0,
                          "Bob",
                          MEDIAWIKI_ACCOUNTS_ONE },
                        { "{\"wikiwebreadcheck\":{\"user\":\"\",\"anonymous\":true,\"email\":\"none\"}}",
                          true,
                          0,
                          NULL,
                          MEDIAWIKI_ACCOUNTS_NONE },
                        { "{\"wikiwebreadcheck\":{\"user\":\"\",\"anonymous\":true,\"email\":\"several\"}}",
                          true,
                          0,
                          NULL,
                          MEDIAWIKI_ACCOUNTS_SEVERAL },
                        { "{\"wikiwebreadcheck\":{\"user\":\"\",\"anonymous\":true}}",
                          false,
                          0,
                          NULL,
                          _MEDIAWIKI_ACCOUNTS_INVALID },
                        /* Hostile or inconsistent: nothing is believed. */
                        { "{\"wikiwebreadcheck\":{\"user\":\"Bob\",\"anonymous\":false,\"email\":\"several\"}}",
                          true,
                          -EBADMSG },
                        { "{\"wikiwebreadcheck\":{\"user\":\"\",\"anonymous\":true,\"email\":\"one\"}}",
                          true,
                          -EBADMSG },
                        { "{\"wikiwebreadcheck\":{\"user\":\"Bob\",\"anonymous\":true,\"email\":\"none\"}}",
                          true,
                          -EBADMSG },
                        { "{\"wikiwebreadcheck\":{\"user\":\"\",\"anonymous\":false}}", false, -EBADMSG },
                        { "{\"wikiwebreadcheck\":{\"user\":\"A|B\",\"anonymous\":false}}", false, -EBADMSG },
                        { "{\"wikiwebreadcheck\":{\"user\":\"A\\nB\",\"anonymous\":false}}", false, -EBADMSG },
                        { "{\"wikiwebreadcheck\":{\"user\":\"Bob\",\"anonymous\":false,\"email\":\"one\"}}",
                          false,
                          -EBADMSG },
                        { "{\"wikiwebreadcheck\":{\"user\":\"\",\"anonymous\":true,\"email\":\"None\"}}",
                          true,
                          -EBADMSG },
                        { "{\"wikiwebreadcheck\":{\"user\":\"\",\"anonymous\":true,\"email\":2}}",
                          true,
                          -EBADMSG },
                        { "{\"wikiwebreadcheck\":{\"user\":\"\",\"anonymous\":\"true\",\"email\":\"none\"}}",
                          true,
                          -EBADMSG },
                        { "{\"wikiwebreadcheck\":{\"user\":null,\"anonymous\":true,\"email\":\"none\"}}",
                          true,
                          -EBADMSG },
                        { "{\"wikiwebreadcheck\":{\"anonymous\":true,\"email\":\"none\"}}", true, -EBADMSG },
                        { "{\"error\":{\"code\":\"badvalue\",\"info\":\"no\"}}", true, -EREMOTEIO },
                };

                for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                        MediaWikiError e = { 0 };

                        ASSERT_EQ_INT(
                                mediawiki_parse_reader(
                                        cases[i].body, strlen(cases[i].body), cases[i].by_email, &reader, &e),
                                cases[i].r);
                        if (cases[i].r == 0) {
                                if (cases[i].user)
                                        ASSERT_EQ_STR(reader.user, cases[i].user);
                                else
                                        ASSERT_TRUE(!reader.user);
                                ASSERT_EQ_INT(reader.accounts, cases[i].accounts);
                        }
                        mediawiki_reader_done(&reader);
                        mediawiki_error_done(&e);
                }
        }
        ASSERT_EQ_STR(mediawiki_accounts_to_string(MEDIAWIKI_ACCOUNTS_SEVERAL), "several");
}

/* A staleness check's prop=info (captured from the fixture wiki), its
 * builder, and hostile replies. */
TEST(revisions) {
        const char *titles[] = { "Apple", "No such page", "東京" };
        _cleanup_free_ char *body = NULL, *q = NULL;
        MediaWikiRevision *revs = NULL;
        MediaWikiError e = { 0 };
        size_t size, n = 0;
        char *x = NULL;

        ASSERT_OK(mediawiki_build_revisions(titles, 3, true, &q));
        ASSERT_EQ_STR(
                q,
                "action=query&prop=info&titles=Apple%7CNo%20such%20page%7C%E6%9D%B1%E4%BA%AC&format=json"
                "&formatversion=2&errorformat=bc&maxlag=5&assert=user");
        ASSERT_EQ_INT(mediawiki_build_revisions(titles, 0, false, &x), -EINVAL);
        ASSERT_EQ_INT(mediawiki_build_revisions((const char *[]){ "A|B" }, 1, false, &x), -EINVAL);
        ASSERT_EQ_INT(mediawiki_build_revisions(titles, MEDIAWIKI_TITLES_MAX + 1, false, &x), -EINVAL);
        ASSERT_TRUE(!x);

        body = load("revisions.json", &size);
        ASSERT_OK(mediawiki_parse_revisions(body, size, &revs, &n, &e));
        ASSERT_EQ_INT(n, 3);
        ASSERT_EQ_STR(revs[0].title, "No such page");
        ASSERT_TRUE(revs[0].missing && revs[0].revision_id == 0);
        ASSERT_EQ_STR(revs[1].title, "Apple");
        ASSERT_TRUE(!revs[1].missing);
        ASSERT_EQ_INT(revs[1].revision_id, 3);
        ASSERT_EQ_STR(revs[2].title, "東京");
        ASSERT_EQ_INT(revs[2].revision_id, 34);
        mediawiki_revisions_free(revs, n);

        ASSERT_EQ_INT(
                mediawiki_parse_revisions(S("{\"query\":{\"pages\":[{\"title\":\"A\"}]}}"), &revs, &n, &e),
                -EBADMSG); /* neither missing nor a revision */
        ASSERT_EQ_INT(
                mediawiki_parse_revisions(
                        S("{\"query\":{\"pages\":[{\"title\":\"A\",\"lastrevid\":-1}]}}"), &revs, &n, &e),
                -EBADMSG);
        ASSERT_EQ_INT(
                mediawiki_parse_revisions(
                        S("{\"query\":{\"pages\":[{\"title\":\"A\",\"lastrevid\":3},{\"title\":\"B\"}]}}"),
                        &revs,
                        &n,
                        &e),
                -EBADMSG); /* a bad page after a good one: the good one is released too */
        ASSERT_EQ_INT(mediawiki_parse_revisions(S("{\"query\":{}}"), &revs, &n, &e), -EBADMSG);
        ASSERT_EQ_INT(
                mediawiki_parse_revisions(
                        S("{\"error\":{\"code\":\"readapidenied\",\"info\":\"no\"}}"), &revs, &n, &e),
                -EREMOTEIO);
        ASSERT_EQ_STR(e.code, "readapidenied");
        mediawiki_error_done(&e);
}

DEFINE_TEST_MAIN()
