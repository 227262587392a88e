/* SPDX-License-Identifier: MIT */
#include <assert.h>
/* json-c here only checks the sources a caller hands to history_finish()
 * (is_json_array()) and reads the given titles the store wrote itself;
 * rendering records is src/api/render.c's. */
#include <json-c/json.h>
#include <limits.h>
#include <pthread.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "shared/fault.h"
#include "shared/json-util.h"
#include "shared/log.h"
#include "shared/macro.h"
#include "shared/parse-util.h"
#include "shared/random-util.h"
#include "shared/strv.h"
#include "shared/user-key.h"
#include "store/wording.h"
#include "store/history-internal.h"
#include "store/history.h"
#include "store/sync-worker.h"

/* Schema version 5. The records keep their insertion order in seq, which
 * orders a listing (newest first) and makes its cursor: a cursor is the seq
 * of the last record of the previous page, in decimal. Version 2 lacks the
 * column citations, version 1 also the column sandbox; opening such a file
 * adds them in one transaction (NULL and '[]' in its records). A new file
 * is made as version 3 (schema_sql), then each later step runs in turn
 * (schema_steps), as it does for an older file. */
#define SCHEMA_VERSION 10
#define SCHEMA_VERSION_SQL "PRAGMA user_version = 10"

static const char schema_sql[] =
        "CREATE TABLE queries ("
        "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
        "  id TEXT NOT NULL UNIQUE,"
        "  session BLOB NOT NULL CHECK (length(session) = 32),"
        "  status TEXT NOT NULL CHECK (status IN ('running', 'succeeded', 'failed')),"
        "  question TEXT NOT NULL,"
        "  answer TEXT,"
        "  sources TEXT NOT NULL DEFAULT '[]',"
        "  error_code TEXT,"
        "  error_message TEXT,"
        "  queue_ms INTEGER NOT NULL DEFAULT 0,"
        "  wiki_ms INTEGER NOT NULL DEFAULT 0,"
        "  model_ms INTEGER NOT NULL DEFAULT 0,"
        "  sandbox_ms INTEGER NOT NULL DEFAULT 0,"
        "  cleanup_ms INTEGER NOT NULL DEFAULT 0,"
        "  total_ms INTEGER NOT NULL DEFAULT 0,"
        "  model TEXT NOT NULL DEFAULT '',"
        "  prompt_tokens INTEGER NOT NULL DEFAULT 0,"
        "  completion_tokens INTEGER NOT NULL DEFAULT 0,"
        "  created_at INTEGER NOT NULL,"
        "  finished_at INTEGER,"
        "  sandbox TEXT,"
        "  citations TEXT NOT NULL DEFAULT '[]'"
        ");"
        "CREATE INDEX queries_by_session ON queries (session, seq);"
        "CREATE TABLE artifacts ("
        "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
        "  id TEXT NOT NULL UNIQUE,"
        "  query_id TEXT NOT NULL REFERENCES queries (id) ON DELETE CASCADE,"
        "  name TEXT NOT NULL,"
        "  media_type TEXT NOT NULL,"
        "  size_bytes INTEGER NOT NULL,"
        "  sha256 TEXT NOT NULL CHECK (length(sha256) = 64),"
        "  data BLOB NOT NULL"
        ");"
        "CREATE INDEX artifacts_by_query ON artifacts (query_id, seq);";

/* Version 6: what reached a record's model besides its own sources (API.md
 * 9 "Share"): the titles of every page the turns given to it as
 * conversation had read (a JSON array of strings, each once), copied when
 * a follow-up begins from the record it follows (that record's sources
 * and its own given titles), so that it holds the whole chain's however
 * long the chain and whatever is deleted later. Records made before know
 * none ('[]'). */
static const char schema_step_6[] = "ALTER TABLE queries ADD COLUMN given_titles TEXT NOT NULL DEFAULT '[]';";

/* Version 7: what a record says of how it was made (API.md 9 "notes"):
 * sentences for the asker, a JSON array of strings, written when the
 * record begins (a follow-up's turns left out because the asker may no
 * longer read what they read, API.md 7). Records made before have none. */
static const char schema_step_7[] = "ALTER TABLE queries ADD COLUMN notes TEXT NOT NULL DEFAULT '[]';";

/* Version 8: personal access tokens (API.md "Access tokens",
 * store/tokens.h): each by the SHA-256 of its secret (never the secret),
 * with the key of the person it acts for (user_key, the SessionKey of
 * their records) and their name, which a request carrying it is given,
 * sealed under the token (user_sealed: the file alone does not say who
 * holds a token). */
static const char schema_step_8[] =
        "CREATE TABLE tokens ("
        "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
        "  id TEXT NOT NULL UNIQUE,"
        "  user_key BLOB NOT NULL CHECK (length(user_key) = 32),"
        "  user_sealed BLOB NOT NULL CHECK (length(user_sealed) = 256),"
        "  name TEXT NOT NULL,"
        "  token_sha256 BLOB NOT NULL UNIQUE CHECK (length(token_sha256) = 32),"
        "  created_at INTEGER NOT NULL,"
        "  expires_at INTEGER NOT NULL,"
        "  last_used_at INTEGER"
        ");"
        "CREATE INDEX tokens_by_user ON tokens (user_key, seq);";

/* Version 5: what the unanswered report needs (API.md 9.1, 9.2). Each
 * record, when it finishes, keeps the searches the model made (a JSON
 * array of {"query", "results"}), the key of its question's wording
 * (store/wording.h) and its signals (HISTORY_SIGNAL_*), so that the
 * report reads one covering index instead of the records' JSON. Records
 * finished before keep no key and no signals: they are not in the
 * report. The asker's feedback is a table of its own, one row per record,
 * deleted with it. */
static const char schema_step_5[] =
        "ALTER TABLE queries ADD COLUMN searches TEXT NOT NULL DEFAULT '[]';"
        "ALTER TABLE queries ADD COLUMN wording_key TEXT;"
        "ALTER TABLE queries ADD COLUMN signals INTEGER NOT NULL DEFAULT 0;"
        /* Covering for the report: it groups by key in index order and
         * never reads the records' rows (which hold the answers). */
        "CREATE INDEX queries_by_wording ON queries (wording_key, finished_at, signals, created_at, id)"
        "  WHERE wording_key IS NOT NULL;"
        "CREATE TABLE feedback ("
        "  query_id TEXT PRIMARY KEY REFERENCES queries (id) ON DELETE CASCADE,"
        "  rating TEXT NOT NULL CHECK (rating IN ('up', 'down')),"
        "  reason TEXT,"
        "  comment TEXT,"
        "  rated_at INTEGER NOT NULL"
        ");";

/* Version 4: conversations (API.md 7 and 9): a follow-up names the record
 * it follows (follow_up) and every record its conversation (the id of its
 * first question; a record made before is its own); the shares of a
 * conversation (API.md 9 "Export and share"), by the SHA-256 of their
 * token (never the token), deleted with their record. */
static const char schema_step_4[] =
        "ALTER TABLE queries ADD COLUMN follow_up TEXT;"
        "ALTER TABLE queries ADD COLUMN conversation TEXT;"
        "UPDATE queries SET conversation = id;"
        "CREATE INDEX queries_by_follow_up ON queries (follow_up);"
        "CREATE TABLE shares ("
        "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
        "  token_sha256 BLOB NOT NULL UNIQUE CHECK (length(token_sha256) = 32),"
        "  query_id TEXT NOT NULL REFERENCES queries (id) ON DELETE CASCADE,"
        "  created_at INTEGER NOT NULL"
        ");"
        "CREATE INDEX shares_by_query ON shares (query_id, seq);";

/* Version 9: who a record belongs to is keyed with the secret of the
 * installation (shared/user-key.h): the column session was the SHA-256 of
 * a session token or of "wikiweb-user", a NUL and a person's name, which
 * anyone holding the file could compute for a name they guess; it is now
 * HMAC-SHA-256(secret, that), the key the daemon computes from then on.
 * The old key is all the new one needs, so every record is re-keyed here,
 * at once, whoever it belongs to (a token's key and a name's are not told
 * apart, nor need to be), and so is the owner of every access token: no
 * old key is left in the file. wikiweb_rekey()
 * is the store's own SQL function (history_open()). */
static const char schema_step_9[] =
        "UPDATE queries SET session = wikiweb_rekey(session);"
        "UPDATE tokens SET user_key = wikiweb_rekey(user_key);";

/* Version 10: indexes that make the history's upkeep grow with what it
 * touches, not with the whole history (docs/PERFORMANCE.md, 10^6
 * records): the retention's batches find the oldest records by
 * created_at; the start's recovery finds the records still running in a
 * partial index that holds only those (a handful), not by a scan; the
 * unanswered report reads the records finished in its window by
 * finished_at, and the "down" ratings given in it by rated_at (a rating
 * is given after its record finished, so one of a record finished in the
 * window was given in it). IF NOT EXISTS: a file set back to an older
 * version by hand keeps them and still opens. */
static const char schema_step_10[] =
        "CREATE INDEX IF NOT EXISTS queries_by_created ON queries (created_at, id);"
        "CREATE INDEX IF NOT EXISTS queries_running ON queries (id) WHERE status = 'running';"
        "CREATE INDEX IF NOT EXISTS queries_by_finished ON queries (finished_at, wording_key, signals, created_at)"
        "  WHERE wording_key IS NOT NULL AND signals != 0;"
        "CREATE INDEX IF NOT EXISTS feedback_down ON feedback (rated_at) WHERE rating = 'down';";

/* The steps after version 3, in order: a file of version v runs every
 * step above v, in one transaction with the new version. */
static const struct {
        int version;
        const char *sql;
} schema_steps[] = {
        { 4, schema_step_4 }, { 5, schema_step_5 }, { 6, schema_step_6 },   { 7, schema_step_7 },
        { 8, schema_step_8 }, { 9, schema_step_9 }, { 10, schema_step_10 },
};

#define RECORD_COLUMNS                                                                                      \
        "seq, id, status, question, answer, sources, error_code, error_message, queue_ms, wiki_ms, "        \
        "model_ms, sandbox_ms, cleanup_ms, total_ms, model, prompt_tokens, completion_tokens, created_at, " \
        "finished_at, sandbox, citations, rating, reason, comment, rated_at, follow_up, conversation, "     \
        "given_titles, notes"

/* The records with their feedback. */
#define RECORD_FROM "queries LEFT JOIN feedback ON feedback.query_id = queries.id"

/* The statements run per query or per request, prepared once per
 * connection (SQLITE_PREPARE_PERSISTENT) on first use and kept until
 * history_free(): compiling them again on every call was a third of the
 * CPU of a query's completion on the event loop (bench-pipeline). */
typedef enum Statement {
        STMT_BEGIN,
        STMT_COMMIT,
        STMT_ROLLBACK,
        STMT_INSERT,
        STMT_FINISH,
        STMT_ARTIFACTS_OF,
        STMT_GET_RECORD,
        STMT_IS_RUNNING,
        STMT_LIST,
        STMT_DELETE,
        STMT_GET_ARTIFACT,
        STMT_ADD_ARTIFACT,
        STMT_SET_FEEDBACK,
        STMT_QUESTION,
        STMT_SHARE_ADD,
        STMT_SHARE_TRIM,
        STMT_SHARE_REVOKE,
        STMT_SHARE_FIND,
        STMT_HAS_FOLLOWER,
        STMT_ARTIFACT_ROWID,
        _STMT_MAX,
} Statement;

static const char *const statement_sql[_STMT_MAX] = {
        [STMT_BEGIN] = "BEGIN IMMEDIATE",
        [STMT_COMMIT] = "COMMIT",
        [STMT_ROLLBACK] = "ROLLBACK",
        [STMT_INSERT] =
                "INSERT INTO queries (id, session, status, question, created_at, follow_up, conversation,"
                " given_titles, notes)"
                " VALUES (?1, ?2, 'running', ?3, ?4, ?5, coalesce(?6, ?1), coalesce((SELECT json_group_array(t)"
                " FROM (SELECT g.value AS t FROM queries f, json_each(f.given_titles) g WHERE f.id = ?5"
                " UNION SELECT json_extract(v.value, '$.title') FROM queries f, json_each(coalesce(f.sources, '[]')) v"
                " WHERE f.id = ?5) WHERE t IS NOT NULL AND typeof(t) = 'text'), '[]'), ?7)",
        [STMT_FINISH] =
                "UPDATE queries SET status = ?2, answer = ?3, sources = ?4, error_code = ?5,"
                " error_message = ?6, queue_ms = ?7, wiki_ms = ?8, model_ms = ?9, sandbox_ms = ?10,"
                " cleanup_ms = ?11, total_ms = ?12, model = ?13, prompt_tokens = ?14,"
                " completion_tokens = ?15, finished_at = ?16, sandbox = ?17, citations = ?18,"
                " searches = ?19, wording_key = ?20, signals = ?21"
                " WHERE id = ?1 AND status = 'running'",
        [STMT_ARTIFACTS_OF] =
                "SELECT id, name, media_type, size_bytes, sha256 FROM artifacts"
                " WHERE query_id = ?1 ORDER BY seq",
        [STMT_GET_RECORD] = "SELECT " RECORD_COLUMNS " FROM " RECORD_FROM " WHERE id = ?1 AND session = ?2",
        [STMT_IS_RUNNING] = "SELECT status = 'running' FROM queries WHERE id = ?1 AND session = ?2",
        [STMT_LIST] = "SELECT " RECORD_COLUMNS " FROM " RECORD_FROM
                      " WHERE session = ?1 AND seq < ?2"
                      " ORDER BY seq DESC LIMIT ?3",
        [STMT_DELETE] = "DELETE FROM queries WHERE id = ?1 AND session = ?2 AND status != 'running'",
        [STMT_GET_ARTIFACT] =
                "SELECT a.name, a.media_type, a.sha256, a.data FROM artifacts a"
                " JOIN queries q ON q.id = a.query_id WHERE a.id = ?1 AND q.session = ?2",
        [STMT_ADD_ARTIFACT] =
                "INSERT INTO artifacts (id, query_id, name, media_type, size_bytes, sha256, data)"
                " SELECT ?1, id, ?2, ?3, ?4, ?5, zeroblob(?4) FROM queries WHERE id = ?6",
        [STMT_SET_FEEDBACK] =
                "INSERT OR REPLACE INTO feedback (query_id, rating, reason, comment, rated_at)"
                " VALUES (?1, ?2, ?3, ?4, ?5)",
        [STMT_QUESTION] = "SELECT question FROM queries WHERE id = ?1",
        /* A follow-up of ?1 that had ended by ?3 (queries_by_follow_up). */
        [STMT_HAS_FOLLOWER] =
                "SELECT 1 FROM queries WHERE follow_up = ?1 AND session = ?2"
                " AND status != 'running' AND finished_at <= ?3 LIMIT 1",
        [STMT_ARTIFACT_ROWID] =
                "SELECT a.rowid, a.size_bytes FROM artifacts a"
                " JOIN queries q ON q.id = a.query_id WHERE a.id = ?1 AND q.session = ?2",
        [STMT_SHARE_ADD] = "INSERT INTO shares (token_sha256, query_id, created_at) VALUES (?1, ?2, ?3)",
        /* The oldest links of the record beyond HISTORY_SHARES_MAX go. */
        [STMT_SHARE_TRIM] =
                "DELETE FROM shares WHERE query_id = ?1 AND seq NOT IN"
                " (SELECT seq FROM shares WHERE query_id = ?1 ORDER BY seq DESC LIMIT ?2)",
        [STMT_SHARE_REVOKE] = "DELETE FROM shares WHERE query_id = ?1",
        [STMT_SHARE_FIND] =
                "SELECT s.token_sha256, q.id, q.session FROM shares s JOIN queries q ON q.id = s.query_id"
                " WHERE s.token_sha256 = ?1",
};

