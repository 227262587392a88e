/* SPDX-License-Identifier: MIT */
/* Fuzz target for the MediaWiki reply parsers (src/query/mediawiki.c). The
 * first byte picks the parser (mod 6: search, page, login token, login,
 * error and revisions and read check, snippet), the rest is the reply; for
 * the read check the first byte / 6 also says how many titles were asked. Besides memory errors it checks
 * that what a parser accepts has the promised shape: titles 1..255 bytes
 * without NUL, a found page has a revision id > 0, an http(s) URL and
 * content, error codes are plain or "(invalid)", snippets come out as
 * valid UTF-8 without tags. */

#include <stdint.h>

#include "query/mediawiki.h"
#include "shared/macro.h"
#include "fuzz.h"

static void check_title(const char *t) {
        CHECK(t);
        CHECK(strlen(t) >= 1 && strlen(t) <= MEDIAWIKI_TITLE_MAX);
}

static void check_code(const MediaWikiError *e) {
        CHECK(e->code);
        if (!streq(e->code, "(invalid)"))
                for (const char *c = e->code; *c; c++)
                        CHECK((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                              (*c >= '0' && *c <= '9') || *c == '_' || *c == '-');
}

static bool utf8_ok(const char *s) {
        const uint8_t *p = (const uint8_t *) s;
        while (*p) {
                size_t n = *p < 0x80        ? 1 :
                        (*p & 0xE0) == 0xC0 ? 2 :
                        (*p & 0xF0) == 0xE0 ? 3 :
                        (*p & 0xF8) == 0xF0 ? 4 :
                                              0;
                if (n == 0)
                        return false;
                for (size_t k = 1; k < n; k++)
                        if ((p[k] & 0xC0) != 0x80)
                                return false;
                p += n;
        }
        return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *body;
        MediaWikiError e = { 0 };
        int r;

        if (size < 1 || size > 1024 * 1024)
                return 0;
        body = (const char *) data + 1;
        size--;

        switch (data[0] % 6) {
        case 0: {
                MediaWikiSearchHit *hits = NULL;
                size_t n = 0;
                r = mediawiki_parse_search(body, size, &hits, &n, &e);
                if (r >= 0) {
                        for (size_t i = 0; i < n; i++) {
                                check_title(hits[i].title);
                                CHECK(hits[i].snippet);
                                CHECK(!strchr(hits[i].snippet, '<') || strstr(body, "&lt;") ||
                                      strstr(body, "&#"));
                        }
                        mediawiki_search_hits_free(hits, n);
                }
                break;
        }
        case 1: {
                WikiPage p = { 0 };
                r = mediawiki_parse_page(body, size, &p, &e);
                if (r >= 0) {
                        check_title(p.title);
                        if (p.missing)
                                CHECK(!p.content && !p.url && p.revision_id == 0);
                        else {
                                CHECK(p.revision_id > 0 && p.revision_id < INT64_MAX);
                                CHECK(p.url && (strneq(p.url, "http://", 7) || strneq(p.url, "https://", 8)));
                                CHECK(p.content && p.content[p.content_size] == 0);
                        }
                        if (p.redirected_from)
                                check_title(p.redirected_from);
                        wiki_page_done(&p);
                }
                break;
        }
        case 2: {
                char *token = NULL;
                r = mediawiki_parse_login_token(body, size, &token, &e);
                if (r >= 0) {
                        CHECK(strlen(token) >= 3 && strlen(token) <= MEDIAWIKI_TOKEN_MAX);
                        for (const char *c = token; *c; c++)
                                CHECK(*c > 0x20 && *c < 0x7f);
                        free(token);
                }
                break;
        }
        case 3: {
                MediaWikiLoginResult res;
                char *reason = NULL;
                r = mediawiki_parse_login(body, size, &res, &reason, &e);
                if (r >= 0) {
                        CHECK(mediawiki_login_result_to_string(res));
                        free(reason);
                }
                break;
        }
        case 4: {
                /* An error reply and, on the same bytes, the revisions of a
                 * staleness check. */
                MediaWikiRevision *revs = NULL;
                MediaWikiError e2 = { 0 };
                size_t n = 0;

                r = mediawiki_parse_error(body, size, &e);
                if (mediawiki_parse_revisions(body, size, &revs, &n, &e2) >= 0) {
                        CHECK(n <= MEDIAWIKI_TITLES_MAX);
                        for (size_t i = 0; i < n; i++) {
                                check_title(revs[i].title);
                                CHECK(revs[i].missing ?
                                              revs[i].revision_id == 0 :
                                              revs[i].revision_id > 0 && revs[i].revision_id < INT64_MAX);
                        }
                        mediawiki_revisions_free(revs, n);
                }
                mediawiki_error_done(&e2);

                /* And the reply of a read check of 1..50 titles: what is
                 * accepted is one answer per title, each true or false,
                 * from a reply that names the module. */
                bool *readable = NULL;
                size_t asked = 1 + (size_t) (data[0] / 6) % MEDIAWIKI_TITLES_MAX;
                if (mediawiki_parse_readcheck(body, size, asked, &readable, &e2) >= 0) {
                        CHECK(memmem(body, size, "wikiwebreadcheck", 16));
                        for (size_t i = 0; i < asked; i++)
                                CHECK(readable[i] == true || readable[i] == false);
                        free(readable);
                }
                mediawiki_error_done(&e2);
                break;
        }
        default: {
                char *text = NULL, *in = strndup(body, size);
                if (in && mediawiki_snippet_to_text(in, &text) >= 0) {
                        CHECK(strlen(text) <= 4 * strlen(in) + 4);
                        if (utf8_ok(in))
                                CHECK(utf8_ok(text));
                        free(text);
                }
                free(in);
                r = 0;
                break;
        }
        }
        if (r == -EREMOTEIO)
                check_code(&e);
        mediawiki_error_done(&e);
        return 0;
}
