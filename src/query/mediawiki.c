/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <json-c/json.h>
#include <limits.h>

#include "query/mediawiki.h"
#include "shared/json-util.h"
#include "shared/macro.h"
#include "shared/strbuf.h"
#include "shared/utf8.h"


void mediawiki_error_done(MediaWikiError *e) {
        if (!e)
                return;
        free(e->code);
        free(e->info);
        *e = (MediaWikiError){ 0 };
}

void mediawiki_search_hits_free(MediaWikiSearchHit *hits, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(hits[i].title);
                free(hits[i].snippet);
        }
        free(hits);
}


static bool text_is_valid(const char *s, size_t max, bool forbid_bar) {
        size_t n;

        if (!s)
                return false;
        n = strnlen(s, max + 1);
        if (n == 0 || n > max)
                return false;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) s[i];
                if (c < 0x20 || c == 0x7f || (forbid_bar && c == '|'))
                        return false;
        }
        return utf8_is_valid(s, n);
}

bool mediawiki_title_is_valid(const char *title) {
        return text_is_valid(title, MEDIAWIKI_TITLE_MAX, true);
}

bool mediawiki_query_is_valid(const char *query) {
        return text_is_valid(query, MEDIAWIKI_QUERY_MAX, false);
}

/* ---- builders ---- */

/* Percent-encode everything but RFC 3986's unreserved characters. */
static void buf_add_encoded(StrBuf *b, const char *s) {
        static const char hex[] = "0123456789ABCDEF";

        for (; *s; s++) {
                unsigned char c = (unsigned char) *s;
                if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
                    c == '.' || c == '_' || c == '~')
                        strbuf_put(b, (const char *) &c, 1);
                else {
                        char e[3] = { '%', hex[c >> 4], hex[c & 15] };
                        strbuf_put(b, e, 3);
                }
        }
}

static void buf_param(StrBuf *b, const char *name, const char *value) {
        if (b->len > 0)
                strbuf_puts(b, "&");
        strbuf_puts(b, name);
        strbuf_puts(b, "=");
        buf_add_encoded(b, value);
}

static int buf_finish(StrBuf *b, char **ret) {
        char *p = strbuf_steal(b);

        if (!p)
                return -ENOMEM;
        *ret = p;
        return 0;
}

static void buf_common(StrBuf *b, bool assert_user) {
        buf_param(b, "format", "json");
        buf_param(b, "formatversion", "2");
        buf_param(b, "errorformat", "bc");
        /* API:Etiquette: tell a lagged wiki's replicas to refuse us. */
        buf_param(b, "maxlag", "5");
        if (assert_user)
                buf_param(b, "assert", "user");
}

int mediawiki_build_search(const char *query, unsigned limit, bool assert_user, char **ret) {
        StrBuf b = { 0 };
        char n[16];

        if (!mediawiki_query_is_valid(query) || limit < 1 || limit > MEDIAWIKI_SEARCH_MAX)
                return -EINVAL;
        (void) snprintf(n, sizeof n, "%u", limit);
        buf_param(&b, "action", "query");
        buf_param(&b, "list", "search");
        buf_param(&b, "srsearch", query);
        buf_param(&b, "srwhat", "text");
        buf_param(&b, "srnamespace", "0");
        buf_param(&b, "srlimit", n);
        buf_param(&b, "srprop", "snippet");
        buf_common(&b, assert_user);
        return buf_finish(&b, ret);
}

int mediawiki_build_read(const char *title, bool assert_user, char **ret) {
        StrBuf b = { 0 };

        if (!mediawiki_title_is_valid(title))
                return -EINVAL;
        buf_param(&b, "action", "query");
        buf_param(&b, "prop", "revisions|info");
        buf_param(&b, "titles", title);
        buf_param(&b, "rvslots", "main");
        buf_param(&b, "rvprop", "content|ids");
        buf_param(&b, "inprop", "url");
        buf_param(&b, "redirects", "1");
        buf_common(&b, assert_user);
        return buf_finish(&b, ret);
}

