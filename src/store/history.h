/* SPDX-License-Identifier: MIT */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shared/artifact.h"
#include "shared/ids.h"
#include "shared/macro.h"
#include "shared/source.h"
#include "shared/time-util.h"
#include "shared/user-key.h"

/* The authoritative query history of API.md 9, in SQLite: one file,
 * history.sqlite3, in the state directory. Each query is written as
 * "running" before its execution starts and completed when it ends; a
 * record still "running" when the store is opened (the daemon crashed or
 * was killed) becomes "failed" with execution_failed. Records and their
 * artifacts belong to a session, identified by the SHA-256 of its token
 * (never the token), and are only ever shown to that session.
 *
 * All calls are synchronous. The loop's connection (history_open())
 * makes a query's two short writes and the reads of one record or page;
 * what may take longer (deletes, the retention's batches, feedback and
 * shares with their sync, the report, the outcomes' retries) runs on the
 * store's worker (store/history-worker.h) on a connection of its own
 * (history_open_worker()), which shares the store's condition (the
 * storage's fault, the outcomes waiting) with the loop's. Every call
 * below may be made on either connection, each from one thread only. */

typedef struct History History;

/* Bounds of a listing (API.md 9). */
#define HISTORY_LIMIT_MIN 1u
#define HISTORY_LIMIT_MAX 100u
#define HISTORY_LIMIT_DEFAULT 20u

/* Open (creating it if needed) the store in directory. *ret_recovered (if
 * not NULL) is the number of records that were still "running" and are now
 * "failed". Returns 0, -ENOMEM, or -EIO / -ENOTSUP (with a logged reason)
 * when the file cannot be opened, is not a history store, or is of a newer
 * schema; -ENOSPC, -EROFS or -EACCES when the state directory is full,
 * read-only or not writable (logged in those words). */
int history_open(const char *directory, History **ret, unsigned *ret_recovered);
/* The same with the secret of the installation (shared/user-key.h) given:
 * history_open() reads it from the state directory's file (making it
 * there), the daemon passes the one it loaded (a credential, or that
 * file). The store keys nothing with it but the re-key of schema step 9:
 * the session keys it is handed are the sealed ones (user_key_seal()). */
int history_open_keyed(const char *directory, const UserKeySecret *secret, History **ret, unsigned *ret_recovered);
History *history_free(History *h);
DEFINE_TRIVIAL_CLEANUP_FUNC(History *, history_free);

/* A second connection to main's store, for the store's worker thread: the
 * schema is main's (checked, changed and recovered by history_open()),
 * the condition (faults, the outcomes waiting) is shared, under a lock.
 * Freed before main (history_free()); used by one thread at a time.
 * Returns 0, -ENOMEM, -EIO. */
int history_open_worker(History *main, History **ret);
/* Whether h is a worker's connection. */
bool history_is_worker(const History *h);

/* Whether the outcome of the record id waits in memory to land. */
bool history_outcome_waits(History *h, const char *id);

/* A new record in state "running". question is stored as given (the
 * request validator has checked it). created_at is CLOCK_REALTIME. Returns
 * 0, -EEXIST for a duplicate id, -EIO. The record starts a conversation of
 * its own. */
int history_begin(History *h, const char *id, const SessionKey *session, const char *question, usec_t created_at);
/* The same, for a follow-up (API.md 7): follow_up is the id of the record
 * this one follows, conversation the id of the conversation's first
 * record (NULL for both: history_begin()); notes the record's notes
 * (NULL-terminated, NULL: none). -ENOMEM too. */
int history_begin_follow_up(
        History *h,
        const char *id,
        const SessionKey *session,
        const char *question,
        const char *follow_up,
        const char *conversation,
        char *const *notes,
        usec_t created_at);

typedef struct HistoryTimings {
        uint64_t queue_ms, wiki_ms, model_ms, sandbox_ms, cleanup_ms, total_ms;
} HistoryTimings;

