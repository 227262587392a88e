/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <json-c/json.h>
#include <limits.h>
#include <math.h>

#include "config-version.h"
#include "http/api.h"
#include "http/export.h"
#include "http/query-stream.h"
#include "http/sources-check.h"
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
#include "shared/sha256.h"
#include "shared/strv.h"
#include "query/mediawiki.h"
#include "shared/time-util.h"
#include "shared/list.h"

/* A POST /query answered when its record is durable (MANAGER_QUERY_DURABLE). */
typedef struct ApiWaiting {
        char query_id[QUERY_ID_MAX];
        HttpRequest *request;
        struct ApiWaiting *waiting_prev, *waiting_next;
} ApiWaiting;

struct Api {
        Manager *manager;
        History *history;              /* read directly: the records (API.md 9) */
        QueueStreams *queue_streams;   /* GET /queue/events (API.md 11.1) */
        QueryStreams *query_streams;   /* the running query's events (11.2, 11.3) */
        SourcesChecks *sources_checks; /* GET /history/{id}/sources (9) */

        /* The requests of the queries in flight: each stays suspended until
         * its record is durable (even if the client has gone). */
        ApiWaiting *waiting;

        /* The shared views waiting for the reader's permissions (API.md 9
         * "Share"). */
        struct ApiReadable *readables;
};

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

/* The query's record is durable: its streams get the record and end
 * (API.md 11.2), and its waiting request is answered. */
static void api_query_durable(Api *api, ManagerQuery *q, const ManagerOutcome *outcome) {
        const char *id = manager_query_id(q);
        const char *h[] = { "Wikiweb-Query-Id", id, NULL };
        _cleanup_free_ char *record = api_record_json(api, id, manager_query_session(q));
        HttpRequest *req = NULL;

        query_streams_finish(api->query_streams, id, record);

        for (ApiWaiting *w = api->waiting; w; w = w->waiting_next)
                if (streq(w->query_id, id)) {
                        req = w->request;
                        LIST_REMOVE(waiting, api->waiting, w);
                        free(w);
                        break;
                }
        if (!req)
                return;
        if (outcome->succeeded) {
                /* The same record the streams got: read and rendered once. */
                if (!record) {
                        log_error("Query %s succeeded but its record cannot be read.", id);
                        http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, h);
                        return;
                }
                http_reply(req, 200, record, h);
        } else
                http_reply_error(req, outcome->api_error, outcome->message, h);
}

/* The Manager's announcements: the query streams, the queue streams and
 * the waiting requests. */
