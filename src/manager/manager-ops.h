/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "manager/manager.h"
#include "shared/api-error.h"
#include "shared/ids.h"
#include "shared/macro.h"
#include "shared/wiki-page.h"
#include "store/history-worker.h"
#include "store/history.h"
#include "store/report.h"
#include "store/tokens.h"

/* The Manager's operations on the history and the wiki for a person, as
 * every face does them (the HTTP API today; D-Bus and MCP call the same):
 * a face parses, calls one of these and formats what it gives back. Who
 * asks is passed in: the session (whose records) and the user (their
 * identity name, NULL: anonymous), whose wiki permissions count in person
 * mode (API.md "Whose permissions").
 *
 * A refusal is a ManagerError: the API error and a message that may be
 * shown (static or sanitized; NULL: the code's default one). A face adds
 * Retry-After to busy itself (API.md 2).
 *
 * Asynchronous operations all have one shape: they return 0 and a handle
 * (owned by the caller; freeing it cancels, and done is never called
 * then), or a negative errno with *ret_error filled and nothing started.
 * done(handle, error, result, userdata) is called once, from the event
 * loop, never from inside the call that started it: error NULL and the
 * result, or an error and result NULL. Both are borrowed for the call. The
 * handle may be freed from inside done. */

typedef struct ManagerError {
        ApiError api_error;
        const char *message; /* NULL: the code's default */
} ManagerError;

/* While the store cannot write (full, read-only, an I/O error, damaged):
 * true, and storage_unavailable with the cause in words in *ret_error
 * (valid until the next call into the Manager). */
bool manager_storage_refusal(Manager *m, ManagerError *ret_error);

/* ---- the history (manager-history.c) ---- */

/* A write to a person's history, made on the store's worker (the delete
 * with its checkpoint, a rating, a share link made or revoked, each
 * durable when done is called): the loop never waits for it. The
 * operation's shape above; its refusals come to done: query_not_found
 * (not theirs, or gone), busy (still running), storage_unavailable (the
 * store cannot write), internal_error. Start errors: -ENOMEM. */
typedef struct ManagerWrite ManagerWrite;
typedef struct ManagerWritten {
        const char *token; /* manager_share_create(): the link's token, given once; NULL otherwise */
} ManagerWritten;
typedef void (*ManagerWriteDone)(
        ManagerWrite *w, const ManagerError *error, const ManagerWritten *result, void *userdata);
ManagerWrite *manager_write_free(ManagerWrite *w);
DEFINE_TRIVIAL_CLEANUP_FUNC(ManagerWrite *, manager_write_free);

/* Delete the session's record id (API.md 9), then checkpoint the log:
 * when done is called, no file of the store holds it. busy while it runs. */
int manager_delete_record(
        Manager *m,
        const SessionKey *session,
        const char *id,
        ManagerWriteDone done,
        void *userdata,
        ManagerWrite **ret,
        ManagerError *ret_error);

/* The asker's rating of the session's ended record id (API.md 9.1),
 * counted in the metrics once kept (a "down" as unanswered too). rating
 * "up" or "down" (else -EINVAL, invalid_input, at once), reason and
 * comment validated by the face (request.h); busy: no answer to rate
 * yet. */
int manager_set_feedback(
        Manager *m,
        const SessionKey *session,
        const char *id,
        const char *rating,
        const char *reason,
        const char *comment,
        ManagerWriteDone done,
        void *userdata,
        ManagerWrite **ret,
        ManagerError *ret_error);

/* A follow-up's preparation (API.md 7): the conversation of the record
 * followed, which must be the session's own and have ended, as the turns
 * the model is given (at most HISTORY_CONVERSATION_MAX_TURNS). Done before
 * admission: a follow-up refused changes no queue state. Checked like a
 * read: in person mode the titles that reached each turn's model (its
 * sources and its given titles) are asked of the wiki for user
 * (manager_check_readable()); the first turn with one they may no longer
 * read and every turn after it are left out, and result->notes says so.
 * A check that cannot be made refuses the follow-up (wiki_auth_failed).
 * In service mode every turn is kept, answered from a defer. Start
 * errors: -ENOENT (query_not_found), -EBUSY (busy: the record followed
 * still runs), -EOPNOTSUPP (execution_failed), -ENOMEM, -EIO. done's
 * result (a ManagerFollowUp for manager_start_query()) is borrowed from
 * the handle: valid until it is freed. */
