/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <json-c/json.h>
#include <math.h>

#include "config-version.h"
#include "http/api.h"
#include "http/query-stream.h"
#include "http/queue-stream.h"
#include "http/stream.h"
#include "http/render.h"
#include "http/request.h"
#include "metrics/metrics.h"
#include "shared/json-util.h"
#include "shared/log.h"
#include "shared/parse-util.h"
#include "shared/macro.h"
#include "shared/random-util.h"
#include "shared/sanitize.h"
#include "shared/time-util.h"
#include "store/sync-worker.h"

struct Api {
        const Config *config;
        Admission *admission;
        QueryExecutor *executor;
        History *history;
        QueueStreams *queue_streams; /* GET /queue/events (API.md 11.1) */
        QueryStreams *query_streams; /* the running query's events (11.2, 11.3) */
        WaitTracker *wait_tracker;   /* borrowed; NULL: the wait range is not known */
        ApiPhaseHook phase_hook;
        void *phase_hook_userdata;
        const char *last_phase;
        ApiQueryFinishedHook hook;
        void *hook_userdata;
        bool degraded;
        bool sandbox_available, sandbox_cleanup_pending;

        /* A query that ended with its cleanup unconfirmed: the slot stays
         * taken until the Sandbox says it is confirmed (API.md 8.4). */
        char awaiting_cleanup[QUERY_ID_MAX];

        /* The query in flight: its request stays suspended until the
         * executor reports back (even if the client has gone). */
        HttpRequest *running_request;
        char running_query_id[QUERY_ID_MAX];
        SessionKey running_session;
        usec_t running_since;  /* monotonic, the claim */
        usec_t running_queued; /* how long its ticket waited before the claim */

        /* The query that ended, between its record's commit and the sync
         * that makes the record durable, which runs on the worker's thread
         * (NULL: none could be started, it is done here). Only then is the
         * slot given up and the client answered. */
        SyncWorker *sync;
        struct {
                bool active;
                bool succeeded, cleanup_confirmed;
                ApiError api_error; /* when !succeeded */
                char *message;      /* the outcome's, NULL for the default */
                usec_t ended;       /* monotonic */
                usec_t duration;
        } ended;
};

/* The running query's phase for D-Bus (API.md 11.4): its log's, or
 * "cleanup" while a query that ended waits for its cleanup to be
 * confirmed, or none. Told to the hook when it changes. */
static void api_phase_changed(Api *api) {
        const char *p = query_streams_phase(api->query_streams);

        if (!p && api->awaiting_cleanup[0])
                p = query_phase_to_string(QUERY_PHASE_CLEANUP);
        if (!p)
                p = "";
        if (api->last_phase && streq(p, api->last_phase))
                return;
        api->last_phase = p;
        if (api->phase_hook)
                api->phase_hook(p, api->phase_hook_userdata);
}

static void api_on_query_event(const char *query_id, const QueryEvent *ev, void *userdata) {
        Api *api = userdata;

        query_streams_event(api->query_streams, query_id, ev);
        api_phase_changed(api);
}

void api_set_phase_hook(Api *api, ApiPhaseHook hook, void *userdata) {
        assert(api);
        api->phase_hook = hook;
        api->phase_hook_userdata = userdata;
}

/* wikiweb_queries_total and wikiweb_query_duration_seconds, once the
 * query's cleanup is confirmed: from the outcome kept in api->ended. */
static void api_count_query(const Api *api, usec_t duration) {
        metrics_count_query(
                api->ended.succeeded,
                api->ended.succeeded ? NULL : api_error_to_string(api->ended.api_error),
                duration);
        /* And the wait range's durations (API.md 5). */
        if (api->wait_tracker)
                (void) wait_tracker_add(api->wait_tracker, (double) duration / USEC_PER_SEC);
}

void api_set_wait_tracker(Api *api, WaitTracker *t) {
        assert(api);
        api->wait_tracker = t;
        queue_streams_set_wait_tracker(api->queue_streams, t);
}