static void api_on_manager_event(Manager *m, const ManagerEvent *ev, void *userdata) {
        Api *api = userdata;
        int r;

        switch (ev->type) {
        case MANAGER_QUERY_STARTED:
                r = query_streams_begin(
                        api->query_streams,
                        manager_query_id(ev->query),
                        manager_query_session(ev->query),
                        manager_query_created(ev->query));
                if (r < 0)
                        log_warning_errno(
                                r, "Query %s: no event log, so no stream", manager_query_id(ev->query));
                break;
        case MANAGER_QUERY_EVENT:
                query_streams_event(api->query_streams, manager_query_id(ev->query), ev->event);
                break;
        case MANAGER_QUERY_DURABLE:
                api_query_durable(api, ev->query, ev->outcome);
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

typedef struct ApiReadable ApiReadable;
static ApiReadable *api_readable_free(ApiReadable *r);

Api *api_free(Api *api) {
        ApiWaiting *w;

        if (!api)
                return NULL;
        api->queue_streams = queue_streams_free(api->queue_streams);
        api->query_streams = query_streams_free(api->query_streams);
        api->sources_checks = sources_checks_free(api->sources_checks);
        while ((w = api->waiting)) {
                LIST_REMOVE(waiting, api->waiting, w);
                free(w);
        }
        while (api->readables)
                api_readable_free(api->readables);
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

        if (asprintf(&message, "The history cannot take a new record: %s", manager_storage_cause(api->manager)) <
            0)
                message = NULL;
        return http_reply_error(req, API_ERROR_STORAGE_UNAVAILABLE, message, h);
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

/* The conversation up to the record id of session into *ret; false when
 * there is none to give, and then the request is answered (query_not_found
 * for an unknown record or another session's, or internal_error). */
static bool api_find_conversation(
        Api *api, HttpRequest *req, const char *id, const SessionKey *session, ApiConversation *ret) {
        int r;

        r = history_get_conversation(
                api->history, id, session, HISTORY_CONVERSATION_MAX_TURNS, &ret->turns, &ret->n_turns);
        if (r == -ENOENT)
                http_reply_error(req, API_ERROR_QUERY_NOT_FOUND, NULL, NULL);
        else if (r < 0)
                http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        return r >= 0;
}

/* A follow-up (API.md 7): the conversation of the record followed, which
 * must be the session's own and have ended, as the turns the model is
 * given. Checked before admission: a follow-up refused changes no queue
 * state and runs nothing. false: the request is answered (query_not_found,
 * busy, internal_error). */
static bool api_prepare_follow_up(
        Api *api,
        HttpRequest *req,
        const char *follow_up,
        ApiConversation *conversation,
        QueryTurn **ret_turns,
        ManagerFollowUp *ret) {
        const HistoryRecord *last;
        QueryTurn *turns;

        if (!api_find_conversation(api, req, follow_up, http_request_session(req), conversation))
                return false;
        last = &conversation->turns[conversation->n_turns - 1];
        if (streq(last->status, "running")) {
                reply_with_retry_after(
                        api, req, API_ERROR_BUSY, "The query followed is still running", now(CLOCK_MONOTONIC));
                return false;
        }
        turns = calloc(conversation->n_turns, sizeof *turns);
        if (!turns) {
                http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
                return false;
        }
        for (size_t i = 0; i < conversation->n_turns; i++)
                turns[i] = (QueryTurn){
                        .question = conversation->turns[i].question,
                        .answer = conversation->turns[i].answer,
                        .sources_json = conversation->turns[i].sources_json,
                };
        *ret_turns = turns;
        *ret = (ManagerFollowUp){
                .follow_up = last->id,
                .conversation = last->conversation,
                .turns = turns,
                .n_turns = conversation->n_turns,
        };
        return true;
}

static HttpHandlerResult api_handle_query(Api *api, HttpRequest *req) {
        bool stream = api_wants_stream(req);
        _cleanup_free_ char *message = NULL;
        _cleanup_(query_body_done) QueryBody q = { 0 };
        _cleanup_(api_conversation_done) ApiConversation conversation = { .turns = NULL };
        _cleanup_free_ QueryTurn *turns = NULL;
        ManagerFollowUp follow_up;
        usec_t t = now(CLOCK_MONOTONIC);
        ManagerQuery *query;
        ApiWaiting *w;
        const uint8_t *body;
        size_t size;
        int r;

        body = http_request_body(req, &size);
        if (request_parse_query(http_request_content_type(req), body, size, &q, &message) < 0)
                return http_reply_error(req, API_ERROR_INVALID_INPUT, message, NULL);
        /* A stream refused is refused before admission (API.md 11.2). */
        if (stream && !http_stream_allowed(req))
                return http_reply_error(req, API_ERROR_RATE_LIMITED, NULL, NULL);
        if (q.follow_up && !api_prepare_follow_up(api, req, q.follow_up, &conversation, &turns, &follow_up))
                return HTTP_HANDLED;

        /* Allocated first: once the query has started, nothing may fail
         * before its request is kept. */
        w = calloc(1, sizeof *w);
        if (!w)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);

        r = manager_start_query(
                api->manager,
                &(ManagerQueryRequest){
                        .session = http_request_session(req),
                        .user = http_request_user(req),
                        .question = q.question,
                        .pages = q.pages,
                        .follow_up = q.follow_up ? &follow_up : NULL,
                },
                &query);
        if (r < 0)
                free(w);
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
                        free(w);
                        return HTTP_HANDLED;
                }
                log_warning_errno(
                        r, "Query %s: no stream for it; answering when it ends", manager_query_id(query));
        }
        snprintf(w->query_id, sizeof w->query_id, "%s", manager_query_id(query));
        w->request = req;
        LIST_PREPEND(waiting, api->waiting, w);
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

/* GET /history/{id}/sources (API.md 9): the caller's record's sources with
 * the wiki's current revisions (http/sources-check.h). */
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

/* A history_*() call on one of the asker's records failed: -ENOENT is 404
 * (not theirs, or gone), -EBUSY 409 busy with Retry-After (its outcome is
 * still to be written: try after), anything else 500. */
static HttpHandlerResult reply_history_error(Api *api, HttpRequest *req, int r) {
        assert(r < 0);

        if (r == -ENOENT)
                return http_reply_error(req, API_ERROR_QUERY_NOT_FOUND, NULL, NULL);
        if (r == -EBUSY)
                return reply_with_retry_after(
                        api, req, API_ERROR_BUSY, "The query is still running", now(CLOCK_MONOTONIC));
        /* A write the store could not make (full, read-only, I/O error, damaged). */
        if (r == -EIO) {
                HistoryStorage st;

                manager_get_storage(api->manager, &st);
                if (st.fault < 0)
                        return reply_storage_unavailable(api, req);
        }
        return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
}

static HttpHandlerResult api_handle_history_delete(Api *api, HttpRequest *req, const char *id) {
        int r;

        r = history_delete(api->history, id, http_request_session(req));
        if (r < 0)
                return reply_history_error(api, req, r);
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
        _cleanup_(history_record_freep) HistoryRecord *record = NULL;
        _cleanup_free_ char *message = NULL;
        const uint8_t *body;
        size_t size;
        int r;

        body = http_request_body(req, &size);
        if (request_parse_feedback(http_request_content_type(req), body, size, &f, &message) < 0)
                return http_reply_error(req, API_ERROR_INVALID_INPUT, message, NULL);

        r = history_set_feedback(
                api->history, id, http_request_session(req), f.rating, f.reason, f.comment, now(CLOCK_REALTIME));
        if (r < 0) /* -EBUSY: there is no answer to rate yet. */
                return reply_history_error(api, req, r);
        metrics_count_feedback(f.rating);
        if (streq(f.rating, "down"))
                metrics_count_unanswered("negative_feedback");

        if (!api_find_record(api, req, id, &record))
                return HTTP_HANDLED;
        return reply_json_object(req, render_history_record(record));
}

/* ---- what the person asking may read (API.md "Whose permissions") ---- */

/* What answers a request once its titles are checked: readable[i] says
 * whether the person asking may read titles[i]. data is the request's
 * own, freed afterwards. */
typedef HttpHandlerResult (*ApiReadableDone)(
        Api *api, HttpRequest *req, void *data, char *const *titles, const bool *readable);

/* A request suspended while manager_check_readable() answers for its
 * titles with the identity of the person asking (WIKI_WEB_WIKI_READ_AS=
 * person asks the wiki; service answers yes at once), asked in batches of
 * at most MEDIAWIKI_TITLES_MAX. With stop_at_unreadable the first title
 * found unreadable ends the asking (those not asked stay unreadable). */
struct ApiReadable {
        Api *api;
        HttpRequest *req;
        char **titles;  /* each once, every one a valid title */
        bool *readable; /* one per title */
        size_t next;    /* the first not yet asked */
        bool stop_at_unreadable;
        ApiReadableDone done;
        void *data;
        void (*free_data)(void *data);
        ManagerReadableCheck *check;
        ApiReadable *readables_prev, *readables_next;
};

static ApiReadable *api_readable_free(ApiReadable *r) {
        if (!r)
                return NULL;
        LIST_REMOVE(readables, r->api->readables, r);
        manager_readable_check_free(r->check);
        if (r->data)
                r->free_data(r->data);
        strv_free(r->titles);
        free(r->readable);
        free(r);
        return NULL;
}

static int api_readable_ask(ApiReadable *r);

static void api_readable_on_done(
        ManagerReadableCheck *c,
        int error,
        ApiError api_error,
        const char *message,
        const bool *readable,
        size_t n,
        void *userdata) {
        ApiReadable *r = userdata;
        bool stop = false;
        int q;

        if (error < 0) {
                /* Fail closed: the wiki's error, nothing shown. */
                (void) http_reply_error(r->req, api_error, message, NULL);
                api_readable_free(r);
                return;
        }
        for (size_t i = 0; i < n && r->titles[r->next]; i++, r->next++) {
                r->readable[r->next] = readable[i];
                stop = stop || (r->stop_at_unreadable && !readable[i]);
        }
        r->check = manager_readable_check_free(r->check);
        if (!stop && r->titles[r->next]) {
                q = api_readable_ask(r);
                if (q >= 0)
                        return;
                (void) http_reply_error(r->req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
                api_readable_free(r);
                return;
        }
        (void) r->done(r->api, r->req, r->data, r->titles, r->readable);
        api_readable_free(r);
}

/* The next batch of titles. */
static int api_readable_ask(ApiReadable *r) {
        char *batch[MEDIAWIKI_TITLES_MAX + 1] = { NULL };

        for (size_t i = 0; i < MEDIAWIKI_TITLES_MAX && r->titles[r->next + i]; i++)
                batch[i] = r->titles[r->next + i];
        return manager_check_readable(
                r->api->manager, http_request_user(r->req), batch, api_readable_on_done, r, &r->check);
}

/* Check titles for the person asking, then answer with done(data); the
 * request is suspended meanwhile. A title the wiki would not take is
 * dropped (so never readable). A check that cannot be made is answered
 * with its error (fail closed). Takes titles and data. */
static HttpHandlerResult api_readable_start(
        Api *api,
        HttpRequest *req,
        char **titles,
        bool stop_at_unreadable,
        ApiReadableDone done,
        void *data,
        void (*free_data)(void *data)) {
        ApiReadable *r;
        size_t n = 0;
        int q;

        r = calloc(1, sizeof *r);
        if (!r) {
                strv_free(titles);
                free_data(data);
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        }
        *r = (ApiReadable){ .api = api,
                            .req = req,
                            .titles = titles,
                            .stop_at_unreadable = stop_at_unreadable,
                            .done = done,
                            .data = data,
                            .free_data = free_data };
        LIST_PREPEND(readables, api->readables, r);
        for (size_t i = 0; titles[i]; i++)
                if (mediawiki_title_is_valid(titles[i]))
                        titles[n++] = titles[i];
                else
                        free(titles[i]);
        titles[n] = NULL;
        r->readable = calloc(n + 1, sizeof(bool));
        if (!r->readable) {
                api_readable_free(r);
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        }
        if (n == 0) {
                HttpHandlerResult h = done(api, req, data, titles, r->readable);

                api_readable_free(r);
                return h;
        }
        q = api_readable_ask(r);
        if (q < 0) {
                api_readable_free(r);
                if (q == -EOPNOTSUPP)
                        return http_reply_error(
                                req, API_ERROR_EXECUTION_FAILED, "The wiki is not configured", NULL);
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
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

/* A report waiting for what its editor may read. */
typedef struct ApiReport {
        Report *report;
        unsigned days;
        bool csv;
} ApiReport;

static void api_report_free(void *p) {
        ApiReport *x = p;

        if (!x)
                return;
        report_free(x->report);
        free(x);
}

/* Only the pages the editor may read stay in the report (API.md "Whose
 * permissions"); how many did not is counted, never which. */
static HttpHandlerResult api_report_on_readable(
        Api *api, HttpRequest *req, void *data, char *const *titles, const bool *readable) {
        ApiReport *x = data;
        size_t n = report_keep_pages(x->report, titles, readable);

        if (n > 0) {
                metrics_count_withheld("report", (unsigned) MIN(n, (size_t) UINT_MAX));
                log_info("Unanswered report: pages withheld from the editor reading it: %zu", n);
        }
        return api_reply_report(api, req, x->report, x->days, x->csv);
}

/* GET /reports/unanswered (API.md 9.2): for the wiki's editors only; in
 * person mode with the pages the editor may read. */
static HttpHandlerResult api_handle_report(Api *api, HttpRequest *req) {
        _cleanup_(report_freep) Report *report = NULL;
        const char *message = NULL;
        ApiReport *x;
        char **titles;
        usec_t t, span;
        unsigned days;
        bool csv;
        int r;

        if (!config_is_editor(manager_get_config(api->manager), http_request_user(req)))
                return http_reply_error(
                        req, API_ERROR_ORIGIN_DENIED, "The report is for the wiki's editors", NULL);
        if (report_parse_days(http_request_argument(req, "days"), &days, &message) < 0)
                return http_reply_error(req, API_ERROR_INVALID_INPUT, message, NULL);
        if (api_report_format(req, &csv) < 0)
                return http_reply_error(req, API_ERROR_INVALID_INPUT, "format must be json or csv", NULL);

        t = now(CLOCK_REALTIME);
        span = (usec_t) days * 24 * 3600 * USEC_PER_SEC;
        r = report_unanswered(api->history, t > span ? t - span : 0, &report);
        if (r < 0) {
                log_error_errno(r, "The unanswered report could not be made");
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        }
        if (!manager_reads_as_person(api->manager))
                return api_reply_report(api, req, report, days, csv);

        titles = report_page_titles(report);
        x = titles ? calloc(1, sizeof *x) : NULL;
        if (!x) {
                strv_free(titles);
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        }
        *x = (ApiReport){ .report = TAKE_PTR(report), .days = days, .csv = csv };
        return api_readable_start(api, req, titles, false, api_report_on_readable, x, api_report_free);
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

static HttpHandlerResult api_handle_history_export(Api *api, HttpRequest *req, const char *id) {
        _cleanup_(api_conversation_done) ApiConversation c = { .turns = NULL };

        if (!api_find_conversation(api, req, id, http_request_session(req), &c))
                return HTTP_HANDLED;
        return api_reply_markdown(req, &c, "/api/v1/artifacts/");
}

/* The digest a share token is kept as. */
static int share_digest(const char *token, uint8_t ret[static HISTORY_SHARE_DIGEST_SIZE]) {
        return sha256(token, strlen(token), ret);
}

static HttpHandlerResult api_handle_share(Api *api, HttpRequest *req, const char *id) {
        _cleanup_free_ char *message = NULL, *url = NULL;
        _cleanup_(json_object_putp) json_object *o = NULL;
        uint8_t bytes[SHARE_TOKEN_HEX_DIGITS / 2], digest[HISTORY_SHARE_DIGEST_SIZE];
        char token[3 + SHARE_TOKEN_HEX_DIGITS + 1] = "sh_";
        const uint8_t *body;
        size_t size;
        int r;

        if (http_request_method(req) == HTTP_METHOD_DELETE) {
                r = history_share_revoke(api->history, id, http_request_session(req));
                if (r < 0)
                        return reply_history_error(api, req, r);
                return http_reply(req, 204, NULL, NULL);
        }

        /* POST: no body, or {}, as a join. */
        body = http_request_body(req, &size);
        if (request_parse_join(http_request_content_type(req), body, size, &message) < 0)
                return http_reply_error(req, API_ERROR_INVALID_INPUT, message, NULL);

        /* 256 random bits; only their digest is kept. */
        r = random_bytes(bytes, sizeof bytes);
        if (r < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        for (size_t i = 0; i < sizeof bytes; i++)
                snprintf(token + 3 + 2 * i, 3, "%02x", bytes[i]);
        r = share_digest(token, digest);
        if (r < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);

        r = history_share_add(api->history, id, http_request_session(req), digest, now(CLOCK_REALTIME));
        if (r < 0)
                return reply_history_error(api, req, r);

        /* The page's address of the shared view: the token in the fragment,
         * which browsers never send, so that it stays out of access logs
         * and Referer headers. */
        if (asprintf(&url, "/#/shared/%s", token) < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        o = json_object_new_object();
        if (!o || json_add(o, "token", json_string(token)) < 0 || json_add(o, "url", json_string(url)) < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        return http_reply(req, 201, render_body(o), NULL);
}

/* A request for a shared conversation (API.md 9 "Share"), from the
 * token's lookup to its answer: what the answer needs, kept while the
 * readability check runs. */
typedef struct ApiShared ApiShared;
typedef HttpHandlerResult (*ApiSharedHandler)(Api *api, HttpRequest *req, const ApiShared *s);

struct ApiShared {
        char token[3 + SHARE_TOKEN_HEX_DIGITS + 1];
        char artifact_id[ROUTE_ID_MAX]; /* GET …/artifacts/{id}; "" otherwise */
        ApiConversation conversation;
        SessionKey owner; /* whose records they are */
        ApiSharedHandler handler;
};

static ApiShared *api_shared_free(ApiShared *s) {
        if (!s)
                return NULL;
        api_conversation_done(&s->conversation);
        free(s);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(ApiShared *, api_shared_free);

/* Every source title of the conversation, each once; NULL-terminated. */
static char **api_shared_titles(const ApiConversation *c) {
        _cleanup_(strv_freep) char **titles = calloc(1, sizeof(char *));
        size_t n = 0;

        if (!titles)
                return NULL;
        for (size_t i = 0; i < c->n_turns; i++) {
                _cleanup_(json_object_putp) json_object *a = json_tokener_parse(c->turns[i].sources_json);
                size_t m = json_object_is_type(a, json_type_array) ? json_object_array_length(a) : 0;

                for (size_t j = 0; j < m; j++) {
                        const char *t = json_object_get_string(
                                json_object_object_get(json_object_array_get_idx(a, j), "title"));

                        if (t && strv_extend_unique(&titles, &n, t) < 0)
                                return NULL;
                }
        }
        return TAKE_PTR(titles);
}

/* The readability check has answered: every source readable, s's
 * handler answers; else 404, as for a wrong token. */
static HttpHandlerResult api_shared_on_readable(
        Api *api, HttpRequest *req, void *data, char *const *titles, const bool *readable) {
        ApiShared *s = data;

        for (size_t i = 0; titles[i]; i++)
                if (!readable[i])
                        return http_reply_error(req, API_ERROR_NOT_FOUND, NULL, NULL);
        return s->handler(api, req, s);
}

static void api_shared_free_data(void *p) {
        api_shared_free(p);
}

/* Whether the person asking may read every source of the shared
 * conversation (API.md 9 "Share"), then s's handler; a source they may
 * not read: 404, as for a wrong token. Takes s. */
static HttpHandlerResult api_check_shared_readable(Api *api, HttpRequest *req, ApiShared *s) {
        char **titles = api_shared_titles(&s->conversation);

        if (!titles) {
                api_shared_free(s);
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        }
        return api_readable_start(api, req, titles, true, api_shared_on_readable, s, api_shared_free_data);
}

/* GET /shared/{token}[/…]: 403 origin_denied for an anonymous request
 * while identity is on (before the token is looked at, so it says nothing
 * of the token), 404 not_found for a token that is wrong or revoked or
 * whose record is gone; else the readability check, then handler. */
static HttpHandlerResult api_handle_shared_route(
        Api *api, HttpRequest *req, const char *token, const char *artifact_id, ApiSharedHandler handler) {
        _cleanup_(api_shared_freep) ApiShared *s = NULL;
        uint8_t digest[HISTORY_SHARE_DIGEST_SIZE];
        char id[QUERY_ID_MAX];
        int r;

        if (config_identity_enabled(manager_get_config(api->manager)) && !http_request_user(req))
                return http_reply_error(
                        req, API_ERROR_ORIGIN_DENIED, "Sign in to read a shared conversation", NULL);

        s = calloc(1, sizeof *s);
        if (!s)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        snprintf(s->token, sizeof s->token, "%s", token);
        snprintf(s->artifact_id, sizeof s->artifact_id, "%s", artifact_id ? artifact_id : "");
        s->handler = handler;

        r = share_digest(s->token, digest);
        if (r >= 0)
                r = history_share_find(api->history, digest, id, &s->owner);
        if (r >= 0)
                r = history_get_conversation(
                        api->history,
                        id,
                        &s->owner,
                        HISTORY_CONVERSATION_MAX_TURNS,
                        &s->conversation.turns,
                        &s->conversation.n_turns);
        if (r == -ENOENT)
                return http_reply_error(req, API_ERROR_NOT_FOUND, NULL, NULL);
        if (r < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        return api_check_shared_readable(api, req, TAKE_PTR(s));
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
                                return api_serve_artifact(api, req, s->artifact_id, &s->owner);
        return http_reply_error(req, API_ERROR_ARTIFACT_NOT_FOUND, NULL, NULL);
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
        case ROUTE_HISTORY_SHARE:
                return api_handle_share(api, req, m->id);
        case ROUTE_SHARED:
                return api_handle_shared_route(api, req, m->id, NULL, api_reply_shared);
        case ROUTE_SHARED_EXPORT:
                return api_handle_shared_route(api, req, m->id, NULL, api_reply_shared_export);
        case ROUTE_SHARED_ARTIFACT:
                return api_handle_shared_route(api, req, m->id, m->id2, api_reply_shared_artifact);
        default:
                return http_reply_error(req, API_ERROR_NOT_FOUND, NULL, NULL);
        }
}
