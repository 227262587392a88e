/* SPDX-License-Identifier: MIT */
#pragma once

#include <systemd/sd-event.h>

#include "admission/admission.h"
#include "admission/wait-tracker.h"
#include "http/httpd.h"
#include "shared/config.h"
#include "shared/macro.h"

/* The queue stream, GET /api/v1/queue/events (API.md 11.1): the caller's
 * status object first, then again whenever something in it changes for the
 * caller (the state, the ticket's status or position, the queue length, the
 * estimate by 1 s or more), and `removed` with the reason when the ticket
 * goes, after which the stream ends.
 *
 * Pushed, not polled: every event of the admission machine marks the
 * streams for a look, and one defer source (run before anything but other
 * HTTP work, in the same loop iteration) compares what each session sees
 * with what it was last sent. A promotion reaches its stream within that
 * iteration. Other changes are coalesced: at most one `status` event per
 * stream in 250 ms; a stream looked at sooner is held back (not even
 * compared) and one shared timer looks again when the earliest held-back
 * interval ends, so the latest state wins. While a query runs, a waiting ticket's estimate falls by a
 * second a second until the average is used up: one timer, armed only
 * then, looks again each second.
 *
 * An open stream is its ticket's heartbeat (admission_hold()); when the
 * last stream of a ticket closes, the ordinary deadline runs from then.
 *
 * Borrows the event loop, the config and the admission machine, which must
 * outlive it. Its streams end when the server quiesces; the server may
 * close them later too (they are the server's), and tells us. */

typedef struct QueueStreams QueueStreams;

/* query_streams: for the session's own running query in the status
 * object (API.md 11.4); borrowed too. */
typedef struct QueryStreams QueryStreams;
int queue_streams_new(
        sd_event *event,
        const Config *config,
        Admission *admission,
        const QueryStreams *query_streams,
        QueueStreams **ret);
/* The wait range of each status event (API.md 5); borrowed, NULL: null. */
void queue_streams_set_wait_tracker(QueueStreams *q, WaitTracker *t);
/* Only after the HTTP server is freed (which closes the streams). */
QueueStreams *queue_streams_free(QueueStreams *q);
DEFINE_TRIVIAL_CLEANUP_FUNC(QueueStreams *, queue_streams_free);

/* GET /api/v1/queue/events: ticket_not_found (no ticket), rate_limited (the
 * session has its streams open), or the stream. */
HttpHandlerResult queue_streams_open(QueueStreams *q, HttpRequest *req);

/* Every event of the admission machine (its handler must not call back
 * into the machine: this only takes note). */
void queue_streams_admission_event(QueueStreams *q, const AdmissionEvent *ev);

/* Streams open now. */
unsigned queue_streams_count(const QueueStreams *q);