void api_cleanup_confirmed(Api *api, const char *query_id) {
        int r;

        assert(api);
        assert(query_id);

        if (!streq(api->awaiting_cleanup, query_id))
                return;
        api->awaiting_cleanup[0] = 0;
        /* Its duration runs to the confirmed cleanup (API.md 12.3). */
        api_count_query(api, now(CLOCK_MONOTONIC) - api->running_since);
        r = admission_finish(api->admission, now(CLOCK_MONOTONIC));
        if (r < 0)
                log_error_errno(r, "Query %s: cleanup confirmed but the controller was not running", query_id);
        api->degraded = false;
        api_phase_changed(api);
        log_notice("Query %s: cleanup confirmed at last; the queue moves on.", query_id);
}

int api_new(
        sd_event *event,
        const Config *config,
        Admission *admission,
        QueryExecutor *executor,
        History *history,
        Api **ret) {
        _cleanup_(api_freep) Api *api = NULL;
        int r;

        assert(config);
        assert(admission);
        assert(executor);
        assert(history);
        assert(ret);

        api = calloc(1, sizeof *api);
        if (!api)
                return -ENOMEM;
        api->config = config;
        api->admission = admission;
        api->executor = executor;
        api->history = history;
        r = query_streams_new(&api->query_streams);
        if (r < 0)
                return r;
        r = queue_streams_new(event, config, admission, api->query_streams, &api->queue_streams);
        if (r < 0)
                return r;
        query_executor_set_event_handler(executor, api_on_query_event, api);
        /* Without the thread, the sync is done on the loop. */
        r = sync_worker_new(event, &api->sync);
        if (r < 0)
                log_warning_errno(r, "No thread for the history's syncs; they run on the event loop");
        *ret = TAKE_PTR(api);
        return 0;
}


Api *api_free(Api *api) {
        if (!api)
                return NULL;
        /* A sync in flight is completed (joined), its callback dropped. */
        api->sync = sync_worker_free(api->sync);
        api->queue_streams = queue_streams_free(api->queue_streams);
        api->query_streams = query_streams_free(api->query_streams);
        free(api->ended.message);
        free(api);
        return NULL;
}

void api_set_query_finished_hook(Api *api, ApiQueryFinishedHook hook, void *userdata) {
        assert(api);
        api->hook = hook;
        api->hook_userdata = userdata;
}

void api_admission_event(Api *api, const AdmissionEvent *ev) {
        assert(ev);

        if (api)
                queue_streams_admission_event(api->queue_streams, ev);
}

void api_set_degraded(Api *api, bool degraded) {
        assert(api);
        api->degraded = degraded;
}

bool api_is_degraded(const Api *api) {
        assert(api);
        return api->degraded;
}

void api_set_sandbox_state(Api *api, bool available, bool cleanup_pending) {
        assert(api);
        api->sandbox_available = available;
        api->sandbox_cleanup_pending = cleanup_pending;
}

/* The status object of API.md 6 as the session sees it, as text (the
 * caller frees it); NULL when out of memory. */
static char *api_status_json(
        const Api *api, const SessionKey *session, const AdmissionStatus *st, usec_t now_mono) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        RenderRunningQuery rq;
        bool running = query_streams_running(api->query_streams, session, &rq.id, &rq.step, &rq.phase);
        WaitRange range;
        int r = 0;

        o = render_status(
                st,
                api->config->queue_reservation_seconds,
                api->config->queue_heartbeat_seconds,
                running ? &rq : NULL);
        if (!o)
                return NULL;
        if (api->wait_tracker)
                r = wait_tracker_status_range(
                        api->wait_tracker,
                        st,
                        admission_waiting_count(api->admission),
                        admission_running_since(api->admission),
                        now_mono,
                        &range);
        if (r < 0)
                log_warning_errno(r, "The wait range could not be computed: it is null");
        if (render_status_add_wait_range(o, r > 0 ? &range : NULL) < 0)
                return NULL;
        return strdup(render_body(o));
}

/* Retry-After for busy and queue_full (API.md 2): whole seconds, at least
 * 1, from the caller's wait estimate, else the heartbeat interval. */
static void retry_after(const Api *api, const SessionKey *session, usec_t now_mono, char buf[static 32]) {
        AdmissionStatus st;
        uint64_t seconds;

        admission_peek(api->admission, session, now_mono, &st);
        if (st.estimate_known)
                seconds = (uint64_t) ceil(st.estimated_wait_seconds);
        else
                seconds = api->config->queue_heartbeat_seconds;
        snprintf(buf, 32, "%" PRIu64, MAX(seconds, (uint64_t) 1));
}