/* An outcome that could not be written, kept until it lands: the
 * HistoryOutcome with its strings owned, and the artifacts not yet kept
 * (their files held open). */
typedef struct PendingOutcome {
        char *id;
        HistoryOutcome o;
        char *strings[8];    /* what o's strings point to, freed with it */
        Artifact *artifacts; /* not yet kept, owned (o.artifacts points here) */
        size_t n_artifacts;
        size_t size;  /* its bytes, for HISTORY_PENDING_BYTES_MAX */
        bool landing; /* a connection is writing it: nobody else touches it */
} PendingOutcome;

/* What the store's connections share (the loop's, the worker's:
 * history_open_worker()): the condition of the storage and the outcomes
 * waiting. Read and changed under lock, which is never held across a
 * call into SQLite. */
typedef struct HistoryCondition {
        pthread_mutex_t lock;
        unsigned n_ref;

        int fault;               /* the last failed write's, 0 once one lands */
        usec_t fault_since;      /* monotonic */
        char *damage;            /* what was found damaged, NULL while sound */
        uint64_t writes_failed;  /* since open */
        uint64_t refused;        /* history_check_writable() refusals since open */
        uint64_t refused_before; /* ... when the fault began */
        PendingOutcome **pending;
        size_t n_pending, pending_bytes;

        /* The test fault: the write_fault_n-th write fails, and the count after it. */
        int write_fault_code;
        unsigned write_fault_n, write_fault_count;
} HistoryCondition;

struct History {
        sqlite3 *db;
        UserKeySecret user_secret; /* what wikiweb_rekey() keys with */
        sqlite3_stmt *stmts[_STMT_MAX];
        char *path;      /* the database file */
        char *wal_path;  /* its write-ahead log */
        char *directory; /* the state directory */
        int sync_fd;     /* the file history_sync_fd() returned, or -1 */

        HistoryCondition *c; /* shared with the store's other connection */
        int forced_code;     /* a result code the next db_error() reports instead of SQLite's */
        char cause[256];     /* the words of history_get_storage() */

        int last_code; /* the result code of the last db_error() */
        bool opened;   /* history_open() is done: faults are said from now on */
        bool worker;   /* the worker's connection (history_open_worker()) */
};

static void cond_lock(History *h) {
        pthread_mutex_lock(&h->c->lock);
}

static void cond_unlock(History *h) {
        pthread_mutex_unlock(&h->c->lock);
}

/* The fault of the storage now (0: none), read under lock. */
static int current_fault(History *h) {
        int fault;

        cond_lock(h);
        fault = h->c->fault;
        cond_unlock(h);
        return fault;
}

/* Whether a write that failed with -EIO met the storage's fault (full,
 * read-only, an I/O error) rather than a damaged file or a bug: what an
 * outcome waits out in memory. */
static bool storage_fault(History *h) {
        int fault = current_fault(h);

        return fault < 0 && fault != -EUCLEAN;
}

static int finish(History *h, const char *id, const HistoryOutcome *o, bool durable);
static int add_artifact(
        History *h, const char *query_id, const Artifact *a, char ret_id[static HISTORY_ARTIFACT_ID_MAX]);
static void pending_done(PendingOutcome *p);
static void pending_last_chance(History *h);

/* Give a cached statement back: reset (which also ends the read
 * transaction a SELECT left open at a row) with its bindings cleared (they
 * point into the caller's strings, SQLITE_STATIC). */
static void stmt_release(sqlite3_stmt *s) {
        (void) sqlite3_reset(s);
        (void) sqlite3_clear_bindings(s);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(sqlite3_stmt *, stmt_release);

/* The fault an SQLite result code means for the store: -ENOSPC, -EROFS,
 * -EACCES, -EIO, -EUCLEAN (damaged), or 0 when it is none of the
 * storage's (a constraint, a busy lock, a bug). system_errno: the OS's
 * errno of the failure, 0 when not known. */
static int fault_of(int code, int system_errno) {
        switch (code & 0xff) {
        case SQLITE_FULL:
                return -ENOSPC;
        case SQLITE_READONLY:
                return -EROFS;
        case SQLITE_CORRUPT:
        case SQLITE_NOTADB:
                return -EUCLEAN;
        case SQLITE_IOERR:
        case SQLITE_CANTOPEN:
                /* SQLite says "disk I/O error" also when a file (the -shm)
                 * cannot grow for lack of space: the OS's errno says which. */
                if (system_errno == ENOSPC || system_errno == EDQUOT)
                        return -ENOSPC;
                if (system_errno == EROFS)
                        return -EROFS;
                if (system_errno == EACCES || system_errno == EPERM)
                        return -EACCES;
                return -EIO;
        default:
                return 0;
        }
}

const char *history_fault_to_string(int fault) {
        switch (fault) {
        case 0:
                return "ok";
        case -ENOSPC:
                return "no space left on the state directory";
        case -EROFS:
                return "the state directory is read-only";
        case -EACCES:
                return "the state directory is not writable (permission denied)";
        case -EIO:
                return "the state directory's file system reported an I/O error";
        case -EUCLEAN:
                return "the history database is damaged";
        case -ENOBUFS:
                return "too many answers are waiting to be stored";
        default:
                return "the history cannot be written";
        }
}

/* A write failed with fault: counted, and said once when the condition
 * begins (or changes), not for every write while it lasts. */
static void note_fault(History *h, int fault, const char *what, int code) {
        bool said;

        cond_lock(h);
        h->c->writes_failed++;
        if (fault == -EUCLEAN && !h->c->damage)
                h->c->damage = strdup("SQLite reported the file as malformed");
        said = fault == h->c->fault || !h->opened;
        if (!said && h->c->fault == 0) {
                h->c->fault_since = now(CLOCK_MONOTONIC);
                h->c->refused_before = h->c->refused;
        }
        h->c->fault = fault;
        cond_unlock(h);
        if (said)
                return;
        log_error(
                "History store: cannot %s in %s: %s (SQLite: %s); new queries are refused until writes land again.",
                what,
                h->path,
                history_fault_to_string(fault),
                sqlite3_errstr(code));
}

/* A write landed: the condition, if any, is over; said once, with what
 * was refused meanwhile. */
static void note_write_landed(History *h) {
        uint64_t refused;
        usec_t since;
        int fault;

        cond_lock(h);
        fault = h->c->fault;
        since = h->c->fault_since;
        refused = h->c->refused - h->c->refused_before;
        h->c->fault = 0;
        cond_unlock(h);
        if (fault == 0)
                return;
        log_notice(
                "History store: writes land again after %" PRIu64 " s (%s before); %" PRIu64
                " %s refused meanwhile.",
                (now(CLOCK_MONOTONIC) - since) / USEC_PER_SEC,
                history_fault_to_string(fault),
                refused,
                refused == 1 ? "request was" : "requests were");
}

/* Log an SQLite failure (its message names no secret: the statements carry
 * only bound parameters) and return -EIO. A failure of the storage (full,
 * read-only, I/O error, damaged) is said in words, once per condition
 * (note_fault()). */
static int db_error(History *h, const char *what) {
        int code = h->forced_code ? h->forced_code : sqlite3_extended_errcode(h->db);
        int fault = fault_of(code, h->forced_code ? 0 : sqlite3_system_errno(h->db));

        h->forced_code = 0;
        h->last_code = code;
        if (fault == 0) {
                log_error("History store: %s: %s", what, sqlite3_errmsg(h->db));
                return -EIO;
        }
        log_debug("History store: cannot %s: %s", what, history_fault_to_string(fault));
        note_fault(h, fault, what, code);
        return -EIO;
}

/* sqlite3_step() of a write: the test fault first, and a write that
 * lands ends a fault. */
static int step_write(History *h, sqlite3_stmt *s) {
        int r;

        if (TEST_FAULT(h->c->write_fault_n > 0)) {
                int code = 0;

                cond_lock(h);
                if (h->c->write_fault_n > 0 && --h->c->write_fault_n == 0) {
                        code = h->c->write_fault_code;
                        if (h->c->write_fault_count > 1) {
                                h->c->write_fault_n = 1;
                                h->c->write_fault_count--;
                        }
                }
                cond_unlock(h);
                if (code != 0) {
                        h->forced_code = code;
                        return code;
                }
        }
        r = sqlite3_step(s);
        if (r == SQLITE_DONE)
                note_write_landed(h);
        return r;
}

static int prepare(History *h, const char *sql, sqlite3_stmt **ret) {
        if (sqlite3_prepare_v2(h->db, sql, -1, ret, NULL) != SQLITE_OK)
                return db_error(h, "prepare");
        return 0;
}

/* The cached statement which, prepared on first use, in *ret; the caller
 * gives it back with stmt_release() (_cleanup_(stmt_releasep)). A
 * statement is never in use twice at once: -EBUSY if it were. */
static int statement(History *h, Statement which, sqlite3_stmt **ret) {
        assert((unsigned) which < _STMT_MAX);

        if (!h->stmts[which] &&
            sqlite3_prepare_v3(
                    h->db, statement_sql[which], -1, SQLITE_PREPARE_PERSISTENT, &h->stmts[which], NULL) !=
                    SQLITE_OK)
                return db_error(h, "prepare");
        if (sqlite3_stmt_busy(h->stmts[which]))
                return -EBUSY;
        *ret = h->stmts[which];
        return 0;
}

/* Run a cached statement without parameters and results (a PRAGMA, BEGIN,
 * COMMIT, ROLLBACK). */
static int exec_cached(History *h, Statement which) {
        _cleanup_(stmt_releasep) sqlite3_stmt *s = NULL;
        int r;

        r = statement(h, which, &s);
        if (r < 0)
                return r;
        r = sqlite3_step(s);
        if (r != SQLITE_DONE && r != SQLITE_ROW)
                return db_error(h, statement_sql[which]);
        return 0;
}

/* A transaction guard: _cleanup_(transaction_rollbackp) History *tx, set
 * to h once the transaction began, rolls it back on every return until it
 * is set to NULL after the commit (a failed COMMIT is rolled back too). */
static void transaction_rollback(History *h) {
        (void) exec_cached(h, STMT_ROLLBACK);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(History *, transaction_rollback);

static int exec(History *h, const char *sql) {
        if (sqlite3_exec(h->db, sql, NULL, NULL, NULL) != SQLITE_OK)
                return db_error(h, sql);
        return 0;
}

static int bind_session(sqlite3_stmt *s, int i, const SessionKey *session) {
        return sqlite3_bind_blob(s, i, session->bytes, sizeof(session->bytes), SQLITE_STATIC);
}

static int user_version(History *h, int *ret) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *s = NULL;
        int r;

        r = prepare(h, "PRAGMA user_version", &s);
        if (r < 0)
                return r;
        if (sqlite3_step(s) != SQLITE_ROW)
                return db_error(h, "read the schema version");
        *ret = sqlite3_column_int(s, 0);
        return 0;
}

/* What check_schema() found. */
enum {
        SCHEMA_CURRENT,
        SCHEMA_CREATE,        /* an empty file */
        SCHEMA_MIGRATE_1,     /* version 1 */
        SCHEMA_MIGRATE_2,     /* version 2 */
        SCHEMA_MIGRATE_STEPS, /* version 3 or later, below SCHEMA_VERSION: schema_steps only */
};

static int another_database(History *h) {
        log_error(
                "History store: %s holds another application's SQLite database, not a wikiweb history; "
                "refusing to touch it. Move it away, or point WIKI_WEB_STATE_DIRECTORY at wikiweb's own "
                "directory.",
                h->path);
        return -ENOTSUP;
}

/* Decide from the file as it is, before changing anything in it: a schema
 * of a newer wikiwebd, or a database that is not a wikiweb history, is
 * refused and left untouched. Returns SCHEMA_CURRENT, SCHEMA_CREATE,
 * SCHEMA_MIGRATE_1, SCHEMA_MIGRATE_2, or a negative errno. */
static int check_schema(History *h) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *s = NULL;
        int version, r;

        r = user_version(h, &version);
        if (r < 0)
                return r;
        if (version > 0 && version <= SCHEMA_VERSION) {
                r = prepare(
                        h, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'queries'", &s);
                if (r < 0)
                        return r;
                if (sqlite3_step(s) != SQLITE_ROW)
                        return db_error(h, "read the schema");
                if (sqlite3_column_int(s, 0) != 1)
                        return another_database(h);
                (void) sqlite3_finalize(s);
                s = NULL;
        }
        if (version == SCHEMA_VERSION)
                return SCHEMA_CURRENT;
        if (version == 1)
                return SCHEMA_MIGRATE_1;
        if (version == 2)
                return SCHEMA_MIGRATE_2;
        if (version >= 3 && version < SCHEMA_VERSION)
                return SCHEMA_MIGRATE_STEPS;
        if (version > SCHEMA_VERSION) {
                log_error(
                        "History store: schema version %d is newer than this wikiwebd's (%d); refusing to touch it.",
                        version,
                        SCHEMA_VERSION);
                return -ENOTSUP;
        }

        r = prepare(h, "SELECT count(*) FROM sqlite_master", &s);
        if (r < 0)
                return r;
        if (sqlite3_step(s) != SQLITE_ROW)
                return db_error(h, "read the schema");
        if (sqlite3_column_int(s, 0) != 0)
                return another_database(h);
        return SCHEMA_CREATE;
}

/* Run sql (a file at version from), then every step of schema_steps above
 * version from, then set the schema version: false at the first that
 * fails, its error left on the connection for db_error(). */
static bool schema_statements_run(History *h, const char *sql, int from) {
        if (sql && sqlite3_exec(h->db, sql, NULL, NULL, NULL) != SQLITE_OK)
                return false;
        for (size_t i = 0; i < ELEMENTSOF(schema_steps); i++)
                if (schema_steps[i].version > from &&
                    sqlite3_exec(h->db, schema_steps[i].sql, NULL, NULL, NULL) != SQLITE_OK)
                        return false;
        return sqlite3_exec(h->db, SCHEMA_VERSION_SQL, NULL, NULL, NULL) == SQLITE_OK;
}

/* schema_statements_run() in one transaction, rolled back if one fails. */
static int change_schema(History *h, const char *sql, int from, const char *what) {
        int r;

        r = exec(h, "BEGIN IMMEDIATE");
        if (r < 0)
                return r;
        if (!schema_statements_run(h, sql, from)) {
                r = db_error(h, what);
                (void) sqlite3_exec(h->db, "ROLLBACK", NULL, NULL, NULL);
                return r;
        }
        return exec(h, "COMMIT");
}

static int create_schema(History *h) {
        return change_schema(h, schema_sql, 3, "create the schema");
}

/* Version 1 to 2: whether run_python was offered (API.md 9 "sandbox"); not
 * known for the records already there (NULL). Version 2 to 3: the verified
 * citations (API.md 9 "citations"); none for the records already there.
 * Every step from the file's version on, in one transaction. */
static int migrate_schema(History *h, int from, int version) {
        static const char from_1[] =
                "ALTER TABLE queries ADD COLUMN sandbox TEXT;"
                "ALTER TABLE queries ADD COLUMN citations TEXT NOT NULL DEFAULT '[]';";
        static const char from_2[] = "ALTER TABLE queries ADD COLUMN citations TEXT NOT NULL DEFAULT '[]';";
        int r;

        r = change_schema(
                h,
                from == SCHEMA_MIGRATE_1         ? from_1 :
                        from == SCHEMA_MIGRATE_2 ? from_2 :
                                                   NULL,
                MAX(version, 3),
                "add the new columns");
        if (r < 0)
                return r;
        log_info("History store: schema version %d updated to %d.", version, SCHEMA_VERSION);
        return 0;
}

/* A step of history_open() failed (and said why): which one, or, when
 * the storage failed, that. Returns error. */
static int history_open_failed(History *h, int error, const char *step) {
        if (h->c->fault == -EUCLEAN)
                log_error(
                        "History store: %s is damaged (SQLite found it malformed while it %s); wikiwebd does not "
                        "start on it. Recover it with sqlite3's .recover or restore it from a backup: wikiwebd(8), "
                        "\"When the database is damaged\".",
                        h->path,
                        step);
        else if (h->c->fault < 0)
                log_error(
                        "History store: %s is not usable: %s (while it %s).",
                        h->path,
                        history_fault_to_string(h->c->fault),
                        step);
        else
                log_error("History store: %s is not usable: %s.", h->path, step);
        /* The caller's line then says it too ("No space left on device"). */
        return IN_SET(h->c->fault, -ENOSPC, -EROFS, -EACCES) ? h->c->fault : error;
}

/* Before SQLite opens path: an existing file of 0 bytes (and no WAL with
 * content) is no history, and an empty one is not made of it; a state
 * directory that cannot be written is said as it is. */
static int check_before_open(const char *directory, const char *path, const char *wal_path) {
        struct stat st, wal;

        if (access(directory, W_OK) < 0) {
                if (errno == EROFS)
                        log_error(
                                "History store: the state directory %s is read-only; wikiwebd needs to write its history there.",
                                directory);
                else
                        log_error_errno(
                                errno, "History store: the state directory %s is not writable", directory);
                return -errno;
        }
        if (stat(path, &st) < 0)
                return errno == ENOENT ? 0 : log_error_errno(errno, "History store: cannot stat %s", path);
        if (!S_ISREG(st.st_mode)) {
                log_error("History store: %s is not a regular file.", path);
                return -EIO;
        }
        if (st.st_size == 0 && (stat(wal_path, &wal) < 0 || wal.st_size == 0)) {
                log_error(
                        "History store: %s exists but is empty (0 bytes): it holds no history, and wikiwebd does "
                        "not start a new one over it. Restore it from a backup, or, on a fresh install, remove it "
                        "(wikiwebd(8), \"When the database is damaged\").",
                        path);
                return -EIO;
        }
        return 0;
}

/* The settings of each connection of the store (history_open(),
 * history_open_worker()), after WAL mode. */
static int connection_settings(History *h) {
        int r;

        r = exec(h, "PRAGMA synchronous = NORMAL");
        if (r < 0)
                return history_open_failed(h, r, "set synchronous=NORMAL");
        /* 16 MiB of pages kept (SQLite's default is 2 MiB): the unanswered
         * report reads an index of about 8 MiB per 100,000 records, which
         * then stays in memory between reports (docs/PERFORMANCE.md). */
        r = exec(h, "PRAGMA cache_size = -16384");
        if (r < 0)
                return history_open_failed(h, r, "set the cache size");
        r = exec(h, "PRAGMA foreign_keys = ON");
        if (r < 0)
                return history_open_failed(h, r, "turned on foreign keys");
        /* What is deleted is overwritten with zeros, whatever the library's
         * build default: a deleted question leaves no copy in the file. */
        r = exec(h, "PRAGMA secure_delete = ON");
        if (r < 0)
                return history_open_failed(h, r, "turned on secure delete");
        return 0;
}

/* Records still "running" belong to a daemon that died: they failed. When
 * it died is not known; the last time the store knows it was alive is the
 * newest time written in the last 1,000 records, which is at least the
 * record's own start. finished_at is that time and total_ms counts up to it (the queue
 * wait plus what is known of the run): the downtime is not counted. */
static int recover(History *h, unsigned *ret) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *s = NULL;
        int r;

        r = prepare(
                h,
                /* The newest time among the last records: a query ends within
                 * its deadline, so no older record holds a later one. Read
                 * only when a record is still running (a non-correlated
                 * subquery is evaluated on first use). */
                "WITH last(t) AS (SELECT max(max(created_at, coalesce(finished_at, 0)))"
                " FROM (SELECT created_at, finished_at FROM queries ORDER BY seq DESC LIMIT 1000))"
                " UPDATE queries SET status = 'failed', error_code = 'execution_failed',"
                " error_message = 'The service stopped before the query''s outcome was stored',"
                " finished_at = max(created_at, (SELECT t FROM last)),"
                " total_ms = queue_ms + max(0, ((SELECT t FROM last) - created_at) / 1000)"
                " WHERE status = 'running'",
                &s);
        if (r < 0)
                return r;
        if (step_write(h, s) != SQLITE_DONE)
                return db_error(h, "recover running records");
        *ret = (unsigned) sqlite3_changes(h->db);
        return 0;
}

