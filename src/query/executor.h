/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "query/query-types.h"
#include "shared/config.h"
#include "shared/macro.h"
#include "shared/time-util.h"

/* The execution step of a query (API.md 8): wiki, model, sandbox, cleanup.
 *
 * The executor runs up to WIKI_WEB_QUEUE_SLOTS queries at once, each its
 * own QueryRun (query/pipeline.h) with its own deadline, each reported
 * once.
 * Without a wiki and a model in the configuration it reports every query
 * honestly as failed with execution_failed ("query execution is not
 * configured: … are not set", naming the missing settings and the README's
 * "Quick start"), asynchronously from the event loop, with its (empty)
 * cleanup confirmed. It owns the daemon's one Upstream (libcurl multi, with
 * the destination policy of the config), shared by every run. */

typedef struct QueryExecutor QueryExecutor;

/* One started job: the caller's handle (importd's Transfer, an sd-bus
 * slot). The caller owns it from query_executor_start() and frees it with
 * query_execution_free(): before the job is reported that cancels it at
 * once, without any callback (what it had in flight is dropped; use
 * query_execution_abort() for an end through the cleanup state); after
 * the report it frees the run (its query directory, and the outcome,
 * which points into it). Every handle is freed before the executor. */
typedef struct QueryExecution QueryExecution;

/* Called once per started job, from the event loop, never from inside
 * start(); error is outcome->error. The job runs no more when it is called
 * (done may start another, and may free e). The outcome is borrowed until
 * e is freed. After an outcome with cleanup_confirmed = false, the Sandbox
 * announces the query's id when the cleanup is confirmed after all
 * (sandbox.h); the executor is done with the job. */
typedef void (*QueryExecutionDone)(QueryExecution *e, int error, const QueryOutcome *outcome, void *userdata);

/* Borrows event and config. Returns 0, -ENOMEM, -EINVAL (a configured URL
 * the destination policy cannot parse), -EIO (libcurl). */
int query_executor_new(sd_event *event, const Config *config, QueryExecutor **ret);

/* The sandbox to offer run_python with (borrowed, must outlive the executor;
 * NULL: none). Queries started later use it when it is available. */
typedef struct Sandbox Sandbox;
void query_executor_set_sandbox(QueryExecutor *x, Sandbox *sandbox);

/* The Sandbox announced a change of its state (sandbox_set_state_handler()):
 * a query waiting for it to start looks again. */
void query_executor_sandbox_changed(QueryExecutor *x);

QueryExecutor *query_executor_free(QueryExecutor *x);
DEFINE_TRIVIAL_CLEANUP_FUNC(QueryExecutor *, query_executor_free);
/* Whether wiki and model are configured (false: every query fails with
 * execution_failed). */
bool query_executor_is_configured(const QueryExecutor *x);
/* Start the job; done is called exactly once later, for this job, and
 * on_event (NULL: none) for each of its pipeline events, both with
 * userdata. Returns 0 and the handle in *ret; -EBUSY if
 * WIKI_WEB_QUEUE_SLOTS jobs are running already or one with the same id
 * is, -ENOMEM. */
int query_executor_start(
        QueryExecutor *x,
        const QueryJob *job,
        QueryExecutionDone done,
        QueryEventHandler on_event,
        void *userdata,
        QueryExecution **ret);
QueryExecution *query_execution_free(QueryExecution *e);
DEFINE_TRIVIAL_CLEANUP_FUNC(QueryExecution *, query_execution_free);
/* How many jobs are running (whose done has not been called yet). */
unsigned query_executor_n_running(const QueryExecutor *x);
/* Whether the job still runs (its done has not been called). */
bool query_execution_is_running(const QueryExecution *e);

/* End the running job now (an administrator's CancelQuery; the service is
 * stopping and cannot wait any longer): its done is called from the event
 * loop with execution_failed and the reason (static, or outliving the
 * job), after cleanup. Returns 0, or -ESRCH when the job was reported
 * already. */
int query_execution_abort(QueryExecution *e, const char *reason);