/* The message of queue_full while an administrator drains admission
 * (API.md 12.1). */
#define API_DRAINING_MESSAGE "The queue is closed for maintenance"

/* busy or queue_full with Retry-After; message NULL: the default one. */
static HttpHandlerResult reply_with_retry_after(
        Api *api, HttpRequest *req, ApiError error, const char *message, usec_t now_mono) {
        char seconds[32];
        const char *h[] = { "Retry-After", seconds, NULL };

        retry_after(api, http_request_session(req), now_mono, seconds);
        return http_reply_error(req, error, message, h);
}

static HttpHandlerResult reply_status(Api *api, HttpRequest *req, unsigned code, usec_t now_mono) {
        _cleanup_free_ char *body = NULL;
        AdmissionStatus st;

        admission_status(api->admission, http_request_session(req), now_mono, &st);
        body = api_status_json(api, http_request_session(req), &st, now_mono);
        if (!body)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        return http_reply(req, code, body, NULL);
}

/* "execution": whether a query can run at all (a wiki and a model are
 * configured), and "missing_settings": the names of those that are not. */
static int api_add_execution_health(Api *api, json_object *o) {
        const struct {
                const char *name;
                const char *value;
        } needed[] = {
                { "WIKI_WEB_WIKI_API_URL", api->config->wiki_api_url },
                { "WIKI_WEB_LLM_URL", api->config->llm_url },
                { "WIKI_WEB_LLM_MODEL", api->config->llm_model },
        };
        json_object *missing = json_object_new_array();

        if (!missing)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(needed); i++)
                if ((!needed[i].value || !needed[i].value[0]) &&
                    json_object_array_add(missing, json_object_new_string(needed[i].name)) < 0) {
                        json_object_put(missing);
                        return -ENOMEM;
                }
        json_object_object_add(
                o,
                "execution",
                json_object_new_string(json_object_array_length(missing) > 0 ? "not_configured" : "ok"));
        json_object_object_add(o, "missing_settings", missing);
        return 0;
}

static HttpHandlerResult api_handle_health(Api *api, HttpRequest *req) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        int r;

        if (!o)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        json_object_object_add(
                o,
                "status",
                json_object_new_string(api->degraded || api->sandbox_cleanup_pending ? "degraded" : "ok"));
        json_object_object_add(o, "contract_revision", json_object_new_int(CONTRACT_REVISION));
        json_object_object_add(o, "version", json_object_new_string(PACKAGE_VERSION));
        json_object_object_add(
                o,
                "state",
                json_object_new_string(admission_state_to_string(admission_get_state(api->admission))));
        json_object_object_add(
                o, "sandbox", json_object_new_string(api->sandbox_available ? "ok" : "unavailable"));
        json_object_object_add(
                o,
                "admission",
                json_object_new_string(admission_is_draining(api->admission) ? "draining" : "open"));
        r = api_add_execution_health(api, o);
        if (r < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        return http_reply(req, 200, json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN), NULL);
}

static HttpHandlerResult api_handle_join(Api *api, HttpRequest *req) {
        _cleanup_free_ char *message = NULL;
        usec_t t = now(CLOCK_MONOTONIC);
        const uint8_t *body;
        size_t size;
        int r;

        body = http_request_body(req, &size);
        if (request_parse_join(http_request_content_type(req), body, size, &message) < 0)
                return http_reply_error(req, API_ERROR_INVALID_INPUT, message, NULL);

        r = admission_join(api->admission, http_request_session(req), t);
        if (r == -ENOSPC)
                return reply_with_retry_after(api, req, API_ERROR_QUEUE_FULL, NULL, t);
        if (r == -ESHUTDOWN)
                return reply_with_retry_after(api, req, API_ERROR_QUEUE_FULL, API_DRAINING_MESSAGE, t);
        if (r < 0) {
                log_error_errno(r, "Failed to join the queue");
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        }
        return reply_status(api, req, r > 0 ? 201 : 200, t);
}