/* wikiweb_rekey(key): the key of schema step 9, HMAC-SHA-256 of the
 * secret over the 32 bytes of an old key; NULL for anything else (which
 * the column's CHECK then refuses). */
static void history_sql_rekey(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
        History *h = sqlite3_user_data(ctx);
        SessionKey k;

        if (argc != 1 || sqlite3_value_type(argv[0]) != SQLITE_BLOB ||
            sqlite3_value_bytes(argv[0]) != (int) sizeof k.bytes) {
                sqlite3_result_null(ctx);
                return;
        }
        memcpy(k.bytes, sqlite3_value_blob(argv[0]), sizeof k.bytes);
        if (user_key_seal(&h->user_secret, &k, &k) < 0) {
                sqlite3_result_error(ctx, "cannot compute the key", -1);
                return;
        }
        sqlite3_result_blob(ctx, k.bytes, sizeof k.bytes, SQLITE_TRANSIENT);
}

int history_open(const char *directory, History **ret, unsigned *ret_recovered) {
        UserKeySecret secret;
        int r;

        assert(directory);

        r = user_key_secret_load(directory, NULL, &secret, NULL);
        if (r < 0)
                return r;
        r = history_open_keyed(directory, &secret, ret, ret_recovered);
        explicit_bzero(&secret, sizeof secret);
        return r;
}

int history_open_keyed(
        const char *directory, const UserKeySecret *secret, History **ret, unsigned *ret_recovered) {
        _cleanup_(history_freep) History *h = NULL;
        _cleanup_free_ char *path = NULL;
        unsigned recovered = 0;
        int r, create, version = 0;

        assert(directory);
        assert(ret);

        if (asprintf(&path, "%s/history.sqlite3", directory) < 0)
                return -ENOMEM;

        h = calloc(1, sizeof *h);
        if (!h)
                return -ENOMEM;
        h->sync_fd = -1;
        h->c = calloc(1, sizeof *h->c);
        if (!h->c)
                return -ENOMEM;
        h->c->n_ref = 1;
        pthread_mutex_init(&h->c->lock, NULL);
        h->user_secret = *secret;
        if (asprintf(&h->wal_path, "%s-wal", path) < 0)
                return -ENOMEM;
        h->directory = strdup(directory);
        if (!h->directory)
                return -ENOMEM;
        h->path = TAKE_PTR(path);
        r = check_before_open(directory, h->path, h->wal_path);
        if (r < 0)
                return r;

        if (sqlite3_open_v2(
                    h->path, &h->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) !=
            SQLITE_OK) {
                log_error(
                        "History store: cannot open %s: %s",
                        h->path,
                        h->db ? sqlite3_errmsg(h->db) : "out of memory");
                return -EIO;
        }
        (void) sqlite3_extended_result_codes(h->db, 1);
        if (sqlite3_create_function(
                    h->db,
                    "wikiweb_rekey",
                    1,
                    SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_DIRECTONLY,
                    h,
                    history_sql_rekey,
                    NULL,
                    NULL) != SQLITE_OK)
                return history_open_failed(h, -EIO, "registered its functions");
        /* A busy database (another process holding a lock) is waited for
         * briefly rather than failing the request at once. */
        (void) sqlite3_busy_timeout(h->db, 5000);

        /* Then WAL: readers never wait for the writer. synchronous=NORMAL
         * by default: a commit is in the WAL, so it survives the daemon's
         * crash or kill (the recovery at the next start relies on that),
         * but is not fsync()ed. The writes whose loss a person would notice
         * (a completed record, a deletion) are then made durable with an
         * fdatasync() of the WAL (history_sync_fd()): what
         * synchronous=FULL adds to NORMAL in WAL mode, and it also makes
         * every earlier commit durable (the "running" record, the
         * artifacts). That is one sync per query instead of two, and the
         * query's completion does it off the event loop (history_finish_nosync(),
         * SyncWorker; ~4 ms on this machine's disk: bench-pipeline). */
        /* Each step's failure is logged by the step (db_error()), then
         * which step it was. */
        create = check_schema(h);
        if (create == -EIO && h->last_code == SQLITE_NOTADB) {
                log_error(
                        "History store: %s is not an SQLite database: its first bytes are not SQLite's header. "
                        "It is no wikiweb history, or it is damaged beyond what SQLite can read; move it away "
                        "and restore the history from a backup (wikiwebd(8), \"When the database is damaged\").",
                        h->path);
                return -EIO;
        }
        if (create >= 0 && user_version(h, &version) < 0)
                return history_open_failed(h, -EIO, "read its schema version");
        if (create == -ENOTSUP)
                return create;
        if (create < 0)
                return history_open_failed(h, create, "checked its schema");
        r = exec(h, "PRAGMA journal_mode = WAL");
        if (r < 0)
                return history_open_failed(h, r, "set WAL mode");
        r = connection_settings(h);
        if (r < 0)
                return r;
        if (create == SCHEMA_CREATE) {
                r = create_schema(h);
                if (r < 0)
                        return history_open_failed(h, r, "created the schema");
        }
        if (create == SCHEMA_MIGRATE_1 || create == SCHEMA_MIGRATE_2 || create == SCHEMA_MIGRATE_STEPS) {
                r = migrate_schema(h, create, version);
                if (r < 0)
                        return history_open_failed(h, r, "updated the schema");
                /* The old keys (step 9) and columns are in no file after. */
                (void) history_checkpoint(h);
        }
        r = recover(h, &recovered);
        if (r < 0)
                return history_open_failed(
                        h, r, "marked the records of the last run that were still running as failed");

        if (ret_recovered)
                *ret_recovered = recovered;
        h->opened = true;
        *ret = TAKE_PTR(h);
        return 0;
}

