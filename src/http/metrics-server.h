/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <systemd/sd-event.h>

#include "metrics/openmetrics.h"
#include "shared/macro.h"

/* The metrics endpoint (API.md 12.3): GET /metrics on a socket of its own
 * (wikiwebd-metrics.socket, never the API's), a second, tiny libmicrohttpd
 * daemon in the same sd-event loop. It answers GET and HEAD /metrics with
 * the exposition in the format the scraper's Accept header asks for, 404
 * for any other path, 405 for any other method; no session, no body.
 *
 * render is called for each scrape and returns 0 and the text (the server
 * frees it) or a negative errno (then 500). */
typedef int (*MetricsRender)(MetricsFormat format, char **ret, size_t *ret_size, void *userdata);

typedef struct MetricsServer MetricsServer;

/* Serve on listen_fd (taken over: closed by the server, even on error). */
int metrics_server_new(sd_event *event, int listen_fd, MetricsRender render, void *userdata, MetricsServer **ret);
MetricsServer *metrics_server_free(MetricsServer *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(MetricsServer *, metrics_server_free);
