/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <errno.h>
#include <stdint.h>

#include "shared/macro.h"
#include "shared/wiki-page.h"

/* The MediaWiki Action API (1.39, API.md 8.1), pure: request builders and
 * parsers of the replies, no I/O (the exchange is src/query/wiki-client.c
 * over src/query/upstream.c). Every reply is untrusted bytes: the parsers
 * take JSON only if it is strict, valid UTF-8, at most
 * MEDIAWIKI_JSON_MAX_DEPTH deep, with the documented types, and refuse
 * (-EBADMSG) anything else. Every request uses format=json and
 * formatversion=2. Strings returned are owned by the caller. */

#define MEDIAWIKI_JSON_MAX_DEPTH 64
#define MEDIAWIKI_TITLE_MAX 255 /* bytes, as MediaWiki's own limit */
#define MEDIAWIKI_QUERY_MAX 300 /* bytes of a search query (API.md 8.6) */
#define MEDIAWIKI_SEARCH_MAX 50 /* hits asked for at most */
#define MEDIAWIKI_CODE_MAX 64   /* bytes of an error code */
#define MEDIAWIKI_TOKEN_MAX 256 /* bytes of a login token */
#define MEDIAWIKI_TITLES_MAX 50 /* titles in one request: MediaWiki's limit without apihighlimits */

/* An API error reply ({"error": {"code", "info"}}, HTTP 200). */
typedef struct MediaWikiError {
        char *code; /* plain [A-Za-z0-9_-], at most MEDIAWIKI_CODE_MAX bytes; else "(invalid)" */
        char *info; /* raw text from the wiki (sanitize before use), may be NULL */
} MediaWikiError;
void mediawiki_error_done(MediaWikiError *e);

/* One search hit: the one type for it in the parser, the wiki client's
 * result and the agent (which gives it to the model). */
typedef struct MediaWikiSearchHit {
        char *title;
        char *snippet; /* plain text: tags removed, entities decoded */
} MediaWikiSearchHit;


/* A page's current revision (prop=info): the one type for it in the parser,
 * the wiki client's result and the staleness check of a record's sources. */
typedef struct MediaWikiRevision {
        char *title;          /* as the wiki returned it */
        bool missing;         /* deleted, or the title is invalid */
        uint64_t revision_id; /* lastrevid; 0 when missing */
} MediaWikiRevision;
void mediawiki_revisions_free(MediaWikiRevision *r, size_t n);

typedef enum MediaWikiLoginResult {
        MEDIAWIKI_LOGIN_SUCCESS,
        MEDIAWIKI_LOGIN_FAILED,
        MEDIAWIKI_LOGIN_WRONG_TOKEN,
        MEDIAWIKI_LOGIN_NEED_TOKEN,
        MEDIAWIKI_LOGIN_ABORTED,
        MEDIAWIKI_LOGIN_OTHER,
} MediaWikiLoginResult;

/* Whether a title / search query may be asked for: 1..max bytes of valid
 * UTF-8 without control characters, and for a title without "|" (which
 * would ask for several pages). */
bool mediawiki_title_is_valid(const char *title);
bool mediawiki_query_is_valid(const char *query);

/* Request builders: the query string (without "?") or the POST body, each
 * parameter percent-encoded. assert_user adds "assert=user". All return 0,
 * -EINVAL for an invalid argument, or -ENOMEM. */
int mediawiki_build_search(const char *query, unsigned limit, bool assert_user, char **ret);
int mediawiki_build_read(const char *title, bool assert_user, char **ret);
/* prop=info of 1..MEDIAWIKI_TITLES_MAX titles in one request, redirects not
 * followed (a page that became a redirect has a new revision). */
int mediawiki_build_revisions(const char *const *titles, size_t n, bool assert_user, char **ret);
/* action=wikiwebreadcheck (the extension WikiwebReadCheck, API.md "Whose
 * permissions"): whether user, or the one account that holds email
 * confirmed (at most one of them; both NULL or "": an anonymous reader),
 * may read each of 1..MEDIAWIKI_TITLES_MAX titles, redirects counting as
 * their targets. user, email: at most MEDIAWIKI_TITLE_MAX bytes of valid
 * UTF-8 without control characters or "|". */
int mediawiki_build_readcheck(
        const char *user, const char *email, const char *const *titles, size_t n, bool assert_user, char **ret);
