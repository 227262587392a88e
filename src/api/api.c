/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <json-c/json.h>
#include <limits.h>
#include <math.h>

#include "config-version.h"
#include "api/api.h"
#include "api/export.h"
#include "api/export-zip.h"
#include "api/query-stream.h"
#include "api/sources-check.h"
#include "api/queue-stream.h"
#include "http/stream.h"
#include "manager/manager-ops.h"
#include "api/render.h"
#include "api/request.h"
#include "metrics/metrics.h"
#include "shared/json-util.h"
#include "shared/log.h"
#include "shared/parse-util.h"
#include "shared/macro.h"
#include "shared/sanitize.h"
#include "shared/strv.h"
#include "shared/time-util.h"
#include "shared/list.h"

/* A waiter of one query (manager_query_wait()), answered when its record
 * is durable: the query's streams get the record and end (request NULL),
 * or a POST /query is answered (request). */
typedef struct ApiWaiting {
        struct Api *api;
        ManagerQueryWaiter waiter;
        HttpRequest *request;
        struct ApiWaiting *waiting_prev, *waiting_next;
} ApiWaiting;

struct Api {
        Manager *manager;
        History *history;              /* read directly: the records (API.md 9) */
        QueueStreams *queue_streams;   /* GET /queue/events (API.md 11.1) */
        QueryStreams *query_streams;   /* the running query's events (11.2, 11.3) */
        SourcesChecks *sources_checks; /* GET /history/{id}/sources (9) */

        /* The waiters of the queries in flight (the requests stay suspended
         * until its record is durable, even if the client has gone). */
        ApiWaiting *waiting;

        /* The requests waiting for a Manager operation: a shared view or
         * the report, while the reader's permissions are asked. */
        struct ApiPending *pending;
};

/* The record as GET /history/{id} returns it, as text in *ret_record, and
 * (ret_citations not NULL) the query stream's citations event of it in
 * *ret_citations (the caller frees both); NULL when it cannot be read. */
static void api_record_json(
        Api *api, const char *id, const SessionKey *session, char **ret_record, char **ret_citations) {
        _cleanup_(history_record_freep) HistoryRecord *record = NULL;
        _cleanup_(json_object_putp) json_object *o = NULL;
        int r;

        *ret_record = NULL;
        if (ret_citations)
                *ret_citations = NULL;
        r = history_get_record(api->history, id, session, &record);
        if (r < 0) {
                log_error_errno(r, "Query %s: its record cannot be read", id);
                return;
        }
        o = render_history_record(record);
        *ret_record = o ? strdup(render_body(o)) : NULL;
        if (ret_citations)
                *ret_citations = render_citations_event(record);
}

static ApiWaiting *api_waiting_new(Api *api, HttpRequest *request) {
        ApiWaiting *w = calloc(1, sizeof *w);

        if (!w)
                return NULL;
        w->api = api;
        w->request = request;
        LIST_PREPEND(waiting, api->waiting, w);
        return w;
}

static void api_waiting_free(ApiWaiting *w) {
        LIST_REMOVE(waiting, w->api->waiting, w);
        free(w);
}

/* The query's record is durable: its streams get the record and end
 * (API.md 11.2). */
static void api_on_query_streams_done(ManagerQuery *q, const ManagerOutcome *outcome, void *userdata) {
        ApiWaiting *w = userdata;
        Api *api = w->api;
        const char *id = manager_query_id(q);
        _cleanup_free_ char *record = NULL, *citations = NULL;

        api_waiting_free(w);
        api_record_json(api, id, manager_query_session(q), &record, &citations);
        query_streams_finish(api->query_streams, id, citations, record);
}

/* The query's record is durable: its waiting request is answered. */
static void api_on_query_request_done(ManagerQuery *q, const ManagerOutcome *outcome, void *userdata) {
        ApiWaiting *w = userdata;
        Api *api = w->api;
        HttpRequest *req = w->request;
        const char *id = manager_query_id(q);
        const char *h[] = { "Wikiweb-Query-Id", id, NULL };
        _cleanup_free_ char *record = NULL;

        api_waiting_free(w);
        if (!outcome->succeeded) {
                http_reply_error(req, outcome->api_error, outcome->message, h);
                return;
        }
        api_record_json(api, id, manager_query_session(q), &record, NULL);
        if (!record) {
                log_error("Query %s succeeded but its record cannot be read.", id);
                http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, h);
                return;
        }
        http_reply(req, 200, record, h);
}

/* A query started: its event log begins, and ends with its record. */
static void api_query_started(Api *api, ManagerQuery *q) {
        ApiWaiting *w;
        int r;

        w = api_waiting_new(api, NULL);
        r = w ? query_streams_begin(
                        api->query_streams,
                        manager_query_id(q),
                        manager_query_session(q),
                        manager_query_created(q)) :
                -ENOMEM;
        if (r < 0) {
                if (w)
                        api_waiting_free(w);
                log_warning_errno(r, "Query %s: no event log, so no stream", manager_query_id(q));
                return;
        }
        manager_query_wait(q, &w->waiter, api_on_query_streams_done, w);
}

/* The Manager's announcements: the query streams and the queue streams.
 * A query's end reaches its waiters (above), not this. */
static void api_on_manager_event(Manager *m, const ManagerEvent *ev, void *userdata) {
        Api *api = userdata;

        switch (ev->type) {
        case MANAGER_QUERY_STARTED:
                api_query_started(api, ev->query);
                break;
        case MANAGER_QUERY_EVENT:
                query_streams_event(api->query_streams, manager_query_id(ev->query), ev->event);
                break;
        case MANAGER_ADMISSION:
                queue_streams_admission_event(api->queue_streams, ev->admission);
                break;
        default:
                break;
        }
}