int mediawiki_build_revisions(const char *const *titles, size_t n, bool assert_user, char **ret) {
        StrBuf b = { 0 };
        StrBuf joined = { 0 };

        if (n < 1 || n > MEDIAWIKI_TITLES_MAX)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (!mediawiki_title_is_valid(titles[i])) {
                        strbuf_done(&joined);
                        return -EINVAL;
                }
                if (i > 0)
                        strbuf_puts(&joined, "|");
                strbuf_puts(&joined, titles[i]);
        }
        if (joined.failed) {
                strbuf_done(&joined);
                return -ENOMEM;
        }
        buf_param(&b, "action", "query");
        buf_param(&b, "prop", "info");
        buf_param(&b, "titles", joined.data);
        buf_common(&b, assert_user);
        strbuf_done(&joined);
        return buf_finish(&b, ret);
}

/* titles joined with "|" for a multi-value parameter; each must be valid. */
static int join_titles(const char *const *titles, size_t n, StrBuf *joined) {
        if (n < 1 || n > MEDIAWIKI_TITLES_MAX)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (!mediawiki_title_is_valid(titles[i]))
                        return -EINVAL;
                if (i > 0)
                        strbuf_puts(joined, "|");
                strbuf_puts(joined, titles[i]);
        }
        return joined->failed ? -ENOMEM : 0;
}

int mediawiki_build_readcheck(
        const char *user, const char *email, const char *const *titles, size_t n, bool assert_user, char **ret) {
        StrBuf b = { 0 };
        StrBuf joined = { 0 };
        int r;

        if ((user && *user && !mediawiki_title_is_valid(user)) ||
            (email && *email && !mediawiki_title_is_valid(email)) || (user && *user && email && *email))
                return -EINVAL;
        r = join_titles(titles, n, &joined);
        if (r < 0) {
                strbuf_done(&joined);
                return r;
        }
        buf_param(&b, "action", "wikiwebreadcheck");
        /* No user or email parameter: the extension checks an anonymous reader. */
        if (user && *user)
                buf_param(&b, "user", user);
        else if (email && *email)
                buf_param(&b, "email", email);
        buf_param(&b, "titles", joined.data);
        buf_common(&b, assert_user);
        strbuf_done(&joined);
        return buf_finish(&b, ret);
}

int mediawiki_build_login_token(char **ret) {
        StrBuf b = { 0 };

        buf_param(&b, "action", "query");
        buf_param(&b, "meta", "tokens");
        buf_param(&b, "type", "login");
        buf_common(&b, false);
        return buf_finish(&b, ret);
}

int mediawiki_build_login(const char *user, const char *password, const char *token, char **ret) {
        StrBuf b = { 0 };

        if (!user || !password || !token || !*user || !*password || !*token)
                return -EINVAL;
        buf_param(&b, "action", "login");
        buf_param(&b, "lgname", user);
        buf_param(&b, "lgpassword", password);
        buf_param(&b, "lgtoken", token);
        buf_common(&b, false);
        if (b.failed && b.data)
                explicit_bzero(b.data, b.cap);
        return buf_finish(&b, ret);
}

int mediawiki_url(const char *api_url, const char *query, char **ret) {
        if (asprintf(ret, "%s%c%s", api_url, strchr(api_url, '?') ? '&' : '?', query) < 0) {
                *ret = NULL;
                return -ENOMEM;
        }
        return 0;
}

/* ---- parsers ---- */

static int parse_json(const char *body, size_t size, json_object **ret) {
        _cleanup_(json_tokener_freep) struct json_tokener *tok = NULL;
        json_object *o;
        size_t end;

        if (!body || size == 0 || size > INT_MAX / 2)
                return -EBADMSG;
        /* json-c stops at a NUL; JSON text never holds a raw one. */
        if (memchr(body, 0, size))
                return -EBADMSG;
        if (!utf8_is_valid(body, size))
                return -EBADMSG;
        tok = json_tokener_new_ex(MEDIAWIKI_JSON_MAX_DEPTH);
        if (!tok)
                return -ENOMEM;
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
        o = json_tokener_parse_ex(tok, body, (int) size);
        if (!o)
                return json_tokener_get_error(tok) == json_tokener_success ? -ENOMEM : -EBADMSG;
        end = json_tokener_get_parse_end(tok);
        if (!json_rest_is_whitespace(body, end, size)) {
                json_object_put(o);
                return -EBADMSG;
        }
        if (!json_object_is_type(o, json_type_object)) {
                json_object_put(o);
                return -EBADMSG;
        }
        *ret = o;
        return 0;
}