int history_open_worker(History *main, History **ret) {
        _cleanup_(history_freep) History *h = NULL;
        int r;

        assert(main);
        assert(ret);

        h = calloc(1, sizeof *h);
        if (!h)
                return -ENOMEM;
        h->sync_fd = -1;
        h->worker = true;
        h->user_secret = main->user_secret;
        h->path = strdup(main->path);
        h->wal_path = strdup(main->wal_path);
        h->directory = strdup(main->directory);
        if (!h->path || !h->wal_path || !h->directory)
                return -ENOMEM;
        /* The same condition: a fault the worker meets is the store's. */
        cond_lock(main);
        main->c->n_ref++;
        h->c = main->c;
        cond_unlock(main);

        /* The schema is the main connection's to check and change; this
         * one only opens what is there. */
        if (sqlite3_open_v2(h->path, &h->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
                log_error(
                        "History store: cannot open %s for the worker: %s",
                        h->path,
                        h->db ? sqlite3_errmsg(h->db) : "out of memory");
                return -EIO;
        }
        (void) sqlite3_extended_result_codes(h->db, 1);
        /* Off the loop: waiting for the loop's short writes costs nobody. */
        (void) sqlite3_busy_timeout(h->db, 30000);
        r = connection_settings(h);
        if (r < 0)
                return r;
        h->opened = true;
        *ret = TAKE_PTR(h);
        return 0;
}

bool history_is_worker(const History *h) {
        return h && h->worker;
}

static void condition_unref(HistoryCondition *c) {
        if (!c)
                return;
        pthread_mutex_lock(&c->lock);
        if (--c->n_ref > 0) {
                pthread_mutex_unlock(&c->lock);
                return;
        }
        pthread_mutex_unlock(&c->lock);
        for (size_t i = 0; i < c->n_pending; i++) {
                pending_done(c->pending[i]);
                free(c->pending[i]);
        }
        free(c->pending);
        free(c->damage);
        pthread_mutex_destroy(&c->lock);
        free(c);
}

History *history_free(History *h) {
        if (!h)
                return NULL;
        /* The loop's connection is the last: the worker's is freed first. */
        if (h->db && h->c && !h->worker)
                pending_last_chance(h);
        for (size_t i = 0; i < _STMT_MAX; i++)
                (void) sqlite3_finalize(h->stmts[i]);
        (void) sqlite3_close_v2(h->db);
        if (h->sync_fd >= 0)
                (void) close(h->sync_fd);
        condition_unref(h->c);
        free(h->directory);
        free(h->path);
        free(h->wal_path);
        explicit_bzero(&h->user_secret, sizeof h->user_secret);
        free(h);
        return NULL;
}

/* The file whose fdatasync() makes the commits so far durable: the WAL,
 * or the database itself if it has none (a file system without WAL
 * support). Opened once and kept while it is the same file (SQLite
 * deletes the WAL only when the last connection closes, but the file is
 * not ours alone). */
int history_sync_fd(History *h) {
        struct stat now, was;
        const char *p;
        int fd;

        assert(h);

        p = h->wal_path;
        if (stat(p, &now) < 0) {
                if (errno != ENOENT)
                        return -errno;
                p = h->path;
                if (stat(p, &now) < 0)
                        return -errno;
        }
        if (h->sync_fd >= 0 && fstat(h->sync_fd, &was) >= 0 && was.st_dev == now.st_dev &&
            was.st_ino == now.st_ino)
                return h->sync_fd;

        fd = open(p, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        if (h->sync_fd >= 0)
                (void) close(h->sync_fd);
        h->sync_fd = fd;
        return fd;
}

int history_sync(History *h) {
        int r;

        r = history_sync_fd(h);
        if (r < 0) {
                log_error_errno(r, "History store: cannot open the WAL to make the commit durable");
                return -EIO;
        }
        r = datasync(r);
        if (r < 0) {
                log_error_errno(r, "History store: cannot make the commit durable");
                return -EIO;
        }
        return 0;
}

/* sqlite3_step() of a one-statement write, then synced: durable across a
 * power cut once it returns (see history_open()). Returns sqlite3_step()'s
 * result, or SQLITE_IOERR if the sync failed. */
static int step_durable(History *h, sqlite3_stmt *s) {
        int r;

        r = step_write(h, s);
        if (r == SQLITE_DONE && history_sync(h) < 0) {
                h->forced_code = SQLITE_IOERR_FSYNC;
                return SQLITE_IOERR;
        }
        return r;
}

int history_begin(History *h, const char *id, const SessionKey *session, const char *question, usec_t created_at) {
        return history_begin_follow_up(h, id, session, question, NULL, NULL, NULL, created_at);
}

int history_begin_follow_up(
        History *h,
        const char *id,
        const SessionKey *session,
        const char *question,
        const char *follow_up,
        const char *conversation,
        char *const *notes,
        usec_t created_at) {
        _cleanup_(stmt_releasep) sqlite3_stmt *s = NULL;
        _cleanup_(json_object_putp) json_object *a = json_object_new_array();
        int r;

        assert(h);
        assert(id);
        assert(session);
        assert(question);

        r = statement(h, STMT_INSERT, &s);
        if (r < 0)
                return r;
        sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
        bind_session(s, 2, session);
        sqlite3_bind_text(s, 3, question, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 4, (sqlite3_int64) created_at);
        sqlite3_bind_text(s, 5, follow_up, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 6, conversation, -1, SQLITE_STATIC);
        if (!a)
                return -ENOMEM;
        for (size_t i = 0; notes && notes[i]; i++)
                if (json_append(a, json_string(notes[i])) < 0)
                        return -ENOMEM;
        /* The array's text lives as long as a. */
        sqlite3_bind_text(s, 7, json_object_to_json_string_ext(a, JSON_C_TO_STRING_PLAIN), -1, SQLITE_STATIC);

        r = step_write(h, s);
        if (r == SQLITE_CONSTRAINT_UNIQUE || r == SQLITE_CONSTRAINT_PRIMARYKEY)
                return -EEXIST;
        if (r != SQLITE_DONE)
                return db_error(h, "insert a record");
        return 0;
}

/* Exactly one JSON array and nothing after it (json_tokener_parse() would
 * accept "[1] x" and keep "[1]"). */
static bool is_json_array(const char *text) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_(json_tokener_freep) json_tokener *tok = NULL;
        size_t n;
        bool ok;

        if (!text)
                return true;
        n = strlen(text);
        if (n > INT_MAX)
                return false;
        tok = json_tokener_new();
        if (!tok)
                return false;
        o = json_tokener_parse_ex(tok, text, (int) n);
        ok = o && json_tokener_get_error(tok) == json_tokener_success &&
                json_object_is_type(o, json_type_array);
        /* Only whitespace may follow the array. */
        for (size_t i = ok ? json_tokener_get_parse_end(tok) : n; i < n; i++)
                if (!strchr(" \t\r\n", text[i])) {
                        ok = false;
                        break;
                }
        return ok;
}

/* The parsed array text, NULL when it is not one (checked before). */
static json_object *parse_array(const char *text) {
        json_object *o = text ? json_tokener_parse(text) : NULL;

        if (o && !json_object_is_type(o, json_type_array)) {
                json_object_put(o);
                return NULL;
        }
        return o;
}

static bool streq_ptr(const char *a, const char *b) {
        return a && b && streq(a, b);
}

/* Whether the query ran into something the wiki lacks (API.md 9.2,
 * "Signals"): no_sources and unverified for an answer, failed for a
 * failure that says the wiki had no answer (history_error_means_unanswered()).
 * A failure of the model, the network or the service is no signal. */
unsigned history_outcome_signals(const HistoryOutcome *o) {
        _cleanup_(json_object_putp) json_object *searches = parse_array(o->searches_json);
        Source *sources = NULL;
        SourceCitation *citations = NULL;
        size_t n_sources = 0, n_citations = 0, n_searches = searches ? json_object_array_length(searches) : 0,
               n_found = 0, n_verified = 0, n_not_found = 0;
        unsigned signals = 0;

        /* Out of memory reads as none, as text that is not an array. */
        if (source_parse_array(o->sources_json, &sources, &n_sources) < 0)
                n_sources = 0;
        sources = source_free_many(sources, n_sources);
        if (source_citation_parse_array(o->citations_json, &citations, &n_citations) < 0)
                n_citations = 0;
        for (size_t i = 0; i < n_citations; i++) {
                if (citations[i].status == CITATION_VERIFIED)
                        n_verified++;
                else if (citations[i].status == CITATION_NOT_FOUND)
                        n_not_found++;
        }
        citations = source_citation_free_many(citations, n_citations);

        for (size_t i = 0; i < n_searches; i++) {
                json_object *results = json_object_object_get(
                        json_object_array_get_idx(searches, i), "results");

                if (json_object_get_int64(results) > 0)
                        n_found++;
        }

        if (!o->succeeded) {
                if (history_error_means_unanswered(o->error_code) && (n_searches > 0 || n_sources > 0))
                        signals |= HISTORY_SIGNAL_FAILED;
                return signals;
        }
        if (n_sources == 0 || (n_searches > 0 && n_found == 0))
                signals |= HISTORY_SIGNAL_NO_SOURCES;
        if (n_verified == 0 || n_not_found > 0)
                signals |= HISTORY_SIGNAL_UNVERIFIED;
        return signals;
}

bool history_error_means_unanswered(const char *code) {
        return streq_ptr(code, "query_timeout") || streq_ptr(code, "execution_failed") ||
                streq_ptr(code, "model_context_exceeded");
}

static int finish(History *h, const char *id, const HistoryOutcome *o, bool durable) {
        _cleanup_(stmt_releasep) sqlite3_stmt *s = NULL;
        _cleanup_free_ char *key = NULL;
        unsigned signals;
        int r;

        assert(h);
        assert(id);
        assert(o);

        if (!is_json_array(o->sources_json) || !is_json_array(o->citations_json) ||
            !is_json_array(o->searches_json))
                return -EINVAL;
        signals = history_outcome_signals(o);
        r = history_question_of(h, id, &key);
        if (r < 0)
                return r;

        r = statement(h, STMT_FINISH, &s);
        if (r < 0)
                return r;
        sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, o->succeeded ? "succeeded" : "failed", -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 3, o->succeeded ? o->answer : NULL, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 4, o->sources_json ? o->sources_json : "[]", -1, SQLITE_STATIC);
        /* A failure always has a code: internal_error if the caller gave none. */
        sqlite3_bind_text(
                s, 5, o->succeeded ? NULL : (o->error_code ? o->error_code : "internal_error"), -1, SQLITE_STATIC);
        sqlite3_bind_text(
                s, 6, o->succeeded ? NULL : (o->error_message ? o->error_message : ""), -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 7, (sqlite3_int64) MIN(o->timings.queue_ms, (uint64_t) INT64_MAX));
        sqlite3_bind_int64(s, 8, (sqlite3_int64) MIN(o->timings.wiki_ms, (uint64_t) INT64_MAX));
        sqlite3_bind_int64(s, 9, (sqlite3_int64) MIN(o->timings.model_ms, (uint64_t) INT64_MAX));
        sqlite3_bind_int64(s, 10, (sqlite3_int64) MIN(o->timings.sandbox_ms, (uint64_t) INT64_MAX));
        sqlite3_bind_int64(s, 11, (sqlite3_int64) MIN(o->timings.cleanup_ms, (uint64_t) INT64_MAX));
        sqlite3_bind_int64(s, 12, (sqlite3_int64) MIN(o->timings.total_ms, (uint64_t) INT64_MAX));
        sqlite3_bind_text(s, 13, o->model ? o->model : "", -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 14, (sqlite3_int64) MIN(o->prompt_tokens, (uint64_t) INT64_MAX));
        sqlite3_bind_int64(s, 15, (sqlite3_int64) MIN(o->completion_tokens, (uint64_t) INT64_MAX));
        sqlite3_bind_int64(s, 16, (sqlite3_int64) o->finished_at);
        sqlite3_bind_text(s, 17, o->sandbox, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 18, o->citations_json ? o->citations_json : "[]", -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 19, o->searches_json ? o->searches_json : "[]", -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 20, key, -1, SQLITE_STATIC);
        sqlite3_bind_int(s, 21, (int) signals);

        r = durable ? step_durable(h, s) : step_write(h, s);
        if (r != SQLITE_DONE)
                return db_error(h, "complete a record");
        return sqlite3_changes(h->db) == 1 ? 0 : -ENOENT;
}

static int pending_add(History *h, const char *id, const HistoryOutcome *o, size_t skip);

/* The outcome's artifacts kept, then finish(); when the storage failed
 * at either, the outcome kept in memory, with the artifacts not yet kept,
 * to land later (history_retry()): 1. An artifact refused for itself (too
 * large, its file unreadable) is left out and logged. */
static int finish_or_keep(History *h, const char *id, const HistoryOutcome *o, bool durable) {
        size_t kept = 0;
        int r = 0;

        for (; kept < o->n_artifacts; kept++) {
                char aid[HISTORY_ARTIFACT_ID_MAX];

                r = add_artifact(h, id, &o->artifacts[kept], aid);
                if (r == -EIO && storage_fault(h))
                        break;
                if (r < 0)
                        log_warning_errno(r, "Query %s: an artifact could not be kept", id);
                r = 0;
        }
        if (r >= 0)
                r = finish(h, id, o, durable);
        if (r != -EIO || !storage_fault(h))
                return r;
        r = pending_add(h, id, o, kept);
        if (r < 0) {
                log_error_errno(
                        r, "History store: the outcome of query %s could not be kept in memory either", id);
                return -EIO;
        }
        return 1;
}

int history_finish(History *h, const char *id, const HistoryOutcome *o) {
        assert(h);
        assert(o);
        return finish_or_keep(h, id, o, true);
}

int history_finish_nosync(History *h, const char *id, const HistoryOutcome *o) {
        return finish_or_keep(h, id, o, false);
}

/* ---- reading records ---- */

/* A text column, or fallback when it is NULL (the schema forbids that for
 * the columns read this way, but the file is not ours alone). */
static const char *column_text(sqlite3_stmt *s, int col, const char *fallback) {
        const char *t = (const char *) sqlite3_column_text(s, col);

        return t ? t : fallback;
}

/* A copy of a text column in *ret, NULL for SQL NULL. Returns 0 or -ENOMEM. */
static int column_strdup(sqlite3_stmt *s, int col, char **ret) {
        const char *t;

        if (sqlite3_column_type(s, col) == SQLITE_NULL) {
                *ret = NULL;
                return 0;
        }
        t = (const char *) sqlite3_column_text(s, col);
        *ret = strdup(t ? t : "");
        return *ret ? 0 : -ENOMEM;
}

static usec_t column_time(sqlite3_stmt *s, int col) {
        if (sqlite3_column_type(s, col) == SQLITE_NULL)
                return USEC_INFINITY;
        return (usec_t) sqlite3_column_int64(s, col);
}

static uint64_t column_u64(sqlite3_stmt *s, int col) {
        return (uint64_t) sqlite3_column_int64(s, col);
}

/* free() each string of a list. */
static void free_strings(char *const *strings, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(strings[i]);
}
#define free_all(...) free_strings((char *[]){ __VA_ARGS__ }, ELEMENTSOF(((char *[]){ __VA_ARGS__ })))

void history_record_done(HistoryRecord *r) {
        if (!r)
                return;
        for (size_t i = 0; i < r->n_artifacts; i++) {
                const HistoryArtifactInfo *a = &r->artifacts[i];

                free_all(a->id, a->name, a->media_type, a->sha256);
        }
        free(r->artifacts);
        source_free_many(r->sources, r->n_sources);
        source_citation_free_many(r->citations, r->n_citations);
        free_all(
                r->id,
                r->status,
                r->question,
                r->answer,
                r->error_code,
                r->error_message,
                r->model,
                r->sandbox,
                r->feedback_rating,
                r->feedback_reason,
                r->feedback_comment,
                r->follow_up,
                r->conversation);
        strv_free(r->given_titles);
        strv_free(r->notes);
        *r = (HistoryRecord){ 0 };
}