typedef struct ManagerPreparedFollowUp ManagerPreparedFollowUp;
typedef void (*ManagerFollowUpDone)(
        ManagerPreparedFollowUp *p, const ManagerError *error, const ManagerFollowUp *result, void *userdata);
int manager_prepare_follow_up(
        Manager *m,
        const SessionKey *session,
        const char *user,
        const char *follow_up,
        ManagerFollowUpDone done,
        void *userdata,
        ManagerPreparedFollowUp **ret,
        ManagerError *ret_error);
ManagerPreparedFollowUp *manager_follow_up_free(ManagerPreparedFollowUp *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(ManagerPreparedFollowUp *, manager_follow_up_free);

/* ---- a person's erasure (manager-erase.c) ---- */

/* An administrator's erasure of the person named user (D-Bus EraseUser,
 * API.md 12.1), by (who asked, for the journal: "uid 1000 (alice)"): their
 * ticket is removed, their running queries cancelled (as CancelQuery) and
 * waited for until their records are durable, then every record,
 * artifact, feedback, share link and personal access token of theirs
 * goes. The journal says once who erased whom and how many, never
 * content. The records go in batches on the store's worker, then the
 * sync and the checkpoint (as manager_erase_session()). Start errors:
 * -EINVAL (not a valid identity name: invalid_input), -EBUSY (an erasure
 * of theirs is under way: busy), -ENOMEM. done's result is borrowed for the call; error
 * busy when a query of theirs had not ended after
 * MANAGER_ERASE_WAIT_USEC. Their queries are awaited on the Manager's
 * announcements (a subscription while it waits): the handle is freed
 * before the Manager, and not from inside an announcement. */
#define MANAGER_ERASE_WAIT_USEC (60 * USEC_PER_SEC)
typedef struct ManagerErased {
        const char *user;
        uint64_t records, artifacts, tokens;
        unsigned cancelled; /* queries of theirs that were running */
} ManagerErased;
typedef struct ManagerErasure ManagerErasure;
typedef void (*ManagerEraseDone)(
        ManagerErasure *e, const ManagerError *error, const ManagerErased *result, void *userdata);
int manager_erase_user(
        Manager *m,
        const char *user,
        const char *by,
        ManagerEraseDone done,
        void *userdata,
        ManagerErasure **ret,
        ManagerError *ret_error);
ManagerErasure *manager_erasure_free(ManagerErasure *e);
DEFINE_TRIVIAL_CLEANUP_FUNC(ManagerErasure *, manager_erasure_free);

/* A person's own erasure (DELETE /api/v1/history): every record of the
 * session (with an identity, the person's on every device), with
 * artifacts, feedback and share links, in batches on the store's worker,
 * then made durable and the write-ahead log checkpointed; done is called
 * (from the loop) after that, result's user NULL and tokens 0. Refused
 * with busy while one of the session's queries runs, as a record's
 * deletion, and while an erasure of the session is under way (either
 * kind; manager_erase_user() is refused so too). Start errors: -EBUSY
 * (busy), -ENOMEM, -EIO, -ESHUTDOWN (the worker stops); done's error:
 * busy (an outcome of theirs was being written), or the store's failure
 * (what went before it stays gone). */
int manager_erase_session(
        Manager *m,
        const SessionKey *session,
        ManagerEraseDone done,
        void *userdata,
        ManagerErasure **ret,
        ManagerError *ret_error);

/* ---- what a person may read (manager-readable.c) ---- */

/* Whether user may read each of titles (any number, NULL-terminated,
 * copied), asked of the wiki now in person mode (the extension
 * WikiwebReadCheck, in batches of MEDIAWIKI_TITLES_MAX, one after the
 * other, each bounded by REVISION_CHECK_TIMEOUT_USEC, on a wiki client of
 * the executor's), never cached. In service mode every valid title is
 * readable, answered from a defer. A title the wiki would not take is never
 * readable, without asking. No titles: an empty result.
 *
 * Fails closed, the same for every caller and every cause (the extension
 * missing, the right revoked, a timeout, a reply that does not parse):
 * wiki_auth_failed with a message naming what to fix (read_check_failure()
 * in query/read-check.h, which the pipeline's own check in a query uses
 * too); the caller shows nothing then. Start
 * errors: -EOPNOTSUPP (person mode, titles to ask and no wiki configured:
 * execution_failed), -ENOMEM. */
typedef struct ManagerReadableCheck ManagerReadableCheck;
typedef struct ManagerReadable {
        char *const *titles; /* as asked */
        const bool *readable;
        size_t n;
} ManagerReadable;
typedef void (*ManagerReadableDone)(
        ManagerReadableCheck *c, const ManagerError *error, const ManagerReadable *result, void *userdata);
int manager_check_readable(
        Manager *m,
        const char *user,
        char *const *titles,
        ManagerReadableDone done,
        void *userdata,
        ManagerReadableCheck **ret,
        ManagerError *ret_error);
ManagerReadableCheck *manager_readable_check_free(ManagerReadableCheck *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(ManagerReadableCheck *, manager_readable_check_free);

/* A record's sources with the wiki's current revisions (API.md 9 GET
 * .../sources), for user: in person mode the titles they may not read now
 * answer as missing pages (withheld), the others are asked for their
 * revision; the first MANAGER_SOURCES_MAX titles (one request to the
 * wiki for the revisions). */
#define MANAGER_SOURCES_MAX 50
typedef struct ManagerSourceState {
        const char *title;
        bool checked;  /* false: not asked (all null) */
        bool missing;  /* no such page now, or one the person may not read */
        bool withheld; /* missing because the person may not read it */
        uint64_t revision_id;
} ManagerSourceState;
typedef struct ManagerSources {
        const ManagerSourceState *sources; /* one per title asked, in order */
        size_t n;
} ManagerSources;
typedef struct ManagerSourcesCheck ManagerSourcesCheck;
typedef void (*ManagerSourcesDone)(
        ManagerSourcesCheck *c, const ManagerError *error, const ManagerSources *result, void *userdata);
int manager_check_sources(
        Manager *m,
        const char *user,
        char *const *titles,
        ManagerSourcesDone done,
        void *userdata,
        ManagerSourcesCheck **ret,
        ManagerError *ret_error);
ManagerSourcesCheck *manager_sources_check_free(ManagerSourcesCheck *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(ManagerSourcesCheck *, manager_sources_check_free);

/* The unanswered report (API.md 9.2) since (realtime) for user, who must
 * be one of the wiki's editors (else -EPERM, origin_denied); in person mode
 * only the pages they may read stay in it (how many did not is counted
 * and logged, never which). done's result is the report (borrowed). */
typedef struct ManagerReportCheck ManagerReportCheck;
typedef void (*ManagerReportDone)(
        ManagerReportCheck *c, const ManagerError *error, const Report *result, void *userdata);
int manager_report_unanswered(
        Manager *m,
        const char *user,
        usec_t since,
        ManagerReportDone done,
        void *userdata,
        ManagerReportCheck **ret,
        ManagerError *ret_error);
ManagerReportCheck *manager_report_check_free(ManagerReportCheck *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(ManagerReportCheck *, manager_report_check_free);

/* ---- the wiki for a person (manager-wiki.c) ---- */

/* A search and a read as a query's tools make them (API.md 8.6), outside
 * any query: with the service account, and in person mode filtered for
 * user as the tools filter (a page they may not read is left out of a
 * search and reads as a missing page, exactly as one that does not exist;
 * how many were withheld is counted in the metrics, never which). A read
 * check that cannot be made fails closed (manager_check_readable()); the
 * wiki's own failures are passed on (their API error, sanitized message).
 * Start errors: -EINVAL (an invalid query, limit or title:
 * invalid_input), -EOPNOTSUPP (no wiki and model configured:
 * execution_failed), -ENOMEM. */
typedef struct ManagerWikiHit {
        const char *title;
        const char *snippet; /* plain text */
} ManagerWikiHit;
typedef struct ManagerWikiHits {
        const ManagerWikiHit *hits; /* at most the limit asked for, the wiki's order */
        size_t n;
} ManagerWikiHits;
typedef struct ManagerWikiOperation ManagerWikiOperation;
typedef void (*ManagerWikiSearchDone)(
        ManagerWikiOperation *o, const ManagerError *error, const ManagerWikiHits *result, void *userdata);
typedef void (*ManagerWikiReadDone)(
        ManagerWikiOperation *o, const ManagerError *error, const WikiPage *result, void *userdata);
/* limit 1..MANAGER_WIKI_SEARCH_MAX. */
#define MANAGER_WIKI_SEARCH_MAX 50
int manager_wiki_search(
        Manager *m,
        const char *user,
        const char *query,
        unsigned limit,
        ManagerWikiSearchDone done,
        void *userdata,
        ManagerWikiOperation **ret,
        ManagerError *ret_error);
int manager_wiki_read(
        Manager *m,
        const char *user,
        const char *title,
        ManagerWikiReadDone done,
        void *userdata,
        ManagerWikiOperation **ret,
        ManagerError *ret_error);
ManagerWikiOperation *manager_wiki_operation_free(ManagerWikiOperation *o);
DEFINE_TRIVIAL_CLEANUP_FUNC(ManagerWikiOperation *, manager_wiki_operation_free);

/* ---- share links (manager-share.c, API.md 9 "Share") ---- */

/* "sh_" and 64 hex digits, and its NUL. */
#define MANAGER_SHARE_TOKEN_MAX (3 + 64 + 1)

/* A new link to the session's ended record id: 256 random bits, of which
 * only the digest is kept; the token is given once, in done's result. A
 * ManagerWrite (above). */
int manager_share_create(
        Manager *m,
        const SessionKey *session,
        const char *id,
        ManagerWriteDone done,
        void *userdata,
        ManagerWrite **ret,
        ManagerError *ret_error);
/* Revoke every link of the session's record id. A ManagerWrite. */
int manager_share_revoke(
        Manager *m,
        const SessionKey *session,
        const char *id,
        ManagerWriteDone done,
        void *userdata,
        ManagerWrite **ret,
        ManagerError *ret_error);

/* For manager-share.c: a ManagerWrite of a share link. digest NULL:
 * revoke; token: given to done (copied). */
int manager_write_share(
        Manager *m,
        const SessionKey *session,
        const char *id,
        const uint8_t *digest,
        const char *token,
        ManagerWriteDone done,
        void *userdata,
        ManagerWrite **ret,
        ManagerError *ret_error);

/* For manager-history.c and manager-share.c: every title that reached the
 * model of records[0..n) (each record's sources and the titles it was
 * given as conversation), each once, in order; NULL-terminated, the
 * caller's to strv_free(). NULL: out of memory. */
char **manager_records_titles(const HistoryRecord *records, size_t n);

/* Open a link for user: the conversation it shares, once user may read
 * every source of every turn shown. A token that is wrong, revoked, whose
 * record is gone, or shares something user may not read: not_found, the
 * same in each case. While identity is on, an anonymous reader is refused
 * at once (-EACCES, origin_denied), before the token is looked at. */
typedef struct ManagerShared {
        const HistoryRecord *turns; /* oldest first, the shared record last */
        size_t n_turns;
        const SessionKey *owner; /* whose records they are (their artifacts) */
} ManagerShared;
typedef struct ManagerShareOpen ManagerShareOpen;
typedef void (*ManagerShareOpenDone)(
        ManagerShareOpen *o, const ManagerError *error, const ManagerShared *result, void *userdata);
int manager_share_open(
        Manager *m,
        const char *user,
        const char *token,
        ManagerShareOpenDone done,
        void *userdata,
        ManagerShareOpen **ret,
        ManagerError *ret_error);
ManagerShareOpen *manager_share_open_free(ManagerShareOpen *o);
DEFINE_TRIVIAL_CLEANUP_FUNC(ManagerShareOpen *, manager_share_open_free);

/* ---- personal access tokens (manager-tokens.c, API.md "Access tokens") ---- */

/* "wwp_" and 43 base64url characters (256 random bits), and its NUL. */
#define MANAGER_TOKEN_PREFIX "wwp_"
#define MANAGER_TOKEN_SECRET_BYTES 32
#define MANAGER_TOKEN_MAX (4 + 43 + 1)

/* Who may hold tokens: a person a trusted proxy named (user, never NULL
 * here; the face refuses an anonymous caller and a caller that itself
 * came with a token). Their key is the one of their records, from the
 * function main set (manager_set_user_key_function()). */
typedef struct ManagerTokenCreated {
        char id[HISTORY_TOKEN_ID_MAX];
        char token[MANAGER_TOKEN_MAX]; /* shown once, never kept */
        usec_t created_at;             /* CLOCK_REALTIME */
        usec_t expires_at;
} ManagerTokenCreated;

/* A new token for user named name (validated by the face), valid for
 * expires_in_days (0: WIKI_WEB_TOKEN_MAX_DAYS). Refusals: -ERANGE
 * (invalid_input: more days than WIKI_WEB_TOKEN_MAX_DAYS), -E2BIG
 * (invalid_input: HISTORY_TOKENS_MAX held already), -EIO. */
int manager_token_create(
        Manager *m,
        const char *user,
        const char *name,
        unsigned expires_in_days,
        ManagerTokenCreated *ret,
        ManagerError *ret_error);
/* user's tokens, oldest first (no secret, no digest): *ret freed with
 * history_tokens_free(). */
int manager_tokens_list(Manager *m, const char *user, HistoryToken **ret, size_t *ret_n, ManagerError *ret_error);
/* Revoke user's token id: -ENOENT (not_found: not theirs, or gone). */
int manager_token_revoke(Manager *m, const char *user, const char *id, ManagerError *ret_error);
/* Revoke every token of user (an admin's): how many (>= 0). */
int manager_tokens_revoke_user(Manager *m, const char *user, ManagerError *ret_error);

/* Who a request carrying token acts as: 0 and the person's name in
 * *ret_user (a new string), the token's last use noted. -EACCES for a
 * token that is malformed, unknown, revoked or expired (the caller
 * cannot tell which, nor can the client); -ENOMEM, -EIO. Nothing here
 * logs the token. */
int manager_token_authenticate(Manager *m, const char *token, char **ret_user);

/* For the operations' own files: the event loop, the store's worker and
 * the executor. */
sd_event *manager_get_event(Manager *m);
HistoryWorker *manager_get_history_worker(Manager *m);

/* The history's retention (manager-retention.c): NULL in *ret when
 * WIKI_WEB_HISTORY_RETENTION_DAYS is 0 (kept until deleted). */
typedef struct ManagerRetention ManagerRetention;
int manager_retention_new(Manager *m, ManagerRetention **ret);
ManagerRetention *manager_retention_free(ManagerRetention *r);
#if ENABLE_TEST_FAULTS
/* Test-only (shared/fault.h): the runs after the first at start are this
 * far apart (from the end of one to the start of the next) instead of an
 * hour. interval > 0. */
void manager_retention_set_test_interval(ManagerRetention *r, usec_t interval);
#endif
QueryExecutor *manager_get_executor(Manager *m);