#if ENABLE_TEST_FAULTS
/* Test-only (shared/fault.h): make each job take this long before
 * it reports, so tests can stop the service while a query runs. The
 * pipeline does not run then, configured or not: each job ends as an
 * unconfigured one ("query execution is not configured"). */
void query_executor_set_test_delay(QueryExecutor *x, usec_t delay);
/* Test-only: the bound of the checks and searches outside a query
 * instead of REVISION_CHECK_TIMEOUT_USEC (0: that). */
void query_executor_set_test_check_timeout(QueryExecutor *x, usec_t timeout);
#endif

/* The staleness check of a record's sources (API.md 9, GET
 * /history/{id}/sources): the wiki's current revision of 1..50 titles in
 * one request (prop=info), on a wiki client of its own (logged in as a
 * query's is), bounded by REVISION_CHECK_TIMEOUT_USEC. It runs beside a
 * query. */
#define REVISION_CHECK_TIMEOUT_USEC (30 * USEC_PER_SEC)

typedef struct RevisionCheck RevisionCheck;
typedef struct WikiResult WikiResult;

/* error is r->error; r is borrowed for the call (its revisions, or the
 * error's api_error and sanitized message). Called once, from the event
 * loop, unless the check is freed first. */
typedef void (*RevisionCheckDone)(RevisionCheck *c, int error, const WikiResult *r, void *userdata);

/* Returns 0, -EOPNOTSUPP (the wiki is not configured), -EINVAL (no titles,
 * too many, or an invalid one), -ENOMEM. The caller owns *ret and frees it
 * (cancelling it) before the executor. */
int query_executor_check_revisions(
        QueryExecutor *x, char **titles, RevisionCheckDone done, void *userdata, RevisionCheck **ret);
RevisionCheck *revision_check_free(RevisionCheck *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(RevisionCheck *, revision_check_free);

/* What the asking person may read (API.md "Whose permissions"): whether
 * user (their wiki user name; NULL: an anonymous reader) may read each of
 * 1..50 titles, in one request to the wiki's extension WikiwebReadCheck,
 * on a wiki client of its own (logged in as a query's is), bounded by
 * REVISION_CHECK_TIMEOUT_USEC. done gets r->readable[i] for titles[i], or
 * an error (fail closed: wiki_auth_failed naming what to fix when the wiki
 * lacks the extension or the account the right). Nothing is cached.
 * Returns as query_executor_check_revisions(); free with
 * revision_check_free(). */
int query_executor_check_readable(
        QueryExecutor *x,
        const char *user,
        char **titles,
        RevisionCheckDone done,
        void *userdata,
        RevisionCheck **ret);

/* A search (limit 1..MEDIAWIKI_SEARCH_MAX) or a read of one page, as a
 * query's tools make them but outside any query (the Manager's
 * manager_wiki_search() and manager_wiki_read(), which filter for the
 * person), on a wiki client of its own with the service account, bounded
 * by REVISION_CHECK_TIMEOUT_USEC. Returns as
 * query_executor_check_revisions(). */
int query_executor_wiki_search(
        QueryExecutor *x,
        const char *query,
        unsigned limit,
        RevisionCheckDone done,
        void *userdata,
        RevisionCheck **ret);
int query_executor_wiki_read(
        QueryExecutor *x, const char *title, RevisionCheckDone done, void *userdata, RevisionCheck **ret);
/* From inside done: move the result out (wiki_result_done() frees it). */
void revision_check_take_result(RevisionCheck *c, WikiResult *ret);

/* Whether WIKI_WEB_WIKI_READ_AS=person. */
bool query_executor_reads_as_person(const QueryExecutor *x);

/* Whether the wiki answered the last read check of the executor's own
 * (health, WIKI_WEB_WIKI_READ_AS=person): "ok", "failed", or "unknown"
 * (none answered yet); NULL in service mode. The check, of an anonymous
 * reader on the page "Main Page", is made at start and then every minute
 * on an event loop timer; this only reads its last result. */
const char *query_executor_read_check_health(const QueryExecutor *x);