HistoryRecord *history_record_free(HistoryRecord *r) {
        history_record_done(r);
        free(r);
        return NULL;
}

HistoryPage *history_page_free(HistoryPage *p) {
        if (!p)
                return NULL;
        for (size_t i = 0; i < p->n_records; i++)
                history_record_done(&p->records[i]);
        free(p->records);
        free(p);
        return NULL;
}

static int artifacts_of(History *h, const char *query_id, HistoryRecord *rec) {
        _cleanup_(stmt_releasep) sqlite3_stmt *s = NULL;
        int r;

        r = statement(h, STMT_ARTIFACTS_OF, &s);
        if (r < 0)
                return r;
        sqlite3_bind_text(s, 1, query_id, -1, SQLITE_STATIC);

        while ((r = sqlite3_step(s)) == SQLITE_ROW) {
                HistoryArtifactInfo *a, *n;

                n = reallocarray(rec->artifacts, rec->n_artifacts + 1, sizeof *n);
                if (!n)
                        return -ENOMEM;
                rec->artifacts = n;
                a = &rec->artifacts[rec->n_artifacts++];
                *a = (HistoryArtifactInfo){ .size_bytes = sqlite3_column_int64(s, 3) };
                if (column_strdup(s, 0, &a->id) < 0 || column_strdup(s, 1, &a->name) < 0 ||
                    column_strdup(s, 2, &a->media_type) < 0 || column_strdup(s, 4, &a->sha256) < 0)
                        return -ENOMEM;
        }
        if (r != SQLITE_DONE)
                return db_error(h, "read artifacts");
        return 0;
}

/* The given titles or the notes (a JSON array of strings, written by the
 * store's own INSERT) as a strv; anything else reads as none. Returns 0 or
 * -ENOMEM. */
static int given_titles_parse(const char *json, char ***ret) {
        _cleanup_(json_object_putp) json_object *a = json_tokener_parse(json);
        size_t k = json_object_is_type(a, json_type_array) ? json_object_array_length(a) : 0, n = 0;
        _cleanup_(strv_freep) char **l = calloc(1, sizeof(char *));

        if (!l)
                return -ENOMEM;
        for (size_t i = 0; i < k; i++) {
                json_object *v = json_object_array_get_idx(a, i);

                if (json_object_is_type(v, json_type_string) &&
                    strv_extend_unique(&l, &n, json_object_get_string(v)) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

/* The sources and citations of the row: written by history_finish() only
 * after checking they are arrays, so text that is not one was changed
 * behind the store's back and reads as none. Returns 0 or -ENOMEM. */
static int record_lists_from_row(sqlite3_stmt *s, HistoryRecord *ret) {
        int r;

        r = source_parse_array(column_text(s, 5, "[]"), &ret->sources, &ret->n_sources);
        if (r == -EINVAL)
                log_warning(
                        "Record %s: its sources are not a JSON array; shown as none.", column_text(s, 1, ""));
        else if (r < 0)
                return r;
        r = source_citation_parse_array(column_text(s, 20, "[]"), &ret->citations, &ret->n_citations);
        if (r == -EINVAL)
                log_warning(
                        "Record %s: its citations are not a JSON array; shown as none.",
                        column_text(s, 1, ""));
        else if (r < 0)
                return r;
        r = given_titles_parse(column_text(s, 27, "[]"), &ret->given_titles);
        if (r < 0)
                return r;
        return given_titles_parse(column_text(s, 28, "[]"), &ret->notes);
}

/* The record at the current row of a statement selecting RECORD_COLUMNS,
 * into *ret (zeroed by the caller; on failure partly filled, for
 * history_record_done()). */
static int pending_apply(History *h, HistoryRecord *rec);
static int pending_land(History *h, const char *id);
static char **pending_ids(History *h);

static int record_from_row(History *h, sqlite3_stmt *s, HistoryRecord *ret) {
        int r;

        if (column_strdup(s, 1, &ret->id) < 0 || column_strdup(s, 2, &ret->status) < 0 ||
            column_strdup(s, 3, &ret->question) < 0 || column_strdup(s, 4, &ret->answer) < 0 ||
            column_strdup(s, 6, &ret->error_code) < 0 || column_strdup(s, 14, &ret->model) < 0 ||
            column_strdup(s, 19, &ret->sandbox) < 0 || column_strdup(s, 25, &ret->follow_up) < 0)
                return -ENOMEM;
        /* A record is its own conversation unless it follows another. */
        ret->conversation = strdup(column_text(s, 26, column_text(s, 1, "")));
        if (!ret->conversation)
                return -ENOMEM;
        r = record_lists_from_row(s, ret);
        if (r < 0)
                return r;
        /* The message belongs to the error: none without a code. */
        if (ret->error_code && column_strdup(s, 7, &ret->error_message) < 0)
                return -ENOMEM;

        if (sqlite3_column_type(s, 21) != SQLITE_NULL) {
                if (column_strdup(s, 21, &ret->feedback_rating) < 0 ||
                    column_strdup(s, 22, &ret->feedback_reason) < 0 ||
                    column_strdup(s, 23, &ret->feedback_comment) < 0)
                        return -ENOMEM;
                ret->feedback_at = column_time(s, 24);
        }

        r = artifacts_of(h, column_text(s, 1, ""), ret);
        if (r < 0)
                return r;

        ret->timings = (HistoryTimings){
                .queue_ms = column_u64(s, 8),
                .wiki_ms = column_u64(s, 9),
                .model_ms = column_u64(s, 10),
                .sandbox_ms = column_u64(s, 11),
                .cleanup_ms = column_u64(s, 12),
                .total_ms = column_u64(s, 13),
        };
        ret->prompt_tokens = column_u64(s, 15);
        ret->completion_tokens = column_u64(s, 16);
        ret->created_at = column_time(s, 17);
        ret->finished_at = column_time(s, 18);
        /* A record whose outcome waits in memory is shown as it will be stored. */
        return pending_apply(h, ret);
}

/* Run which, a SELECT with ?1 the id and ?2 the session, up to its first
 * row: 1 and the statement at that row in *ret (the caller releases it),
 * 0 when there is none (id unknown, or another session's), or -EIO. */
static int select_owned(
        History *h, Statement which, const char *id, const SessionKey *session, sqlite3_stmt **ret) {
        _cleanup_(stmt_releasep) sqlite3_stmt *s = NULL;
        int r;

        r = statement(h, which, &s);
        if (r < 0)
                return r;
        sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
        bind_session(s, 2, session);

        r = sqlite3_step(s);
        if (r == SQLITE_DONE)
                return 0;
        if (r != SQLITE_ROW)
                return db_error(h, "read a record");
        *ret = TAKE_PTR(s);
        return 1;
}

int history_get_record(History *h, const char *id, const SessionKey *session, HistoryRecord **ret) {
        _cleanup_(stmt_releasep) sqlite3_stmt *s = NULL;
        _cleanup_(history_record_freep) HistoryRecord *rec = NULL;
        int r;

        assert(h);
        assert(id);
        assert(session);
        assert(ret);

        r = select_owned(h, STMT_GET_RECORD, id, session, &s);
        if (r <= 0)
                return r == 0 ? -ENOENT : r;
        rec = calloc(1, sizeof *rec);
        if (!rec)
                return -ENOMEM;
        r = record_from_row(h, s, rec);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(rec);
        return 0;
}

int history_recent_durations(History *h, size_t max, double *ret_seconds, size_t *ret_n) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *s = NULL;
        size_t n = 0;
        int r;

        assert(h);
        assert(ret_seconds || max == 0);
        assert(ret_n);

        /* Claim to outcome: the whole time less the wait in the queue. */
        r = prepare(
                h,
                "SELECT total_ms - queue_ms FROM queries WHERE status != 'running' AND total_ms >= queue_ms "
                "ORDER BY seq DESC LIMIT ?",
                &s);
        if (r < 0)
                return r;
        if (sqlite3_bind_int64(s, 1, (sqlite3_int64) MIN(max, (size_t) INT64_MAX)) != SQLITE_OK)
                return db_error(h, "bind");
        while ((r = sqlite3_step(s)) == SQLITE_ROW)
                ret_seconds[n++] = (double) sqlite3_column_int64(s, 0) / 1000.0;
        if (r != SQLITE_DONE)
                return db_error(h, "read the recent durations");
        *ret_n = n;
        return 0;
}

/* Whether session's record id is running: 1, 0 once it has ended, -ENOENT
 * when session has no such record (another session's included), or a
 * database error. */
static int owned_running(History *h, const char *id, const SessionKey *session) {
        _cleanup_(stmt_releasep) sqlite3_stmt *s = NULL;
        int r;

        r = select_owned(h, STMT_IS_RUNNING, id, session, &s);
        if (r < 0)
                return r;
        if (r == 0)
                return -ENOENT;
        /* Ended, its outcome waiting in memory to land. */
        if (history_outcome_waits(h, id))
                return 0;
        return sqlite3_column_int(s, 0) ? 1 : 0;
}

int history_is_running(History *h, const char *id, const SessionKey *session) {
        int r;

        assert(h);
        assert(id);
        assert(session);

        r = owned_running(h, id, session);
        return r == -ENOENT ? 0 : r;
}

/* A decimal integer without sign, spaces or leading zeros, at most max:
 * the settings' parser, which allows leading zeros, minus those. */
static int parse_strict_uint(const char *text, uint64_t max, uint64_t *ret) {
        if (text && text[0] == '0' && text[1] != '\0')
                return -EINVAL;
        return parse_uint64_range(text, 0, max, ret) < 0 ? -EINVAL : 0;
}

static int parse_cursor(const char *cursor, int64_t *ret) {
        uint64_t v;

        if (!cursor) {
                *ret = INT64_MAX;
                return 0;
        }
        if (parse_strict_uint(cursor, INT64_MAX, &v) < 0 || v == 0)
                return -EINVAL;
        *ret = (int64_t) v;
        return 0;
}

int history_parse_list_arguments(
        const char *limit, const char *cursor, unsigned *ret_limit, const char **ret_message) {
        uint64_t l = HISTORY_LIMIT_DEFAULT;
        int64_t c;

        assert(ret_limit);
        assert(ret_message);

        if (limit && (parse_strict_uint(limit, HISTORY_LIMIT_MAX, &l) < 0 || l < HISTORY_LIMIT_MIN)) {
                *ret_message = "limit must be an integer from 1 to 100";
                return -EINVAL;
        }
        if (parse_cursor(cursor, &c) < 0) {
                *ret_message = "cursor is not a cursor from a previous page";
                return -EINVAL;
        }
        *ret_limit = (unsigned) l;
        return 0;
}

int history_list_records(
        History *h, const SessionKey *session, unsigned limit, const char *cursor, HistoryPage **ret) {
        _cleanup_(stmt_releasep) sqlite3_stmt *s = NULL;
        _cleanup_(history_page_freep) HistoryPage *page = NULL;
        int64_t before, last = 0;
        bool more = false;
        int r;

        assert(h);
        assert(session);
        assert(ret);

        if (limit < HISTORY_LIMIT_MIN || limit > HISTORY_LIMIT_MAX || parse_cursor(cursor, &before) < 0)
                return -EINVAL;
        page = calloc(1, sizeof *page);
        if (!page)
                return -ENOMEM;
        page->records = calloc(limit, sizeof *page->records);
        if (!page->records)
                return -ENOMEM;

        r = statement(h, STMT_LIST, &s);
        if (r < 0)
                return r;
        bind_session(s, 1, session);
        sqlite3_bind_int64(s, 2, before);
        /* One more than asked: whether there is a next page. */
        sqlite3_bind_int(s, 3, (int) limit + 1);

        while ((r = sqlite3_step(s)) == SQLITE_ROW) {
                if (page->n_records == limit) {
                        more = true;
                        break;
                }
                /* Counted first: a record half read is freed with the page. */
                r = record_from_row(h, s, &page->records[page->n_records++]);
                if (r < 0)
                        return r;
                last = sqlite3_column_int64(s, 0);
        }
        if (r != SQLITE_DONE && r != SQLITE_ROW)
                return db_error(h, "list records");

        if (more)
                snprintf(page->next_cursor, sizeof page->next_cursor, "%" PRId64, last);

        *ret = TAKE_PTR(page);
        return 0;
}

int history_delete(History *h, const char *id, const SessionKey *session) {
        _cleanup_(stmt_releasep) sqlite3_stmt *s = NULL;
        int r;

        assert(h);
        assert(id);
        assert(session);

        r = history_is_running(h, id, session);
        if (r < 0)
                return r;
        if (r > 0)
                return -EBUSY;
        /* An outcome waiting lands first (the row is still "running"). */
        if (history_outcome_waits(h, id)) {
                r = pending_land(h, id);
                if (r < 0)
                        return r;
                /* Another connection is writing it: after that. */
                if (history_outcome_waits(h, id))
                        return -EBUSY;
        }

        /* The artifacts go with it (ON DELETE CASCADE), in one statement. */
        r = statement(h, STMT_DELETE, &s);
        if (r < 0)
                return r;
        sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
        bind_session(s, 2, session);
        if (step_durable(h, s) != SQLITE_DONE)
                return db_error(h, "delete a record");
        if (sqlite3_changes(h->db) != 1)
                return -ENOENT;
        /* The record is gone from the tables either way; a checkpoint that
         * fails is logged, and the next one (or the stop) cuts the log. */
        (void) history_checkpoint(h);
        return 0;
}

/* One batch of the records del deletes (the artifacts, feedback and
 * share links go with them, ON DELETE CASCADE), in one transaction:
 * count, which selects the same batch, counts its artifacts first;
 * count_what and del_what name the steps in the journal. Returns 1 when
 * the batch was full (more may be left), 0 when not, with the counts
 * set; or the store's error, rolled back. */
static int delete_batch(
        History *h,
        sqlite3_stmt *count,
        sqlite3_stmt *del,
        const char *count_what,
        const char *del_what,
        unsigned batch,
        unsigned *ret_records,
        unsigned *ret_artifacts) {
        _cleanup_(transaction_rollbackp) History *tx = NULL;
        unsigned records, artifacts;
        int r;

        r = exec_cached(h, STMT_BEGIN);
        if (r < 0)
                return r;
        tx = h; /* from here every return rolls back, until the commit */
        if (sqlite3_step(count) != SQLITE_ROW)
                return db_error(h, count_what);
        artifacts = (unsigned) sqlite3_column_int64(count, 0);
        (void) sqlite3_reset(count);
        if (step_write(h, del) != SQLITE_DONE)
                return db_error(h, del_what);
        records = (unsigned) sqlite3_changes(h->db);
        r = exec_cached(h, STMT_COMMIT);
        if (r < 0)
                return r;
        tx = NULL;

        *ret_records = records;
        *ret_artifacts = artifacts;
        return records == batch;
}

int history_prune(History *h, usec_t before, unsigned batch, unsigned *ret_records, unsigned *ret_artifacts) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *count = NULL, *del = NULL;
        int r;

        assert(h);
        assert(batch > 0);
        assert(ret_records);
        assert(ret_artifacts);

        /* The oldest first, so a conversation loses its first turns first;
         * a running record (its query is still on) is never taken. */
#define PRUNE_BATCH                                                                                     \
        "SELECT id FROM queries WHERE created_at < ?1 AND status != 'running' ORDER BY created_at, id " \
        "LIMIT ?2"
        r = prepare(h, "SELECT count(*) FROM artifacts WHERE query_id IN (" PRUNE_BATCH ")", &count);
        if (r < 0)
                return r;
        r = prepare(h, "DELETE FROM queries WHERE id IN (" PRUNE_BATCH ")", &del);
        if (r < 0)
                return r;
#undef PRUNE_BATCH
        sqlite3_bind_int64(count, 1, (sqlite3_int64) before);
        sqlite3_bind_int(count, 2, (int) batch);
        sqlite3_bind_int64(del, 1, (sqlite3_int64) before);
        sqlite3_bind_int(del, 2, (int) batch);
        return delete_batch(
                h, count, del, "count the artifacts to prune", "prune records", batch, ret_records, ret_artifacts);
}

/* The outcomes waiting in memory of the session's records land first: their
 * rows are still "running" until then, and the erase takes no running row. */
static int erase_land_pending(History *h, const SessionKey *session) {
        _cleanup_(strv_freep) char **ids = pending_ids(h);

        if (!ids)
                return -ENOMEM;
        for (size_t i = 0; ids[i]; i++) {
                int r = owned_running(h, ids[i], session);

                if (r == -ENOENT) /* another person's */
                        continue;
                if (r < 0)
                        return r;
                r = pending_land(h, ids[i]);
                if (r < 0)
                        return r;
                /* Another connection is writing it: the erase waits for that. */
                if (history_outcome_waits(h, ids[i]))
                        return -EBUSY;
        }
        return 0;
}

int history_erase_session_batch(
        History *h, const SessionKey *session, unsigned batch, unsigned *ret_records, unsigned *ret_artifacts) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *count = NULL, *del = NULL;
        unsigned records, artifacts;
        int r;

        assert(h);
        assert(session);
        assert(batch > 0);

        r = erase_land_pending(h, session);
        if (r < 0)
                return r;

                /* By the index queries_by_session, oldest first; a running record
                 * (its query is still on) is never taken: its outcome would be
                 * written after. */
#define ERASE_BATCH "SELECT id FROM queries WHERE session = ?1 AND status != 'running' ORDER BY seq LIMIT ?2"
        r = prepare(h, "SELECT count(*) FROM artifacts WHERE query_id IN (" ERASE_BATCH ")", &count);
        if (r < 0)
                return r;
        r = prepare(h, "DELETE FROM queries WHERE id IN (" ERASE_BATCH ")", &del);
        if (r < 0)
                return r;
#undef ERASE_BATCH
        bind_session(count, 1, session);
        sqlite3_bind_int(count, 2, (int) MIN(batch, (unsigned) INT_MAX));
        bind_session(del, 1, session);
        sqlite3_bind_int(del, 2, (int) MIN(batch, (unsigned) INT_MAX));
        r = delete_batch(
                h, count, del, "count the artifacts to erase", "erase records", batch, &records, &artifacts);
        if (r < 0)
                return r;
        if (ret_records)
                *ret_records = records;
        if (ret_artifacts)
                *ret_artifacts = artifacts;
        return r;
}

