/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <systemd/sd-event.h>

#include "query/llm-client.h"
#include "query/query-types.h"
#include "query/upstream.h"
#include "sandbox/sandbox.h"
#include "shared/api-error.h"
#include "shared/config.h"
#include "shared/macro.h"

/* One query's run (API.md 8): the per-query state machine behind the
 * executor (docs/CODING_STYLE.md).
 *
 *   SANDBOX_WAIT  only when the sandbox is starting as the query starts
 *            (SANDBOX_STARTING): wait until it is available or
 *            unavailable (the Sandbox announces it:
 *            query_run_sandbox_changed()), at most until
 *            query_sandbox_wait_until() (a timer of its own); then on with
 *            run_python or without (QueryOutcome.sandbox says which)
 *   PRELOAD  the request's "pages", one wiki_read each, as sources
 *   STEP     agent_next() decides: a model request, a tool call, the answer
 *            or a failure
 *   MODEL    one chat-completions exchange in flight (q->model_op)
 *   TOOL     one tool in flight (q->wiki_op or q->sandbox_run)
 *   CLEANUP  nothing may be in flight any more: a sandbox run that was
 *            cancelled is waited for; /out is collected into artifacts
 *   DONE     the outcome is reported from a defer source
 *
 * At most one operation is in flight, owned by its field. Every completion
 * records its result and calls query_run_advance(). One deadline timer
 * (WIKI_WEB_QUERY_TIMEOUT_SECONDS) ends the query with query_timeout,
 * cancelling whatever is in flight (a wait for the sandbox too); an abort
 * does the same with execution_failed. The first error wins. Every path
 * goes through CLEANUP.
 *
 * Ownership: the executor owns a QueryRun from query_run_new() until
 * query_run_free(). It borrows the event loop, the config, the Upstream, the
 * model client and the sandbox (NULL: run_python is not offered), which
 * must outlive it. The done callback runs exactly once, from a defer
 * source; the run has nothing left to do after it and is freed once it
 * returns. A run whose
 * sandbox cleanup is not yet confirmed at that point reports
 * cleanup_confirmed = false; the cleanup goes on in the Sandbox, which
 * announces it by the query's id when it is confirmed
 * (sandbox_set_cleanup_confirmed_handler()). */

typedef struct QueryRun QueryRun;

/* When a query started at started, with its deadline, stops waiting for a
 * starting sandbox: QUERY_SANDBOX_WAIT_MAX_USEC later, never past the
 * deadline. */
usec_t query_sandbox_wait_until(usec_t started, usec_t deadline);

/* What a query does about run_python with the sandbox in state at time
 * now: true and *ret when it is decided (available: offered; unavailable:
 * not offered, without waiting; starting at or past wait_until: not
 * offered, "starting"), false to wait on (starting, before wait_until).
 * Pure. */
bool query_sandbox_decide(SandboxState state, usec_t now, usec_t wait_until, QuerySandbox *ret);

/* error is outcome->error: 0 when the query succeeded. */
typedef void (*QueryRunDone)(QueryRun *q, int error, const QueryOutcome *outcome, void *userdata);

typedef struct QueryRunContext {
        sd_event *event;
        const Config *config;
        Upstream *upstream;
        LlmClient *llm;             /* the model client, long-lived: what it learnt of the server persists */
        Sandbox *sandbox;           /* NULL or unavailable: no run_python; starting: waited for */
        QueryEventHandler on_event; /* NULL: none */
        void *event_userdata;
} QueryRunContext;

/* Starts the run: the first operation begins from a defer. job is copied.
 * Returns 0, -ENOMEM, -EINVAL (the config lacks wiki or model). */
int query_run_new(
        const QueryRunContext *ctx, const QueryJob *job, QueryRunDone done, void *userdata, QueryRun **ret);
/* Cancels whatever is in flight without any callback. */
QueryRun *query_run_free(QueryRun *q);
DEFINE_TRIVIAL_CLEANUP_FUNC(QueryRun *, query_run_free);

/* End the run with error (a negative errno) and api_error (the first error
 * wins) through the cleanup state. message: raw, copied. No-op once the
 * outcome is reported. */
void query_run_abort(QueryRun *q, int error, ApiError api_error, const char *message);
/* The sandbox's state changed: a run waiting for it looks again (from a
 * defer). No-op in any other state. */
void query_run_sandbox_changed(QueryRun *q);
