/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "query/mediawiki.h"
#include "query/upstream.h"
#include "shared/api-error.h"
#include "shared/macro.h"
#include "shared/time-util.h"
#include "shared/wiki-user.h"

/* The MediaWiki client of one query (API.md 8.1): search and read pages
 * through src/query/upstream.c, strictly one request at a time.
 *
 * A WikiClient belongs to one query and owns that query's wiki session:
 * the cookie jar (a libcurl share) and the login state. With a username
 * (bot password "User@AppId"), the first operation logs in
 * (meta=tokens&type=login, then action=login with the same jar), and every
 * request then carries assert=user; an "assertuserfailed" (the session was
 * lost) logs in again once per operation and repeats the request. Without a
 * username the wiki is read anonymously.
 *
 * Failures (API.md 8.1, 8 "Upstream failures"): a login whose result is not
 * Success, "readapidenied", HTTP 401 or 403: wiki_auth_failed; "maxlag", or
 * HTTP 429/503 with Retry-After: waited for (the Retry-After value, or 5 s)
 * and retried up to 3 times while the query deadline allows, else
 * query_timeout; any other API error: upstream_failed with its code in the
 * message; transport failures as upstream_classify() says. The password
 * never appears in a message, a log line or a result.
 *
 * Threading and ownership: the event loop's thread only. The client borrows
 * the Upstream (which must outlive it) and copies its settings (the
 * password is wiped when the client is freed). An operation is owned by the
 * caller until wiki_operation_free(); its callback runs exactly once, from
 * a defer source (never inside the starting call, never inside a libcurl
 * callback), unless the operation is freed first, which cancels it with no
 * callback. Every operation must be freed before its client. */

#define WIKI_RETRY_MAX 3
#define WIKI_RETRY_DEFAULT_USEC (5 * USEC_PER_SEC)

typedef struct WikiClient WikiClient;
typedef struct WikiOperation WikiOperation;

typedef struct WikiClientSettings {
        const char *api_url;  /* WIKI_WEB_WIKI_API_URL */
        const char *username; /* "User@AppId", or NULL: anonymous */
        const char *password; /* the bot password; NULL when anonymous */
        usec_t deadline;      /* the query's, CLOCK_MONOTONIC; 0: none */
        /* How a person's identity names their wiki account for the read
         * check (borrowed: must outlive the client); NULL: names as they are. */
        const WikiUserMap *user_map;
} WikiClientSettings;

/* Returns 0, -EINVAL (a username without a password), -ENOMEM. */
int wiki_client_new(Upstream *u, const WikiClientSettings *s, WikiClient **ret);
WikiClient *wiki_client_free(WikiClient *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(WikiClient *, wiki_client_free);

/* How many logins succeeded so far (a re-login counts), for tests and logs. */
unsigned wiki_client_logins(const WikiClient *c);

typedef struct WikiResult {
        /* 0, or a negative errno (the exchange's, -EACCES for a refused
         * login or access, -EREMOTEIO for another API error, -EBUSY when the
         * wiki stayed busy, -ETIMEDOUT, -ENOMEM, ...); api_error is then what
         * the client is told. */
        int error;
        ApiError api_error; /* when error < 0 */
        char *message;      /* already sanitized; NULL on success */
        /* search */
        MediaWikiSearchHit *hits;
        size_t n_hits;
        /* read: page.missing for a page that does not exist */
        WikiPage page;
        /* revisions: the current revision of each title */
        MediaWikiRevision *revisions;
        size_t n_revisions;
        /* readcheck: readable[i] for the i-th title asked, and the account
         * whose permissions they are (NULL: an anonymous reader's) */
        bool *readable;
        size_t n_readable;
        char *reader;
} WikiResult;

/* Frees what a result owns (a result taken with wiki_operation_take_result()). */
void wiki_result_done(WikiResult *r);

/* error is r->error; r is borrowed for the duration of the call. */
typedef void (*WikiDone)(WikiOperation *op, int error, const WikiResult *r, void *userdata);

/* list=search&srwhat=text: limit 1..MEDIAWIKI_SEARCH_MAX. Returns 0, -EINVAL
 * for an invalid query or limit, -EBUSY while another operation of this
 * client runs, -ENOMEM. */
int wiki_client_search(
        WikiClient *c, const char *query, unsigned limit, WikiDone done, void *userdata, WikiOperation **ret);
/* One page with content, revision id and canonical URL, after redirects.
 * A page the client's own account may not read ("accessdenied") is a
 * missing page, not a failure. Returns as wiki_client_search(). */
int wiki_client_read(WikiClient *c, const char *title, WikiDone done, void *userdata, WikiOperation **ret);

/* The current revision of 1..MEDIAWIKI_TITLES_MAX titles (a strv, copied)
 * in one request, prop=info. Returns as wiki_client_search(). */
int wiki_client_revisions(WikiClient *c, char **titles, WikiDone done, void *userdata, WikiOperation **ret);

/* Whether the person identity names (NULL: an anonymous reader) may read
 * each of 1..MEDIAWIKI_TITLES_MAX titles (a strv, copied), in one request to
 * the extension WikiwebReadCheck (API.md "Whose permissions"):
 * result.readable, and result.reader the account checked. The identity is
 * mapped by the client's user_map (wiki_user_resolve()) at every call, and
 * an address is resolved by the wiki in the same request: nothing is kept
 * from one check to the next. An address that several accounts hold is
 * wiki_auth_failed (the accounts are never named). Every failure fails:
 * wiki_auth_failed naming what to fix when the wiki lacks the extension
 * ("badvalue", "unknown_action"), the account the right
 * ("permissiondenied") or the extension its e-mail lookup, else as any
 * request. Returns as wiki_client_search(). */
int wiki_client_readcheck(
        WikiClient *c, const char *user, char **titles, WikiDone done, void *userdata, WikiOperation **ret);

/* Moves the result out of a finished operation (from its callback): the
 * caller owns *ret then and frees it with wiki_result_done(). */
void wiki_operation_take_result(WikiOperation *op, WikiResult *ret);

WikiOperation *wiki_operation_free(WikiOperation *op);
DEFINE_TRIVIAL_CLEANUP_FUNC(WikiOperation *, wiki_operation_free);