static HttpHandlerResult api_handle_leave(Api *api, HttpRequest *req) {
        int r;

        r = admission_leave(api->admission, http_request_session(req), now(CLOCK_MONOTONIC));
        if (r == -ENOENT)
                return http_reply_error(req, API_ERROR_TICKET_NOT_FOUND, NULL, NULL);
        if (r < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        return http_reply(req, 204, NULL, NULL);
}

/* Complete the query's record (API.md 9): it was written as "running"
 * before execution started. A failure here is logged; the record then stays
 * "running" until the next start marks it failed. Durable when this
 * returns, or, with !durable, once the caller has synced the store
 * (history_finish_nosync()). */
static void api_record_outcome(Api *api, const QueryOutcome *o, usec_t duration, bool durable) {
        _cleanup_free_ char *message = NULL;
        const char *raw = o->message ? o->message : api_error_default_message(o->api_error);
        HistoryOutcome h = {
                .succeeded = o->error >= 0,
                .answer = o->error >= 0 ? (o->answer ? o->answer : "") : NULL,
                .error_code = o->error >= 0 ? NULL : api_error_to_string(o->api_error),
                .sources_json = o->sources_json,
                .timings = {
                        .queue_ms = api->running_queued / USEC_PER_MSEC,
                        .wiki_ms = o->timings.wiki / USEC_PER_MSEC,
                        .model_ms = o->timings.model / USEC_PER_MSEC,
                        .sandbox_ms = o->timings.sandbox / USEC_PER_MSEC,
                        .cleanup_ms = o->timings.cleanup / USEC_PER_MSEC,
                        .total_ms = (api->running_queued + duration) / USEC_PER_MSEC,
                },
                .model = o->model ? o->model : api->config->llm_model,
                .prompt_tokens = o->prompt_tokens,
                .completion_tokens = o->completion_tokens,
                .finished_at = now(CLOCK_REALTIME),
                .sandbox = o->sandbox,
        };
        int r;

        /* The same sanitizer as the response (API.md 2). */
        if (o->error < 0) {
                if (sanitize_message(raw, strlen(raw), &message) < 0) {
                        log_oom();
                        return;
                }
                h.error_message = message;
        }

        /* Files left in /out are kept, also for a failed query (API.md 8.3),
         * streamed from the files the pipeline collected. */
        for (size_t i = 0; i < o->n_artifacts; i++) {
                char id[HISTORY_ARTIFACT_ID_MAX];

                r = history_add_artifact(api->history, o->query_id, &o->artifacts[i], id);
                if (r < 0)
                        log_warning_errno(r, "Query %s: an artifact could not be kept", o->query_id);
        }

        r = durable ? history_finish(api->history, o->query_id, &h) :
                      history_finish_nosync(api->history, o->query_id, &h);
        if (r == -ENOENT)
                log_warning("Query %s ended, but its record is gone.", o->query_id);
        else if (r < 0)
                log_error_errno(r, "Failed to record the outcome of query %s", o->query_id);
}

/* The record as GET /history/{id} returns it, as text (the caller frees
 * it); NULL when it cannot be read. */
static char *api_record_json(Api *api, const char *id, const SessionKey *session) {
        _cleanup_(history_record_freep) HistoryRecord *record = NULL;
        _cleanup_(json_object_putp) json_object *o = NULL;
        int r;

        r = history_get_record(api->history, id, session, &record);
        if (r < 0) {
                log_error_errno(r, "Query %s: its record cannot be read", id);
                return NULL;
        }
        o = render_history_record(record);
        return o ? strdup(render_body(o)) : NULL;
}

/* The query's streams get its record and end (API.md 11.2). */
static void api_finish_streams(Api *api, const char *id) {
        _cleanup_free_ char *record = api_record_json(api, id, &api->running_session);

        query_streams_finish(api->query_streams, id, record);
        api_phase_changed(api);
}

/* The record of the query that ended is durable (or could not be made
 * so, error, logged): give up the slot, tell the journal, D-Bus and the
 * client. */
static void api_record_durable(Api *api, int error) {
        HttpRequest *req = TAKE_PTR(api->running_request);
        _cleanup_free_ char *message = TAKE_PTR(api->ended.message);
        bool succeeded = api->ended.succeeded;
        const char *status = succeeded ? "succeeded" : "failed";
        const char *id = api->running_query_id;
        const char *h[] = { "Wikiweb-Query-Id", id, NULL };
        usec_t duration = api->ended.duration;
        int r;

        assert(api->ended.active);
        api->ended.active = false;
        if (error < 0)
                log_error_errno(error, "Query %s: its record could not be made durable", id);

        if (api->ended.cleanup_confirmed) {
                api_count_query(api, duration);
                r = admission_finish(api->admission, api->ended.ended);
                if (r < 0)
                        log_error_errno(r, "Query %s ended but the controller was not running", id);
        } else {
                /* The slot stays taken until cleanup is confirmed (API.md 8.4). */
                api->degraded = true;
                snprintf(api->awaiting_cleanup, sizeof api->awaiting_cleanup, "%s", id);
                log_error("Query %s: cleanup could not be confirmed; the queue stays blocked.", id);
        }

        {
                const char *fields[] = { "WIKIWEB_EVENT=query_finished", NULL, NULL, NULL };
                char f1[64], f2[64];

                snprintf(f1, sizeof f1, "QUERY_ID=%s", id);
                snprintf(f2, sizeof f2, "QUERY_STATUS=%s", status);
                fields[1] = f1;
                fields[2] = f2;
                log_fields(
                        LOG_INFO,
                        fields,
                        "Query %s %s after %" PRIu64 " ms%s%s.",
                        id,
                        status,
                        duration / USEC_PER_MSEC,
                        succeeded ? "" : ": ",
                        succeeded ? "" : api_error_to_string(api->ended.api_error));
        }

        if (api->hook)
                api->hook(id, status, duration, api->ended.cleanup_confirmed, api->hook_userdata);

        api_finish_streams(api, id);
        if (!req)
                return;
        if (succeeded) {
                _cleanup_(history_record_freep) HistoryRecord *record = NULL;
                _cleanup_(json_object_putp) json_object *body = NULL;

                r = history_get_record(api->history, id, http_request_session(req), &record);
                if (r >= 0) {
                        body = render_history_record(record);
                        if (!body)
                                r = -ENOMEM;
                }
                if (r < 0) {
                        log_error_errno(r, "Query %s succeeded but its record cannot be read", id);
                        http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, h);
                } else
                        http_reply(req, 200, render_body(body), h);
        } else
                http_reply_error(req, api->ended.api_error, message, h);
}