static json_object *get(json_object *o, const char *key, json_type type) {
        json_object *v;

        if (!o || !json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v))
                return NULL;
        return json_object_is_type(v, type) ? v : NULL;
}

/* A string member without NUL, of at most max bytes; NULL else. */
static const char *get_string(json_object *o, const char *key, size_t max) {
        json_object *v = get(o, key, json_type_string);
        const char *s;
        int n;

        if (!v)
                return NULL;
        s = json_object_get_string(v);
        n = json_object_get_string_len(v);
        if (n < 0 || (size_t) n > max || strlen(s) != (size_t) n)
                return NULL;
        return s;
}

static bool code_is_plain(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || n > MEDIAWIKI_CODE_MAX)
                return false;
        for (; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
                      *s == '_' || *s == '-'))
                        return false;
        return true;
}

/* 1: the object is an error reply (filled in), 0: not one, < 0 failure. */
static int take_error(json_object *o, MediaWikiError *ret) {
        json_object *e;
        const char *code, *info;
        MediaWikiError err = { 0 };

        if (!json_object_object_get_ex(o, "error", &e))
                return 0;
        if (!json_object_is_type(e, json_type_object))
                return -EBADMSG;
        code = get_string(e, "code", 1024);
        info = get_string(e, "info", 64 * 1024);
        err.code = strdup(code && code_is_plain(code) ? code : "(invalid)");
        err.info = info ? strdup(info) : NULL;
        if (!err.code || (info && !err.info)) {
                mediawiki_error_done(&err);
                return -ENOMEM;
        }
        if (ret)
                *ret = err;
        else
                mediawiki_error_done(&err);
        return 1;
}

static int parse_reply(const char *body, size_t size, json_object **ret, MediaWikiError *ret_error) {
        json_object *o = NULL;
        int r;

        r = parse_json(body, size, &o);
        if (r < 0)
                return r;
        r = take_error(o, ret_error);
        if (r != 0) {
                json_object_put(o);
                return r < 0 ? r : -EREMOTEIO;
        }
        *ret = o;
        return 0;
}

int mediawiki_parse_error(const char *body, size_t size, MediaWikiError *ret_error) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        return parse_reply(body, size, &o, ret_error);
}

static int strdup_checked(const char *s, char **ret) {
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

/* The hits of a reply being parsed: n allocated, filled in order; released
 * together by search_hits_done() unless handed over. */
typedef struct SearchHits {
        MediaWikiSearchHit *items;
        size_t n;
} SearchHits;

static void search_hits_done(SearchHits *h) {
        if (h->items)
                mediawiki_search_hits_free(h->items, h->n);
        *h = (SearchHits){ 0 };
}

int mediawiki_parse_search(
        const char *body, size_t size, MediaWikiSearchHit **ret_hits, size_t *ret_n, MediaWikiError *ret_error) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_(search_hits_done) SearchHits hits = { 0 };
        json_object *query, *list;
        size_t n;
        int r;

        r = parse_reply(body, size, &o, ret_error);
        if (r < 0)
                return r;
        query = get(o, "query", json_type_object);
        list = get(query, "search", json_type_array);
        if (!list)
                return -EBADMSG;
        n = json_object_array_length(list);
        if (n > 500)
                return -EBADMSG;
        if (n > 0) {
                hits.items = calloc(n, sizeof *hits.items);
                if (!hits.items)
                        return -ENOMEM;
                hits.n = n;
        }
        for (size_t i = 0; i < n; i++) {
                json_object *h = json_object_array_get_idx(list, i);
                const char *title = get_string(h, "title", MEDIAWIKI_TITLE_MAX);
                const char *snippet = get_string(h, "snippet", 64 * 1024);

                if (!title || !*title)
                        return -EBADMSG;
                json_object *sv = NULL;
                if (json_object_is_type(h, json_type_object) &&
                    json_object_object_get_ex(h, "snippet", &sv) && sv && !snippet)
                        return -EBADMSG; /* present, not null, and not a good string */
                r = strdup_checked(title, &hits.items[i].title);
                if (r < 0)
                        return r;
                r = mediawiki_snippet_to_text(snippet ? snippet : "", &hits.items[i].snippet);
                if (r < 0)
                        return r;
        }
        *ret_hits = TAKE_PTR(hits.items);
        *ret_n = n;
        return 0;
}