typedef struct HistoryOutcome {
        bool succeeded;
        const char *answer;         /* when succeeded, else NULL */
        const char *sources_json;   /* a JSON array, NULL for [] */
        const char *citations_json; /* a JSON array (API.md 9 "citations"), NULL for [] */
        const char *error_code;     /* when failed */
        const char *error_message;  /* when failed: already sanitized */
        HistoryTimings timings;
        const char *model; /* the model name of the usage object */
        uint64_t prompt_tokens, completion_tokens;
        usec_t finished_at;  /* CLOCK_REALTIME */
        const char *sandbox; /* whether run_python was offered ("offered", "unavailable", "starting"); NULL:
                              * not known */
        /* The searches the model made: a JSON array of {"query": "…",
         * "results": N}, in order; NULL for []. Kept for the unanswered
         * report (API.md 9.2), not shown in the record. */
        const char *searches_json;
        /* The files the run left (API.md 8.3), borrowed: kept before the
         * record is completed. When the storage cannot take them, they
         * wait with the outcome (their files held open) and land with it. */
        const Artifact *artifacts;
        size_t n_artifacts;
} HistoryOutcome;

/* The signals a finished record keeps for the unanswered report (API.md
 * 9.2), computed by history_finish() from the outcome. negative_feedback
 * is the feedback's, not a bit. */
#define HISTORY_SIGNAL_NO_SOURCES \
        (1u << 0) /* an answer without a page read, or whose searches all found nothing */
#define HISTORY_SIGNAL_UNVERIFIED \
        (1u << 1) /* an answer without a verified citation, or with a quote not found */
#define HISTORY_SIGNAL_FAILED \
        (1u << 2) /* failed with an error that means "no answer" (below), after a search or read */

/* Whether a failed query's error code says the wiki had no answer:
 * query_timeout, execution_failed (also the step limit: the model was
 * still searching) and model_context_exceeded. The failures of the model,
 * the wiki's server, the network, the sandbox and the service are not. */
bool history_error_means_unanswered(const char *code);

/* The HISTORY_SIGNAL_* bits history_finish() keeps for the outcome. */
unsigned history_outcome_signals(const HistoryOutcome *o);

/* Complete the running record id. Returns 0, -ENOENT (no running record
 * of that id, e.g. it was deleted meanwhile), -EINVAL (sources_json or
 * citations_json is not an array), -EIO. */
int history_finish(History *h, const char *id, const HistoryOutcome *outcome);

/* history_finish(), committed but not yet durable across a power cut (a
 * crash or kill of the daemon does not lose it): the caller makes it so
 * with fdatasync() of history_sync_fd(), e.g. off the event loop
 * (SyncWorker), before it tells anyone the query ended. Same returns. */
int history_finish_nosync(History *h, const char *id, const HistoryOutcome *outcome);

/* A descriptor whose fdatasync() makes every commit so far durable (the
 * write-ahead log). Owned by the store: valid until the next call into it
 * or history_free(); dup() it to keep it. Returns it or a negative errno. */
int history_sync_fd(History *h);

/* fdatasync() of history_sync_fd() here and now. Returns 0 or -EIO
 * (logged). */
int history_sync(History *h);

/* One entry of a record's artifact list (API.md 9), without the bytes. */
typedef struct HistoryArtifactInfo {
        char *id;
        char *name;
        char *media_type;
        int64_t size_bytes;
        char *sha256;
} HistoryArtifactInfo;

/* The query record of API.md 9, as stored: src/api/render.c turns it into
 * the JSON of the contract. Every string is owned by the record; a NULL
 * string is a JSON null (answer while running or after a failure,
 * error_code when there is no error). */