static void api_on_record_durable(SyncWorker *w, int error, void *userdata) {
        api_record_durable(userdata, error);
}

/* The executor's report, on the loop: the record is committed now, and
 * the rest waits for the sync that makes it durable, done on the worker's
 * thread (several milliseconds on a disk, during which the loop serves
 * requests) or, without it, here. */
static void api_on_query_done(QueryExecutor *x, int error, const QueryOutcome *o, void *userdata) {
        Api *api = userdata;
        usec_t t = now(CLOCK_MONOTONIC);
        int r;

        assert(!api->ended.active);
        api->ended.active = true;
        api->ended.succeeded = error >= 0;
        api->ended.cleanup_confirmed = o->cleanup_confirmed;
        api->ended.api_error = o->api_error;
        api->ended.ended = t;
        api->ended.duration = t - api->running_since;
        /* Without memory for it the default message of the code is sent. */
        api->ended.message = o->message ? strdup(o->message) : NULL;

        api_record_outcome(api, o, api->ended.duration, /* durable= */ false);

        r = api->sync ?
                sync_worker_start(api->sync, history_sync_fd(api->history), api_on_record_durable, api) :
                -EOPNOTSUPP;
        if (r < 0)
                api_record_durable(api, history_sync(api->history));
}

bool api_is_completing(const Api *api) {
        return api && api->ended.active;
}

/* The session's record id in *ret; false when there is none to give, and
 * then the request is answered (query_not_found, also for another
 * session's record, or internal_error). */
static bool api_find_record(Api *api, HttpRequest *req, const char *id, HistoryRecord **ret) {
        int r;

        r = history_get_record(api->history, id, http_request_session(req), ret);
        if (r == -ENOENT)
                http_reply_error(req, API_ERROR_QUERY_NOT_FOUND, NULL, NULL);
        else if (r < 0)
                http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        return r >= 0;
}

