/* SPDX-License-Identifier: MIT */
#include <json-c/json.h>
#include <math.h>

#include "config-version.h"
#include "http/api.h"
#include "http/request.h"
#include "shared/log.h"
#include "shared/macro.h"
#include "shared/random-util.h"
#include "shared/time-util.h"

struct Api {
        const Config *config;
        Admission *admission;
        QueryExecutor *executor;
        ApiQueryFinishedHook hook;
        void *hook_userdata;
        bool degraded;

        /* The query in flight: its request stays suspended until the
         * executor reports back (even if the client has gone). */
        HttpRequest *running_request;
        char running_query_id[QUERY_ID_MAX];
        usec_t running_since;
};

DEFINE_TRIVIAL_CLEANUP_FUNC(json_object *, json_object_put);

int api_new(const Config *config, Admission *admission, QueryExecutor *executor, Api **ret) {
        Api *api = calloc(1, sizeof *api);

        if (!api)
                return -ENOMEM;
        api->config = config;
        api->admission = admission;
        api->executor = executor;
        *ret = api;
        return 0;
}

Api *api_free(Api *api) {
        free(api);
        return NULL;
}

void api_set_query_finished_hook(Api *api, ApiQueryFinishedHook hook, void *userdata) {
        api->hook = hook;
        api->hook_userdata = userdata;
}

void api_set_degraded(Api *api, bool degraded) {
        api->degraded = degraded;
}

bool api_is_degraded(const Api *api) {
        return api->degraded;
}

/* Seconds as a JSON number with millisecond precision ("84.0", "12.345"). */
static json_object *json_seconds(double seconds) {
        char buf[64];
        size_t n;

        if (!isfinite(seconds) || seconds < 0)
                seconds = 0;
        snprintf(buf, sizeof buf, "%.3f", round(seconds * 1000.0) / 1000.0);
        /* Trim trailing zeros but keep one digit after the point. */
        n = strlen(buf);
        while (n > 2 && buf[n - 1] == '0' && buf[n - 2] != '.')
                buf[--n] = 0;
        return json_object_new_double_s(seconds, buf);
}

static json_object *json_time(usec_t mono) {
        char buf[RFC3339_MS_MAX];

        if (mono == USEC_INFINITY)
                return NULL;
        return json_object_new_string(format_rfc3339_ms(buf, monotonic_to_wallclock(mono)));
}

static json_object *ticket_to_json(const TicketView *t) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        json_object_object_add(o, "id", json_object_new_string(t->id));
        json_object_object_add(o, "status", json_object_new_string(ticket_status_to_string(t->status)));
        json_object_object_add(o, "position", json_object_new_uint64(t->position));
        json_object_object_add(o, "joined_at", json_time(t->joined));
        json_object_object_add(o, "heartbeat_expires_at", json_time(t->heartbeat_deadline));
        json_object_object_add(
                o,
                "reservation_expires_at",
                t->status == TICKET_RESERVED ? json_time(t->reservation_deadline) : NULL);
        return o;
}

/* The status object of API.md 6. */
static char *status_to_json(const Api *api, const AdmissionStatus *st) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        uint64_t hb = api->config->queue_heartbeat_seconds;
        char *s;

        if (!o)
                return NULL;
        json_object_object_add(o, "state", json_object_new_string(admission_state_to_string(st->state)));
        json_object_object_add(o, "queue_length", json_object_new_uint64(st->queue_length));
        json_object_object_add(o, "max_length", json_object_new_uint64(st->max_length));
        json_object_object_add(o, "ticket", st->has_ticket ? ticket_to_json(&st->ticket) : NULL);
        json_object_object_add(
                o,
                "estimated_wait_seconds",
                st->estimate_known ? json_seconds(st->estimated_wait_seconds) : NULL);
        json_object_object_add(
                o, "average_query_seconds", st->average_known ? json_seconds(st->average_query_seconds) : NULL);
        json_object_object_add(
                o, "reservation_seconds", json_object_new_uint64(api->config->queue_reservation_seconds));
        json_object_object_add(o, "heartbeat_seconds", json_object_new_uint64(hb));
        json_object_object_add(o, "poll_after_seconds", json_object_new_uint64(hb / 3 > 0 ? hb / 3 : 1));

        s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        return s;
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

static HttpHandlerResult reply_with_retry_after(Api *api, HttpRequest *req, ApiError error, usec_t now_mono) {
        char seconds[32];
        const char *h[] = { "Retry-After", seconds, NULL };

        retry_after(api, http_request_session(req), now_mono, seconds);
        return http_reply_error(req, error, NULL, h);
}

static HttpHandlerResult reply_status(Api *api, HttpRequest *req, unsigned code, usec_t now_mono) {
        _cleanup_free_ char *body = NULL;
        AdmissionStatus st;

        admission_status(api->admission, http_request_session(req), now_mono, &st);
        body = status_to_json(api, &st);
        if (!body)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        return http_reply(req, code, body, NULL);
}

static HttpHandlerResult handle_health(Api *api, HttpRequest *req) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();

        if (!o)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        json_object_object_add(o, "status", json_object_new_string(api->degraded ? "degraded" : "ok"));
        json_object_object_add(o, "contract_revision", json_object_new_int(CONTRACT_REVISION));
        json_object_object_add(o, "version", json_object_new_string(PACKAGE_VERSION));
        json_object_object_add(
                o,
                "state",
                json_object_new_string(admission_state_to_string(admission_get_state(api->admission))));
        return http_reply(req, 200, json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN), NULL);
}