int api_new(sd_event *event, Manager *manager, Api **ret) {
        _cleanup_(api_freep) Api *api = NULL;
        int r;

        assert(event);
        assert(manager);
        assert(ret);

        api = calloc(1, sizeof *api);
        if (!api)
                return -ENOMEM;
        api->manager = manager;
        api->history = manager_get_history(manager);
        r = query_streams_new(&api->query_streams);
        if (r < 0)
                return r;
        r = queue_streams_new(event, manager, &api->queue_streams);
        if (r < 0)
                return r;
        r = sources_checks_new(manager, &api->sources_checks);
        if (r < 0)
                return r;
        r = manager_subscribe(manager, api_on_manager_event, api);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(api);
        return 0;
}

typedef struct ApiPending ApiPending;
static ApiPending *api_pending_free(ApiPending *p);

Api *api_free(Api *api) {
        ApiWaiting *w;

        if (!api)
                return NULL;
        api->queue_streams = queue_streams_free(api->queue_streams);
        api->query_streams = query_streams_free(api->query_streams);
        api->sources_checks = sources_checks_free(api->sources_checks);
        /* Before the Manager, which answers no waiter any more. */
        while ((w = api->waiting))
                api_waiting_free(w);
        while (api->pending)
                api_pending_free(api->pending);
        free(api);
        return NULL;
}

/* Retry-After for busy and queue_full (API.md 2): whole seconds, at least
 * 1, from the caller's wait estimate, else the heartbeat interval. */