static int take_uint(json_object *o, const char *key, uint64_t *ret) {
        json_object *v = get(o, key, json_type_int);
        int64_t x;

        if (!v)
                return -EBADMSG;
        errno = 0;
        x = json_object_get_int64(v);
        /* json-c saturates an overflowing number at INT64_MAX/MIN. */
        if (x <= 0 || x == INT64_MAX || errno != 0)
                return -EBADMSG;
        *ret = (uint64_t) x;
        return 0;
}

/* A page object that names no page of this wiki: a special page or a
 * virtual namespace (Special:, -1; Media:, -2), which has no revision and
 * no text to read ("special": true, a negative "ns"). */
static bool page_is_special(json_object *page) {
        json_object *ns = get(page, "ns", json_type_int);

        return json_object_get_boolean(get(page, "special", json_type_boolean)) ||
                (ns && json_object_get_int64(ns) < 0);
}

/* A title the wiki read as another wiki's ("wikipedia:X"): query.interwiki
 * holds it, and no page comes back. Returns its title, or NULL. */
static const char *query_interwiki_title(json_object *query) {
        json_object *iw = get(query, "interwiki", json_type_array);
        const char *title;

        if (!iw || json_object_array_length(iw) != 1)
                return NULL;
        title = get_string(json_object_array_get_idx(iw, 0), "title", MEDIAWIKI_TITLE_MAX);
        return title && *title ? title : NULL;
}

int mediawiki_parse_page(const char *body, size_t size, WikiPage *ret, MediaWikiError *ret_error) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_(wiki_page_done) WikiPage p = { 0 };
        json_object *query, *pages, *page, *redirects, *revs, *rev, *slots, *main_slot, *content_o;
        const char *title, *url, *content;
        int r, n;

        r = parse_reply(body, size, &o, ret_error);
        if (r < 0)
                return r;
        query = get(o, "query", json_type_object);
        pages = get(query, "pages", json_type_array);
        /* Another wiki's page: none of this wiki, so "missing" (API.md 8.6). */
        title = query_interwiki_title(query);
        if (title && !pages) {
                r = strdup_checked(title, &p.title);
                if (r < 0)
                        return r;
                p.missing = true;
                *ret = p;
                p = (WikiPage){ 0 };
                return 0;
        }
        /* One title asked for: exactly one page comes back. */
        if (!pages || json_object_array_length(pages) != 1)
                return -EBADMSG;
        page = json_object_array_get_idx(pages, 0);
        title = get_string(page, "title", MEDIAWIKI_TITLE_MAX);
        if (!title || !*title)
                return -EBADMSG;
        r = strdup_checked(title, &p.title);
        if (r < 0)
                return r;

        redirects = get(query, "redirects", json_type_array);
        if (redirects) {
                size_t k = json_object_array_length(redirects);
                json_object *first;
                const char *from;

                if (k == 0 || k > 64)
                        return -EBADMSG;
                first = json_object_array_get_idx(redirects, 0);
                from = get_string(first, "from", MEDIAWIKI_TITLE_MAX);
                if (!from || !*from)
                        return -EBADMSG;
                r = strdup_checked(from, &p.redirected_from);
                if (r < 0)
                        return r;
        }

        if (get(page, "missing", json_type_boolean) || get(page, "invalid", json_type_boolean) ||
            page_is_special(page)) {
                if (!json_object_get_boolean(get(page, "missing", json_type_boolean)) &&
                    !json_object_get_boolean(get(page, "invalid", json_type_boolean)) &&
                    !page_is_special(page))
                        return -EBADMSG;
                p.missing = true;
                *ret = p;
                p = (WikiPage){ 0 };
                return 0;
        }

        revs = get(page, "revisions", json_type_array);
        if (!revs || json_object_array_length(revs) != 1)
                return -EBADMSG;
        rev = json_object_array_get_idx(revs, 0);
        r = take_uint(rev, "revid", &p.revision_id);
        if (r < 0)
                return r;
        slots = get(rev, "slots", json_type_object);
        main_slot = get(slots, "main", json_type_object);
        content_o = get(main_slot, "content", json_type_string);
        if (!content_o)
                return -EBADMSG;
        content = json_object_get_string(content_o);
        n = json_object_get_string_len(content_o);
        if (n < 0)
                return -EBADMSG;
        p.content = malloc((size_t) n + 1);
        if (!p.content)
                return -ENOMEM;
        memcpy(p.content, content, (size_t) n);
        p.content[n] = 0;
        p.content_size = (size_t) n;

        url = get_string(page, "canonicalurl", 8192);
        if (!url)
                url = get_string(page, "fullurl", 8192);
        if (!url || !(strneq(url, "http://", 7) || strneq(url, "https://", 8)))
                return -EBADMSG;
        r = strdup_checked(url, &p.url);
        if (r < 0)
                return r;

        *ret = p;
        p = (WikiPage){ 0 };
        return 0;
}