static HttpHandlerResult handle_join(Api *api, HttpRequest *req) {
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
                return reply_with_retry_after(api, req, API_ERROR_QUEUE_FULL, t);
        if (r < 0) {
                log_error_errno(r, "Failed to join the queue");
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        }
        return reply_status(api, req, r > 0 ? 201 : 200, t);
}

static HttpHandlerResult handle_leave(Api *api, HttpRequest *req) {
        int r;

        r = admission_leave(api->admission, http_request_session(req), now(CLOCK_MONOTONIC));
        if (r == -ENOENT)
                return http_reply_error(req, API_ERROR_TICKET_NOT_FOUND, NULL, NULL);
        if (r < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        return http_reply(req, 204, NULL, NULL);
}

static void on_query_done(const QueryOutcome *o, void *userdata) {
        Api *api = userdata;
        HttpRequest *req = TAKE_PTR(api->running_request);
        usec_t t = now(CLOCK_MONOTONIC), duration = t - api->running_since;
        const char *status = o->succeeded ? "succeeded" : "failed";
        const char *h[] = { "Wikiweb-Query-Id", api->running_query_id, NULL };
        int r;

        if (o->cleanup_confirmed) {
                r = admission_finish(api->admission, t);
                if (r < 0)
                        log_error_errno(r, "Query %s ended but the controller was not running", o->query_id);
        } else {
                /* The slot stays taken until cleanup is confirmed (API.md 8.4). */
                api->degraded = true;
                log_error("Query %s: cleanup could not be confirmed; the queue stays blocked.", o->query_id);
        }

        {
                const char *fields[] = { "WIKIWEB_EVENT=query_finished", NULL, NULL, NULL };
                char f1[64], f2[64];

                snprintf(f1, sizeof f1, "QUERY_ID=%s", o->query_id);
                snprintf(f2, sizeof f2, "QUERY_STATUS=%s", status);
                fields[1] = f1;
                fields[2] = f2;
                log_fields(
                        LOG_INFO,
                        fields,
                        "Query %s %s after %" PRIu64 " ms%s%s.",
                        o->query_id,
                        status,
                        duration / USEC_PER_MSEC,
                        o->succeeded ? "" : ": ",
                        o->succeeded ? "" : api_error_to_string(o->error));
        }

        if (api->hook)
                api->hook(o->query_id, status, duration, o->cleanup_confirmed, api->hook_userdata);

        if (!req)
                return;
        if (o->succeeded)
                /* The query record arrives with the pipeline and history. */
                http_reply(req, 200, "{}", h);
        else
                http_reply_error(req, o->error, o->message, h);
}

static HttpHandlerResult handle_query(Api *api, HttpRequest *req) {
        _cleanup_free_ char *message = NULL;
        _cleanup_(query_body_done) QueryBody q = { 0 };
        usec_t t = now(CLOCK_MONOTONIC);
        const uint8_t *body;
        QueryJob job = { 0 };
        size_t size;
        int r;

        body = http_request_body(req, &size);
        if (request_parse_query(http_request_content_type(req), body, size, &q, &message) < 0)
                return http_reply_error(req, API_ERROR_INVALID_INPUT, message, NULL);

        r = random_id("qr_", job.id, sizeof job.id);
        if (r < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);

        r = admission_claim(api->admission, http_request_session(req), job.id, t);
        if (r == -EBUSY)
                return reply_with_retry_after(api, req, API_ERROR_BUSY, t);
        if (r == -ENOSPC)
                return reply_with_retry_after(api, req, API_ERROR_QUEUE_FULL, t);
        if (r < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);

        job.session = *http_request_session(req);
        job.question = q.question;
        job.pages = q.pages;

        r = query_executor_start(api->executor, &job, on_query_done, api);
        if (r < 0) {
                const char *h[] = { "Wikiweb-Query-Id", job.id, NULL };

                log_error_errno(r, "Failed to start query %s", job.id);
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

        memcpy(api->running_query_id, job.id, sizeof job.id);
        api->running_since = t;
        api->running_request = req;
        http_request_suspend(req);
        return HTTP_SUSPENDED;
}

HttpHandlerResult api_handle(HttpRequest *req, void *userdata) {
        Api *api = userdata;
        const RouteMatch *m = http_request_route(req);

        switch (m->route) {
        case ROUTE_HEALTH:
                return handle_health(api, req);
        case ROUTE_QUEUE_JOIN:
                return handle_join(api, req);
        case ROUTE_QUEUE_STATUS:
                return reply_status(api, req, 200, now(CLOCK_MONOTONIC));
        case ROUTE_QUEUE_TICKET:
                return handle_leave(api, req);
        case ROUTE_QUERY:
                return handle_query(api, req);
        case ROUTE_HISTORY:
        case ROUTE_HISTORY_ITEM:
                /* The history store is a later piece of work: say so. */
                return http_reply_error(req, API_ERROR_NOT_FOUND, "Query history is not implemented yet", NULL);
        case ROUTE_ARTIFACT:
                return http_reply_error(req, API_ERROR_ARTIFACT_NOT_FOUND, NULL, NULL);
        default:
                return http_reply_error(req, API_ERROR_NOT_FOUND, NULL, NULL);
        }
}