typedef struct HistoryRecord {
        char *id;
        char *status; /* "running", "succeeded" or "failed" */
        char *question;
        char *answer;
        /* The sources and the citations (API.md 9), parsed once from what
         * history_finish() stored (shared/source.h); none when the stored
         * text is no array (only a file changed behind the store's back). */
        Source *sources;
        size_t n_sources;
        SourceCitation *citations;
        size_t n_citations;
        HistoryArtifactInfo *artifacts; /* in the order they were kept */
        size_t n_artifacts;
        char *error_code;
        char *error_message;
        HistoryTimings timings; /* at most INT64_MAX each */
        char *model;            /* the usage object's model name */
        uint64_t prompt_tokens, completion_tokens;
        usec_t created_at;  /* CLOCK_REALTIME */
        usec_t finished_at; /* CLOCK_REALTIME, USEC_INFINITY while running */
        char *sandbox;      /* as HistoryOutcome's; NULL while running and when not known */
        /* The asker's feedback (API.md 9.1): rating "up" or "down", NULL
         * without feedback; reason and comment NULL when not given. */
        char *feedback_rating;
        char *feedback_reason;
        char *feedback_comment;
        usec_t feedback_at; /* CLOCK_REALTIME, when there is feedback */
        char *follow_up;    /* the record it follows (API.md 7), NULL for a conversation's first */
        char *conversation; /* the id of its conversation's first record, never NULL */
        /* The titles the turns given to its model as conversation had read
         * (their sources, and theirs before them), each once; empty for a
         * conversation's first record, never NULL. Kept with the record: a
         * turn deleted since still counts (API.md 9 "Share"). */
        char **given_titles;
        /* What the record says of how it was made (API.md 9 "notes"),
         * sentences for the asker; empty when there is nothing to say,
         * never NULL. */
        char **notes;
} HistoryRecord;

