/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "http/httpd.h"
#include "shared/ids.h"
#include "shared/time-util.h"

/* Event streams (API.md 11): a response of Server-Sent Events that stays
 * open while its owner (the queue stream, a query's stream) sends events.
 *
 * No thread and no polling. The response is a libmicrohttpd content
 * reader: while the stream has bytes to send MHD takes them as the socket
 * drains; when it has none the reader suspends the connection, and the
 * next http_stream_send() resumes it and wakes MHD from the loop. While
 * suspended, MHD does not watch the socket, so the stream does: a client
 * that goes away is noticed at once (EPOLLRDHUP), not at the next event.
 *
 * Limits (API.md 11):
 *  - HTTP_STREAM_MAX_PER_SESSION open streams per session; one more is
 *    refused (the caller answers rate_limited);
 *  - HTTP_STREAM_BUFFER_MAX bytes waiting unsent: one more event closes the
 *    stream (counted, logged); its owner is told, and whatever the stream
 *    was about goes on;
 *  - a stream is a connection like any other: it counts against the total
 *    and the per-address connection limits for as long as it is open;
 *  - after HTTP_STREAM_KEEPALIVE_USEC without an event it sends the
 *    comment SSE_KEEPALIVE. One timer serves every stream of the server
 *    (streams in order of their last event), and it coalesces the
 *    keep-alives that fall due within a second of each other.
 *
 * Ownership: the server owns every stream. The owner holds a borrowed
 * pointer from http_stream_open() until its closed callback runs (once,
 * always, whatever ends the stream, also while the server is freed); after
 * that the pointer is gone. */

#define HTTP_STREAM_MAX_PER_SESSION 8
#define HTTP_STREAM_BUFFER_MAX (256 * 1024)
#define HTTP_STREAM_KEEPALIVE_USEC (15 * USEC_PER_SEC)

typedef struct HttpStream HttpStream;

typedef enum HttpStreamEnd {
        HTTP_STREAM_ENDED,   /* http_stream_end(): everything sent, the response finished */
        HTTP_STREAM_GONE,    /* the client closed the connection, or writing to it failed */
        HTTP_STREAM_CUT,     /* more than HTTP_STREAM_BUFFER_MAX waited unsent */
        HTTP_STREAM_STOPPED, /* the server went away with the stream open */
        _HTTP_STREAM_END_MAX,
        _HTTP_STREAM_END_INVALID = -EINVAL,
} HttpStreamEnd;

/* "ended", "gone", "cut", "stopped"; NULL for an out-of-range value. */
const char *http_stream_end_to_string(HttpStreamEnd e);

typedef enum HttpStreamFlags {
        /* End the stream when the server stops accepting connections
         * (http_server_quiesce(), SIGTERM): for a stream that carries
         * nothing that must be finished, such as the queue's. Others end
         * when their owner ends them. */
        HTTP_STREAM_END_ON_QUIESCE = 1 << 0,
} HttpStreamFlags;

/* Called once when the stream has ended, for the reason given; the stream
 * is freed right after. It may call anything but http_stream_*() on this
 * stream. */
typedef void (*HttpStreamClosed)(HttpStream *s, HttpStreamEnd why, void *userdata);

/* Whether the request's session may open one more stream. */
bool http_stream_allowed(HttpRequest *req);

/* Answer req with an event stream: 200, text/event-stream, the common
 * headers, then extra_headers (name/value pairs, NULL-terminated). Returns
 * 0 and the stream in *ret (borrowed, see above); -EMFILE when the session
 * has HTTP_STREAM_MAX_PER_SESSION open (nothing was sent: the caller
 * answers rate_limited); -ENOMEM (nothing was sent either). */
int http_stream_open(
        HttpRequest *req,
        HttpStreamFlags flags,
        const char *const *extra_headers,
        HttpStreamClosed closed,
        void *userdata,
        HttpStream **ret);

/* Queue one event (sse.h) with the given id. Returns 0; -ENOBUFS when it
 * did not fit under HTTP_STREAM_BUFFER_MAX: the stream is being cut (the
 * closed callback follows from the loop); -EPIPE once the stream is ending
 * or failed; -ENOMEM. */
int http_stream_send(HttpStream *s, uint64_t id, const char *event, const char *json);

/* End the stream once what is queued is sent; the closed callback follows
 * from the loop (HTTP_STREAM_ENDED, or why it ended otherwise). */
void http_stream_end(HttpStream *s);

/* The session that opened the stream. */
const SessionKey *http_stream_session(const HttpStream *s);

/* Streams open now, and cut (HTTP_STREAM_CUT) since the server started. */
unsigned http_server_streams_open(const HttpServer *s);
uint64_t http_server_streams_cut(const HttpServer *s);