/* Whether the client asks for the query stream (API.md 11.2): an Accept
 * that names text/event-stream. */
static bool api_wants_stream(HttpRequest *req) {
        const char *accept = http_request_header(req, "Accept");

        return accept && strcasestr(accept, "text/event-stream");
}

static HttpHandlerResult api_handle_query(Api *api, HttpRequest *req) {
        bool stream = api_wants_stream(req);
        _cleanup_free_ char *message = NULL;
        _cleanup_(query_body_done) QueryBody q = { 0 };
        usec_t t = now(CLOCK_MONOTONIC);
        const uint8_t *body;
        QueryJob job = { 0 };
        AdmissionStatus st;
        usec_t queued, created = now(CLOCK_REALTIME);
        size_t size;
        int r;

        body = http_request_body(req, &size);
        if (request_parse_query(http_request_content_type(req), body, size, &q, &message) < 0)
                return http_reply_error(req, API_ERROR_INVALID_INPUT, message, NULL);
        /* A stream refused is refused before admission (API.md 11.2). */
        if (stream && !http_stream_allowed(req))
                return http_reply_error(req, API_ERROR_RATE_LIMITED, NULL, NULL);

        r = random_id("qr_", job.id, sizeof job.id);
        if (r < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);

        /* How long the session's ticket waited, if it had one (an implicit
         * join from idle waited for nothing). */
        admission_peek(api->admission, http_request_session(req), t, &st);
        queued = st.has_ticket ? t - MIN(t, st.ticket.joined) : 0;

        r = admission_claim(api->admission, http_request_session(req), job.id, t);
        if (r == -EBUSY)
                return reply_with_retry_after(api, req, API_ERROR_BUSY, NULL, t);
        if (r == -ENOSPC)
                return reply_with_retry_after(api, req, API_ERROR_QUEUE_FULL, NULL, t);
        if (r == -ESHUTDOWN)
                return reply_with_retry_after(api, req, API_ERROR_QUEUE_FULL, API_DRAINING_MESSAGE, t);
        if (r < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        /* The ticket's wait ends with the claim; the pipeline counts the
         * other phases as each ends (API.md 12.3). */
        metrics_count_query_phase("queue", queued);

        job.session = *http_request_session(req);
        job.question = q.question;
        job.pages = q.pages;

        /* The history is authoritative: the record exists before execution
         * starts (API.md 9). Without it the query does not run. */
        r = history_begin(api->history, job.id, &job.session, q.question, created);
        if (r < 0) {
                log_error_errno(r, "Failed to record query %s; not running it", job.id);
                (void) admission_finish(api->admission, now(CLOCK_MONOTONIC));
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        }

        memcpy(api->running_query_id, job.id, sizeof job.id);
        api->running_session = job.session;
        api->running_since = t;
        api->running_queued = queued;
        r = query_streams_begin(api->query_streams, job.id, &job.session, created);
        if (r < 0)
                log_warning_errno(r, "Query %s: no event log, so no stream", job.id);

        r = query_executor_start(api->executor, &job, api_on_query_done, api);
        if (r < 0) {
                const char *h[] = { "Wikiweb-Query-Id", job.id, NULL };
                QueryOutcome failed = {
                        .query_id = job.id,
                        .error = r,
                        .api_error = API_ERROR_INTERNAL_ERROR,
                        .cleanup_confirmed = true,
                };

                log_error_errno(r, "Failed to start query %s", job.id);
                api_record_outcome(api, &failed, now(CLOCK_MONOTONIC) - t, /* durable= */ true);
                query_streams_finish(api->query_streams, job.id, NULL);
                metrics_count_query(false, api_error_to_string(failed.api_error), now(CLOCK_MONOTONIC) - t);
                (void) admission_finish(api->admission, now(CLOCK_MONOTONIC));
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, h);
        }

        {
                const char *fields[] = { "WIKIWEB_EVENT=query_started", NULL, NULL };
                char f1[64];

                snprintf(f1, sizeof f1, "QUERY_ID=%s", job.id);
                fields[1] = f1;
                log_fields(LOG_INFO, fields, "Query %s started.", job.id);
        }

        if (stream) {
                const char *h[] = { "Wikiweb-Query-Id", job.id, NULL };

                /* The answer is the stream; the query's end is its record. */
                r = query_streams_attach(api->query_streams, req, job.id, 0, h);
                if (r >= 0)
                        return HTTP_HANDLED;
                log_warning_errno(r, "Query %s: no stream for it; answering when it ends", job.id);
        }
        api->running_request = req;
        http_request_suspend(req);
        return HTTP_SUSPENDED;
}