void mediawiki_revisions_free(MediaWikiRevision *r, size_t n) {
        for (size_t i = 0; r && i < n; i++)
                free(r[i].title);
        free(r);
}

/* The revisions of a reply being parsed: n allocated, filled in order;
 * released together by revisions_done() unless handed over. */
typedef struct Revisions {
        MediaWikiRevision *items;
        size_t n;
} Revisions;

static void revisions_done(Revisions *r) {
        mediawiki_revisions_free(r->items, r->n);
        *r = (Revisions){ 0 };
}

int mediawiki_parse_revisions(
        const char *body, size_t size, MediaWikiRevision **ret, size_t *ret_n, MediaWikiError *ret_error) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_(revisions_done) Revisions revs = { 0 };
        json_object *pages;
        size_t n;
        int r;

        r = parse_reply(body, size, &o, ret_error);
        if (r < 0)
                return r;
        pages = get(get(o, "query", json_type_object), "pages", json_type_array);
        if (!pages)
                return -EBADMSG;
        n = json_object_array_length(pages);
        if (n > MEDIAWIKI_TITLES_MAX)
                return -EBADMSG;
        if (n > 0) {
                revs.items = calloc(n, sizeof *revs.items);
                if (!revs.items)
                        return -ENOMEM;
                revs.n = n;
        }
        for (size_t i = 0; i < n; i++) {
                json_object *page = json_object_array_get_idx(pages, i);
                const char *title = get_string(page, "title", MEDIAWIKI_TITLE_MAX);
                bool missing = json_object_get_boolean(get(page, "missing", json_type_boolean)) ||
                        json_object_get_boolean(get(page, "invalid", json_type_boolean)) ||
                        page_is_special(page);

                if (!title || !*title)
                        return -EBADMSG;
                revs.items[i].missing = missing;
                if (!missing) {
                        r = take_uint(page, "lastrevid", &revs.items[i].revision_id);
                        if (r < 0)
                                return r;
                }
                r = strdup_checked(title, &revs.items[i].title);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(revs.items);
        *ret_n = n;
        return 0;
}

int mediawiki_parse_readcheck(const char *body, size_t size, size_t n, bool **ret, MediaWikiError *ret_error) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_free_ bool *readable = NULL;
        json_object *pages;
        int r;

        assert(ret);

        if (n < 1 || n > MEDIAWIKI_TITLES_MAX)
                return -EINVAL;
        r = parse_reply(body, size, &o, ret_error);
        if (r < 0)
                return r;
        pages = get(get(o, "wikiwebreadcheck", json_type_object), "pages", json_type_array);
        /* One answer per title asked, in the order asked: else nothing is
         * known about any of them. */
        if (!pages || json_object_array_length(pages) != n)
                return -EBADMSG;
        readable = calloc(n, sizeof(bool));
        if (!readable)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                json_object *page = json_object_array_get_idx(pages, i);
                json_object *v = get(page, "readable", json_type_boolean);
                const char *title = get_string(page, "title", 4 * MEDIAWIKI_TITLE_MAX);

                if (!v || !title)
                        return -EBADMSG;
                readable[i] = json_object_get_boolean(v);
        }
        *ret = TAKE_PTR(readable);
        return 0;
}

