/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <json-c/json.h>
#include <math.h>

#include "admission/wait-range.h"
#include "api/queue-stream.h"
#include "api/render.h"
#include "http/stream.h"
#include "shared/json-util.h"
#include "shared/list.h"
#include "shared/log.h"
#include "shared/time-util.h"

typedef struct QueueStream QueueStream;

/* At most one `status` event per stream in this interval (API.md 11.1): a
 * churning queue moves every position on every change, and a page does
 * nothing useful with more than a few updates a second. A change within
 * the interval is held back and the latest state goes out when it ends; a
 * promotion and a removal go out at once. */
#define QUEUE_STREAM_STATUS_INTERVAL_USEC (250 * USEC_PER_MSEC)

struct QueueStreams {
        sd_event *event;
        Manager *manager;
        sd_event_source *look_source;     /* defer: compare what each stream was sent */
        sd_event_source *estimate_source; /* while a running query uses up the average */
        sd_event_source *held_source;     /* the end of the earliest held-back stream's interval */
        QueueStream *streams_head;
        unsigned n_streams;
};

/* What a stream was last sent: a status event goes out when any of it
 * differs (API.md 11.1). */
typedef struct QueueStreamSeen {
        AdmissionState state;
        TicketStatus ticket_status;
        uint64_t position;
        uint64_t queue_length;
        bool estimate_known;
        double estimate;
        bool range_known;
        WaitRange range;
} QueueStreamSeen;

struct QueueStream {
        QueueStreams *owner;
        HttpStream *stream; /* NULL once closed */
        SessionKey session;
        char *user; /* the session's user ("Identity"), NULL: anonymous */
        char ticket_id[TICKET_ID_MAX];
        uint64_t last_id;
        bool sent_any;
        QueueStreamSeen seen;
        usec_t next_status_usec; /* no status event before this, unless urgent */
        bool held;               /* a look within the interval: look again at its end */
        bool urgent;             /* its ticket was promoted: send now */
        bool removed;            /* the ticket went: `removed` with reason, then the end */
        RemoveReason reason;
        bool ended;
        QueueStream *streams_prev, *streams_next;
};

static void queue_streams_look_soon(QueueStreams *q) {
        (void) sd_event_source_set_enabled(q->look_source, SD_EVENT_ONESHOT);
}

/* Any other open stream of the same ticket (which then holds it still). */
static bool ticket_has_other_stream(const QueueStreams *q, const QueueStream *qs) {
        for (const QueueStream *o = q->streams_head; o; o = o->streams_next)
                if (o != qs && !o->removed && streq(o->ticket_id, qs->ticket_id))
                        return true;
        return false;
}

static void queue_stream_free(QueueStream *qs) {
        QueueStreams *q = qs->owner;

        LIST_REMOVE(streams, q->streams_head, qs);
        q->n_streams--;
        free(qs->user);
        free(qs);
}

static void queue_stream_on_closed(HttpStream *s, HttpStreamEnd why, void *userdata) {
        QueueStream *qs = userdata;
        QueueStreams *q = qs->owner;

        qs->stream = NULL;
        /* The last stream of a ticket that is still there: its ordinary
         * heartbeat deadline runs from now (API.md 11.1). */
        if (!qs->removed && !ticket_has_other_stream(q, qs))
                (void) manager_hold_ticket(
                        q->manager, &qs->session, qs->ticket_id, false, now(CLOCK_MONOTONIC));
        queue_stream_free(qs);
}

/* A bound of the wait range moved by at least a second and a twentieth
 * of what was sent: the page says it in words ("about 2 min"), so smaller
 * moves are not news. */
static bool bound_moved(double now, double sent) {
        return fabs(now - sent) >= MAX(1.0, sent / 20);
}

static bool seen_differs(const QueueStreamSeen *a, const QueueStreamSeen *b) {
        if (a->state != b->state || a->ticket_status != b->ticket_status || a->position != b->position ||
            a->queue_length != b->queue_length || a->estimate_known != b->estimate_known ||
            a->range_known != b->range_known)
                return true;
        if (a->estimate_known && fabs(a->estimate - b->estimate) >= 1.0)
                return true;
        return a->range_known &&
                (bound_moved(a->range.p10, b->range.p10) || bound_moved(a->range.p50, b->range.p50) ||
                 bound_moved(a->range.p90, b->range.p90));
}

static int queue_stream_send(QueueStream *qs, const char *event, json_object *o) {
        if (!o)
                return -ENOMEM;
        return http_stream_send(qs->stream, ++qs->last_id, event, render_body(o));
}

/* Send `removed`, and end the stream. */
static void queue_stream_removed(QueueStream *qs) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        const char *reason = remove_reason_to_string(qs->reason);

        if (o && json_add(o, "reason", json_string(reason ? reason : "left")) < 0) {
                json_object_put(o);
                o = NULL;
        }
        if (queue_stream_send(qs, "removed", o) < 0)
                log_debug("Queue stream: the removal could not be sent.");
        qs->ended = true;
        http_stream_end(qs->stream);
}

