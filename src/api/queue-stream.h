/* SPDX-License-Identifier: MIT */
#pragma once

#include <systemd/sd-event.h>

#include "http/httpd.h"
#include "manager/manager.h"
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
 * What a stream shows is the Manager's status view (manager_status()),
 * rendered by the one writer of the status object (render_status_text()).
 *
 * Borrows the event loop and the Manager, which must outlive it. Its streams end when the server quiesces;
 * the server may close them later too (they are the server's), and tells us. */

typedef struct QueueStreams QueueStreams;

int queue_streams_new(sd_event *event, Manager *manager, QueueStreams **ret);
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