int history_erase_session(
        History *h, const SessionKey *session, unsigned batch, uint64_t *ret_records, uint64_t *ret_artifacts) {
        uint64_t records = 0, artifacts = 0;
        int r;

        assert(h);
        assert(session);
        assert(batch > 0);

        do {
                unsigned n = 0, a = 0;

                r = history_erase_session_batch(h, session, batch, &n, &a);
                if (r < 0)
                        return r;
                records += n;
                artifacts += a;
        } while (r > 0);

        if (records > 0) {
                /* Durable, then no copy of what went is left in the log. */
                r = history_sync(h);
                if (r < 0)
                        return r;
                (void) history_checkpoint(h);
        }
        if (ret_records)
                *ret_records = records;
        if (ret_artifacts)
                *ret_artifacts = artifacts;
        return 0;
}

/* Whether the session has a record still running (its outcome not yet
 * written, nor waiting in memory): 1, 0, or -EIO. Its cost is of the
 * running records, whatever the size of the history. */
int history_session_running(History *h, const SessionKey *session) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *s = NULL;
        int r;

        assert(h);
        assert(session);

        /* From the few running records (a partial index), not from the
         * person's many: it runs on the loop. */
        r = prepare(
                h,
                "SELECT id FROM queries INDEXED BY queries_running"
                " WHERE status = 'running' AND session = ?1",
                &s);
        if (r < 0)
                return r;
        bind_session(s, 1, session);
        for (;;) {
                r = sqlite3_step(s);
                if (r == SQLITE_DONE)
                        return 0;
                if (r != SQLITE_ROW)
                        return db_error(h, "look for running records");
                if (!history_outcome_waits(h, column_text(s, 0, "")))
                        return 1;
        }
}

int history_checkpoint(History *h) {
        int log = 0, done = 0;

        assert(h);

        /* TRUNCATE: every frame is copied into the main file (where secure
         * delete has zeroed what went) and the log is cut to 0 bytes, so no
         * old copy of a deleted page stays in it. */
        if (sqlite3_wal_checkpoint_v2(h->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, &log, &done) != SQLITE_OK)
                return db_error(h, "checkpoint the write-ahead log");
        return 0;
}

int history_secure_delete(History *h) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *s = NULL;
        int on;

        assert(h);

        if (sqlite3_prepare_v2(h->db, "PRAGMA secure_delete", -1, &s, NULL) != SQLITE_OK)
                return db_error(h, "read secure_delete");
        if (sqlite3_step(s) != SQLITE_ROW)
                return db_error(h, "read secure_delete");
        on = sqlite3_column_int(s, 0);
        return on != 0;
}

void history_artifact_done(HistoryArtifact *a) {
        assert(a);
        free(a->name);
        free(a->media_type);
        free(a->data);
        *a = (HistoryArtifact){ 0 };
}

int history_get_artifact(History *h, const char *id, const SessionKey *session, HistoryArtifact *ret) {
        _cleanup_(stmt_releasep) sqlite3_stmt *s = NULL;
        HistoryArtifact a = { 0 };
        const void *data;
        int r, size;

        assert(h);
        assert(id);
        assert(session);
        assert(ret);

        r = select_owned(h, STMT_GET_ARTIFACT, id, session, &s);
        if (r <= 0)
                return r == 0 ? -ENOENT : r;

        data = sqlite3_column_blob(s, 3);
        size = sqlite3_column_bytes(s, 3);
        a.name = strdup(column_text(s, 0, ""));
        a.media_type = strdup(column_text(s, 1, "application/octet-stream"));
        a.data = malloc(size > 0 ? (size_t) size : 1);
        if (!a.name || !a.media_type || !a.data) {
                history_artifact_done(&a);
                return -ENOMEM;
        }
        if (size > 0)
                memcpy(a.data, data, (size_t) size);
        a.size = (size_t) size;
        snprintf(a.sha256, sizeof a.sha256, "%s", column_text(s, 2, ""));

        *ret = a;
        return 0;
}

int history_read_artifact(
        History *h,
        const char *id,
        const SessionKey *session,
        uint64_t offset,
        void *buf,
        size_t size,
        size_t *ret_n) {
        _cleanup_(stmt_releasep) sqlite3_stmt *s = NULL;
        sqlite3_blob *blob = NULL;
        sqlite3_int64 rowid;
        int64_t total;
        size_t n;
        int r;

        assert(h);
        assert(id);
        assert(session);
        assert(buf || size == 0);
        assert(ret_n);

        r = select_owned(h, STMT_ARTIFACT_ROWID, id, session, &s);
        if (r <= 0)
                return r == 0 ? -ENOENT : r;
        rowid = sqlite3_column_int64(s, 0);
        total = sqlite3_column_int64(s, 1);
        stmt_release(TAKE_PTR(s));

        if (total < 0 || offset >= (uint64_t) total || size == 0) {
                *ret_n = 0;
                return 0;
        }
        n = (size_t) MIN((uint64_t) size, (uint64_t) total - offset);
        n = MIN(n, (size_t) INT_MAX);
        /* Opened and closed here: a blob left open would hold a read
         * transaction, and with it every checkpoint, for as long as a
         * slow reader takes. */
        if (sqlite3_blob_open(h->db, "main", "artifacts", "data", rowid, 0, &blob) != SQLITE_OK)
                return db_error(h, "open an artifact's blob");
        if ((uint64_t) sqlite3_blob_bytes(blob) < offset + n) {
                (void) sqlite3_blob_close(blob);
                return -EIO;
        }
        if (sqlite3_blob_read(blob, buf, (int) n, (int) offset) != SQLITE_OK) {
                r = db_error(h, "read an artifact");
                (void) sqlite3_blob_close(blob);
                return r;
        }
        (void) sqlite3_blob_close(blob);
        *ret_n = n;
        return 0;
}

int history_has_follower(History *h, const char *id, const SessionKey *session, usec_t ended_by) {
        _cleanup_(stmt_releasep) sqlite3_stmt *s = NULL;
        int r;

        assert(h);
        assert(id);
        assert(session);

        r = statement(h, STMT_HAS_FOLLOWER, &s);
        if (r < 0)
                return r;
        sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
        bind_session(s, 2, session);
        sqlite3_bind_int64(s, 3, (sqlite3_int64) MIN(ended_by, (usec_t) INT64_MAX));
        r = sqlite3_step(s);
        if (r == SQLITE_ROW)
                return 1;
        if (r == SQLITE_DONE)
                return 0;
        return db_error(h, "read a record's follow-ups");
}

/* The artifact's blob, written from its file; inside the transaction of
 * history_add_artifact(). */
static int history_write_artifact_blob(History *h, int fd, uint64_t size) {
        sqlite3_blob *blob = NULL;
        uint8_t buf[65536];
        uint64_t done = 0;
        int r = 0;

        if (size == 0)
                return 0;
        if (sqlite3_blob_open(h->db, "main", "artifacts", "data", sqlite3_last_insert_rowid(h->db), 1, &blob) !=
            SQLITE_OK)
                return db_error(h, "open an artifact's blob");
        /* Stream: the file may be large (WIKI_WEB_ARTIFACT_MAX_BYTES). */
        while (done < size) {
                ssize_t k = pread(fd, buf, (size_t) MIN(size - done, (uint64_t) sizeof buf), (off_t) done);

                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) {
                        log_error_errno(k < 0 ? errno : EIO, "History store: cannot read an artifact's file");
                        r = -EIO;
                        break;
                }
                if (sqlite3_blob_write(blob, buf, (int) k, (int) done) != SQLITE_OK) {
                        r = db_error(h, "write an artifact");
                        break;
                }
                done += (uint64_t) k;
        }
        sqlite3_blob_close(blob);
        return r;
}

int history_add_artifact(
        History *h, const char *query_id, const Artifact *a, char ret_id[static HISTORY_ARTIFACT_ID_MAX]) {
        return add_artifact(h, query_id, a, ret_id);
}

static int add_artifact(
        History *h, const char *query_id, const Artifact *a, char ret_id[static HISTORY_ARTIFACT_ID_MAX]) {
        _cleanup_(stmt_releasep) sqlite3_stmt *s = NULL;
        char id[HISTORY_ARTIFACT_ID_MAX];
        const char *name, *media_type, *sha256;
        uint64_t size;
        int fd, r;

        assert(h);
        assert(query_id);
        assert(a);

        name = a->name;
        media_type = a->media_type;
        sha256 = a->sha256;
        size = a->size_bytes;
        fd = a->fd;

        if (!sha256 || strlen(sha256) != 64 || !name || !*name || !media_type || fd < 0)
                return -EINVAL;
        if (size > (uint64_t) sqlite3_limit(h->db, SQLITE_LIMIT_LENGTH, -1))
                return -EFBIG;
        r = random_id("af_", id, sizeof id);
        if (r < 0)
                return r;

        r = exec_cached(h, STMT_BEGIN);
        if (r < 0)
                return r;
        r = statement(h, STMT_ADD_ARTIFACT, &s);
        if (r < 0) {
                (void) exec_cached(h, STMT_ROLLBACK);
                return r;
        }
        sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, name, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 3, media_type, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 4, (sqlite3_int64) size);
        sqlite3_bind_text(s, 5, sha256, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 6, query_id, -1, SQLITE_STATIC);
        if (step_write(h, s) != SQLITE_DONE) {
                r = db_error(h, "add an artifact");
                (void) exec_cached(h, STMT_ROLLBACK);
                return r;
        }
        if (sqlite3_changes(h->db) != 1) {
                /* No such query (the INSERT ... SELECT found none). */
                (void) exec_cached(h, STMT_ROLLBACK);
                return -ENOENT;
        }
        r = history_write_artifact_blob(h, fd, size);
        if (r < 0) {
                (void) exec_cached(h, STMT_ROLLBACK);
                return r;
        }
        r = exec_cached(h, STMT_COMMIT);
        if (r < 0) {
                (void) exec_cached(h, STMT_ROLLBACK);
                return r;
        }
        memcpy(ret_id, id, sizeof id);
        return 0;
}