static void retry_after(Api *api, const SessionKey *session, usec_t now_mono, char buf[static 32]) {
        ManagerStatus st;
        uint64_t seconds;

        manager_status(api->manager, session, now_mono, &st);
        if (st.admission.estimate_known)
                seconds = (uint64_t) ceil(st.admission.estimated_wait_seconds);
        else
                seconds = st.heartbeat_seconds;
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

/* storage_unavailable (API.md 2): the store's cause in words, and a
 * Retry-After of the store's first retry. */
static HttpHandlerResult reply_storage_unavailable(Api *api, HttpRequest *req) {
        const char *h[] = { "Retry-After", "5", NULL };
        _cleanup_free_ char *message = NULL;

        if (asprintf(&message, "The history cannot be written: %s", manager_storage_cause(api->manager)) < 0)
                message = NULL;
        return http_reply_error(req, API_ERROR_STORAGE_UNAVAILABLE, message, h);
}

/* A Manager operation's refusal; busy with Retry-After (API.md 2). */
static HttpHandlerResult reply_manager_error(Api *api, HttpRequest *req, const ManagerError *e) {
        if (e->api_error == API_ERROR_STORAGE_UNAVAILABLE)
                return reply_storage_unavailable(api, req);
        if (e->api_error == API_ERROR_BUSY)
                return reply_with_retry_after(api, req, e->api_error, e->message, now(CLOCK_MONOTONIC));
        return http_reply_error(req, e->api_error, e->message, NULL);
}

/* The status object (API.md 6); a queue call, so a heartbeat too. */
static HttpHandlerResult reply_status(Api *api, HttpRequest *req, unsigned code, usec_t now_mono) {
        _cleanup_free_ char *body = NULL;
        ManagerStatus st;

        manager_heartbeat(api->manager, http_request_session(req), now_mono);
        manager_status(api->manager, http_request_session(req), now_mono, &st);
        body = render_status_text(&st, http_request_user(req));
        if (!body)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        return http_reply(req, code, body, NULL);
}

static HttpHandlerResult api_handle_health(Api *api, HttpRequest *req) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        json_object *missing = json_object_new_array();
        ManagerHealth h;

        if (!o || !missing) {
                json_object_put(missing);
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        }
        manager_get_health(api->manager, &h);
        for (size_t i = 0; h.missing_settings[i]; i++)
                json_object_array_add(missing, json_object_new_string(h.missing_settings[i]));
        json_object_object_add(o, "status", json_object_new_string(h.degraded ? "degraded" : "ok"));
        json_object_object_add(o, "contract_revision", json_object_new_int(CONTRACT_REVISION));
        json_object_object_add(o, "version", json_object_new_string(PACKAGE_VERSION));
        json_object_object_add(o, "state", json_object_new_string(admission_state_to_string(h.state)));
        json_object_object_add(
                o, "sandbox", json_object_new_string(manager_sandbox_health_to_string(h.sandbox)));
        json_object_object_add(o, "admission", json_object_new_string(h.draining ? "draining" : "open"));
        json_object_object_add(
                o, "execution", json_object_new_string(h.execution_configured ? "ok" : "not_configured"));
        json_object_object_add(o, "missing_settings", missing);
        /* The store (API.md 6): ok, degraded or failed, and why. */
        json_object_object_add(
                o, "storage", json_object_new_string(history_storage_state_to_string(h.storage)));
        if (h.storage_cause)
                json_object_object_add(o, "storage_cause", json_object_new_string(h.storage_cause));
        /* Days a record is kept, 0: until deleted (API.md "Every setting"). */
        json_object_object_add(
                o,
                "history_retention_days",
                json_object_new_int64((int64_t) manager_get_config(api->manager)->history_retention_days));
        /* Whose wiki permissions count, and in person mode whether the wiki
         * answered the last check (API.md "Whose permissions"). */
        json_object_object_add(
                o,
                "wiki_read_as",
                json_object_new_string(
                        config_read_as_to_string(manager_get_config(api->manager)->wiki_read_as)));
        if (manager_get_config(api->manager)->wiki_read_as == CONFIG_READ_AS_PERSON)
                json_object_object_add(
                        o, "wiki_read_check", json_object_new_string(manager_read_check_health(api->manager)));
        {
                AdmissionSlotCounts c;

                admission_get_slot_counts(manager_get_admission(api->manager), &c);
                if (json_add(o, "slots", render_slots(&c)) < 0)
                        return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        }
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

        r = manager_join(api->manager, http_request_session(req), http_request_user(req), t);
        if (r == MANAGER_STORAGE_UNAVAILABLE)
                return reply_storage_unavailable(api, req);
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

        r = manager_leave(api->manager, http_request_session(req), now(CLOCK_MONOTONIC));
        if (r == -ENOENT)
                return http_reply_error(req, API_ERROR_TICKET_NOT_FOUND, NULL, NULL);
        if (r < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        return http_reply(req, 204, NULL, NULL);
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

/* Who asked a query that started (API.md "Identity"): one journal line
 * with WIKIWEB_USER, the name through the sanitizer (it is the proxy's,
 * not ours). Nothing for an anonymous session. */
static void api_log_user(HttpRequest *req, const char *query_id) {
        const char *fields[] = { "WIKIWEB_EVENT=query_user", NULL, NULL, NULL };
        _cleanup_free_ char *user = NULL, *f1 = NULL, *f2 = NULL;
        int r;

        if (!http_request_user(req))
                return;
        r = sanitize_message(http_request_user(req), strlen(http_request_user(req)), &user);
        if (r < 0) {
                log_oom();
                return;
        }
        if (asprintf(&f1, "QUERY_ID=%s", query_id) < 0) {
                log_oom();
                return;
        }
        if (asprintf(&f2, "WIKIWEB_USER=%s", user) < 0) {
                log_oom();
                return;
        }
        fields[1] = f1;
        fields[2] = f2;
        log_fields(LOG_INFO, fields, "Query %s asked by user %s.", query_id, user);
}

/* A conversation as history_get_conversation() gives it. */
typedef struct ApiConversation {
        HistoryRecord *turns;
        size_t n_turns;
} ApiConversation;

static void api_conversation_done(ApiConversation *c) {
        history_conversation_free_records(c->turns, c->n_turns);
        *c = (ApiConversation){ .turns = NULL };
}

/* Start the query of q, a follow-up's prepared turns in follow_up (NULL:
 * none), and answer it when it ends or as its stream. t: when the request
 * began (CLOCK_MONOTONIC). */
static HttpHandlerResult api_query_start(
        Api *api, HttpRequest *req, const QueryBody *q, const ManagerFollowUp *follow_up, bool stream, usec_t t) {
        ManagerQuery *query;
        ApiWaiting *w;
        int r;

        /* Allocated first: once the query has started, nothing may fail
         * before its request is kept. */
        w = api_waiting_new(api, req);
        if (!w)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);

        r = manager_start_query(
                api->manager,
                &(ManagerQueryRequest){
                        .session = http_request_session(req),
                        .user = http_request_user(req),
                        .question = q->question,
                        .pages = q->pages,
                        .follow_up = follow_up,
                },
                &query);
        if (r < 0)
                api_waiting_free(w);
        if (r == -EBUSY)
                return reply_with_retry_after(api, req, API_ERROR_BUSY, NULL, t);
        if (r == MANAGER_STORAGE_UNAVAILABLE)
                return reply_storage_unavailable(api, req);
        if (r == -ENOSPC)
                return reply_with_retry_after(api, req, API_ERROR_QUEUE_FULL, NULL, t);
        if (r == -ESHUTDOWN)
                return reply_with_retry_after(api, req, API_ERROR_QUEUE_FULL, API_DRAINING_MESSAGE, t);
        if (r < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        api_log_user(req, manager_query_id(query));

        if (stream) {
                const char *h[] = { "Wikiweb-Query-Id", manager_query_id(query), NULL };

                /* The answer is the stream; the query's end is its record. */
                r = query_streams_attach(api->query_streams, req, manager_query_id(query), 0, h);
                if (r >= 0) {
                        api_waiting_free(w);
                        return HTTP_HANDLED;
                }
                log_warning_errno(
                        r, "Query %s: no stream for it; answering when it ends", manager_query_id(query));
        }
        manager_query_wait(query, &w->waiter, api_on_query_request_done, w);
        http_request_suspend(req);
        return HTTP_SUSPENDED;
}

static HttpHandlerResult api_query_follow_up(Api *api, HttpRequest *req, QueryBody *q, bool stream, usec_t t);

static HttpHandlerResult api_handle_query(Api *api, HttpRequest *req) {
        bool stream = api_wants_stream(req);
        _cleanup_free_ char *message = NULL;
        _cleanup_(query_body_done) QueryBody q = { 0 };
        usec_t t = now(CLOCK_MONOTONIC);
        const uint8_t *body;
        size_t size;

        body = http_request_body(req, &size);
        if (request_parse_query(http_request_content_type(req), body, size, &q, &message) < 0)
                return http_reply_error(req, API_ERROR_INVALID_INPUT, message, NULL);
        /* A stream refused is refused before admission (API.md 11.2). */
        if (stream && !http_stream_allowed(req))
                return http_reply_error(req, API_ERROR_RATE_LIMITED, NULL, NULL);
        /* A follow-up is prepared first, checked like a read (API.md 7). */
        if (q.follow_up)
                return api_query_follow_up(api, req, &q, stream, t);
        return api_query_start(api, req, &q, NULL, stream, t);
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

/* GET /history/{id}/sources (API.md 9): the caller's record's sources with
 * the wiki's current revisions (api/sources-check.h). */
static HttpHandlerResult api_handle_history_sources(Api *api, HttpRequest *req, const char *id) {
        _cleanup_(history_record_freep) HistoryRecord *record = NULL;

        if (!api_find_record(api, req, id, &record))
                return HTTP_HANDLED;
        return sources_checks_handle(api->sources_checks, req, record);
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

/* The writes a request waits for (on the store's worker), each answered
 * when it is durable. */
typedef enum ApiWriteKind {
        API_WRITE_DELETE,       /* DELETE /history/{id}: 204 */
        API_WRITE_FEEDBACK,     /* POST /history/{id}/feedback: the record */
        API_WRITE_SHARE,        /* POST /history/{id}/share: 201 with the link */
        API_WRITE_SHARE_REVOKE, /* DELETE /history/{id}/share: 204 */
} ApiWriteKind;

static HttpHandlerResult
        api_write(Api *api, HttpRequest *req, ApiWriteKind kind, const char *id, const FeedbackBody *f);

static HttpHandlerResult api_handle_history_delete(Api *api, HttpRequest *req, const char *id) {
        return api_write(api, req, API_WRITE_DELETE, id, NULL);
}

/* DELETE /api/v1/history: every record of the person (API.md 9). */
static HttpHandlerResult api_handle_history_erase(Api *api, HttpRequest *req);

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

/* The artifact id of session's records, served. */
static HttpHandlerResult
        api_serve_artifact(Api *api, HttpRequest *req, const char *id, const SessionKey *session) {
        _cleanup_(history_artifact_done) HistoryArtifact a = { 0 };
        _cleanup_free_ char *disposition = NULL;
        char etag[64 + 3];
        int r;

        r = history_get_artifact(api->history, id, session, &a);
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

/* POST /history/{id}/feedback (API.md 9.1): the asker rates their own
 * finished record; the answer is the record, with its feedback. */
static HttpHandlerResult api_handle_history_feedback(Api *api, HttpRequest *req, const char *id) {
        _cleanup_(feedback_body_done) FeedbackBody f = { .rating = NULL };
        _cleanup_free_ char *message = NULL;
        const uint8_t *body;
        size_t size;

        body = http_request_body(req, &size);
        if (request_parse_feedback(http_request_content_type(req), body, size, &f, &message) < 0)
                return http_reply_error(req, API_ERROR_INVALID_INPUT, message, NULL);
        return api_write(api, req, API_WRITE_FEEDBACK, id, &f);
}

/* ---- requests waiting for a Manager operation ---- */

typedef struct ApiShared ApiShared;

/* A request suspended while the Manager checks what its reader may read:
 * a shared view (share), the report (report) or a follow-up's turns
 * (follow_up). */
struct ApiPending {
        Api *api;
        HttpRequest *req;
        ManagerShareOpen *share;
        ManagerReportCheck *report;
        ManagerPreparedFollowUp *follow_up;
        ManagerWrite *write;
        ManagerErasure *erasure;
        /* The write's: what, and the record's id */
        ApiWriteKind write_kind;
        char id[QUERY_ID_MAX];
        /* The follow-up's: its query, as asked */
        QueryBody query;
        bool stream;
        usec_t began;
        /* The report's */
        unsigned days;
        bool csv;
        /* The shared view's */
        ApiShared *shared;
        ApiPending *pending_prev, *pending_next;
};

static ApiShared *api_shared_free(ApiShared *s);

static ApiPending *api_pending_free(ApiPending *p) {
        if (!p)
                return NULL;
        LIST_REMOVE(pending, p->api->pending, p);
        manager_share_open_free(p->share);
        manager_report_check_free(p->report);
        manager_follow_up_free(p->follow_up);
        manager_write_free(p->write);
        manager_erasure_free(p->erasure);
        query_body_done(&p->query);
        api_shared_free(p->shared);
        free(p);
        return NULL;
}

static ApiPending *api_pending_new(Api *api, HttpRequest *req) {
        ApiPending *p = calloc(1, sizeof *p);

        if (!p)
                return NULL;
        p->api = api;
        p->req = req;
        LIST_PREPEND(pending, api->pending, p);
        return p;
}

/* A link made: its token, and the page's address of the shared view: the
 * token in the fragment, which browsers never send, so that it stays out
 * of access logs and Referer headers. */
static HttpHandlerResult api_reply_share(HttpRequest *req, const char *token) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_free_ char *url = NULL;

        if (!token || asprintf(&url, "/#/shared/%s", token) < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        o = json_object_new_object();
        if (!o || json_add(o, "token", json_string(token)) < 0 || json_add(o, "url", json_string(url)) < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        return http_reply(req, 201, render_body(o), NULL);
}

static void api_write_on_done(
        ManagerWrite *w, const ManagerError *error, const ManagerWritten *result, void *userdata) {
        ApiPending *p = userdata;
        _cleanup_(history_record_freep) HistoryRecord *record = NULL;

        if (error)
                (void) reply_manager_error(p->api, p->req, error);
        else
                switch (p->write_kind) {
                case API_WRITE_DELETE:
                case API_WRITE_SHARE_REVOKE:
                        (void) http_reply(p->req, 204, NULL, NULL);
                        break;
                case API_WRITE_FEEDBACK:
                        if (api_find_record(p->api, p->req, p->id, &record))
                                (void) reply_json_object(p->req, render_history_record(record));
                        break;
                case API_WRITE_SHARE:
                        (void) api_reply_share(p->req, result->token);
                        break;
                }
        api_pending_free(p);
}

static void api_erase_on_done(
        ManagerErasure *erasure, const ManagerError *error, const ManagerErased *result, void *userdata) {
        ApiPending *p = userdata;

        if (error)
                (void) reply_manager_error(p->api, p->req, error);
        else
                (void) http_reply(p->req, 204, NULL, NULL);
        api_pending_free(p);
}

/* DELETE /api/v1/history: every record of the person (API.md 9),
 * suspended until the erasure is durable and checkpointed. */
static HttpHandlerResult api_handle_history_erase(Api *api, HttpRequest *req) {
        ManagerError e;
        ApiPending *p = api_pending_new(api, req);

        if (!p)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        if (manager_erase_session(
                    api->manager, http_request_session(req), api_erase_on_done, p, &p->erasure, &e) < 0) {
                HttpHandlerResult h = reply_manager_error(api, req, &e);

                api_pending_free(p);
                return h;
        }
        http_request_suspend(req);
        return HTTP_SUSPENDED;
}

/* A write of the asker's history: suspended until it is durable. */
static HttpHandlerResult
        api_write(Api *api, HttpRequest *req, ApiWriteKind kind, const char *id, const FeedbackBody *f) {
        const SessionKey *session = http_request_session(req);
        ManagerError e;
        ApiPending *p;
        int r = -EINVAL;

        if (strlen(id) >= sizeof p->id)
                return http_reply_error(req, API_ERROR_QUERY_NOT_FOUND, NULL, NULL);
        p = api_pending_new(api, req);
        if (!p)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        p->write_kind = kind;
        snprintf(p->id, sizeof p->id, "%s", id);
        switch (kind) {
        case API_WRITE_DELETE:
                r = manager_delete_record(api->manager, session, id, api_write_on_done, p, &p->write, &e);
                break;
        case API_WRITE_FEEDBACK:
                r = manager_set_feedback(
                        api->manager,
                        session,
                        id,
                        f->rating,
                        f->reason,
                        f->comment,
                        api_write_on_done,
                        p,
                        &p->write,
                        &e);
                break;
        case API_WRITE_SHARE:
                r = manager_share_create(api->manager, session, id, api_write_on_done, p, &p->write, &e);
                break;
        case API_WRITE_SHARE_REVOKE:
                r = manager_share_revoke(api->manager, session, id, api_write_on_done, p, &p->write, &e);
                break;
        }
        if (r < 0) {
                HttpHandlerResult h = reply_manager_error(api, req, &e);

                api_pending_free(p);
                return h;
        }
        http_request_suspend(req);
        return HTTP_SUSPENDED;
}

/* The follow-up's turns are prepared: its query starts with them, or the
 * preparation's refusal is the answer. */
static void api_follow_up_on_prepared(
        ManagerPreparedFollowUp *f, const ManagerError *error, const ManagerFollowUp *result, void *userdata) {
        ApiPending *p = userdata;

        if (error)
                (void) reply_manager_error(p->api, p->req, error);
        else
                (void) api_query_start(p->api, p->req, &p->query, result, p->stream, p->began);
        api_pending_free(p);
}

/* POST /query with follow_up (API.md 7): suspended while the Manager
 * prepares the turns followed, which in person mode asks the wiki what
 * the asker may still read. The query body is moved into the pending. */
static HttpHandlerResult api_query_follow_up(Api *api, HttpRequest *req, QueryBody *q, bool stream, usec_t t) {
        ManagerError e;
        ApiPending *p;

        p = api_pending_new(api, req);
        if (!p)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        p->query = *q;
        *q = (QueryBody){ 0 };
        p->stream = stream;
        p->began = t;
        if (manager_prepare_follow_up(
                    api->manager,
                    http_request_session(req),
                    http_request_user(req),
                    p->query.follow_up,
                    api_follow_up_on_prepared,
                    p,
                    &p->follow_up,
                    &e) < 0) {
                HttpHandlerResult h = reply_manager_error(api, req, &e);

                api_pending_free(p);
                return h;
        }
        http_request_suspend(req);
        return HTTP_SUSPENDED;
}

/* Whether the client asks for the report as CSV: ?format=csv. */
static int api_report_format(HttpRequest *req, bool *ret_csv) {
        const char *format = http_request_argument(req, "format");

        if (!format || streq(format, "json")) {
                *ret_csv = false;
                return 0;
        }
        if (streq(format, "csv")) {
                *ret_csv = true;
                return 0;
        }
        return -EINVAL;
}

/* GET /reports (API.md 9.2): the reports the asking person may read, so
 * that a page shows the editors' report to editors without being refused
 * for everybody else. */
static HttpHandlerResult api_handle_reports(Api *api, HttpRequest *req) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        json_object *reports = json_object_new_array();

        /* json_add() and json_append() take their value over, also on failure. */
        if (!o || json_add(o, "reports", reports) < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        if (config_is_editor(manager_get_config(api->manager), http_request_user(req)) &&
            json_append(reports, json_string("unanswered")) < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        return reply_json_object(req, TAKE_PTR(o));
}

/* The unanswered report, as JSON or CSV. */
static HttpHandlerResult
        api_reply_report(Api *api, HttpRequest *req, const Report *report, unsigned days, bool csv) {
        if (csv) {
                _cleanup_free_ char *text = render_report_csv(report);
                /* A download, as an artifact is: never rendered as a page. */
                const char *h[] = { "Content-Disposition",
                                    "attachment; filename=\"unanswered.csv\"",
                                    "Content-Security-Policy",
                                    "sandbox",
                                    NULL };

                if (!text)
                        return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
                return http_reply_bytes(req, 200, "text/csv; charset=utf-8", text, strlen(text), h);
        }
        return reply_json_object(
                req, render_report(report, days, manager_get_config(api->manager)->wiki_api_url));
}

static void api_report_on_done(
        ManagerReportCheck *c, const ManagerError *error, const Report *report, void *userdata) {
        ApiPending *p = userdata;

        if (error)
                (void) http_reply_error(p->req, error->api_error, error->message, NULL);
        else
                (void) api_reply_report(p->api, p->req, report, p->days, p->csv);
        api_pending_free(p);
}

/* GET /reports/unanswered (API.md 9.2): for the wiki's editors only; in
 * person mode with the pages the editor may read. */
static HttpHandlerResult api_handle_report(Api *api, HttpRequest *req) {
        const char *message = NULL;
        ManagerError e;
        ApiPending *p;
        usec_t t, span;
        unsigned days;
        bool csv;

        if (!config_is_editor(manager_get_config(api->manager), http_request_user(req)))
                return http_reply_error(
                        req, API_ERROR_ORIGIN_DENIED, "The report is for the wiki's editors", NULL);
        if (report_parse_days(http_request_argument(req, "days"), &days, &message) < 0)
                return http_reply_error(req, API_ERROR_INVALID_INPUT, message, NULL);
        if (api_report_format(req, &csv) < 0)
                return http_reply_error(req, API_ERROR_INVALID_INPUT, "format must be json or csv", NULL);

        p = api_pending_new(api, req);
        if (!p)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        p->days = days;
        p->csv = csv;
        t = now(CLOCK_REALTIME);
        span = (usec_t) days * 24 * 3600 * USEC_PER_SEC;
        if (manager_report_unanswered(
                    api->manager,
                    http_request_user(req),
                    t > span ? t - span : 0,
                    api_report_on_done,
                    p,
                    &p->report,
                    &e) < 0) {
                api_pending_free(p);
                return http_reply_error(req, e.api_error, e.message, NULL);
        }
        http_request_suspend(req);
        return HTTP_SUSPENDED;
}

static HttpHandlerResult api_handle_artifact(Api *api, HttpRequest *req, const char *id) {
        return api_serve_artifact(api, req, id, http_request_session(req));
}

/* ---- conversations: export and share (API.md 9) ---- */

/* 200 with a conversation as Markdown, to be saved. */
static HttpHandlerResult
        api_reply_markdown(HttpRequest *req, const ApiConversation *c, const char *artifact_base) {
        _cleanup_free_ char *text = NULL, *disposition = NULL;
        int r;

        r = export_markdown(c->turns, c->n_turns, artifact_base, &text);
        if (r < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        /* Named after the record: an id is safe in a header as it is. */
        if (asprintf(&disposition, "attachment; filename=\"conversation-%s.md\"", c->turns[c->n_turns - 1].id) <
            0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        {
                /* A download, like an artifact: never a document of ours. */
                const char *h[] = {
                        "Content-Disposition", disposition, "Content-Security-Policy", "sandbox", NULL,
                };
                return http_reply_bytes(req, 200, "text/markdown; charset=utf-8", text, strlen(text), h);
        }
}

/* GET /history/{id}/export: the session's conversation up to id, read
 * as the history's listing is. */
static HttpHandlerResult api_handle_history_export(Api *api, HttpRequest *req, const char *id) {
        _cleanup_(api_conversation_done) ApiConversation c = { .turns = NULL };
        int r;

        r = history_get_conversation(
                api->history, id, http_request_session(req), HISTORY_CONVERSATION_MAX_TURNS, &c.turns, &c.n_turns);
        if (r == -ENOENT)
                return http_reply_error(req, API_ERROR_QUERY_NOT_FOUND, NULL, NULL);
        if (r < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        return api_reply_markdown(req, &c, "/api/v1/artifacts/");
}

static ssize_t api_archive_on_read(void *userdata, uint8_t *buf, size_t max) {
        return export_zip_read(userdata, buf, max);
}

static void api_archive_on_free(void *userdata) {
        export_zip_free(userdata);
}

/* GET /history/export (API.md 9 "Export of a whole history"): every
 * record of the session's (with an identity, the person's), as GET
 * /history lists them, in one ZIP made as it is sent. */
static HttpHandlerResult api_handle_history_archive(Api *api, HttpRequest *req) {
        _cleanup_(export_zip_freep) ExportZip *z = NULL;
        char disposition[sizeof "attachment; filename=\"wikiweb-history-YYYY-MM-DD.zip\""];
        usec_t t = now(CLOCK_REALTIME);
        char day[RFC3339_MS_MAX];
        int r;

        r = export_zip_new(api->history, http_request_session(req), t, &z);
        if (r < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        /* Named after the day (UTC) it was made: safe in a header as it is. */
        snprintf(
                disposition,
                sizeof disposition,
                "attachment; filename=\"wikiweb-history-%.10s.zip\"",
                format_rfc3339_ms(day, t));
        {
                /* A download, as an artifact is: never a document of ours. */
                const char *h[] = {
                        "Content-Disposition", disposition, "Content-Security-Policy", "sandbox", NULL,
                };
                return http_reply_reader(
                        req, 200, "application/zip", api_archive_on_read, api_archive_on_free, TAKE_PTR(z), h);
        }
}

static HttpHandlerResult api_handle_share(Api *api, HttpRequest *req, const char *id) {
        _cleanup_free_ char *message = NULL;
        const uint8_t *body;
        size_t size;

        if (http_request_method(req) == HTTP_METHOD_DELETE)
                return api_write(api, req, API_WRITE_SHARE_REVOKE, id, NULL);

        /* POST: no body, or {}, as a join. */
        body = http_request_body(req, &size);
        if (request_parse_join(http_request_content_type(req), body, size, &message) < 0)
                return http_reply_error(req, API_ERROR_INVALID_INPUT, message, NULL);
        return api_write(api, req, API_WRITE_SHARE, id, NULL);
}

/* A request for a shared conversation (API.md 9 "Share"), from the
 * token to its answer, while the Manager opens the share. */
typedef HttpHandlerResult (*ApiSharedHandler)(Api *api, HttpRequest *req, const ApiShared *s);

struct ApiShared {
        char token[MANAGER_SHARE_TOKEN_MAX];
        char artifact_id[ROUTE_ID_MAX]; /* GET …/artifacts/{id}; "" otherwise */
        ApiConversation conversation;   /* borrowed from the Manager's result */
        const SessionKey *owner;        /* whose records they are */
        ApiSharedHandler handler;
};

static ApiShared *api_shared_free(ApiShared *s) {
        free(s);
        return NULL;
}

static void api_shared_on_open(
        ManagerShareOpen *o, const ManagerError *error, const ManagerShared *result, void *userdata) {
        ApiPending *p = userdata;
        ApiShared *s = p->shared;

        if (error)
                (void) http_reply_error(p->req, error->api_error, error->message, NULL);
        else {
                s->conversation = (ApiConversation){ .turns = (HistoryRecord *) result->turns,
                                                     .n_turns = result->n_turns };
                s->owner = result->owner;
                (void) s->handler(p->api, p->req, s);
        }
        api_pending_free(p);
}

/* GET /shared/{token}[/…]: the Manager opens the share for the reader
 * (403 origin_denied for an anonymous reader while identity is on; 404
 * not_found for a token that is wrong, revoked, whose record is gone, or
 * that shows what the reader may not read), then handler answers. */
static HttpHandlerResult api_handle_shared_route(
        Api *api, HttpRequest *req, const char *token, const char *artifact_id, ApiSharedHandler handler) {
        ApiPending *p;
        ManagerError e;

        p = api_pending_new(api, req);
        if (p)
                p->shared = calloc(1, sizeof *p->shared);
        if (!p || !p->shared) {
                api_pending_free(p);
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        }
        snprintf(p->shared->token, sizeof p->shared->token, "%s", token);
        snprintf(p->shared->artifact_id, sizeof p->shared->artifact_id, "%s", artifact_id ? artifact_id : "");
        p->shared->handler = handler;
        if (manager_share_open(
                    api->manager, http_request_user(req), p->shared->token, api_shared_on_open, p, &p->share, &e) <
            0) {
                api_pending_free(p);
                return http_reply_error(req, e.api_error, e.message, NULL);
        }
        http_request_suspend(req);
        return HTTP_SUSPENDED;
}

/* GET /shared/{token}: the turns, read-only, their files through the share. */
static HttpHandlerResult api_reply_shared(Api *api, HttpRequest *req, const ApiShared *s) {
        const ApiConversation *c = &s->conversation;
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_free_ char *base = NULL;
        json_object *turns;

        if (asprintf(&base, "/api/v1/shared/%s", s->token) < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);

        o = json_object_new_object();
        turns = json_object_new_array();
        if (!o || !turns || json_object_object_add(o, "turns", turns) < 0) {
                json_object_put(turns);
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        }
        for (size_t i = 0; i < c->n_turns; i++) {
                json_object *rec = render_history_record(&c->turns[i]), *arts;
                size_t n;

                if (!rec || json_object_array_add(turns, rec) < 0) {
                        json_object_put(rec);
                        return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
                }
                /* Its artifacts are downloaded through the share. */
                arts = json_object_object_get(rec, "artifacts");
                n = json_object_array_length(arts);
                for (size_t j = 0; j < n; j++) {
                        json_object *a = json_object_array_get_idx(arts, j);
                        _cleanup_free_ char *u = NULL;

                        if (asprintf(&u, "%s/artifacts/%s", base, c->turns[i].artifacts[j].id) < 0 ||
                            json_add(a, "download_url", json_string(u)) < 0)
                                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
                }
        }
        {
                _cleanup_free_ char *export = NULL;

                if (asprintf(&export, "%s/export", base) < 0 ||
                    json_add(o, "export_url", json_string(export)) < 0)
                        return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        }
        return http_reply(req, 200, render_body(o), NULL);
}

/* GET /shared/{token}/export. */
static HttpHandlerResult api_reply_shared_export(Api *api, HttpRequest *req, const ApiShared *s) {
        _cleanup_free_ char *base = NULL;

        if (asprintf(&base, "/api/v1/shared/%s/artifacts/", s->token) < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        return api_reply_markdown(req, &s->conversation, base);
}

/* GET /shared/{token}/artifacts/{id}: only an artifact of its turns. */
static HttpHandlerResult api_reply_shared_artifact(Api *api, HttpRequest *req, const ApiShared *s) {
        const ApiConversation *c = &s->conversation;

        for (size_t i = 0; i < c->n_turns; i++)
                for (size_t j = 0; j < c->turns[i].n_artifacts; j++)
                        if (streq(c->turns[i].artifacts[j].id, s->artifact_id))
                                return api_serve_artifact(api, req, s->artifact_id, s->owner);
        return http_reply_error(req, API_ERROR_ARTIFACT_NOT_FOUND, NULL, NULL);
}

/* Who may hold access tokens (API.md "Access tokens"): a person a
 * trusted proxy named. Without trusted proxies there are none; an
 * anonymous caller is refused; a request that itself carries a token may
 * list and revoke, never create. Returns true when a refusal was queued. */
static bool api_tokens_refuse(Api *api, HttpRequest *req, bool create) {
        if (!config_identity_enabled(manager_get_config(api->manager))) {
                http_reply_error(
                        req,
                        API_ERROR_ORIGIN_DENIED,
                        "Access tokens need a sign-on: this daemon has no trusted proxies (WIKI_WEB_TRUSTED_PROXIES)",
                        NULL);
                return true;
        }
        if (!http_request_user(req)) {
                http_reply_error(req, API_ERROR_ORIGIN_DENIED, "Sign in to manage access tokens", NULL);
                return true;
        }
        if (create && http_request_by_token(req)) {
                http_reply_error(
                        req,
                        API_ERROR_ORIGIN_DENIED,
                        "A request carrying an access token cannot create tokens: sign in through the sign-on",
                        NULL);
                return true;
        }
        return false;
}

static HttpHandlerResult api_handle_tokens_list(Api *api, HttpRequest *req) {
        HistoryToken *tokens = NULL;
        json_object *o;
        ManagerError e;
        size_t n = 0;

        if (api_tokens_refuse(api, req, false))
                return HTTP_HANDLED;
        if (manager_tokens_list(api->manager, http_request_user(req), &tokens, &n, &e) < 0)
                return reply_manager_error(api, req, &e);
        o = render_tokens(tokens, n, now(CLOCK_REALTIME), manager_get_config(api->manager)->token_max_days);
        history_tokens_free(tokens, n);
        return reply_json_object(req, o);
}

static HttpHandlerResult api_handle_tokens_create(Api *api, HttpRequest *req) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_(token_body_done) TokenBody b = { .name = NULL };
        _cleanup_free_ char *message = NULL;
        char created[RFC3339_MS_MAX], expires[RFC3339_MS_MAX];
        ManagerTokenCreated t;
        const uint8_t *body;
        ManagerError e;
        size_t size;
        int r;

        if (api_tokens_refuse(api, req, true))
                return HTTP_HANDLED;
        body = http_request_body(req, &size);
        r = request_parse_token(http_request_content_type(req), body, size, &b, &message);
        if (r == -ENOMEM)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        if (r < 0)
                return http_reply_error(req, API_ERROR_INVALID_INPUT, message, NULL);
        if (manager_token_create(api->manager, http_request_user(req), b.name, b.expires_in_days, &t, &e) < 0)
                return reply_manager_error(api, req, &e);

        /* The one response that ever holds the token. */
        o = json_object_new_object();
        if (!o || json_add(o, "id", json_string(t.id)) < 0 ||
            json_add(o, "token", json_string(t.token)) < 0 || json_add(o, "name", json_string(b.name)) < 0 ||
            json_add(o, "created_at", json_string(format_rfc3339_ms(created, t.created_at))) < 0 ||
            json_add(o, "expires_at", json_string(format_rfc3339_ms(expires, t.expires_at))) < 0) {
                explicit_bzero(&t, sizeof t);
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        }
        explicit_bzero(&t, sizeof t);
        return http_reply(req, 201, render_body(o), (const char *const[]){ "Cache-Control", "no-store", NULL });
}

static HttpHandlerResult api_handle_tokens(Api *api, HttpRequest *req) {
        if (http_request_method(req) == HTTP_METHOD_POST)
                return api_handle_tokens_create(api, req);
        return api_handle_tokens_list(api, req);
}

static HttpHandlerResult api_handle_token_revoke(Api *api, HttpRequest *req, const char *id) {
        ManagerError e;

        if (api_tokens_refuse(api, req, false))
                return HTTP_HANDLED;
        if (manager_token_revoke(api->manager, http_request_user(req), id, &e) < 0)
                return reply_manager_error(api, req, &e);
        return http_reply(req, 204, NULL, NULL);
}

int api_verify_token(const char *credential, char **ret_user, void *userdata) {
        Api *api = userdata;

        assert(credential);
        assert(ret_user);
        assert(api);
        return manager_token_authenticate(api->manager, credential, ret_user);
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
                if (http_request_method(req) == HTTP_METHOD_DELETE)
                        return api_handle_history_erase(api, req);
                return api_handle_history_list(api, req);
        case ROUTE_HISTORY_ITEM:
                if (http_request_method(req) == HTTP_METHOD_DELETE)
                        return api_handle_history_delete(api, req, m->id);
                return api_handle_history_get(api, req, m->id);
        case ROUTE_HISTORY_EVENTS:
                return api_handle_history_events(api, req, m->id);
        case ROUTE_HISTORY_SOURCES:
                return api_handle_history_sources(api, req, m->id);
        case ROUTE_ARTIFACT:
                return api_handle_artifact(api, req, m->id);
        case ROUTE_HISTORY_FEEDBACK:
                return api_handle_history_feedback(api, req, m->id);
        case ROUTE_REPORT_UNANSWERED:
                return api_handle_report(api, req);
        case ROUTE_REPORTS:
                return api_handle_reports(api, req);
        case ROUTE_HISTORY_EXPORT:
                return api_handle_history_export(api, req, m->id);
        case ROUTE_HISTORY_ARCHIVE:
                return api_handle_history_archive(api, req);
        case ROUTE_HISTORY_SHARE:
                return api_handle_share(api, req, m->id);
        case ROUTE_SHARED:
                return api_handle_shared_route(api, req, m->id, NULL, api_reply_shared);
        case ROUTE_SHARED_EXPORT:
                return api_handle_shared_route(api, req, m->id, NULL, api_reply_shared_export);
        case ROUTE_SHARED_ARTIFACT:
                return api_handle_shared_route(api, req, m->id, m->id2, api_reply_shared_artifact);
        case ROUTE_TOKENS:
                return api_handle_tokens(api, req);
        case ROUTE_TOKEN:
                return api_handle_token_revoke(api, req, m->id);
        default:
                return http_reply_error(req, API_ERROR_NOT_FOUND, NULL, NULL);
        }
}
