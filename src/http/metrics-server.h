/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <systemd/sd-event.h>

#include "manager/manager.h"
#include "shared/macro.h"

/* The metrics endpoint (API.md 12.3): GET /metrics on a socket of its own
 * (wikiwebd-metrics.socket, never the API's), a second, tiny libmicrohttpd
 * daemon in the same sd-event loop. It answers GET and HEAD /metrics with
 * the exposition in the format the scraper's Accept header asks for, 404
 * for any other path, 405 for any other method; no session, no body.
 *
 * A face of the Manager: each scrape reads the gauges from it (the
 * admission's state, slots and queue, in O(1)) and the process's figures
 * now, and the counters as metrics/metrics.h counted them; the error of a
 * render is a 500. */
typedef struct MetricsServer MetricsServer;

/* Serve on listen_fd (taken over: closed by the server, even on error),
 * reading manager (borrowed, must outlive it). */
int metrics_server_new(sd_event *event, int listen_fd, Manager *manager, MetricsServer **ret);
MetricsServer *metrics_server_free(MetricsServer *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(MetricsServer *, metrics_server_free);