int mediawiki_build_login_token(char **ret);
/* The POST body of action=login: holds the password; wipe it after use. */
int mediawiki_build_login(const char *user, const char *password, const char *token, char **ret);
/* api_url + "?" + query (or "&" when api_url has a query already). */
int mediawiki_url(const char *api_url, const char *query, char **ret);

/* Parsers. Each returns 0 on success; -EREMOTEIO when the body is an API
 * error reply, with it in *ret_error (which the caller then frees with
 * mediawiki_error_done()); -EBADMSG when the body is not what MediaWiki
 * sends; -ENOMEM. ret_error may be NULL. */
int mediawiki_parse_error(const char *body, size_t size, MediaWikiError *ret_error);
int mediawiki_parse_search(
        const char *body, size_t size, MediaWikiSearchHit **ret_hits, size_t *ret_n, MediaWikiError *ret_error);
void mediawiki_search_hits_free(MediaWikiSearchHit *hits, size_t n);
/* A page (shared/wiki-page.h): free it with wiki_page_done(). A title that
 * names no page of this wiki is a page with missing set, as a missing or
 * invalid one is: another wiki's (the reply's query.interwiki, no pages),
 * a special page or a virtual namespace ("special": true or a negative
 * "ns": Special:AllPages, Special:Export/X, Media:X). A reply that does
 * not have these shapes either is -EBADMSG. */
int mediawiki_parse_page(const char *body, size_t size, WikiPage *ret, MediaWikiError *ret_error);
/* The pages of a prop=info reply, in the wiki's order, at most
 * MEDIAWIKI_TITLES_MAX: free with mediawiki_revisions_free(). */
int mediawiki_parse_revisions(
        const char *body, size_t size, MediaWikiRevision **ret, size_t *ret_n, MediaWikiError *ret_error);
/* The reply of mediawiki_build_readcheck() for n titles: exactly n pages in
 * the order asked, each with a boolean "readable"; *ret an array of n
 * (owned by the caller, free()). Anything else is -EBADMSG: the caller
 * treats every failure as "may not read" (fail closed). */
int mediawiki_parse_readcheck(const char *body, size_t size, size_t n, bool **ret, MediaWikiError *ret_error);

/* How many accounts hold an address confirmed (the read check by e-mail). */
typedef enum MediaWikiAccounts {
        MEDIAWIKI_ACCOUNTS_NONE,
        MEDIAWIKI_ACCOUNTS_ONE,
        MEDIAWIKI_ACCOUNTS_SEVERAL,
        _MEDIAWIKI_ACCOUNTS_MAX,
        _MEDIAWIKI_ACCOUNTS_INVALID = -EINVAL,
} MediaWikiAccounts;

/* Whose permissions a read check's reply is (its "user", "anonymous" and,
 * asked by e-mail, "email"). */
typedef struct MediaWikiReader {
        char *user;                 /* the account checked; NULL: an anonymous reader */
        MediaWikiAccounts accounts; /* by_email only: none, one (user set) or several */
} MediaWikiReader;
void mediawiki_reader_done(MediaWikiReader *r);

/* The reader of a read check's reply (the pages are
 * mediawiki_parse_readcheck()'s): "anonymous" a boolean, "user" a name
 * (mediawiki_title_is_valid()) exactly when not anonymous, or "" else; asked
 * by_email, "email" is "none" or "several" (anonymous) or "one" (an
 * account), else it is absent. Anything else is -EBADMSG. */
int mediawiki_parse_reader(
        const char *body, size_t size, bool by_email, MediaWikiReader *ret, MediaWikiError *ret_error);
const char *mediawiki_accounts_to_string(MediaWikiAccounts a);

int mediawiki_parse_login_token(const char *body, size_t size, char **ret_token, MediaWikiError *ret_error);
/* ret_reason: the wiki's reason for a failure (raw: sanitize), or NULL. */
int mediawiki_parse_login(
        const char *body, size_t size, MediaWikiLoginResult *ret, char **ret_reason, MediaWikiError *ret_error);
const char *mediawiki_login_result_to_string(MediaWikiLoginResult r);

/* A search snippet (HTML with <span class="searchmatch">) as plain text:
 * tags dropped, the five named entities and numeric references decoded
 * (a reference to U+0000, a surrogate or beyond U+10FFFF becomes U+FFFD).
 * Returns 0 or -ENOMEM. */
int mediawiki_snippet_to_text(const char *html, char **ret);
