/* SPDX-License-Identifier: MIT */
#pragma once

#include <microhttpd.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "admission/admission.h"
#include "http/origin.h"
#include "http/router.h"
#include "http/session.h"
#include "shared/api-error.h"
#include "shared/config.h"
#include "shared/macro.h"
#include "shared/user-key.h"

/* libmicrohttpd inside the sd-event loop, as systemd's journal-remote does:
 * MHD runs with MHD_USE_EPOLL and no threads of its own; its epoll fd is an
 * sd-event I/O source and its connection timeout an sd-event time source.
 *
 * The server owns the request lifecycle that every endpoint shares, in the
 * order API.md 1, 3, 4 and 7 fix: strict framing, who is asking (API.md
 * "Identity": the trusted proxy's user header, 403/400, for the page's
 * files too), origin policy (403, changes nothing),
 * CORS preflight, routing (404/405), the size limit (413, decided from
 * Content-Length before the body is read, and while streaming a chunked
 * body), body accumulation, the session cookie, then the endpoint handler
 * (api/api.c). Every response carries the common headers. */

/* The request line and header fields together, counted as received
 * (libmicrohttpd's MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE: every byte from
 * the method to the empty line, whitespace and line ends as sent), at most
 * this many bytes and fields: past either, 431. */
#define HTTP_HEAD_MAX_BYTES 8192
#define HTTP_HEAD_MAX_FIELDS 64
/* libmicrohttpd's per-connection memory (http/pool.h): the head, a record
 * per field, cookie and query argument, MHD's copy of the Cookie field,
 * and the response head. A request that leaves less than the response
 * head it could get is refused with 431 before anything is done. */
#define HTTP_CONNECTION_POOL_BYTES (24 * 1024)
/* What libmicrohttpd adds to every response head: the status line with the
 * longest reason phrase we use (431's) rounded up, Date (37 and the byte
 * its check wants), Connection: close, Content-Length of up to 20 digits,
 * the empty line. */
#define HTTP_RESPONSE_HEAD_MHD_BYTES (64 + 38 + 19 + 38 + 2)
/* The largest response head wikiwebd makes, without the Origin it may echo
 * in Access-Control-Allow-Origin: an artifact's (1,458 bytes: the above,
 * Cache-Control, X-Content-Type-Options, the three CORS fields, a new
 * session's Set-Cookie, the media type, Content-Disposition with a 255-byte
 * name percent-encoded, ETag, Content-Security-Policy). Every response is
 * checked against it when queued. */
#define HTTP_RESPONSE_HEAD_MAX_BYTES 1536
/* Descriptors kept for the daemon's own use below RLIMIT_NOFILE. */
#define HTTP_FD_RESERVE 128

typedef struct HttpServer HttpServer;
typedef struct HttpRequest HttpRequest;

/* What a handler returns: a response was queued, or the request is
 * suspended until http_request_complete() is called. */
typedef enum HttpHandlerResult {
        HTTP_HANDLED,
        HTTP_SUSPENDED,
} HttpHandlerResult;

typedef HttpHandlerResult (*HttpHandler)(HttpRequest *req, void *userdata);

/* Start serving on listen_fd (taken over: closed by the server, even on
 * error). The config is borrowed and must outlive the server. */
/* The secret of the installation (shared/user-key.h) that every request's
 * session key is sealed with (user_key_seal()) before a handler sees it:
 * the key the history keeps. Copied. Until it is set, a zero secret. */
void http_server_set_user_secret(HttpServer *s, const UserKeySecret *secret);

int http_server_new(
        sd_event *event,
        int listen_fd,
        const Config *config,
        HttpHandler handler,
        void *userdata,
        HttpServer **ret);
