/* SPDX-License-Identifier: MIT */
#pragma once

#include "admission/admission.h"
#include "admission/wait-tracker.h"
#include "http/httpd.h"
#include "query/executor.h"
#include "shared/config.h"
#include "shared/macro.h"
#include "store/history.h"

/* The endpoints of API.md 6, 7 and 9: they turn a validated request into
 * calls on the admission machine, the executor and the history store, and
 * their results into the JSON bodies of the contract.
 *
 * An Api borrows the config, the admission machine, the executor and the
 * history store. */

typedef struct Api Api;

/* Called when a query has ended (its cleanup confirmed or not), for the
 * D-Bus signal and the counters. status is "succeeded" or "failed". */
typedef void (*ApiQueryFinishedHook)(
        const char *query_id, const char *status, usec_t duration_usec, bool cleanup_confirmed, void *userdata);

/* event: where the completion of a query's record is reported (its sync
 * runs on a thread of the Api's own, SyncWorker). */
int api_new(
        sd_event *event,
        const Config *config,
        Admission *admission,
        QueryExecutor *executor,
        History *history,
        Api **ret);
Api *api_free(Api *api);
DEFINE_TRIVIAL_CLEANUP_FUNC(Api *, api_free);
void api_set_query_finished_hook(Api *api, ApiQueryFinishedHook hook, void *userdata);
/* The running query's phase changed (API.md 11.4, RunningQueryPhase on
 * D-Bus): "model", "wiki", "sandbox", "cleanup", or "" when none runs. */
typedef void (*ApiPhaseHook)(const char *phase, void *userdata);
void api_set_phase_hook(Api *api, ApiPhaseHook hook, void *userdata);

/* Every event of the admission machine, for the queue streams (API.md
 * 11.1); called from the machine's handler, so it only takes note. api may
 * be NULL (not made yet). */
void api_admission_event(Api *api, const AdmissionEvent *ev);
void api_set_degraded(Api *api, bool degraded);

/* The recent durations and the wait range of the status object and the
 * queue stream (API.md 5): borrowed, outlives api; each query's duration
 * is added to it once its cleanup is confirmed. */
void api_set_wait_tracker(Api *api, WaitTracker *t);

/* The cleanup of query_id is confirmed (the Sandbox's announcement). If
 * that query ended unconfirmed, its slot is freed now (admission_finish())
 * and health is ok again unless something else keeps it degraded; any
 * other id is ignored. */
void api_cleanup_confirmed(Api *api, const char *query_id);

bool api_is_degraded(const Api *api);
/* Whether a query has ended but its record is still being made durable:
 * its slot is not given up and its client not answered yet. */
bool api_is_completing(const Api *api);
/* The sandbox's state for /api/v1/health: "sandbox": "ok"|"unavailable",
 * and "status": "degraded" while a sandbox cleanup is not confirmed. */
void api_set_sandbox_state(Api *api, bool available, bool cleanup_pending);

/* The HttpHandler for http_server_new(); userdata is the Api. */
HttpHandlerResult api_handle(HttpRequest *req, void *userdata);
