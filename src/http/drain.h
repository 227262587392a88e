/* SPDX-License-Identifier: MIT */
#pragma once

#include <systemd/sd-event.h>

#include "http/httpd.h"
#include "shared/macro.h"
#include "shared/time-util.h"

/* The last part of a stop, once no query runs any more: the requests in
 * flight (a body still arriving, a response still being sent) are
 * answered, and a connection accepted just before the stop whose request
 * has not arrived yet gets a moment for it (http_server_fresh_until();
 * seen under load: a polling client's request closed unanswered by a
 * restart), but not past timeout_usec from the start of the drain.
 *
 * done runs once, from the loop (never inside http_drain_start()), with
 * error 0 when nothing is in flight any more, -ETIMEDOUT when the time is
 * up, or a negative errno when the drain could not be watched. The server
 * is borrowed and must outlive the drain; the caller owns the drain until
 * http_drain_free(), which cancels it without a callback. */

typedef struct HttpDrain HttpDrain;
typedef void (*HttpDrainDone)(HttpDrain *d, int error, void *userdata);

/* Returns 0 and the drain in *ret; -ENOMEM or sd-event's errno. */
int http_drain_start(
        sd_event *event,
        HttpServer *server,
        usec_t timeout_usec,
        HttpDrainDone done,
        void *userdata,
        HttpDrain **ret);
HttpDrain *http_drain_free(HttpDrain *d);
DEFINE_TRIVIAL_CLEANUP_FUNC(HttpDrain *, http_drain_free);