/* Compare what the session sees now with what the stream was last sent;
 * send the status object if it differs (always, the first time). */
static void queue_stream_look(QueueStream *qs, usec_t t) {
        QueueStreams *q = qs->owner;
        _cleanup_free_ char *text = NULL;
        ManagerStatus view;
        const AdmissionStatus *st = &view.admission;
        QueueStreamSeen now_seen;
        int r;

        if (!qs->stream || qs->ended)
                return;
        if (qs->removed) {
                queue_stream_removed(qs);
                return;
        }
        /* Within the interval: hold back without even looking (the peek
         * and the comparison cost too, with many streams). */
        if (qs->sent_any && !qs->urgent && t < qs->next_status_usec) {
                qs->held = true;
                return;
        }
        qs->held = false;

        /* The peek applies expiries due by now, whose events may mark
         * this very stream removed. */
        manager_status(q->manager, &qs->session, t, &view);
        if (!qs->removed && (!st->has_ticket || !streq(st->ticket.id, qs->ticket_id))) {
                /* Gone without an event we saw (should not happen). */
                qs->removed = true;
                qs->reason = REMOVE_LEFT;
        }
        if (qs->removed) {
                queue_stream_removed(qs);
                return;
        }
        now_seen = (QueueStreamSeen){
                .state = st->state,
                .ticket_status = st->ticket.status,
                .position = st->ticket.position,
                .queue_length = st->queue_length,
                .estimate_known = st->estimate_known,
                .estimate = st->estimated_wait_seconds,
                .range_known = view.range_known,
                .range = view.range_known ? view.range : (WaitRange){ .p50 = 0 },
        };
        if (qs->sent_any && !seen_differs(&now_seen, &qs->seen)) {
                qs->urgent = false;
                return;
        }

        text = render_status_text(&view, qs->user);
        r = text ? http_stream_send(qs->stream, ++qs->last_id, "status", text) : -ENOMEM;
        if (r < 0) {
                if (r != -ENOBUFS && r != -EPIPE)
                        log_warning_errno(r, "Queue stream: a status event could not be sent");
                return;
        }
        qs->seen = now_seen;
        qs->sent_any = true;
        qs->urgent = false;
        qs->next_status_usec = usec_add(t, QUEUE_STREAM_STATUS_INTERVAL_USEC);
}

/* The end of the earliest interval of a held-back stream: look again then. */
static void queue_streams_arm_held(QueueStreams *q) {
        usec_t next = USEC_INFINITY;
        int r;

        for (const QueueStream *qs = q->streams_head; qs; qs = qs->streams_next)
                if (qs->held && qs->stream && !qs->ended)
                        next = MIN(next, qs->next_status_usec);
        if (next == USEC_INFINITY) {
                (void) sd_event_source_set_enabled(q->held_source, SD_EVENT_OFF);
                return;
        }
        r = sd_event_source_set_time(q->held_source, next);
        if (r < 0) {
                log_warning_errno(r, "Queue streams: the timer of held-back status events could not be set");
                return;
        }
        r = sd_event_source_set_enabled(q->held_source, SD_EVENT_ONESHOT);
        if (r < 0)
                log_warning_errno(
                        r, "Queue streams: the timer of held-back status events could not be enabled");
}

/* While a query runs and the average is not used up, a waiting ticket's
 * estimate falls by a second each second; while a query runs and the
 * wait range is known, the range moves with the running queries' time
 * (API.md 5): look again in a second. Otherwise no timer: the estimate
 * and the range change only with an event. */
static void queue_streams_arm_estimate(QueueStreams *q, usec_t t) {
        ManagerQuery *oldest = manager_oldest_query(q->manager);
        usec_t since = oldest ? manager_query_since(oldest) : USEC_INFINITY;
        usec_t avg = manager_average_usec(q->manager);
        bool running = q->streams_head && oldest;
        bool falling = running && avg > 0 && t - MIN(t, since) < avg;
        bool ranged = running && manager_wait_known(q->manager);

        if (!falling && !ranged) {
                (void) sd_event_source_set_enabled(q->estimate_source, SD_EVENT_OFF);
                return;
        }
        if (sd_event_source_set_time(q->estimate_source, usec_add(t, USEC_PER_SEC)) >= 0)
                (void) sd_event_source_set_enabled(q->estimate_source, SD_EVENT_ONESHOT);
}

static void queue_streams_look_all(QueueStreams *q) {
        usec_t t = now(CLOCK_MONOTONIC);

        for (QueueStream *qs = q->streams_head; qs; qs = qs->streams_next)
                queue_stream_look(qs, t);
        queue_streams_arm_estimate(q, t);
        queue_streams_arm_held(q);
}

static int queue_streams_on_look(sd_event_source *es, void *userdata) {
        QueueStreams *q = userdata;

        if (sd_event_get_state(q->event) == SD_EVENT_FINISHED)
                return 0;
        queue_streams_look_all(q);
        return 0;
}

static int queue_streams_on_estimate(sd_event_source *es, uint64_t usec, void *userdata) {
        return queue_streams_on_look(NULL, userdata);
}

