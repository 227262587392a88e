/* SPDX-License-Identifier: MIT */
#pragma once

#include <microhttpd.h>
#include <systemd/sd-event.h>

#include "http/httpd.h"

/* Between the server (httpd.c) and its event streams (stream.c): nothing
 * else includes this. */

typedef struct HttpStream HttpStream;
typedef struct HttpStreamHub HttpStreamHub;

/* httpd.c, for stream.c. */
sd_event *http_server_event(const HttpServer *s);
HttpStreamHub *http_server_stream_hub(const HttpServer *s);
/* Run MHD once more from the loop (after a resume). */
void http_server_wake(HttpServer *s);
struct MHD_Connection *http_request_connection(const HttpRequest *req);
HttpServer *http_request_server(const HttpRequest *req);
/* The connection's socket (MHD's: never closed here), -EBADF if unknown. */
int http_request_fd(const HttpRequest *req);
/* Add the common headers and extra_headers to r and queue it; r is taken
 * over (destroyed), also on failure. 0, or -ENOMEM: nothing was queued. */
int http_request_queue_response(
        HttpRequest *req, struct MHD_Response *r, unsigned status, const char *const *extra_headers);
/* Make s the request's stream: when the request completes, the stream is
 * told (http_stream_detach()). */
void http_request_set_stream(HttpRequest *req, HttpStream *s);

/* stream.c, for httpd.c. */
int http_stream_hub_new(HttpServer *server, HttpStreamHub **ret);
/* Every stream must be gone (http_stream_hub_abort(), then MHD stopped). */
HttpStreamHub *http_stream_hub_free(HttpStreamHub *h);
/* The server stops accepting: end the HTTP_STREAM_END_ON_QUIESCE ones. */
void http_stream_hub_quiesce(HttpStreamHub *h);
/* The server is being freed: every stream fails (HTTP_STREAM_STOPPED) and
 * a suspended one is resumed, so that MHD_stop_daemon() closes it. */
void http_stream_hub_abort(HttpStreamHub *h);
/* The stream's request completed (the connection is done with it): the
 * closed callback, then the stream is freed. */
void http_stream_detach(HttpStream *s);