/* Free what r holds and zero it (r itself is the caller's). */
void history_record_done(HistoryRecord *r);
/* Free a record from history_get_record(). Returns NULL. */
HistoryRecord *history_record_free(HistoryRecord *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(HistoryRecord *, history_record_free);

/* The record id, if it belongs to session: 0 and a new record in *ret (free
 * with history_record_free()), -ENOENT (*ret untouched), -ENOMEM, -EIO. */
int history_get_record(History *h, const char *id, const SessionKey *session, HistoryRecord **ret);

/* Whether the record exists, belongs to session and is still running:
 * 1, 0, or -EIO. */
int history_is_running(History *h, const char *id, const SessionKey *session);

/* The durations of the most recent finished queries (claim to outcome, in
 * seconds: total_ms less queue_ms), newest first, at most max of them into
 * ret_seconds; their number in *ret_n. For the wait range at start-up. */
int history_recent_durations(History *h, size_t max, double *ret_seconds, size_t *ret_n);

/* "9223372036854775807" and its NUL. */
#define HISTORY_CURSOR_MAX 20

/* One page of a listing (API.md 9), newest first. */
typedef struct HistoryPage {
        HistoryRecord *records;
        size_t n_records;
        /* The cursor of the next page, "" when this is the last one. */
        char next_cursor[HISTORY_CURSOR_MAX];
} HistoryPage;

/* Free the page and its records. Returns NULL. */
HistoryPage *history_page_free(HistoryPage *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(HistoryPage *, history_page_free);

/* One page of the session's records, newest first: limit records (1..100)
 * older than the cursor (NULL: from the newest). Returns 0 and a new page in
 * *ret (free with history_page_free()), -EINVAL for a limit out of range or
 * a cursor this store did not hand out (malformed; *ret untouched),
 * -ENOMEM, -EIO. */
int history_list_records(
        History *h, const SessionKey *session, unsigned limit, const char *cursor, HistoryPage **ret);

/* Parse a listing's query arguments: limit (NULL: the default) as a decimal
 * integer 1..100 without sign, spaces or leading zeros, and cursor (NULL:
 * none) as handed out by history_list_records(). Returns 0, or -EINVAL and a static
 * message naming the argument. Untrusted input: fuzzed. */
int history_parse_list_arguments(
        const char *limit, const char *cursor, unsigned *ret_limit, const char **ret_message);

/* The asker's feedback on the session's finished record id (API.md 9.1):
 * rating "up" or "down", reason and comment NULL when not given (the
 * request validator checked them). A second call replaces the first.
 * Durable when it returns. Returns 0, -ENOENT (none of this session),
 * -EBUSY (still running), -EINVAL (another rating), -EIO. */
int history_set_feedback(
        History *h,
        const char *id,
        const SessionKey *session,
        const char *rating,
        const char *reason,
        const char *comment,
        usec_t rated_at);

/* Delete the session's record id and its artifacts (and its feedback and share
 * links), then checkpoint the write-ahead log (history_checkpoint()): when it
 * returns, no file of the store holds the record's text. Returns 0, -ENOENT
 * (none of this session), -EBUSY (it is still running), -EIO. */
int history_delete(History *h, const char *id, const SessionKey *session);

/* Delete at most batch of the oldest records asked before `before` (with their
 * artifacts, feedback and share links), in one transaction; running records
 * are kept. The counts of records and artifacts deleted in *ret_records and
 * *ret_artifacts. Returns 1 when a full batch went (there may be more), 0 when
 * none is left, or -EIO. The caller checkpoints (history_checkpoint()). */
int history_prune(History *h, usec_t before, unsigned batch, unsigned *ret_records, unsigned *ret_artifacts);

/* Records of one session erased per transaction by history_erase_session(). */
#define HISTORY_ERASE_BATCH 500u

/* Erase every record of session (a person's, API.md 9 and 12.1), with their
 * artifacts, feedback and share links: batch records per transaction
 * (between two, other connections may write), then the deletion is made
 * durable and the write-ahead log checkpointed (history_checkpoint()), so
 * that when it returns no file of the store holds their text. A record
 * still running is kept (the caller ends the person's queries first, or
 * refuses: history_session_running()); an outcome waiting in memory for
 * one of them lands first and is erased with it. It touches nothing but h
 * and its connection: it may run on another thread than the event loop's
 * on a History of that thread's own. The counts of records and artifacts
 * erased in *ret_records and *ret_artifacts (each may be NULL). Returns 0
 * (also when there was nothing), -EIO (logged; what went before the failed
 * batch stays gone). */
int history_erase_session(
        History *h, const SessionKey *session, unsigned batch, uint64_t *ret_records, uint64_t *ret_artifacts);

/* One batch of history_erase_session(), for the store's worker (one job
 * each): the session's outcomes waiting in memory land first (-EBUSY while
 * another connection writes one), then at most batch of its records that
 * are not running go in one transaction. Not made durable nor
 * checkpointed: after the last batch the caller runs history_sync() and
 * history_checkpoint(). The counts in *ret_records and *ret_artifacts (each
 * may be NULL). Returns 1 when a full batch went (there may be more), 0
 * when none is left, -EBUSY, or -EIO. */
int history_erase_session_batch(
        History *h, const SessionKey *session, unsigned batch, unsigned *ret_records, unsigned *ret_artifacts);

/* Whether the session has a record whose query still runs: 1, 0, -EIO. */
int history_session_running(History *h, const SessionKey *session);

/* Copy the write-ahead log into the main file and truncate it to 0 bytes
 * (wal_checkpoint(TRUNCATE)). Returns 0 or -EIO. */
int history_checkpoint(History *h);

/* Whether secure_delete is on for the store's connection: 1, 0, or -EIO. */
int history_secure_delete(History *h);

typedef struct HistoryArtifact {
        char *name;
        char *media_type;
        char sha256[65];
        void *data;
        size_t size;
} HistoryArtifact;

void history_artifact_done(HistoryArtifact *a);

/* The artifact id, if its query belongs to session. Returns 0 and *ret
 * filled (free with history_artifact_done()), -ENOENT, -ENOMEM, -EIO. */
int history_get_artifact(History *h, const char *id, const SessionKey *session, HistoryArtifact *ret);

/* Up to size bytes of the artifact id, if its query belongs to session,
 * from offset on, into buf: 0 and their number in *ret_n (0 at or past
 * the end), -ENOENT, -EIO. Reads only those bytes (the blob's pages), so
 * an artifact of any size is read in bounded memory, a piece at a time;
 * no read stays open between calls. */
int history_read_artifact(
        History *h,
        const char *id,
        const SessionKey *session,
        uint64_t offset,
        void *buf,
        size_t size,
        size_t *ret_n);

/* Keep one artifact of the query id (API.md 9), with the bytes read from
 * a->fd (borrowed; read with pread() from offset 0, exactly a->size_bytes,
 * streamed into the blob without holding the file in memory). a->name and
 * a->media_type are already made safe (src/sandbox/files.h); a->sha256 is
 * 64 hex digits of those bytes. The query's record then lists it and GET
 * /api/v1/artifacts/{id} serves it. Returns 0 and the new id ("af_" + 32
 * hex digits) in ret_id, -ENOENT (no such query), -EFBIG (above SQLite's
 * blob limit, 1e9 bytes), -EIO (the file was shorter, or the store
 * failed), -EINVAL. */
#define HISTORY_ARTIFACT_ID_MAX 40
int history_add_artifact(
        History *h, const char *query_id, const Artifact *a, char ret_id[static HISTORY_ARTIFACT_ID_MAX]);

/* ---- the store under faults (wikiwebd(8) "When the disk fills") ---- */

/* A write the store could not make is said once, in words, and the
 * store's condition is kept: the negative errno of the last failed write
 * (cleared by the next write that lands), whether the file was found
 * damaged, and the outcomes waiting in memory to land (history_finish()). */

/* Outcomes kept in memory at most, and their bytes: past either,
 * history_check_writable() refuses new records. */
#define HISTORY_PENDING_MAX 32u
#define HISTORY_PENDING_BYTES_MAX (32u * 1024u * 1024u)

typedef enum HistoryStorageState {
        HISTORY_STORAGE_OK,       /* "ok" */
        HISTORY_STORAGE_DEGRADED, /* "degraded": writes fail, outcomes wait, or space is low */
        HISTORY_STORAGE_FAILED,   /* "failed": the file is damaged */
        _HISTORY_STORAGE_STATE_MAX,
        _HISTORY_STORAGE_STATE_INVALID = -EINVAL,
} HistoryStorageState;

const char *history_storage_state_to_string(HistoryStorageState s);

typedef struct HistoryStorage {
        HistoryStorageState state;
        /* The cause in words when the state is not ok ("no space left on
         * the state directory", ...), static or the store's: valid until
         * the next call into the store. */
        const char *cause;
        int fault;              /* the last failed write's -ENOSPC, -EROFS, -EACCES, -EIO, -EUCLEAN; 0 */
        bool damaged;           /* quick_check or SQLite found the file damaged */
        size_t n_pending;       /* outcomes waiting in memory to land */
        uint64_t writes_failed; /* since the store was opened */
        uint64_t free_bytes;    /* of the state directory's file system, UINT64_MAX when not known */
        uint64_t refused;       /* history_check_writable() refusals since the store was opened */
} HistoryStorage;

/* The condition now. min_free_bytes: free space below it (and above 0)
 * is "degraded" (WIKI_WEB_STATE_MIN_FREE_BYTES; 0: never). */
void history_get_storage(History *h, uint64_t min_free_bytes, HistoryStorage *ret);

/* The words of a fault: "no space left on the state directory", ... */
const char *history_fault_to_string(int fault);

/* Whether the store can take a new record now: 0, or the fault that
 * stops it (-ENOSPC, -EROFS, -EACCES, -EIO, -EUCLEAN; -ENOBUFS when the
 * outcomes waiting are at their bound), with its words in *ret_cause
 * (static or the store's). A refusal is counted, and said in the journal
 * only when the condition ends (history_retry()). */
int history_check_writable(History *h, const char **ret_cause);

/* Land the outcomes waiting in memory (durably), or, with none waiting,
 * try one small write to learn whether the fault is over. Returns the
 * number of outcomes still waiting (>= 0), or, when nothing waits and the
 * probe failed, the fault. */
int history_retry(History *h);

/* Whether a retry is worth it: a fault or an outcome waiting. */
bool history_needs_retry(History *h);

/* A quick_check that another thread may stop (history_quick_check_stop():
 * sqlite3_interrupt() of its connection). */
typedef struct HistoryQuickCheck HistoryQuickCheck;
int history_quick_check_new(HistoryQuickCheck **ret);
HistoryQuickCheck *history_quick_check_free(HistoryQuickCheck *c);
void history_quick_check_stop(HistoryQuickCheck *c);

/* PRAGMA quick_check of the store's file on a connection of its own,
 * read-only: made to run on another thread (it reads the whole file,
 * minutes at 10^6 records) and touches nothing of the store but its path.
 * Returns 0 and NULL in *ret_problem when the file is sound, 0 and what
 * SQLite found (a new string) when it is not, -ECANCELED once c (NULL:
 * none) was stopped, or another negative errno when it could not run. */
int history_quick_check_path(const char *path, HistoryQuickCheck *c, char **ret_problem);

/* The database file's path, owned by the store. */
const char *history_path(History *h);

/* What the check found: the store is damaged from now on (health
 * "failed", every write refused). problem: SQLite's words. */
void history_set_damaged(History *h, const char *problem);

#if ENABLE_TEST_FAULTS
/* The test fault of the store's unit test: the n-th write from now (1:
 * the next) and the count - 1 after it fail with code (SQLITE_IOERR or
 * SQLITE_FULL), as if SQLite had returned it. n 0: off. */
void history_set_test_write_fault(History *h, int code, unsigned n, unsigned count);
#endif

/* ---- conversations (API.md 7 and 9) ---- */

/* Turns read at most by history_get_conversation()'s callers: the
 * conversation a follow-up continues, an export, a shared view. */
#define HISTORY_CONVERSATION_MAX_TURNS 100u

/* The conversation up to and including the session's record id: the
 * records reached from it through their follow_up links, oldest first, at
 * most max (the newest ones). A link to a record that is gone ends it.
 * Returns 0 with *ret (free with history_conversation_free_records()) and
 * *ret_n >= 1, -ENOENT (id is not the session's), -EINVAL (max 0),
 * -ENOMEM, -EIO. */
int history_get_conversation(
        History *h, const char *id, const SessionKey *session, size_t max, HistoryRecord **ret, size_t *ret_n);
void history_conversation_free_records(HistoryRecord *records, size_t n);

/* Whether a record of session follows id (its follow_up) and had ended
 * (not running, finished_at at most ended_by, CLOCK_REALTIME): 1, 0, -EIO.
 * A record without one is the last turn of its conversation. */
int history_has_follower(History *h, const char *id, const SessionKey *session, usec_t ended_by);

/* The links of one record kept at most; a new one beyond that revokes the
 * oldest. */
#define HISTORY_SHARES_MAX 20
#define HISTORY_SHARE_DIGEST_SIZE 32

/* A share link of the session's ended record id, known by the SHA-256 of
 * its token (the token itself is never stored). Durable when it returns.
 * Returns 0, -ENOENT (not the session's), -EBUSY (still running), -EIO. */
int history_share_add(
        History *h,
        const char *id,
        const SessionKey *session,
        const uint8_t token_sha256[static HISTORY_SHARE_DIGEST_SIZE],
        usec_t created_at);

/* Revoke every link of the session's record id. Returns how many there
 * were (>= 0), -ENOENT (not the session's record), -EIO. Deleting a record
 * (history_delete()) deletes its links too. */
int history_share_revoke(History *h, const char *id, const SessionKey *session);

/* The record a link's token digest shares, and the session it belongs to.
 * Returns 0, -ENOENT (no such link: never made, revoked, or its record
 * deleted), -EIO. */
int history_share_find(
        History *h,
        const uint8_t token_sha256[static HISTORY_SHARE_DIGEST_SIZE],
        char ret_id[static QUERY_ID_MAX],
        SessionKey *ret_session);