static void api_on_replay_closed(HttpStream *s, HttpStreamEnd why, void *userdata) {
}

/* GET /history/{id}/events (API.md 11.3): the running query's stream from
 * Last-Event-ID on, or for a finished query its `query` and `record`. */
static HttpHandlerResult api_handle_history_events(Api *api, HttpRequest *req, const char *id) {
        _cleanup_(history_record_freep) HistoryRecord *record = NULL;
        _cleanup_(json_object_putp) json_object *o = NULL, *q = NULL;
        const char *last = http_request_header(req, "Last-Event-ID"), *created;
        uint64_t last_id = 0;
        HttpStream *s;
        int r;

        if (!api_find_record(api, req, id, &record))
                return HTTP_HANDLED;
        if (!http_stream_allowed(req))
                return http_reply_error(req, API_ERROR_RATE_LIMITED, NULL, NULL);
        /* An id that is not ours (not a number) replays everything. */
        if (last && parse_uint64_range(last, 0, UINT64_MAX, &last_id) < 0)
                last_id = 0;

        r = query_streams_attach(api->query_streams, req, id, last_id, NULL);
        if (r >= 0)
                return HTTP_HANDLED;
        if (r == -EMFILE)
                return http_reply_error(req, API_ERROR_RATE_LIMITED, NULL, NULL);
        if (r != -ENOENT)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);

        /* Not running (any more): the record says it all. A record still
         * "running" without a log (its outcome is being written) ends the
         * same way; the client asks again. */
        o = render_history_record(record);
        q = json_object_new_object();
        created = o ? json_object_get_string(json_object_object_get(o, "created_at")) : NULL;
        if (!o || !q || json_add(q, "id", json_string(id)) < 0 ||
            json_add(q, "created_at", json_string(created)) < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        r = http_stream_open(req, 0, NULL, api_on_replay_closed, NULL, &s);
        if (r == -EMFILE)
                return http_reply_error(req, API_ERROR_RATE_LIMITED, NULL, NULL);
        if (r < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        if (last_id < 1)
                (void) http_stream_send(s, 1, "query", render_body(q));
        if (last_id < 2)
                (void) http_stream_send(s, 2, "record", render_body(o));
        http_stream_end(s);
        return HTTP_HANDLED;
}

/* 200 with o as its body, taking o; NULL (out of memory): a 500. */
static HttpHandlerResult reply_json_object(HttpRequest *req, json_object *o) {
        _cleanup_(json_object_putp) json_object *body = o;

        if (!body)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        return http_reply(req, 200, render_body(body), NULL);
}

static HttpHandlerResult api_handle_history_list(Api *api, HttpRequest *req) {
        _cleanup_(history_page_freep) HistoryPage *page = NULL;
        const char *cursor = http_request_argument(req, "cursor"), *message = NULL;
        unsigned limit;
        int r;

        r = history_parse_list_arguments(http_request_argument(req, "limit"), cursor, &limit, &message);
        if (r < 0)
                return http_reply_error(req, API_ERROR_INVALID_INPUT, message, NULL);

        r = history_list_records(api->history, http_request_session(req), limit, cursor, &page);
        if (r < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        return reply_json_object(req, render_history_page(page));
}

static HttpHandlerResult api_handle_history_get(Api *api, HttpRequest *req, const char *id) {
        _cleanup_(history_record_freep) HistoryRecord *record = NULL;

        if (!api_find_record(api, req, id, &record))
                return HTTP_HANDLED;
        return reply_json_object(req, render_history_record(record));
}

static HttpHandlerResult api_handle_history_delete(Api *api, HttpRequest *req, const char *id) {
        int r;

        r = history_delete(api->history, id, http_request_session(req));
        if (r == -ENOENT)
                return http_reply_error(req, API_ERROR_QUERY_NOT_FOUND, NULL, NULL);
        if (r == -EBUSY)
                /* Its outcome is still to be written: delete it after. */
                return reply_with_retry_after(
                        api, req, API_ERROR_BUSY, "The query is still running", now(CLOCK_MONOTONIC));
        if (r < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        return http_reply(req, 204, NULL, NULL);
}

/* RFC 8187 ext-value for Content-Disposition: UTF-8'' then every byte
 * outside attr-char percent-encoded. */
static char *disposition_filename(const char *name) {
        static const char prefix[] = "attachment; filename*=UTF-8''", attr[] = "!#$&+-.^_`|~",
                          hex[] = "0123456789ABCDEF";
        size_t k = sizeof(prefix) - 1;
        char *out = malloc(k + strlen(name) * 3 + 1);

        if (!out)
                return NULL;
        memcpy(out, prefix, k);
        for (const unsigned char *p = (const unsigned char *) name; *p; p++)
                if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                    strchr(attr, *p))
                        out[k++] = (char) *p;
                else {
                        out[k++] = '%';
                        out[k++] = hex[*p >> 4];
                        out[k++] = hex[*p & 15];
                }
        out[k] = 0;
        return out;
}

static HttpHandlerResult api_handle_artifact(Api *api, HttpRequest *req, const char *id) {
        _cleanup_(history_artifact_done) HistoryArtifact a = { 0 };
        _cleanup_free_ char *disposition = NULL;
        char etag[64 + 3];
        int r;

        r = history_get_artifact(api->history, id, http_request_session(req), &a);
        if (r == -ENOENT)
                return http_reply_error(req, API_ERROR_ARTIFACT_NOT_FOUND, NULL, NULL);
        if (r < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);

        /* The store's media type goes into a header: anything but printable
         * ASCII there is not a media type. */
        for (const char *p = a.media_type; *p; p++)
                if (*p < 0x20 || *p > 0x7e) {
                        log_warning(
                                "Artifact %s has an invalid media type; serving it as application/octet-stream.",
                                id);
                        free(a.media_type);
                        a.media_type = strdup("application/octet-stream");
                        if (!a.media_type)
                                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
                        break;
                }

        disposition = disposition_filename(a.name);
        if (!disposition)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        snprintf(etag, sizeof etag, "\"%s\"", a.sha256);
        {
                const char *h[] = {
                        "Content-Disposition",     disposition, "ETag", etag,
                        "Content-Security-Policy", "sandbox",   NULL,
                };
                return http_reply_bytes(req, 200, a.media_type, a.data, a.size, h);
        }
}

HttpHandlerResult api_handle(HttpRequest *req, void *userdata) {
        Api *api = userdata;
        const RouteMatch *m;

        assert(req);
        assert(api);
        m = http_request_route(req);

        switch (m->route) {
        case ROUTE_HEALTH:
                return api_handle_health(api, req);
        case ROUTE_QUEUE_JOIN:
                return api_handle_join(api, req);
        case ROUTE_QUEUE_STATUS:
                return reply_status(api, req, 200, now(CLOCK_MONOTONIC));
        case ROUTE_QUEUE_TICKET:
                return api_handle_leave(api, req);
        case ROUTE_QUEUE_EVENTS:
                return queue_streams_open(api->queue_streams, req);
        case ROUTE_QUERY:
                return api_handle_query(api, req);
        case ROUTE_HISTORY:
                return api_handle_history_list(api, req);
        case ROUTE_HISTORY_ITEM:
                if (http_request_method(req) == HTTP_METHOD_DELETE)
                        return api_handle_history_delete(api, req, m->id);
                return api_handle_history_get(api, req, m->id);
        case ROUTE_HISTORY_EVENTS:
                return api_handle_history_events(api, req, m->id);
        case ROUTE_ARTIFACT:
                return api_handle_artifact(api, req, m->id);
        default:
                return http_reply_error(req, API_ERROR_NOT_FOUND, NULL, NULL);
        }
}