HttpServer *http_server_free(HttpServer *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(HttpServer *, http_server_free);
/* The connection limit: RLIMIT_NOFILE's soft limit less HTTP_FD_RESERVE,
 * lowered to WIKI_WEB_HTTP_MAX_CONNECTIONS when that is set. */
unsigned http_connection_limit(const Config *config);
/* Stop accepting new connections (clean shutdown); the listening socket is
 * closed by us, but socket activation keeps its own copy. */
void http_server_quiesce(HttpServer *s);
/* Number of requests begun and not yet completed (an idle keep-alive
 * connection has none). */
unsigned http_server_active_count(const HttpServer *s);
/* How long a stop should still wait for connections that have sent no
 * request yet: until HTTP_STOP_FRESH_USEC after the newest of them was
 * accepted (or last answered), since its request is most likely on its way
 * (a client connects, then writes); 0 when there is none. Exiting before
 * would close it unanswered. Only matters after http_server_quiesce(), when
 * no new connection is accepted, so it ends soon. */
#define HTTP_STOP_FRESH_USEC (1 * USEC_PER_SEC)
usec_t http_server_fresh_until(const HttpServer *s);

/* Accessors for handlers. All returned pointers are borrowed from the
 * request and valid until the response is queued. */
HttpMethod http_request_method(const HttpRequest *req);
const RouteMatch *http_request_route(const HttpRequest *req);
const SessionKey *http_request_session(const HttpRequest *req);
/* Who is asking (API.md "Identity"): the user a trusted proxy named, NULL
 * for an anonymous session (always NULL without trusted proxies). With a
 * user, http_request_session() is that user's key, the same for every one
 * of their sessions. */
const char *http_request_user(const HttpRequest *req);
/* Whether http_request_user() is the person of the access token the
 * request carries ("Authorization: Bearer", API.md "Access tokens")
 * rather than a trusted proxy's user header. */
bool http_request_by_token(const HttpRequest *req);

/* Access tokens (API.md "Access tokens"): on the API's paths and /mcp, a
 * request with "Authorization: Bearer <credential>" acts as the person
 * the verifier names, from any address; a credential it refuses is 401
 * invalid_token with WWW-Authenticate, never an anonymous session, and
 * counted per client address (past the limit, 429 rate_limited). The
 * verifier returns 0 and the person's name in *ret_user (a new string,
 * taken over), -EACCES for a credential that is no valid token, another
 * negative errno when it cannot tell (500). credential is borrowed for
 * the call; it is never logged nor kept. Without trusted proxies, or
 * without a verifier, every token is refused. */
typedef int (*HttpTokenVerifier)(const char *credential, char **ret_user, void *userdata);
void http_server_set_token_verifier(HttpServer *s, HttpTokenVerifier verify, void *userdata);
const char *http_request_content_type(const HttpRequest *req);
const uint8_t *http_request_body(const HttpRequest *req, size_t *ret_size);
/* A query-string argument, NULL if absent. */
const char *http_request_argument(const HttpRequest *req, const char *name);
/* A request header field's value (the first of that name), NULL if absent. */
const char *http_request_header(const HttpRequest *req, const char *name);

/* Build and queue a response. body is a JSON text (copied); NULL for an
 * empty body (e.g. 204). Extra headers: NULL-terminated name/value pairs.
 * Returns HTTP_HANDLED; on a suspended request, stores the response and
 * resumes the connection. */
HttpHandlerResult http_reply(
        HttpRequest *req, unsigned status, const char *json_body, const char *const *extra_headers);
/* A response of raw bytes (copied) with the given Content-Type (NULL:
 * none), for artifact downloads; otherwise as http_reply(). */
HttpHandlerResult http_reply_bytes(
        HttpRequest *req,
        unsigned status,
        const char *content_type,
        const void *data,
        size_t size,
        const char *const *extra_headers);

/* A response whose body is made as it is sent, for a download of any
 * size in bounded memory (chunked; an HTTP/1.0 client gets it up to the
 * connection's close). read is called from the loop each time the socket
 * can take more, for at most max bytes into buf: it returns how many it
 * wrote (> 0; it should do a bounded amount of work each time, since the
 * loop waits meanwhile), 0 at the end, or a negative errno, which closes
 * the connection (the client sees a body cut short, never a false end).
 * free_userdata (NULL: none) is called once when the response is done
 * with: sent, failed, the client gone, or the server freed; also when this
 * fails (out of memory: the static 500). Otherwise as http_reply_bytes(). */
#define HTTP_READER_BLOCK_BYTES (16 * 1024)
typedef ssize_t (*HttpBodyRead)(void *userdata, uint8_t *buf, size_t max);
typedef void (*HttpBodyFree)(void *userdata);
HttpHandlerResult http_reply_reader(
        HttpRequest *req,
        unsigned status,
        const char *content_type,
        HttpBodyRead read,
        HttpBodyFree free_userdata,
        void *userdata,
        const char *const *extra_headers);

/* The error envelope of API.md 2; message NULL means the default message;
 * the message goes through the sanitizer. */
HttpHandlerResult http_reply_error(
        HttpRequest *req, ApiError error, const char *message, const char *const *extra_headers);

/* Suspend the request (the handler then returns HTTP_SUSPENDED) and later
 * complete it with http_reply()/http_reply_error(). If the client went away
 * in between, the reply is dropped when the connection closes. */
void http_request_suspend(HttpRequest *req);