static const char *const mediawiki_accounts_table[_MEDIAWIKI_ACCOUNTS_MAX] = {
        [MEDIAWIKI_ACCOUNTS_NONE] = "none",
        [MEDIAWIKI_ACCOUNTS_ONE] = "one",
        [MEDIAWIKI_ACCOUNTS_SEVERAL] = "several",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(mediawiki_accounts, MediaWikiAccounts)

void mediawiki_reader_done(MediaWikiReader *r) {
        if (!r)
                return;
        free(r->user);
        *r = (MediaWikiReader){ .accounts = _MEDIAWIKI_ACCOUNTS_INVALID };
}

int mediawiki_parse_reader(
        const char *body, size_t size, bool by_email, MediaWikiReader *ret, MediaWikiError *ret_error) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_object *rc, *anonymous, *email;
        MediaWikiAccounts accounts = _MEDIAWIKI_ACCOUNTS_INVALID;
        const char *user;
        bool anon;
        int r;

        assert(ret);

        r = parse_reply(body, size, &o, ret_error);
        if (r < 0)
                return r;
        rc = get(o, "wikiwebreadcheck", json_type_object);
        anonymous = get(rc, "anonymous", json_type_boolean);
        user = get_string(rc, "user", MEDIAWIKI_TITLE_MAX);
        if (!anonymous || !user)
                return -EBADMSG;
        anon = json_object_get_boolean(anonymous);
        if (anon ? *user != 0 : !mediawiki_title_is_valid(user))
                return -EBADMSG;
        if (by_email) {
                const char *a = get_string(rc, "email", 16);

                for (MediaWikiAccounts i = 0; a && i < _MEDIAWIKI_ACCOUNTS_MAX; i++)
                        if (streq(a, mediawiki_accounts_table[i]))
                                accounts = i;
                /* One account exactly when a named one was checked. */
                if (accounts < 0 || (accounts == MEDIAWIKI_ACCOUNTS_ONE) == anon)
                        return -EBADMSG;
        } else if (json_object_object_get_ex(rc, "email", &email))
                return -EBADMSG; /* an answer to a question not asked */
        *ret = (MediaWikiReader){ .accounts = accounts };
        if (!anon) {
                ret->user = strdup(user);
                if (!ret->user)
                        return -ENOMEM;
        }
        return 0;
}

int mediawiki_parse_login_token(const char *body, size_t size, char **ret_token, MediaWikiError *ret_error) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        const char *token;
        int r;

        r = parse_reply(body, size, &o, ret_error);
        if (r < 0)
                return r;
        token = get_string(
                get(get(o, "query", json_type_object), "tokens", json_type_object),
                "logintoken",
                MEDIAWIKI_TOKEN_MAX);
        /* A real token is 40 hex digits and "+\\"; "+\\" alone is the
         * anonymous token, which a login cannot use. */
        if (!token || strlen(token) < 3)
                return -EBADMSG;
        for (const char *c = token; *c; c++)
                if ((unsigned char) *c < 0x21 || (unsigned char) *c > 0x7e)
                        return -EBADMSG;
        return strdup_checked(token, ret_token);
}

static const char *const mediawiki_login_result_table[] = {
        [MEDIAWIKI_LOGIN_SUCCESS] = "Success",        [MEDIAWIKI_LOGIN_FAILED] = "Failed",
        [MEDIAWIKI_LOGIN_WRONG_TOKEN] = "WrongToken", [MEDIAWIKI_LOGIN_NEED_TOKEN] = "NeedToken",
        [MEDIAWIKI_LOGIN_ABORTED] = "Aborted",        [MEDIAWIKI_LOGIN_OTHER] = "other",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(mediawiki_login_result, MediaWikiLoginResult)

int mediawiki_parse_login(
        const char *body, size_t size, MediaWikiLoginResult *ret, char **ret_reason, MediaWikiError *ret_error) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_object *login;
        const char *result, *reason;
        MediaWikiLoginResult res = MEDIAWIKI_LOGIN_OTHER;
        int r;

        r = parse_reply(body, size, &o, ret_error);
        if (r < 0)
                return r;
        login = get(o, "login", json_type_object);
        result = get_string(login, "result", 64);
        if (!result)
                return -EBADMSG;
        for (size_t i = 0; i < MEDIAWIKI_LOGIN_OTHER; i++)
                if (streq(result, mediawiki_login_result_table[i]))
                        res = (MediaWikiLoginResult) i;
        if (ret_reason) {
                /* errorformat=bc: a string; newer formats: an object. */
                reason = get_string(login, "reason", 4096);
                if (!reason) {
                        json_object *ro = get(login, "reason", json_type_object);
                        reason = get_string(ro, "text", 4096);
                        if (!reason)
                                reason = get_string(ro, "code", 4096);
                }
                *ret_reason = reason ? strdup(reason) : NULL;
                if (reason && !*ret_reason)
                        return -ENOMEM;
        }
        *ret = res;
        return 0;
}