int history_set_feedback(
        History *h,
        const char *id,
        const SessionKey *session,
        const char *rating,
        const char *reason,
        const char *comment,
        usec_t rated_at) {
        _cleanup_(stmt_releasep) sqlite3_stmt *s = NULL;
        int r;

        assert(h);
        assert(id);
        assert(session);
        assert(rating);

        if (!streq(rating, "up") && !streq(rating, "down"))
                return -EINVAL;
        /* Not found (also another session's), or running. */
        r = owned_running(h, id, session);
        if (r < 0)
                return r;
        if (r > 0)
                return -EBUSY;

        r = statement(h, STMT_SET_FEEDBACK, &s);
        if (r < 0)
                return r;
        sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, rating, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 3, reason, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 4, comment, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s, 5, (sqlite3_int64) rated_at);
        if (step_durable(h, s) != SQLITE_DONE)
                return db_error(h, "keep the feedback");
        return 0;
}

sqlite3 *history_database(History *h) {
        assert(h);
        return h->db;
}

int history_question_of(History *h, const char *id, char **ret_key) {
        _cleanup_(stmt_releasep) sqlite3_stmt *s = NULL;
        int r;

        assert(h);
        assert(id);
        assert(ret_key);

        r = statement(h, STMT_QUESTION, &s);
        if (r < 0)
                return r;
        sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
        r = sqlite3_step(s);
        if (r == SQLITE_DONE) {
                *ret_key = NULL;
                return 0;
        }
        if (r != SQLITE_ROW)
                return db_error(h, "read a question");
        return wording_key(column_text(s, 0, ""), ret_key);
}

/* ---- conversations and their shares ---- */

void history_conversation_free_records(HistoryRecord *records, size_t n) {
        for (size_t i = 0; i < n; i++)
                history_record_done(&records[i]);
        free(records);
}

/* The turns of a conversation read so far: records[n] of max allocated. */
typedef struct ConversationTurns {
        HistoryRecord *records;
        size_t n;
} ConversationTurns;

static void conversation_turns_done(ConversationTurns *t) {
        history_conversation_free_records(t->records, t->n);
}

int history_get_conversation(
        History *h, const char *id, const SessionKey *session, size_t max, HistoryRecord **ret, size_t *ret_n) {
        _cleanup_(conversation_turns_done) ConversationTurns turns = { 0 };
        char next[QUERY_ID_MAX];
        int r;

        assert(h);
        assert(id);
        assert(session);
        assert(ret);
        assert(ret_n);

        if (max < 1)
                return -EINVAL;
        turns.records = calloc(max, sizeof *turns.records);
        if (!turns.records)
                return -ENOMEM;

        /* Newest first, following the links back; a turn that was deleted
         * ends the chain there. */
        snprintf(next, sizeof next, "%s", id);
        while (turns.n < max) {
                _cleanup_(stmt_releasep) sqlite3_stmt *s = NULL;
                HistoryRecord *turn;

                r = select_owned(h, STMT_GET_RECORD, next, session, &s);
                if (r < 0)
                        return r;
                if (r == 0) {
                        if (turns.n == 0)
                                return -ENOENT;
                        break;
                }
                /* Counted first: a record half read is freed with the turns. */
                turn = &turns.records[turns.n++];
                r = record_from_row(h, s, turn);
                if (r < 0)
                        return r;
                if (!turn->follow_up || strlen(turn->follow_up) >= sizeof next)
                        break;
                snprintf(next, sizeof next, "%s", turn->follow_up);
        }

        /* Oldest first. */
        for (size_t i = 0; i < turns.n / 2; i++) {
                HistoryRecord t = turns.records[i];
                turns.records[i] = turns.records[turns.n - 1 - i];
                turns.records[turns.n - 1 - i] = t;
        }
        *ret = turns.records;
        *ret_n = turns.n;
        turns = (ConversationTurns){ 0 };
        return 0;
}

int history_share_add(
        History *h,
        const char *id,
        const SessionKey *session,
        const uint8_t token_sha256[static HISTORY_SHARE_DIGEST_SIZE],
        usec_t created_at) {
        _cleanup_(stmt_releasep) sqlite3_stmt *s = NULL, *t = NULL;
        int r;

        assert(h);
        assert(id);
        assert(session);
        assert(token_sha256);

        r = owned_running(h, id, session);
        if (r < 0)
                return r;
        if (r > 0)
                return -EBUSY;

        r = exec_cached(h, STMT_BEGIN);
        if (r < 0)
                return r;
        r = statement(h, STMT_SHARE_ADD, &s);
        if (r >= 0) {
                sqlite3_bind_blob(s, 1, token_sha256, HISTORY_SHARE_DIGEST_SIZE, SQLITE_STATIC);
                sqlite3_bind_text(s, 2, id, -1, SQLITE_STATIC);
                sqlite3_bind_int64(s, 3, (sqlite3_int64) created_at);
                r = step_write(h, s) == SQLITE_DONE ? 0 : db_error(h, "add a share");
        }
        if (r >= 0)
                r = statement(h, STMT_SHARE_TRIM, &t);
        if (r >= 0) {
                sqlite3_bind_text(t, 1, id, -1, SQLITE_STATIC);
                sqlite3_bind_int(t, 2, HISTORY_SHARES_MAX);
                r = sqlite3_step(t) == SQLITE_DONE ? 0 : db_error(h, "trim the shares");
        }
        if (r >= 0)
                r = exec_cached(h, STMT_COMMIT);
        if (r < 0) {
                (void) exec_cached(h, STMT_ROLLBACK);
                return r;
        }
        return history_sync(h);
}

int history_share_revoke(History *h, const char *id, const SessionKey *session) {
        _cleanup_(stmt_releasep) sqlite3_stmt *s = NULL;
        int r;

        assert(h);
        assert(id);
        assert(session);

        r = owned_running(h, id, session);
        if (r < 0)
                return r;
        r = statement(h, STMT_SHARE_REVOKE, &s);
        if (r < 0)
                return r;
        sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
        if (step_durable(h, s) != SQLITE_DONE)
                return db_error(h, "revoke shares");
        return sqlite3_changes(h->db);
}

/* Whether a and b are equal, in a time that does not depend on where they
 * differ. */
static bool memeq_const_time(const uint8_t *a, const uint8_t *b, size_t n) {
        uint8_t d = 0;

        for (size_t i = 0; i < n; i++)
                d |= a[i] ^ b[i];
        return d == 0;
}

int history_share_find(
        History *h,
        const uint8_t token_sha256[static HISTORY_SHARE_DIGEST_SIZE],
        char ret_id[static QUERY_ID_MAX],
        SessionKey *ret_session) {
        _cleanup_(stmt_releasep) sqlite3_stmt *s = NULL;
        const void *digest, *session;
        const char *id;
        int r;

        assert(h);
        assert(token_sha256);
        assert(ret_id);
        assert(ret_session);

        r = statement(h, STMT_SHARE_FIND, &s);
        if (r < 0)
                return r;
        sqlite3_bind_blob(s, 1, token_sha256, HISTORY_SHARE_DIGEST_SIZE, SQLITE_STATIC);
        r = sqlite3_step(s);
        if (r == SQLITE_DONE)
                return -ENOENT;
        if (r != SQLITE_ROW)
                return db_error(h, "find a share");
        digest = sqlite3_column_blob(s, 0);
        id = column_text(s, 1, "");
        session = sqlite3_column_blob(s, 2);
        if (!digest || sqlite3_column_bytes(s, 0) != HISTORY_SHARE_DIGEST_SIZE || !session ||
            sqlite3_column_bytes(s, 2) != (int) sizeof(ret_session->bytes) || strlen(id) >= QUERY_ID_MAX)
                return -ENOENT;
        /* The index found it by the digest; the digest is compared once
         * more, in constant time, so that the answer never rests on a
         * comparison that stops at the first differing byte. */
        if (!memeq_const_time(digest, token_sha256, HISTORY_SHARE_DIGEST_SIZE))
                return -ENOENT;
        memcpy(ret_session->bytes, session, sizeof(ret_session->bytes));
        snprintf(ret_id, QUERY_ID_MAX, "%s", id);
        return 0;
}

/* ---- the store under faults ---- */

static const char *const history_storage_state_table[_HISTORY_STORAGE_STATE_MAX] = {
        [HISTORY_STORAGE_OK] = "ok",
        [HISTORY_STORAGE_DEGRADED] = "degraded",
        [HISTORY_STORAGE_FAILED] = "failed",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(history_storage_state, HistoryStorageState)

static void pending_done(PendingOutcome *p) {
        free(p->id);
        for (size_t i = 0; i < ELEMENTSOF(p->strings); i++)
                free(p->strings[i]);
        for (size_t i = 0; i < p->n_artifacts; i++)
                artifact_done(&p->artifacts[i]);
        free(p->artifacts);
        *p = (PendingOutcome){ 0 };
}

/* Under lock. */
static PendingOutcome *pending_find(History *h, const char *id) {
        for (size_t i = 0; i < h->c->n_pending; i++)
                if (streq(h->c->pending[i]->id, id))
                        return h->c->pending[i];
        return NULL;
}

bool history_outcome_waits(History *h, const char *id) {
        bool found;

        assert(h);
        assert(id);
        cond_lock(h);
        found = pending_find(h, id);
        cond_unlock(h);
        return found;
}

/* A copy of text into p->strings[i] (NULL stays NULL), its bytes counted. */
static int pending_keep(PendingOutcome *p, size_t i, const char **text) {
        if (!*text)
                return 0;
        p->strings[i] = strdup(*text);
        if (!p->strings[i])
                return -ENOMEM;
        p->size += strlen(*text) + 1;
        *text = p->strings[i];
        return 0;
}

/* Copies of the artifacts not yet kept: their names and a descriptor of
 * each file (the sandbox may remove the file itself meanwhile; the bytes
 * stay while it is open). */
static int pending_keep_artifacts(PendingOutcome *p, const Artifact *artifacts, size_t n) {
        if (n == 0)
                return 0;
        p->artifacts = calloc(n, sizeof *p->artifacts);
        if (!p->artifacts)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                Artifact *a = &p->artifacts[p->n_artifacts];

                *a = (Artifact){ .fd = -1 };
                p->n_artifacts++;
                a->name = strdup(artifacts[i].name);
                if (!a->name)
                        return -ENOMEM;
                a->media_type = artifacts[i].media_type;
                a->size_bytes = artifacts[i].size_bytes;
                memcpy(a->sha256, artifacts[i].sha256, sizeof a->sha256);
                a->fd = fcntl(artifacts[i].fd, F_DUPFD_CLOEXEC, 3);
                if (a->fd < 0)
                        return -errno;
                p->size += strlen(a->name) + 1;
        }
        return 0;
}

/* Keep the outcome o of id in memory, with the artifacts of it not yet
 * kept (o->artifacts from skip on). */
static int pending_add(History *h, const char *id, const HistoryOutcome *o, size_t skip) {
        _cleanup_free_ PendingOutcome *p = calloc(1, sizeof *p);
        PendingOutcome **n;
        const char **texts[8];
        size_t waiting;
        int r = 0;

        if (!p)
                return -ENOMEM;
        p->o = *o;
        texts[0] = &p->o.answer;
        texts[1] = &p->o.sources_json;
        texts[2] = &p->o.citations_json;
        texts[3] = &p->o.error_code;
        texts[4] = &p->o.error_message;
        texts[5] = &p->o.model;
        texts[6] = &p->o.sandbox;
        texts[7] = &p->o.searches_json;
        _Static_assert(ELEMENTSOF(texts) == ELEMENTSOF(p->strings), "one string per text");
        if (history_outcome_waits(h, id))
                return -EEXIST;
        p->id = strdup(id);
        if (!p->id)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(texts) && r >= 0; i++)
                r = pending_keep(p, i, texts[i]);
        if (r >= 0 && skip < o->n_artifacts)
                r = pending_keep_artifacts(p, o->artifacts + skip, o->n_artifacts - skip);
        p->o.artifacts = p->artifacts;
        p->o.n_artifacts = p->n_artifacts;
        cond_lock(h);
        n = r < 0 ? NULL : reallocarray(h->c->pending, h->c->n_pending + 1, sizeof *n);
        if (n) {
                h->c->pending = n;
                h->c->pending[h->c->n_pending++] = p;
                h->c->pending_bytes += p->size;
        }
        waiting = h->c->n_pending;
        cond_unlock(h);
        if (!n) {
                pending_done(p);
                return r < 0 ? r : -ENOMEM;
        }
        log_warning(
                "History store: the outcome of query %s is kept in memory until it can be written%s (%zu waiting).",
                id,
                p->n_artifacts > 0 ? ", with its files" : "",
                waiting);
        TAKE_PTR(p);
        return 0;
}

/* Under lock: p out of the list, and freed. */
static void pending_remove(History *h, PendingOutcome *p) {
        size_t i = 0;

        while (i < h->c->n_pending && h->c->pending[i] != p)
                i++;
        assert(i < h->c->n_pending);
        h->c->pending_bytes -= MIN(h->c->pending_bytes, p->size);
        memmove(&h->c->pending[i], &h->c->pending[i + 1], (h->c->n_pending - i - 1) * sizeof *h->c->pending);
        h->c->n_pending--;
        pending_done(p);
        free(p);
}

/* Take p (under lock) for this connection to write: NULL when another
 * is writing it. */
static PendingOutcome *pending_take(History *h, const char *id) {
        PendingOutcome *p;

        cond_lock(h);
        p = pending_find(h, id);
        if (p && p->landing)
                p = NULL;
        if (p)
                p->landing = true;
        cond_unlock(h);
        return p;
}

/* Write the outcome taken (pending_take()) now, durably: first its
 * artifacts not yet kept, each dropped from it once it is, then the
 * record. Returns 0 (written, or its record is gone: either way it waits
 * no more), or -EIO (it waits on). */
