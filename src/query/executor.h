/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <systemd/sd-event.h>

#include "admission/admission.h"
#include "shared/api-error.h"
#include "shared/config.h"

/* The execution step of a query (API.md 8): wiki, model, sandbox, cleanup.
 *
 * This is the interface the pipeline implements. Until it exists, the
 * executor reports every query honestly as failed with execution_failed
 * ("query execution is not configured"), asynchronously from the event
 * loop, with its (empty) cleanup confirmed. */

typedef struct QueryJob {
        char id[QUERY_ID_MAX];
        SessionKey session;
        const char *question; /* borrowed for the duration of start() */
        char *const *pages;   /* borrowed, NULL-terminated */
} QueryJob;

typedef struct QueryOutcome {
        const char *query_id;
        bool succeeded;
        ApiError error;         /* when !succeeded */
        const char *message;    /* raw, the caller sanitizes; NULL: the default */
        const char *answer;     /* when succeeded */
        bool cleanup_confirmed; /* false: the slot must not be promoted yet */
} QueryOutcome;

/* Called once per started job, from the event loop, never from inside
 * start(). The outcome is borrowed for the duration of the call. */
typedef void (*QueryDoneHandler)(const QueryOutcome *outcome, void *userdata);

typedef struct QueryExecutor QueryExecutor;

/* Borrows event and config. */
int query_executor_new(sd_event *event, const Config *config, QueryExecutor **ret);
QueryExecutor *query_executor_free(QueryExecutor *x);
/* Whether wiki and model are configured (false: every query fails with
 * execution_failed). */
bool query_executor_is_configured(const QueryExecutor *x);
/* Start the job; done is called exactly once later. Returns 0, -EBUSY if a
 * job is already running, -ENOMEM. */
int query_executor_start(QueryExecutor *x, const QueryJob *job, QueryDoneHandler done, void *userdata);
/* Whether a job is running. */
bool query_executor_busy(const QueryExecutor *x);

/* End the running job now (the service is stopping and cannot wait any
 * longer): done is called from the event loop with execution_failed and
 * the reason, after cleanup. Returns 0, or -ESRCH when no job runs. */
int query_executor_abort(QueryExecutor *x, const char *reason);

/* Test-only (WIKI_WEB_TEST_FAULTS=1): make each job take this long before
 * it reports, so tests can stop the service while a query runs. */
void query_executor_set_test_delay(QueryExecutor *x, usec_t delay);