/* ---- snippets ---- */

static void buf_add_codepoint(StrBuf *b, uint32_t cp) {
        char e[4];
        size_t n;

        if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
                cp = 0xFFFD;
        if (cp < 0x80)
                e[0] = (char) cp, n = 1;
        else if (cp < 0x800)
                e[0] = (char) (0xC0 | cp >> 6), e[1] = (char) (0x80 | (cp & 0x3F)), n = 2;
        else if (cp < 0x10000)
                e[0] = (char) (0xE0 | cp >> 12), e[1] = (char) (0x80 | ((cp >> 6) & 0x3F)),
                e[2] = (char) (0x80 | (cp & 0x3F)), n = 3;
        else
                e[0] = (char) (0xF0 | cp >> 18), e[1] = (char) (0x80 | ((cp >> 12) & 0x3F)),
                e[2] = (char) (0x80 | ((cp >> 6) & 0x3F)), e[3] = (char) (0x80 | (cp & 0x3F)), n = 4;
        strbuf_put(b, e, n);
}

/* Decode the entity at s ("&...;"); returns the bytes consumed, 0 if it is
 * not one we know (then "&" is kept as text). */
static size_t decode_entity(const char *s, StrBuf *b) {
        static const struct {
                const char *name;
                char c;
        } named[] = { { "&amp;", '&' }, { "&lt;", '<' }, { "&gt;", '>' }, { "&quot;", '"' }, { "&apos;", '\'' } };

        for (size_t i = 0; i < ELEMENTSOF(named); i++)
                if (strneq(s, named[i].name, strlen(named[i].name))) {
                        strbuf_put(b, &named[i].c, 1);
                        return strlen(named[i].name);
                }
        if (s[1] == '#') {
                bool hex = s[2] == 'x' || s[2] == 'X';
                const char *p = s + (hex ? 3 : 2);
                uint32_t cp = 0;
                size_t digits = 0;

                for (; digits < 8; p++, digits++) {
                        unsigned d;
                        if (*p >= '0' && *p <= '9')
                                d = (unsigned) (*p - '0');
                        else if (hex && *p >= 'a' && *p <= 'f')
                                d = (unsigned) (*p - 'a' + 10);
                        else if (hex && *p >= 'A' && *p <= 'F')
                                d = (unsigned) (*p - 'A' + 10);
                        else
                                break;
                        cp = cp * (hex ? 16 : 10) + d;
                }
                if (digits == 0 || *p != ';')
                        return 0;
                buf_add_codepoint(b, cp);
                return (size_t) (p + 1 - s);
        }
        return 0;
}

int mediawiki_snippet_to_text(const char *html, char **ret) {
        StrBuf b = { 0 };

        strbuf_put(&b, "", 0);
        for (const char *s = html; *s;) {
                if (*s == '<') {
                        const char *close = strchr(s, '>');
                        if (!close)
                                break; /* a cut-off tag: drop the rest */
                        s = close + 1;
                } else if (*s == '&') {
                        size_t n = decode_entity(s, &b);
                        if (n == 0) {
                                strbuf_put(&b, "&", 1);
                                s++;
                        } else
                                s += n;
                } else {
                        size_t n = strcspn(s, "<&");
                        strbuf_put(&b, s, n);
                        s += n;
                }
        }
        return buf_finish(&b, ret);
}