static int pending_land_taken(History *h, PendingOutcome *p) {
        int r = 0;

        while (p->n_artifacts > 0) {
                char aid[HISTORY_ARTIFACT_ID_MAX];

                r = add_artifact(h, p->id, &p->artifacts[0], aid);
                if (r == -EIO && storage_fault(h))
                        break;
                if (r < 0 && r != -ENOENT)
                        log_warning_errno(r, "Query %s: an artifact could not be kept", p->id);
                cond_lock(h);
                artifact_done(&p->artifacts[0]);
                memmove(&p->artifacts[0], &p->artifacts[1], (p->n_artifacts - 1) * sizeof *p->artifacts);
                p->n_artifacts--;
                p->o.n_artifacts = p->n_artifacts;
                cond_unlock(h);
        }
        if (p->n_artifacts == 0)
                r = finish(h, p->id, &p->o, true);
        if (r == -EIO) {
                cond_lock(h);
                p->landing = false;
                cond_unlock(h);
                return r;
        }
        if (r < 0)
                log_warning_errno(r, "History store: the outcome of query %s is dropped", p->id);
        else
                log_info("History store: the outcome of query %s is stored at last.", p->id);
        cond_lock(h);
        pending_remove(h, p);
        cond_unlock(h);
        return 0;
}

/* The outcome of id, if it waits and no other connection is writing it,
 * written now (pending_land_taken()). */
static int pending_land(History *h, const char *id) {
        PendingOutcome *p = pending_take(h, id);

        return p ? pending_land_taken(h, p) : 0;
}

/* A copy of text in *slot, replacing what was there. */
static int replace_text(char **slot, const char *text) {
        char *c = NULL;

        if (text) {
                c = strdup(text);
                if (!c)
                        return -ENOMEM;
        }
        free(*slot);
        *slot = c;
        return 0;
}

/* The record's lists replaced by the outcome's (checked arrays: -EINVAL
 * cannot happen). */
static int pending_apply_lists(HistoryRecord *rec, const HistoryOutcome *o) {
        Source *sources = NULL;
        SourceCitation *citations = NULL;
        size_t n_sources = 0, n_citations = 0;
        int r;

        r = source_parse_array(o->sources_json ? o->sources_json : "[]", &sources, &n_sources);
        if (r < 0)
                return r;
        r = source_citation_parse_array(o->citations_json ? o->citations_json : "[]", &citations, &n_citations);
        if (r < 0) {
                source_free_many(sources, n_sources);
                return r;
        }
        source_free_many(rec->sources, rec->n_sources);
        source_citation_free_many(rec->citations, rec->n_citations);
        rec->sources = sources;
        rec->n_sources = n_sources;
        rec->citations = citations;
        rec->n_citations = n_citations;
        return 0;
}

/* pending_apply() under the lock. */
static int pending_apply_locked(History *h, HistoryRecord *rec) {
        const PendingOutcome *p;
        const HistoryOutcome *o;

        p = pending_find(h, rec->id);
        if (!p)
                return 0;
        o = &p->o;
        if (replace_text(&rec->status, o->succeeded ? "succeeded" : "failed") < 0 ||
            replace_text(&rec->answer, o->succeeded ? (o->answer ? o->answer : "") : NULL) < 0 ||
            pending_apply_lists(rec, o) < 0 ||
            replace_text(
                    &rec->error_code,
                    o->succeeded ? NULL : (o->error_code ? o->error_code : "internal_error")) < 0 ||
            replace_text(&rec->error_message, o->succeeded ? NULL : (o->error_message ? o->error_message : "")) <
                    0 ||
            replace_text(&rec->model, o->model ? o->model : "") < 0 ||
            replace_text(&rec->sandbox, o->sandbox) < 0)
                return -ENOMEM;
        rec->timings = o->timings;
        rec->prompt_tokens = o->prompt_tokens;
        rec->completion_tokens = o->completion_tokens;
        rec->finished_at = o->finished_at;
        return 0;
}

static int pending_apply(History *h, HistoryRecord *rec) {
        int r;

        if (!rec->status || !streq(rec->status, "running") || !rec->id)
                return 0;
        /* Held while the outcome is copied: a writer frees it only under lock. */
        cond_lock(h);
        r = pending_apply_locked(h, rec);
        cond_unlock(h);
        return r;
}

/* At history_free() of the loop's connection (the worker's is gone): the
 * outcomes still waiting get one last try, then their records are marked
 * failed with the true reason, if even that can be written. What cannot
 * is said: the next start marks them failed. */
static void pending_last_chance(History *h) {
        while (h->c->n_pending > 0) {
                PendingOutcome *p = h->c->pending[0];
                char message[256];
                HistoryOutcome failed;

                p->landing = true;
                if (pending_land_taken(h, p) >= 0)
                        continue;
                snprintf(
                        message,
                        sizeof message,
                        "The answer could not be stored: %s",
                        history_fault_to_string(current_fault(h) ? current_fault(h) : -EIO));
                failed = (HistoryOutcome){
                        .error_code = "internal_error",
                        .error_message = message,
                        .timings = p->o.timings,
                        .model = p->o.model,
                        .finished_at = p->o.finished_at,
                        .sandbox = p->o.sandbox,
                };
                if (finish(h, p->id, &failed, true) >= 0)
                        log_error("History store: query %s is recorded as failed: %s.", p->id, message);
                else
                        log_error(
                                "History store: the outcome of query %s is lost: %s; the next start records it as failed.",
                                p->id,
                                history_fault_to_string(current_fault(h) ? current_fault(h) : -EIO));
                cond_lock(h);
                pending_remove(h, p);
                cond_unlock(h);
        }
}

static void history_get_storage_locked(History *h, uint64_t min_free_bytes, HistoryStorage *ret);

static uint64_t free_bytes_of(const char *directory) {
        struct statvfs v;

        if (!directory || statvfs(directory, &v) < 0)
                return UINT64_MAX;
        return (uint64_t) v.f_bavail * (uint64_t) v.f_frsize;
}

void history_get_storage(History *h, uint64_t min_free_bytes, HistoryStorage *ret) {
        assert(h);
        assert(ret);

        cond_lock(h);
        history_get_storage_locked(h, min_free_bytes, ret);
        cond_unlock(h);
}

/* history_get_storage(), under lock. */
static void history_get_storage_locked(History *h, uint64_t min_free_bytes, HistoryStorage *ret) {
        *ret = (HistoryStorage){
                .state = HISTORY_STORAGE_OK,
                .fault = h->c->damage ? -EUCLEAN : h->c->fault,
                .damaged = h->c->damage,
                .n_pending = h->c->n_pending,
                .writes_failed = h->c->writes_failed,
                .free_bytes = free_bytes_of(h->directory),
                .refused = h->c->refused,
        };
        if (h->c->damage) {
                snprintf(
                        h->cause,
                        sizeof h->cause,
                        "the history database %s is damaged (%s); see wikiwebd(8), \"When the database is damaged\"",
                        h->path,
                        h->c->damage);
                ret->state = HISTORY_STORAGE_FAILED;
        } else if (h->c->fault < 0 && h->c->n_pending > 0)
                snprintf(
                        h->cause,
                        sizeof h->cause,
                        "%s; %zu %s to be stored",
                        history_fault_to_string(h->c->fault),
                        h->c->n_pending,
                        h->c->n_pending == 1 ? "answer waits" : "answers wait");
        else if (h->c->fault < 0)
                snprintf(h->cause, sizeof h->cause, "%s", history_fault_to_string(h->c->fault));
        else if (h->c->n_pending > 0)
                snprintf(
                        h->cause,
                        sizeof h->cause,
                        "%zu %s to be stored",
                        h->c->n_pending,
                        h->c->n_pending == 1 ? "answer waits" : "answers wait");
        else if (min_free_bytes > 0 && ret->free_bytes < min_free_bytes)
                snprintf(
                        h->cause,
                        sizeof h->cause,
                        "low space: %" PRIu64
                        " bytes free on the state directory, under "
                        "WIKI_WEB_STATE_MIN_FREE_BYTES (%" PRIu64 ")",
                        ret->free_bytes,
                        min_free_bytes);
        else
                return;
        if (ret->state == HISTORY_STORAGE_OK)
                ret->state = HISTORY_STORAGE_DEGRADED;
        ret->cause = h->cause;
}

int history_check_writable(History *h, const char **ret_cause) {
        int fault;

        assert(h);

        cond_lock(h);
        fault = h->c->damage    ? -EUCLEAN :
                h->c->fault < 0 ? h->c->fault :
                h->c->n_pending >= HISTORY_PENDING_MAX || h->c->pending_bytes >= HISTORY_PENDING_BYTES_MAX ?
                                  -ENOBUFS :
                                  0;
        if (fault != 0) {
                h->c->refused++;
                if (ret_cause) {
                        HistoryStorage st;

                        history_get_storage_locked(h, 0, &st);
                        *ret_cause = fault == -ENOBUFS ? history_fault_to_string(fault) : st.cause;
                }
        }
        cond_unlock(h);
        return fault;
}

bool history_needs_retry(History *h) {
        bool r;

        assert(h);
        cond_lock(h);
        r = !h->c->damage && (h->c->fault < 0 || h->c->n_pending > 0);
        cond_unlock(h);
        return r;
}

/* The ids of the outcomes waiting, oldest first (a strv), NULL when out of memory. */
static char **pending_ids(History *h) {
        char **ids;

        cond_lock(h);
        ids = calloc(h->c->n_pending + 1, sizeof(char *));
        for (size_t i = 0; ids && i < h->c->n_pending; i++)
                if (!(ids[i] = strdup(h->c->pending[i]->id))) {
                        ids = strv_free(ids);
                        break;
                }
        cond_unlock(h);
        return ids;
}

int history_retry(History *h) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *s = NULL;
        _cleanup_(strv_freep) char **ids = NULL;
        int fault, r;
        size_t n;

        assert(h);

        cond_lock(h);
        fault = h->c->damage ? -EUCLEAN : h->c->fault;
        n = h->c->n_pending;
        cond_unlock(h);
        if (fault == -EUCLEAN)
                return -EUCLEAN;
        if (n > 0) {
                ids = pending_ids(h);
                if (!ids)
                        return -ENOMEM;
                for (size_t i = 0; ids[i]; i++)
                        if (pending_land(h, ids[i]) < 0)
                                break;
                cond_lock(h);
                n = h->c->n_pending;
                cond_unlock(h);
                return (int) n;
        }
        if (fault == 0)
                return 0;

        /* Nothing waits: one write of the smallest kind (the schema
         * version, unchanged: one page in the WAL) says whether writes
         * land again. */
        r = prepare(h, SCHEMA_VERSION_SQL, &s);
        if (r < 0)
                return current_fault(h) < 0 ? current_fault(h) : r;
        if (step_write(h, s) != SQLITE_DONE) {
                (void) db_error(h, "write a probe");
                return current_fault(h) < 0 ? current_fault(h) : -EIO;
        }
        return 0;
}

const char *history_path(History *h) {
        assert(h);
        return h->path;
}

void history_set_damaged(History *h, const char *problem) {
        assert(h);
        assert(problem);

        cond_lock(h);
        if (h->c->damage) {
                cond_unlock(h);
                return;
        }
        h->c->damage = strdup(problem);
        if (!h->c->damage)
                h->c->damage = strdup("PRAGMA quick_check failed");
        cond_unlock(h);
        log_error(
                "History store: %s is damaged: PRAGMA quick_check says \"%s\". Writes are refused; recover it with "
                "sqlite3's .recover or restore it from a backup (wikiwebd(8), \"When the database is damaged\").",
                h->path,
                problem);
}

struct HistoryQuickCheck {
        pthread_mutex_t lock;
        sqlite3 *db; /* the check's connection while it is open */
        bool stop;
};

int history_quick_check_new(HistoryQuickCheck **ret) {
        HistoryQuickCheck *c = calloc(1, sizeof *c);

        if (!c)
                return -ENOMEM;
        pthread_mutex_init(&c->lock, NULL);
        *ret = c;
        return 0;
}

HistoryQuickCheck *history_quick_check_free(HistoryQuickCheck *c) {
        if (!c)
                return NULL;
        pthread_mutex_destroy(&c->lock);
        free(c);
        return NULL;
}

void history_quick_check_stop(HistoryQuickCheck *c) {
        if (!c)
                return;
        pthread_mutex_lock(&c->lock);
        c->stop = true;
        /* The integrity check looks at the interrupt flag as it goes. */
        if (c->db)
                sqlite3_interrupt(c->db);
        pthread_mutex_unlock(&c->lock);
}

/* Publish the check's connection (NULL: closing it); false when stopped already. */
static bool quick_check_publish(HistoryQuickCheck *c, sqlite3 *db) {
        bool stopped;

        if (!c)
                return true;
        pthread_mutex_lock(&c->lock);
        c->db = db;
        stopped = c->stop;
        pthread_mutex_unlock(&c->lock);
        return !stopped;
}

int history_quick_check_path(const char *path, HistoryQuickCheck *c, char **ret_problem) {
        sqlite3 *db = NULL;
        sqlite3_stmt *s = NULL;
        char *problem = NULL;
        int r;

        assert(path);
        assert(ret_problem);

        if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
                (void) sqlite3_close_v2(db);
                return -EIO;
        }
        (void) sqlite3_busy_timeout(db, 5000);
        if (!quick_check_publish(c, db)) {
                (void) sqlite3_close_v2(db);
                return -ECANCELED;
        }
        r = sqlite3_prepare_v2(db, "PRAGMA quick_check(1)", -1, &s, NULL);
        if (r == SQLITE_OK)
                r = sqlite3_step(s);
        if (r == SQLITE_ROW) {
                const char *t = (const char *) sqlite3_column_text(s, 0);

                if (t && !streq(t, "ok")) {
                        problem = strndup(t, 200);
                        r = problem ? SQLITE_DONE : SQLITE_NOMEM;
                } else
                        r = SQLITE_DONE;
        } else if ((r & 0xff) == SQLITE_CORRUPT || (r & 0xff) == SQLITE_NOTADB) {
                problem = strdup(sqlite3_errmsg(db));
                r = problem ? SQLITE_DONE : SQLITE_NOMEM;
        }
        (void) sqlite3_finalize(s);
        (void) quick_check_publish(c, NULL);
        (void) sqlite3_close_v2(db);
        if (r == SQLITE_INTERRUPT)
                return -ECANCELED;
        if (r != SQLITE_DONE)
                return r == SQLITE_NOMEM ? -ENOMEM : -EIO;
        *ret_problem = problem;
        return 0;
}

#if ENABLE_TEST_FAULTS
void history_set_test_write_fault(History *h, int code, unsigned n, unsigned count) {
        assert(h);
        cond_lock(h);
        h->c->write_fault_code = code;
        h->c->write_fault_n = n;
        h->c->write_fault_count = MAX(count, 1u);
        cond_unlock(h);
}
#endif