static int queue_streams_on_held(sd_event_source *es, uint64_t usec, void *userdata) {
        return queue_streams_on_look(NULL, userdata);
}

void queue_streams_admission_event(QueueStreams *q, const AdmissionEvent *ev) {
        assert(ev);

        if (!q || !q->streams_head)
                return;
        if (ev->type == ADMISSION_EVENT_TICKET_REMOVED && ev->ticket_id)
                for (QueueStream *qs = q->streams_head; qs; qs = qs->streams_next)
                        if (!qs->removed && streq(qs->ticket_id, ev->ticket_id)) {
                                /* The hold went with the ticket. */
                                qs->removed = true;
                                qs->reason = ev->reason;
                        }
        /* A promotion is not held back by the interval. */
        if (ev->type == ADMISSION_EVENT_TICKET_PROMOTED && ev->ticket_id)
                for (QueueStream *qs = q->streams_head; qs; qs = qs->streams_next)
                        if (streq(qs->ticket_id, ev->ticket_id))
                                qs->urgent = true;
        queue_streams_look_soon(q);
}

HttpHandlerResult queue_streams_open(QueueStreams *q, HttpRequest *req) {
        const SessionKey *session = http_request_session(req);
        usec_t t = now(CLOCK_MONOTONIC);
        _cleanup_free_ QueueStream *qs = NULL;
        ManagerStatus st;
        int r;

        assert(q);
        assert(req);

        /* A queue call like a status poll: it is a heartbeat too. */
        manager_heartbeat(q->manager, session, t);
        manager_status(q->manager, session, t, &st);
        if (!st.admission.has_ticket)
                return http_reply_error(req, API_ERROR_TICKET_NOT_FOUND, NULL, NULL);
        if (!http_stream_allowed(req))
                return http_reply_error(req, API_ERROR_RATE_LIMITED, NULL, NULL);

        qs = calloc(1, sizeof *qs);
        if (!qs)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        qs->owner = q;
        qs->session = *session;
        if (http_request_user(req)) {
                qs->user = strdup(http_request_user(req));
                if (!qs->user)
                        return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        }
        memcpy(qs->ticket_id, st.admission.ticket.id, sizeof qs->ticket_id);

        r = http_stream_open(req, HTTP_STREAM_END_ON_QUIESCE, NULL, queue_stream_on_closed, qs, &qs->stream);
        if (r < 0) {
                free(qs->user);
                qs->user = NULL;
        }
        if (r == -EMFILE)
                return http_reply_error(req, API_ERROR_RATE_LIMITED, NULL, NULL);
        if (r < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);

        r = manager_hold_ticket(q->manager, session, qs->ticket_id, true, t);
        if (r < 0)
                log_warning_errno(r, "Queue stream: the ticket could not be held");
        LIST_PREPEND(streams, q->streams_head, qs);
        q->n_streams++;
        /* The first status at once, not from the defer. */
        queue_stream_look(TAKE_PTR(qs), t);
        queue_streams_arm_estimate(q, t);
        return HTTP_HANDLED;
}

unsigned queue_streams_count(const QueueStreams *q) {
        return q ? q->n_streams : 0;
}

int queue_streams_new(sd_event *event, Manager *manager, QueueStreams **ret) {
        _cleanup_(queue_streams_freep) QueueStreams *q = NULL;
        int r;

        assert(event);
        assert(manager);
        assert(ret);

        q = calloc(1, sizeof *q);
        if (!q)
                return -ENOMEM;
        q->event = event;
        q->manager = manager;

        r = sd_event_add_defer(event, &q->look_source, queue_streams_on_look, q);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(q->look_source, SD_EVENT_OFF);
        (void) sd_event_source_set_description(q->look_source, "queue-streams-look");
        /* As urgent as the HTTP sources: a promotion is news to send now. */
        r = sd_event_source_set_priority(q->look_source, SD_EVENT_PRIORITY_IMPORTANT);
        if (r < 0)
                return r;

        r = sd_event_add_time(
                event, &q->estimate_source, CLOCK_MONOTONIC, USEC_INFINITY, 0, queue_streams_on_estimate, q);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(q->estimate_source, SD_EVENT_OFF);
        (void) sd_event_source_set_description(q->estimate_source, "queue-streams-estimate");

        /* Accuracy 1 ms: the default (250 ms) would double the interval. */
        r = sd_event_add_time(
                event, &q->held_source, CLOCK_MONOTONIC, USEC_INFINITY, USEC_PER_MSEC, queue_streams_on_held, q);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(q->held_source, SD_EVENT_OFF);
        (void) sd_event_source_set_description(q->held_source, "queue-streams-held");

        *ret = TAKE_PTR(q);
        return 0;
}

QueueStreams *queue_streams_free(QueueStreams *q) {
        if (!q)
                return NULL;
        /* The server closed every stream before (it is freed first). */
        assert(!q->streams_head);
        q->look_source = sd_event_source_disable_unref(q->look_source);
        q->estimate_source = sd_event_source_disable_unref(q->estimate_source);
        q->held_source = sd_event_source_disable_unref(q->held_source);
        free(q);
        return NULL;
}
