/* SPDX-License-Identifier: MIT */
#include <microhttpd.h>
#include <assert.h>
#include <limits.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <ifaddrs.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "http/httpd-internal.h"
#include "http/httpd.h"
#include "http/mhd-util.h"
#include "http/pool.h"
#include "http/stream.h"
#include "http/www.h"
#include "metrics/metrics.h"
#include "shared/json-util.h"
#include "shared/list.h"
#include "shared/log.h"
#include "shared/macro.h"
#include "shared/fault.h"
#include "shared/host.h"
#include "shared/netprefix.h"
#include "shared/parse-util.h"
#include "shared/random-util.h"
#include "shared/sanitize.h"
#include "shared/time-util.h"

typedef struct HttpConnection HttpConnection;

/* Addresses whose spoofed user header was logged within the last
 * HTTP_IDENTITY_WARN_INTERVAL_USEC; when every slot is that recent, further
 * addresses are counted, not logged, until one frees up. */
#define HTTP_IDENTITY_WARN_SLOTS 64
#define HTTP_IDENTITY_WARN_INTERVAL_USEC (60 * USEC_PER_SEC)

/* The machine's own addresses, for a Host that names one as a literal
 * (API.md 4): read at start, and again when a literal that is none of
 * them arrives, at most once per interval (an address added since). */
#define HTTP_OWN_ADDRESSES_MAX 64
#define HTTP_OWN_ADDRESSES_INTERVAL_USEC (10 * USEC_PER_SEC)

typedef struct HttpIdentityWarning {
        NetAddress address;
        usec_t at; /* 0: free */
} HttpIdentityWarning;

/* Refused access tokens (API.md "Access tokens"), per client address (an
 * IPv6 address by its /64, which one client holds whole): past
 * HTTP_TOKEN_FAILURES_MAX within HTTP_TOKEN_FAILURE_WINDOW_USEC of the
 * first, every request of that address carrying a token is rate_limited
 * until the window ends, a right token too. HTTP_TOKEN_FAILURE_SLOTS
 * addresses are kept; a new one takes the oldest window's slot. */
#define HTTP_TOKEN_FAILURES_MAX 10
#define HTTP_TOKEN_FAILURE_WINDOW_USEC (60 * USEC_PER_SEC)
#define HTTP_TOKEN_FAILURE_SLOTS 256

typedef struct HttpTokenFailures {
        NetAddress address;
        usec_t since; /* the window's first failure; 0: free */
        unsigned n;
} HttpTokenFailures;

/* The challenge of a refused token (RFC 6750 3.1). */
#define HTTP_TOKEN_CHALLENGE "Bearer realm=\"wikiweb\", error=\"invalid_token\""

struct HttpServer {
        sd_event *event;
        const Config *config;
        struct MHD_Daemon *daemon;
        sd_event_source *io_source;
        sd_event_source *timer_source;
        sd_event_source *wake_source;     /* runs MHD once more (resume, closed connections) */
        sd_event_source *deadline_source; /* the oldest request deadline */
        HttpHandler handler;
        void *userdata;
        unsigned n_requests;    /* requests alive (begun, not yet completed) */
        unsigned n_connections; /* connections MHD holds */
        unsigned connection_limit;
        bool closed_in_run; /* a connection closed during the current MHD_run() */
        bool quiesced;

        /* Connections waiting for a complete request, oldest deadline
         * first: every deadline is "now + the same timeout", so appending
         * keeps the list sorted. */
        HttpConnection *waiting_head, *waiting_tail;

        /* Requests suspended by their handler, to be resumed (and their
         * connections closed) if the server is freed before they are
         * answered: MHD_stop_daemon() aborts on a suspended connection. */
        HttpRequest *suspended_head;

        /* The event streams (stream.c): their keep-alive timer and limits. */
        HttpStreamHub *streams;

        /* Rate-limited warnings about refused connections. */
        usec_t limit_warned_at;
        unsigned limit_suppressed;

        /* Identity (API.md "Identity"): the secret the cookie tokens
         * issued to users are made with (a new one each start), and when
         * the user header from an untrusted peer was last logged, per
         * address: at most once a minute each. */
        uint8_t session_secret[SESSION_SECRET_BYTES];
        /* The secret of the installation every session key is sealed with
         * (user_key_seal()): the key the history keeps. Zero until main
         * sets it (http_server_set_user_secret()). */
        UserKeySecret user_secret;
        HttpIdentityWarning identity_warned[HTTP_IDENTITY_WARN_SLOTS];
        unsigned identity_suppressed;

        /* Access tokens: who checks them (the API face's, set by main;
         * NULL: no token is valid) and the refusals per address. */
        HttpTokenVerifier token_verifier;
        void *token_verifier_userdata;
        HttpTokenFailures token_failures[HTTP_TOKEN_FAILURE_SLOTS];

        /* The machine's own addresses (http_server_read_own_addresses()). */
        NetAddress own_addresses[HTTP_OWN_ADDRESSES_MAX];
        size_t n_own_addresses;
        usec_t own_addresses_read_at;
        usec_t host_warned_at; /* a refused Host was last logged; 0: never */
        unsigned host_suppressed;

        /* A test-only fault switch (shared/fault.h) that makes allocations
         * on the reply path fail, so that the out-of-memory answers can be
         * provoked for real. */
        FaultHttpOom test_oom;
};

/* One client connection (MHD's socket context). From accept, and again
 * after each response, the next request (request line, header fields and
 * body) must arrive in full within the request timeout: a trickle of
 * bytes does not extend it, unlike MHD's own idle timeout. */
struct HttpConnection {
        HttpServer *server;
        int fd;
        usec_t deadline; /* USEC_INFINITY when not waiting */
        HttpConnection *prev, *next;

        /* The request MHD is reading or answering on this connection, from
         * the URI log callback until http_server_on_completed(). MHD skips
         * the completion of a request it gives up on before the access
         * handler saw it (its own 431, a target it cannot split): what is
         * still here when the connection closes is freed then. */
        HttpRequest *request;
};

struct HttpRequest {
        HttpServer *server;
        struct MHD_Connection *connection;
        HttpConnection *owner; /* its connection's record, NULL if none */
        bool begun;            /* the access handler has seen it */

        /* The request target as received (before unescaping), from the
         * URI log callback: its length, and where it ended. */
        const char *raw_uri;
        size_t raw_uri_len;
        bool bare; /* a framing refusal: no session, no CORS, close */

        HttpMethod method;
        RouteMatch route;
        bool is_api;
        bool page; /* a file of the web page (API.md 13), which a browser may keep and revalidate */
        OriginVerdict origin;
        char *origin_value; /* copy, for Access-Control-Allow-Origin */

        char token[SESSION_TOKEN_LEN + 1];
        bool new_session;
        SessionKey session;
        char *user;    /* the identity from a trusted proxy or a token; NULL: anonymous */
        bool by_token; /* user is the person of the access token the request carries */

        char *content_type;
        uint8_t *body;
        size_t body_size, body_allocated;
        bool too_large;
        size_t discarded;

        size_t response_head_reserved; /* pool bytes kept for the response head */

        bool responded; /* a response was queued */
        bool failed;    /* not even the static 500 could be made: close the connection */
        bool suspended;
        HttpRequest *suspended_prev, *suspended_next; /* in the server's list while suspended */
        struct MHD_Response *pending;                 /* completed while suspended */
        unsigned pending_status;

        HttpStream *stream; /* the response is an event stream (stream.h) */
};

/* Request bodies are accumulated up to the configured limit; past it we
 * stop storing and answer 413. A client that keeps streaming after that is
 * cut off once it has sent this much more. */
#define DISCARD_AFTER_LIMIT_BYTES (1024 * 1024)

/* Take a request off the server's list of suspended ones. */
static void http_request_unlink_suspended(HttpRequest *req) {
        if (!req->suspended)
                return;
        LIST_REMOVE(suspended, req->server->suspended_head, req);
        req->suspended = false;
}

static void request_free(HttpRequest *req) {
        if (!req)
                return;
        if (req->owner)
                req->owner->request = NULL;
        http_request_unlink_suspended(req);
        /* The stream learns that its connection is done with it. */
        http_stream_detach(TAKE_PTR(req->stream));
        if (req->pending)
                MHD_destroy_response(req->pending);
        free(req->origin_value);
        free(req->user);
        free(req->content_type);
        free(req->body);
        free(req);
}

/* A request MHD gave up on without calling http_server_on_completed()
 * (see HttpConnection). */
static void request_free_uncompleted(HttpRequest *req) {
        if (!req)
                return;
        if (req->begun)
                req->server->n_requests--;
        request_free(req);
}

/* True once the loop has finished: a source that still fires then (its
 * owner is being torn down) must not touch MHD or the requests. */
static bool http_server_finished(const HttpServer *s) {
        return sd_event_get_state(s->event) == SD_EVENT_FINISHED;
}

HttpMethod http_request_method(const HttpRequest *req) {
        return req->method;
}

const RouteMatch *http_request_route(const HttpRequest *req) {
        return &req->route;
}

const SessionKey *http_request_session(const HttpRequest *req) {
        return &req->session;
}

const char *http_request_user(const HttpRequest *req) {
        return req->user;
}

bool http_request_by_token(const HttpRequest *req) {
        return req->by_token;
}

void http_server_set_token_verifier(HttpServer *s, HttpTokenVerifier verify, void *userdata) {
        assert(s);
        s->token_verifier = verify;
        s->token_verifier_userdata = userdata;
}

const char *http_request_content_type(const HttpRequest *req) {
        return req->content_type;
}

const uint8_t *http_request_body(const HttpRequest *req, size_t *ret_size) {
        *ret_size = req->body_size;
        return req->body ? req->body : (const uint8_t *) "";
}

const char *http_request_argument(const HttpRequest *req, const char *name) {
        return MHD_lookup_connection_value(req->connection, MHD_GET_ARGUMENT_KIND, name);
}

const char *http_request_header(const HttpRequest *req, const char *name) {
        return MHD_lookup_connection_value(req->connection, MHD_HEADER_KIND, name);
}

sd_event *http_server_event(const HttpServer *s) {
        return s->event;
}

HttpStreamHub *http_server_stream_hub(const HttpServer *s) {
        return s->streams;
}

struct MHD_Connection *http_request_connection(const HttpRequest *req) {
        return req->connection;
}

HttpServer *http_request_server(const HttpRequest *req) {
        return req->server;
}

int http_request_fd(const HttpRequest *req) {
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(
                req->connection, MHD_CONNECTION_INFO_CONNECTION_FD);

        return info ? info->connect_fd : -EBADF;
}

void http_request_set_stream(HttpRequest *req, HttpStream *s) {
        req->stream = s;
}

static int add_header(struct MHD_Response *r, const char *name, const char *value) {
        return MHD_add_response_header(r, name, value) == MHD_YES ? 0 : -ENOMEM;
}

/* The headers every response carries (API.md 1, 3, 4). */
static int add_common_headers(HttpRequest *req, struct MHD_Response *r) {
        const Config *c = req->server->config;
        int k = 0;

        k |= add_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, req->page ? "no-cache" : "no-store");
        k |= add_header(r, "X-Content-Type-Options", "nosniff");
        if (req->bare)
                /* A request refused for its framing or size: nothing in it
                 * is trusted, the connection is not reused, and the
                 * response is as small as it can be (it must fit in what
                 * is left of the connection's memory pool). */
                return add_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
        if (req->server->quiesced)
                /* Stopping: finish this exchange, then let the client
                 * reconnect (to the next instance, via socket activation). */
                k |= add_header(r, MHD_HTTP_HEADER_CONNECTION, "close");

        if (req->origin == ORIGIN_ALLOW_CORS && req->origin_value) {
                k |= add_header(r, "Access-Control-Allow-Origin", req->origin_value);
                k |= add_header(r, "Access-Control-Allow-Credentials", "true");
                k |= add_header(r, MHD_HTTP_HEADER_VARY, "Origin");
        }

        /* A fresh session for any API request that came without a usable
         * cookie, except one the origin policy refused: that one changes
         * nothing, not even the session. */
        if (req->is_api && req->new_session && req->origin != ORIGIN_DENY) {
                _cleanup_free_ char *cookie = NULL;

                if (session_set_cookie_header(
                            req->token, c->session_max_age_seconds, c->cookie_secure, &cookie) < 0)
                        return -ENOMEM;
                k |= add_header(r, MHD_HTTP_HEADER_SET_COOKIE, cookie);
        }
        return k ? -ENOMEM : 0;
}

/* Wake MHD from the loop: it picks up a resumed connection only when it
 * runs, and nothing on its sockets may wake it. */
void http_server_wake(HttpServer *s) {
        (void) sd_event_source_set_enabled(s->wake_source, SD_EVENT_ONESHOT);
}

/* Resume a suspended request: MHD calls the access handler again, which
 * queues the pending response (or closes the connection if the request
 * failed). */
static void http_request_resume(HttpRequest *req) {
        if (!req->suspended)
                return;
        http_request_unlink_suspended(req);
        MHD_resume_connection(req->connection);
        http_server_wake(req->server);
}

static enum MHD_Result
        http_response_sum_field(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
        size_t *n = cls;

        *n += strlen(key) + 2 + strlen(value) + 2;
        return MHD_YES;
}

/* An upper bound of the head libmicrohttpd builds for r. */
static size_t http_response_head_bytes(struct MHD_Response *r) {
        size_t n = HTTP_RESPONSE_HEAD_MHD_BYTES;

        (void) MHD_get_response_headers(r, http_response_sum_field, &n);
        return n;
}

static HttpHandlerResult queue_or_store(HttpRequest *req, struct MHD_Response *r, unsigned status) {
        size_t head = http_response_head_bytes(r);

        /* The pool kept this much for the head (request_refuse_framing());
         * more might not fit, and the connection would be closed without
         * an answer after the handler acted. */
        if (head > req->response_head_reserved)
                log_error(
                        "HTTP: a %u response head of %zu bytes exceeds the %zu bytes kept for it; "
                        "HTTP_RESPONSE_HEAD_MAX_BYTES is too small.",
                        status,
                        head,
                        req->response_head_reserved);

        /* Counted as it is made: one response per request, whether queued
         * now or stored until MHD takes it. */
        metrics_count_http_request(status);

        if (req->suspended) {
                /* MHD only takes a response from inside the access handler:
                 * keep it and resume; the handler queues it on the next call. */
                if (req->pending)
                        MHD_destroy_response(req->pending);
                req->pending = r;
                req->pending_status = status;
                http_request_resume(req);
                return HTTP_HANDLED;
        }

        if (MHD_queue_response(req->connection, status, r) == MHD_YES) {
                req->responded = true;
                MHD_destroy_response(r);
        } else {
                /* MHD refuses a response while a body is still arriving;
                 * keep it and queue it on the next call. */
                if (req->pending)
                        MHD_destroy_response(req->pending);
                req->pending = r;
                req->pending_status = status;
        }
        return HTTP_HANDLED;
}

/* The reply when no other can be made, as journal-remote's
 * mhd_respond_oom(): a static body (nothing is copied, so making it
 * allocates only MHD's small response struct), and the connection closed
 * afterwards to give the memory back. */
static const char http_oom_body[] = "{\"error\":{\"code\":\"internal_error\",\"message\":\"Internal error\"}}";

static struct MHD_Response *http_response_oom(const HttpServer *s) {
        struct MHD_Response *r;

        if (TEST_FAULT(s->test_oom == FAULT_HTTP_OOM_ALL))
                return NULL;
        r = MHD_create_response_from_buffer(
                sizeof(http_oom_body) - 1, (void *) http_oom_body, MHD_RESPMEM_PERSISTENT);
        if (!r)
                return NULL;
        /* Best effort: each of these is small, and the body alone is a
         * complete answer. */
        (void) add_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json; charset=utf-8");
        (void) add_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        (void) add_header(r, "X-Content-Type-Options", "nosniff");
        (void) add_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
        return r;
}

/* Out of memory while answering: the static 500 instead, queued or stored
 * like any reply, so a suspended request is resumed and answered too. If
 * not even that can be made, the connection is closed (the access handler
 * returns MHD_NO on its next call; a suspended request is resumed for it):
 * the client is never left waiting. */
static HttpHandlerResult http_reply_oom(HttpRequest *req) {
        struct MHD_Response *r;

        log_oom();
        r = http_response_oom(req->server);
        if (r)
                return queue_or_store(req, r, 500);

        req->failed = true;
        http_request_resume(req);
        return HTTP_HANDLED;
}

/* Add the common headers, the Content-Type and the extra headers (name,
 * value pairs, NULL-terminated) to r and queue it. A response without
 * its session cookie or CORS headers would be a wrong answer: the static
 * 500 instead. Takes r. */
static HttpHandlerResult reply_with_headers(
        HttpRequest *req,
        struct MHD_Response *r,
        unsigned status,
        const char *content_type,
        const char *const *extra_headers) {
        if (add_common_headers(req, r) < 0 ||
            (content_type && add_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type) < 0)) {
                MHD_destroy_response(r);
                return http_reply_oom(req);
        }
        for (const char *const *h = extra_headers; h && h[0] && h[1]; h += 2)
                if (add_header(r, h[0], h[1]) < 0) {
                        MHD_destroy_response(r);
                        return http_reply_oom(req);
                }
        return queue_or_store(req, r, status);
}


HttpHandlerResult http_reply_bytes(
        HttpRequest *req,
        unsigned status,
        const char *content_type,
        const void *data,
        size_t size,
        const char *const *extra_headers) {
        struct MHD_Response *r;

        assert(req);

        r = TEST_FAULT(req->server->test_oom != FAULT_HTTP_OOM_NONE) ?
                NULL :
                MHD_create_response_from_buffer(size, (void *) (size > 0 ? data : ""), MHD_RESPMEM_MUST_COPY);
        if (!r)
                return http_reply_oom(req);
        return reply_with_headers(req, r, status, content_type, extra_headers);
}

/* A body made as it is sent (http_reply_reader()). */
typedef struct HttpBodyReader {
        HttpBodyRead read;
        HttpBodyFree free;
        void *userdata;
} HttpBodyReader;

static ssize_t http_body_on_read(void *cls, uint64_t pos, char *buf, size_t max) {
        HttpBodyReader *b = cls;
        ssize_t n;

        if (max == 0)
                return 0;
        n = b->read(b->userdata, (uint8_t *) buf, max);
        if (n > 0)
                return n;
        if (n == 0)
                return MHD_CONTENT_READER_END_OF_STREAM;
        log_warning_errno((int) n, "HTTP: a download failed while it was made; closing its connection");
        return MHD_CONTENT_READER_END_WITH_ERROR;
}

/* MHD is done with the response: sent, or the client went away. */
static void http_body_on_free(void *cls) {
        HttpBodyReader *b = cls;

        if (b->free)
                b->free(b->userdata);
        free(b);
}

HttpHandlerResult http_reply_reader(
        HttpRequest *req,
        unsigned status,
        const char *content_type,
        HttpBodyRead read,
        HttpBodyFree free_userdata,
        void *userdata,
        const char *const *extra_headers) {
        struct MHD_Response *r = NULL;
        HttpBodyReader *b;

        assert(req);
        assert(read);

        b = TEST_FAULT(req->server->test_oom != FAULT_HTTP_OOM_NONE) ? NULL : malloc(sizeof *b);
        if (b) {
                *b = (HttpBodyReader){ .read = read, .free = free_userdata, .userdata = userdata };
                /* Chunked: MHD reads into the connection's memory pool, a
                 * piece at a time as the socket drains (the block size only
                 * counts for an HTTP/1.0 client). */
                r = MHD_create_response_from_callback(
                        MHD_SIZE_UNKNOWN, HTTP_READER_BLOCK_BYTES, http_body_on_read, b, http_body_on_free);
                if (!r)
                        free(b);
        }
        if (!r) {
                if (free_userdata)
                        free_userdata(userdata);
                return http_reply_oom(req);
        }
        /* From here on, MHD frees b and userdata with the response. */
        return reply_with_headers(req, r, status, content_type, extra_headers);
}

int http_request_queue_response(
        HttpRequest *req, struct MHD_Response *r, unsigned status, const char *const *extra_headers) {
        assert(req);
        assert(r);

        if (add_common_headers(req, r) < 0) {
                MHD_destroy_response(r);
                return -ENOMEM;
        }
        for (const char *const *h = extra_headers; h && h[0] && h[1]; h += 2)
                if (add_header(r, h[0], h[1]) < 0) {
                        MHD_destroy_response(r);
                        return -ENOMEM;
                }
        (void) queue_or_store(req, r, status);
        return 0;
}

HttpHandlerResult http_reply(
        HttpRequest *req, unsigned status, const char *json_body, const char *const *extra_headers) {
        assert(req);

        return http_reply_bytes(
                req,
                status,
                json_body ? "application/json; charset=utf-8" : NULL,
                json_body,
                json_body ? strlen(json_body) : 0,
                extra_headers);
}

HttpHandlerResult http_reply_error(
        HttpRequest *req, ApiError error, const char *message, const char *const *extra_headers) {
        assert(req);

        _cleanup_free_ char *clean = NULL, *quoted = NULL, *body = NULL;
        const char *m = message ? message : api_error_default_message(error);

        if (sanitize_message(m, strlen(m), &clean) < 0 || !(quoted = json_quote(clean)) ||
            asprintf(&body, "{\"error\":{\"code\":\"%s\",\"message\":%s}}", api_error_to_string(error), quoted) <
                    0) {
                body = NULL;
                return http_reply_oom(req);
        }
        return http_reply(req, api_error_http_status(error), body, extra_headers);
}

void http_request_suspend(HttpRequest *req) {
        assert(req);

        if (req->suspended)
                return;
        req->suspended = true;
        LIST_PREPEND(suspended, req->server->suspended_head, req);
        MHD_suspend_connection(req->connection);
}

unsigned http_server_active_count(const HttpServer *s) {
        return s ? s->n_requests : 0;
}

usec_t http_server_fresh_until(const HttpServer *s) {
        usec_t timeout, began;

        if (!s || !s->waiting_tail)
                return 0;
        /* The waiting list is in deadline order, every deadline set to "now +
         * the request timeout" when the connection began to wait: the tail
         * is the newest. */
        timeout = s->config->http_request_timeout_seconds * USEC_PER_SEC;
        began = s->waiting_tail->deadline > timeout ? s->waiting_tail->deadline - timeout : 0;
        return usec_add(began, HTTP_STOP_FRESH_USEC);
}

static const char *header(struct MHD_Connection *c, const char *name) {
        return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

static HttpHandlerResult reply_preflight(HttpRequest *req) {
        static const char *const h[] = {
                "Access-Control-Allow-Methods",
                HTTP_CORS_ALLOW_METHODS,
                "Access-Control-Allow-Headers",
                "Content-Type",
                "Access-Control-Max-Age",
                "600",
                NULL,
        };
        return http_reply(req, 204, NULL, h);
}

/* What the request line and header fields look like, from MHD's parsed
 * copy of them. */
typedef struct HeadScan {
        size_t n_fields;
        unsigned n_host, n_content_length, n_transfer_encoding;
        const char *transfer_encoding;
        const char *prev_end; /* where the previous field's value ended */
        bool malformed;
} HeadScan;

/* MHD parses the head in place: each field stays where it arrived, in
 * order, with its line end (CRLF or LF) overwritten by NULs, and it takes a
 * value as a C string. A NUL byte inside a value therefore cuts it short
 * without a trace, except that between the end of the value MHD saw and
 * the next field's name there are then more than the 1..2 NULs of a line
 * end. Pointers from MHD's buffer are compared as integers. */
static bool is_line_end(const char *from, const char *to) {
        uintptr_t f = (uintptr_t) from, t = (uintptr_t) to;

        if (t <= f || t - f > 2)
                return false;
        for (; f < t; f++)
                if (*(const char *) f != '\0')
                        return false;
        return true;
}

static enum MHD_Result http_server_scan_field(
        void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size, const char *value, size_t value_size) {
        HeadScan *h = cls;

        h->n_fields++;
        if (h->prev_end && !is_line_end(h->prev_end, key))
                h->malformed = true;
        h->prev_end = value + value_size;

        /* RFC 9110 5.1: a field name is a token. libmicrohttpd 0.9.75 keeps
         * "Content-Length " (a space before the colon) as a name of its own
         * and would then not frame the body by it. */
        if (key_size == 0)
                h->malformed = true;
        for (size_t i = 0; i < key_size; i++) {
                char ch = key[i];
                if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                      (ch && strchr("!#$%&'*+-.^_`|~", ch))))
                        h->malformed = true;
        }

        /* RFC 9110 5.5: field values are visible characters, SP and HTAB. */
        for (size_t i = 0; i < value_size; i++) {
                unsigned char ch = (unsigned char) value[i];
                if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
                        h->malformed = true;
        }

        if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0)
                h->n_host++;
        else if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0)
                h->n_content_length++;
        else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
                h->n_transfer_encoding++;
                h->transfer_encoding = value;
        }
        return MHD_YES;
}

/* Every kind of record MHD keeps in the pool. */
#define HTTP_POOL_RECORD_KINDS                                                                  \
        ((enum MHD_ValueKind)(                                                                  \
                MHD_HEADER_KIND | MHD_COOKIE_KIND | MHD_POSTDATA_KIND | MHD_GET_ARGUMENT_KIND | \
                MHD_FOOTER_KIND))

/* What the pool holds for this request (http/pool.h): the head as MHD
 * received it, whitespace it skipped included, one record per field,
 * cookie and query argument, and MHD's copy of the Cookie field. */
static HttpPoolUse request_pool_use(struct MHD_Connection *c) {
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(
                c, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
        HttpPoolUse u = {
                /* Not reached: MHD knows the head's size once it has it all. */
                .head_bytes = info ? info->header_size : SIZE_MAX / 2,
        };
        int n;

        n = MHD_get_connection_values_n(c, HTTP_POOL_RECORD_KINDS, NULL, NULL);
        u.n_records = n > 0 ? (size_t) n : 0;
        u.has_cookie = MHD_lookup_connection_value_n(
                               c,
                               MHD_HEADER_KIND,
                               MHD_HTTP_HEADER_COOKIE,
                               STRLEN(MHD_HTTP_HEADER_COOKIE),
                               NULL,
                               &u.cookie_size) == MHD_YES;
        return u;
}

/* Strict framing (RFC 9112), checked before anything else: a request that
 * a front proxy might frame differently from us is refused with 400 and
 * the connection closed; a head above the limit, or one that leaves no
 * room in the connection's pool for the largest response head we could
 * make for it, is 431. These responses carry no session cookie. Returns
 * true when a response was queued. */
static bool request_refuse_framing(HttpRequest *req, const char *method, const char *version) {
        struct MHD_Connection *c = req->connection;
        HeadScan h = { 0 };
        HttpPoolUse u = request_pool_use(c);
        const char *message = NULL, *origin;
        ApiError error = API_ERROR_INVALID_INPUT;

        (void) MHD_get_connection_values_n(c, MHD_HEADER_KIND, http_server_scan_field, &h);
        /* The last value ends with its line end, then the empty line. */
        if (h.prev_end && (h.prev_end[0] != '\0' || h.prev_end[1] != '\0'))
                h.malformed = true;

        /* The response may echo the Origin (Access-Control-Allow-Origin),
         * which is no longer than ORIGIN_MAX_LEN when it does. */
        origin = header(c, "Origin");
        req->response_head_reserved = HTTP_RESPONSE_HEAD_MAX_BYTES;
        if (origin && strlen(origin) <= ORIGIN_MAX_LEN)
                req->response_head_reserved += strlen(origin);

        if (u.head_bytes > HTTP_HEAD_MAX_BYTES || h.n_fields > HTTP_HEAD_MAX_FIELDS ||
            !http_pool_fits(&u, req->response_head_reserved, HTTP_CONNECTION_POOL_BYTES))
                error = API_ERROR_HEADER_TOO_LARGE;
        else if (!req->raw_uri || version != req->raw_uri + req->raw_uri_len + 1)
                /* A NUL, a space or a control character in the target (the
                 * URI log callback left raw_uri unset for those). */
                message = "Malformed request line";
        else if (h.malformed)
                message = "Malformed header field";
        else if (h.n_host > 1 || (h.n_host == 0 && !streq(version, MHD_HTTP_VERSION_1_0)))
                message = "Exactly one Host header is required";
        else if (h.n_content_length > 1)
                message = "Repeated Content-Length header";
        else if (h.n_transfer_encoding > 1 || (h.n_transfer_encoding == 1 && strcasecmp(h.transfer_encoding, "chunked") != 0))
                message = "Unsupported Transfer-Encoding";
        else if (h.n_transfer_encoding > 0 && h.n_content_length > 0)
                message = "Content-Length together with Transfer-Encoding";
        else
                return false;

        req->bare = true;
        http_reply_error(req, error, message, NULL);
        return true;
}

/* A file of the web page (API.md 13), or 404 as any unknown path when
 * there is none or WIKI_WEB_UI=false. Outside /api/v1: no session, no
 * origin policy (the page is only read; what it then calls is the API).
 * "no-cache" with a strong ETag: the browser keeps the file and asks each
 * time whether it is still current, and a new build answers with the new
 * bytes, never stale ones. The copy compressed at build time goes to a
 * client whose Accept-Encoding takes gzip, with its own ETag; every answer
 * says "Vary: Accept-Encoding", so that a cache keeps the two apart. */
static void request_serve_page(HttpRequest *req, const char *url) {
        const WwwFile *f = req->server->config->web_ui ? www_lookup(url) : NULL;
        const char *h[] = {
                MHD_HTTP_HEADER_ETAG,
                NULL,
                MHD_HTTP_HEADER_VARY,
                MHD_HTTP_HEADER_ACCEPT_ENCODING,
                "Content-Security-Policy",
                WWW_CONTENT_SECURITY_POLICY,
                "Referrer-Policy",
                "no-referrer",
                NULL, /* Content-Encoding, for the compressed copy */
                NULL,
                NULL,
        };
        const unsigned char *data;
        size_t size;

        if (!f) {
                http_reply_error(req, API_ERROR_NOT_FOUND, NULL, NULL);
                return;
        }
        if (req->method != HTTP_METHOD_GET && req->method != HTTP_METHOD_HEAD) {
                const char *allow[] = { MHD_HTTP_HEADER_ALLOW, "GET, HEAD", NULL };
                http_reply_error(req, API_ERROR_METHOD_NOT_ALLOWED, NULL, allow);
                return;
        }

        req->page = true;
        if (f->gzip_data && www_accepts_gzip(header(req->connection, MHD_HTTP_HEADER_ACCEPT_ENCODING))) {
                h[1] = f->gzip_etag;
                h[8] = MHD_HTTP_HEADER_CONTENT_ENCODING;
                h[9] = "gzip";
                data = f->gzip_data;
                size = f->gzip_size;
        } else {
                h[1] = f->etag;
                data = f->data;
                size = f->size;
        }
        if (www_etag_matches(header(req->connection, MHD_HTTP_HEADER_IF_NONE_MATCH), h[1])) {
                h[8] = NULL; /* no body, no Content-Encoding */
                http_reply_bytes(req, 304, NULL, NULL, 0, h);
        } else
                http_reply_bytes(req, 200, f->media_type, data, size, h);
}

typedef struct CookieScan {
        char *token;
        int found; /* 1: a well-formed session cookie, 0: a malformed one, -ENOENT: none yet */
} CookieScan;

static enum MHD_Result http_server_scan_cookie(
        void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size, const char *value, size_t value_size) {
        CookieScan *cs = cls;

        if (cs->found != -ENOENT || strcasecmp(key, MHD_HTTP_HEADER_COOKIE) != 0)
                return MHD_YES;
        cs->found = session_cookie_find(value, cs->token);
        return MHD_YES;
}

/* The user header as received: how many fields of that name (in any case:
 * field names are case-insensitive), and the first one's value. */
typedef struct IdentityScan {
        const char *name;
        unsigned n;
        const char *value;
        size_t value_size;
} IdentityScan;

static enum MHD_Result http_server_scan_identity(
        void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size, const char *value, size_t value_size) {
        IdentityScan *is = cls;

        if (strcasecmp(key, is->name) != 0)
                return MHD_YES;
        if (is->n++ == 0) {
                is->value = value;
                is->value_size = value ? value_size : 0;
        }
        return MHD_YES;
}

/* Nothing is looked for without identity (no trusted proxies). */
static void identity_scan(HttpRequest *req, IdentityScan *ret) {
        *ret = (IdentityScan){ .name = req->server->config->user_header };
        if (config_identity_enabled(req->server->config))
                (void) MHD_get_connection_values_n(
                        req->connection, MHD_HEADER_KIND, http_server_scan_identity, ret);
}

/* The connection's own peer address (never a forwarding header). -errno
 * when it has none that can be trusted (a UNIX socket: AF_UNIX is no
 * proxy address). */
static int request_peer(HttpRequest *req, NetAddress *ret) {
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(
                req->connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        const struct sockaddr *sa;

        if (!info || !info->client_addr)
                return -ENOTCONN;
        sa = info->client_addr;
        return net_address_from_sockaddr(
                sa, sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in), ret);
}

/* The user header from a peer that is no trusted proxy: a warning at most
 * once a minute per address (the header's value is never logged). */
static void identity_warn_untrusted(HttpServer *s, const NetAddress *peer) {
        usec_t t = now(CLOCK_MONOTONIC);
        HttpIdentityWarning *slot = NULL;
        char buf[NET_PREFIX_STRING_MAX];
        unsigned suppressed;

        for (size_t i = 0; i < HTTP_IDENTITY_WARN_SLOTS; i++) {
                HttpIdentityWarning *w = &s->identity_warned[i];
                bool recent = w->at != 0 && t < w->at + HTTP_IDENTITY_WARN_INTERVAL_USEC;

                if (recent && w->address.family == peer->family &&
                    memcmp(w->address.bytes, peer->bytes, sizeof peer->bytes) == 0)
                        return; /* logged within the minute */
                if (!recent && !slot)
                        slot = w;
        }
        if (!slot) {
                s->identity_suppressed++;
                return;
        }
        slot->address = *peer;
        slot->at = t;
        suppressed = s->identity_suppressed;
        s->identity_suppressed = 0;
        net_address_format(peer, buf);
        if (suppressed > 0)
                log_warning(
                        "HTTP: refused the user header %s from %s, which is not a trusted proxy "
                        "(WIKI_WEB_TRUSTED_PROXIES); %u more refusals from other addresses were not logged.",
                        s->config->user_header,
                        buf,
                        suppressed);
        else
                log_warning(
                        "HTTP: refused the user header %s from %s, which is not a trusted proxy "
                        "(WIKI_WEB_TRUSTED_PROXIES).",
                        s->config->user_header,
                        buf);
}

/* Whether this is GET or HEAD /api/v1/health: the one request that needs
 * no identity (a load balancer's or monitor's probe). */
static bool request_is_health(const HttpRequest *req, const char *url) {
        return (req->method == HTTP_METHOD_GET || req->method == HTTP_METHOD_HEAD) &&
                streq(url, "/api/v1/health");
}

/* The paths a token may be used on: the API and the MCP endpoint. */
static bool request_takes_token(const HttpRequest *req, const char *url) {
        return req->is_api || streq(url, "/mcp") || strneq(url, "/mcp/", STRLEN("/mcp/"));
}

/* The credential of "Authorization: Bearer <credential>" (the scheme
 * case-insensitive, RFC 9110 11.1), borrowed from the header's value; NULL
 * for any other scheme (Basic from a proxy's own sign-on is not ours). */
static const char *bearer_credential(const IdentityScan *auth) {
        const char *v = auth->value;

        if (!v || auth->value_size < STRLEN("Bearer ") || strncasecmp(v, "Bearer ", STRLEN("Bearer ")) != 0)
                return NULL;
        v += STRLEN("Bearer ");
        while (*v == ' ')
                v++;
        return v;
}

/* The refusals of tokens from peer's address: its slot, made (the oldest
 * window's taken over) when create. NULL when there is none. */
static HttpTokenFailures *token_failures_of(HttpServer *s, const NetAddress *peer, bool create, usec_t t) {
        HttpTokenFailures *oldest = NULL;
        NetAddress a = *peer;

        if (a.family == AF_INET6)
                memset(a.bytes + 8, 0, 8); /* its /64 */
        for (size_t i = 0; i < HTTP_TOKEN_FAILURE_SLOTS; i++) {
                HttpTokenFailures *f = &s->token_failures[i];

                if (f->since != 0 && t >= f->since + HTTP_TOKEN_FAILURE_WINDOW_USEC)
                        *f = (HttpTokenFailures){ .since = 0 }; /* its window is over */
                if (f->since != 0 && f->address.family == a.family &&
                    memcmp(f->address.bytes, a.bytes, sizeof a.bytes) == 0)
                        return f;
                if (!oldest || f->since < oldest->since)
                        oldest = f;
        }
        if (!create)
                return NULL;
        *oldest = (HttpTokenFailures){ .address = a, .since = t };
        return oldest;
}

/* Whether peer is past its refusals; then rate_limited with the seconds
 * left of its window was queued. */
static bool token_refuse_limited(HttpRequest *req, const NetAddress *peer) {
        usec_t t = now(CLOCK_MONOTONIC);
        HttpTokenFailures *f = token_failures_of(req->server, peer, false, t);
        char seconds[32];
        const char *h[] = { "Retry-After", seconds, NULL };

        if (!f || f->n < HTTP_TOKEN_FAILURES_MAX)
                return false;
        metrics_count_identity_refused("token_rate_limited");
        snprintf(
                seconds,
                sizeof seconds,
                "%" PRIu64,
                MAX((f->since + HTTP_TOKEN_FAILURE_WINDOW_USEC - t + USEC_PER_SEC - 1) / USEC_PER_SEC,
                    (uint64_t) 1));
        http_reply_error(req, API_ERROR_RATE_LIMITED, "Too many refused access tokens from this address", h);
        return true;
}

/* A refused token: counted for its address, 401 with the challenge. */
static bool token_refuse(HttpRequest *req, const NetAddress *peer) {
        HttpTokenFailures *f = token_failures_of(req->server, peer, true, now(CLOCK_MONOTONIC));
        const char *h[] = { "WWW-Authenticate", HTTP_TOKEN_CHALLENGE, NULL };

        f->n++;
        metrics_count_identity_refused("token");
        http_reply_error(req, API_ERROR_INVALID_TOKEN, NULL, h);
        return true;
}

/* A request carrying "Authorization: Bearer": the token's person in
 * req->user, or a refusal queued (true). Without trusted proxies there
 * are no tokens: every one is refused. The token is never logged and
 * never kept past the verifier's call. */
static bool request_identify_token(HttpRequest *req, const IdentityScan *auth, const char *credential) {
        HttpServer *s = req->server;
        NetAddress peer = { .family = 0 };
        char *user = NULL;
        int r;

        /* A peer without an address (a UNIX socket) shares one slot. */
        (void) request_peer(req, &peer);
        if (token_refuse_limited(req, &peer))
                return true;
        if (auth->n > 1) {
                metrics_count_identity_refused("repeated");
                http_reply_error(req, API_ERROR_INVALID_INPUT, "Repeated Authorization header", NULL);
                return true;
        }
        if (!config_identity_enabled(s->config) || !s->token_verifier ||
            strlen(credential) != auth->value_size - (size_t) (credential - auth->value))
                return token_refuse(req, &peer);
        r = s->token_verifier(credential, &user, s->token_verifier_userdata);
        if (r == -EACCES)
                return token_refuse(req, &peer);
        if (r < 0) {
                log_error_errno(r, "HTTP: failed to check an access token");
                http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
                return true;
        }
        req->user = user;
        req->by_token = true;
        /* The person's key, here on every path a token is taken on (the
         * API's and /mcp), as for their browser. */
        r = session_key_from_user(req->user, &req->session);
        if (r < 0) {
                log_error_errno(r, "Failed to make the session of a user");
                http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
                return true;
        }
        return false;
}

/* Who is asking (API.md "Identity"), decided from the connection's own
 * peer address and the user header alone, before anything else is done
 * with the request; without trusted proxies nothing happens here. Sets
 * req->user. Returns true when the request was refused (a response was
 * queued); every refusal is counted. */
static bool request_identify(HttpRequest *req, const char *url, const IdentityScan *is, const IdentityScan *auth) {
        HttpServer *s = req->server;
        const Config *cfg = s->config;
        const char *credential = auth->n > 0 && request_takes_token(req, url) ? bearer_credential(auth) : NULL;
        NetAddress peer;
        bool has_peer, trusted;

        if (!config_identity_enabled(cfg))
                return credential ? request_identify_token(req, auth, credential) : false;

        has_peer = request_peer(req, &peer) >= 0;
        trusted = has_peer && net_prefix_list_contains(cfg->trusted_proxies, cfg->n_trusted_proxies, &peer);

        if (is->n > 0 && !trusted) {
                /* Never believed, whatever else the request says
                 * (X-Forwarded-For, Forwarded, a cookie). */
                metrics_count_identity_refused("untrusted_peer");
                if (has_peer)
                        identity_warn_untrusted(s, &peer);
                http_reply_error(
                        req,
                        API_ERROR_ORIGIN_DENIED,
                        "The user header is accepted only from a trusted proxy",
                        NULL);
                return true;
        }
        if (is->n > 1) {
                metrics_count_identity_refused("repeated");
                http_reply_error(req, API_ERROR_INVALID_INPUT, "Repeated user header", NULL);
                return true;
        }
        if (is->n == 1 && !session_user_is_valid(is->value, is->value_size)) {
                metrics_count_identity_refused("invalid");
                http_reply_error(req, API_ERROR_INVALID_INPUT, "Invalid user header", NULL);
                return true;
        }
        if (credential) {
                /* A token acts for its person from any address; beside a
                 * trusted proxy's user header it must name the same one. */
                if (request_identify_token(req, auth, credential))
                        return true;
                if (is->n == 1 &&
                    (strlen(req->user) != is->value_size || memcmp(req->user, is->value, is->value_size) != 0)) {
                        metrics_count_identity_refused("token");
                        http_reply_error(
                                req,
                                API_ERROR_ORIGIN_DENIED,
                                "The user header and the access token name different people",
                                NULL);
                        return true;
                }
                return false;
        }
        if (is->n == 1) {
                req->user = strndup(is->value, is->value_size);
                if (!req->user) {
                        log_oom();
                        http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
                        return true;
                }
                return false;
        }

        if (cfg->require_user && !request_is_health(req, url)) {
                /* An assistant cannot follow the sign-on's browser login:
                 * /mcp says how to authenticate instead (API.md "MCP"). */
                const char *h[] = { "WWW-Authenticate", "Bearer realm=\"wikiweb\"", NULL };
                bool mcp = streq(url, "/mcp");

                metrics_count_identity_refused("missing");
                http_reply_error(
                        req,
                        mcp ? API_ERROR_UNAUTHORIZED : API_ERROR_ORIGIN_DENIED,
                        "Sign-in required",
                        mcp ? h : NULL);
                return true;
        }
        return false;
}

/* The session of a request with an identity: the user's key, and the
 * cookie token issued to that user. A cookie issued to someone else (or
 * to an anonymous session) is not this user's session: it is replaced, the
 * other session untouched. Returns 0 or a negative errno. */
static int request_user_session(HttpRequest *req, const CookieScan *cs) {
        char token[SESSION_TOKEN_LEN + 1];
        int r;

        r = session_key_from_user(req->user, &req->session);
        if (r < 0)
                return r;
        r = session_token_for_user(req->server->session_secret, req->user, token);
        if (r < 0)
                return r;
        if (cs->found > 0 && streq(cs->token, token))
                return 0;
        if (cs->found > 0)
                metrics_count_identity_refused("cookie");
        memcpy(req->token, token, sizeof token);
        req->new_session = true;
        return 0;
}

/* The addresses of the machine's interfaces, up or not (an address is
 * ours while it is configured). Cheap enough to repeat: one netlink dump. */
static void http_server_read_own_addresses(HttpServer *s) {
        struct ifaddrs *list = NULL;
        size_t n = 0;

        s->own_addresses_read_at = now(CLOCK_MONOTONIC);
        if (getifaddrs(&list) < 0) {
                log_warning_errno(errno, "HTTP: failed to read the machine's addresses, keeping the last ones");
                return;
        }
        for (struct ifaddrs *i = list; i && n < HTTP_OWN_ADDRESSES_MAX; i = i->ifa_next) {
                const struct sockaddr *sa = i->ifa_addr;

                if (!sa || (sa->sa_family != AF_INET && sa->sa_family != AF_INET6))
                        continue;
                if (net_address_from_sockaddr(
                            sa,
                            sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
                                                        sizeof(struct sockaddr_in),
                            &s->own_addresses[n]) >= 0)
                        n++;
        }
        freeifaddrs(list);
        s->n_own_addresses = n;
}

/* DNS rebinding (API.md 4, "Host"): a request whose Host is not a name of
 * this daemon is refused before anything else is done with it, on every
 * path: no session, no ticket, no page. A trusted proxy's request is
 * checked the same way, on the Host it forwards. Returns true when a
 * response was queued. */
static bool request_refuse_host(HttpRequest *req) {
        HttpServer *s = req->server;
        const char *host = header(req->connection, MHD_HTTP_HEADER_HOST);
        HostPolicy p = {
                .allowed_hosts = s->config->allowed_hosts,
                .allowed_origins = s->config->allowed_origins,
                .own = s->own_addresses,
                .n_own = s->n_own_addresses,
        };
        HostVerdict v;

        /* Only HTTP/1.0 may leave Host out (request_refuse_framing()), and
         * no browser does: such a request has no own origin either. */
        if (!host)
                return false;
        v = host_check(host, &p);
        if (v == HOST_UNKNOWN_ADDRESS &&
            now(CLOCK_MONOTONIC) >= s->own_addresses_read_at + HTTP_OWN_ADDRESSES_INTERVAL_USEC) {
                http_server_read_own_addresses(s);
                p.n_own = s->n_own_addresses;
                v = host_check(host, &p);
        }
        if (v == HOST_ALLOW)
                return false;

        /* At most one line a minute: a rebinding page may send many. The
         * value is not logged (anyone's bytes); its absence is. */
        if (s->host_warned_at == 0 ||
            now(CLOCK_MONOTONIC) >= s->host_warned_at + HTTP_IDENTITY_WARN_INTERVAL_USEC) {
                log_warning(
                        "HTTP: refused %u request(s) whose Host is no name of this daemon (localhost, "
                        "its addresses, WIKI_WEB_ALLOWED_HOSTS, the hosts of WIKI_WEB_ALLOWED_ORIGINS).",
                        s->host_suppressed + 1);
                s->host_warned_at = now(CLOCK_MONOTONIC);
                s->host_suppressed = 0;
        } else
                s->host_suppressed++;
        req->bare = true;
        http_reply_error(req, API_ERROR_ORIGIN_DENIED, "Host not allowed", NULL);
        return true;
}

/* Everything decided from the request line and headers alone, before any
 * body byte is read (API.md 7: origin → size → ...). Returns true when a
 * response was queued. */
static bool request_begin(HttpRequest *req, const char *url, const char *method, const char *version) {
        struct MHD_Connection *c = req->connection;
        const Config *cfg = req->server->config;
        CookieScan cs = { .token = req->token, .found = -ENOENT };
        IdentityScan is, auth = { .name = MHD_HTTP_HEADER_AUTHORIZATION };
        const char *v;
        int r;

        identity_scan(req, &is);
        (void) MHD_get_connection_values_n(c, MHD_HEADER_KIND, http_server_scan_identity, &auth);
        if (request_refuse_framing(req, method, version)) {
                /* A user header in a request refused for its framing (a
                 * control character in its value, a line MHD could not
                 * split) is a refused identity too. */
                if (is.n > 0)
                        metrics_count_identity_refused("invalid");
                return true;
        }
        if (request_refuse_host(req))
                return true;

        req->method = http_method_from_string(method);
        req->is_api = router_path_is_api(url);

        if (request_identify(req, url, &is, &auth))
                return true;

        if (!req->is_api) {
                request_serve_page(req, url);
                return true;
        }

        v = header(c, "Origin");
        req->origin = origin_check(
                v,
                header(c, MHD_HTTP_HEADER_HOST),
                header(c, "Sec-Fetch-Site"),
                cfg->cookie_secure,
                cfg->allowed_origins);
        if (req->origin == ORIGIN_ALLOW_CORS) {
                req->origin_value = strdup(v);
                if (!req->origin_value)
                        req->origin = ORIGIN_ALLOW;
        }
        if (req->origin == ORIGIN_DENY) {
                http_reply_error(req, API_ERROR_ORIGIN_DENIED, NULL, NULL);
                return true;
        }

        /* The session: a well-formed cookie is used as it is, anything else
         * gets a fresh token. Only its SHA-256 is kept. */
        /* Several Cookie fields count as one joined with "; " (RFC 9113
         * 8.2.3): the first wikiweb_session pair among them decides. */
        (void) MHD_get_connection_values_n(c, MHD_HEADER_KIND, http_server_scan_cookie, &cs);
        /* A token's request has its person's key already, and gets no
         * cookie: its client sends the credential with every request. */
        if (req->user && !req->by_token) {
                r = request_user_session(req, &cs);
                if (r < 0) {
                        log_error_errno(r, "Failed to make the session of a user");
                        http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
                        return true;
                }
        } else if (!req->user && cs.found <= 0) {
                r = session_token_new(req->token);
                if (r < 0) {
                        log_error_errno(r, "Failed to make a session token");
                        http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
                        return true;
                }
                req->new_session = true;
        }
        if (!req->user) {
                r = session_key_from_token(req->token, &req->session);
                if (r < 0) {
                        log_error_errno(r, "Failed to hash the session token");
                        http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
                        return true;
                }
        }
        /* A token's key and a person's alike: what the history keeps is
         * keyed with the installation's secret (wikiwebd(8) "Backups"). */
        r = user_key_seal(&req->server->user_secret, &req->session, &req->session);
        if (r < 0) {
                log_error_errno(r, "Failed to seal the session key");
                http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
                return true;
        }

        if (req->method == HTTP_METHOD_OPTIONS) {
                reply_preflight(req);
                return true;
        }

        if (router_match(url, &req->route) < 0) {
                http_reply_error(req, API_ERROR_NOT_FOUND, NULL, NULL);
                return true;
        }
        if (!route_allows_method(req->route.route, req->method)) {
                const char *h[] = { MHD_HTTP_HEADER_ALLOW, route_allow_header(req->route.route), NULL };
                http_reply_error(req, API_ERROR_METHOD_NOT_ALLOWED, NULL, h);
                return true;
        }

        /* The size limit is decided from Content-Length before reading the
         * body; a chunked body is checked while it streams in. */
        v = header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (v) {
                uint64_t n;

                if (parse_uint64_range(v, 0, UINT64_MAX, &n) < 0) {
                        http_reply_error(req, API_ERROR_INVALID_INPUT, "Invalid Content-Length", NULL);
                        return true;
                }
                if (n > cfg->max_request_bytes) {
                        http_reply_error(req, API_ERROR_REQUEST_TOO_LARGE, NULL, NULL);
                        return true;
                }
        }

        v = header(c, MHD_HTTP_HEADER_CONTENT_TYPE);
        if (v) {
                req->content_type = strdup(v);
                if (!req->content_type) {
                        http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
                        return true;
                }
        }
        return false;
}

/* Append a piece of the body, within the limit. */
static void request_append(HttpRequest *req, const char *data, size_t n) {
        size_t limit = req->server->config->max_request_bytes;

        if (req->too_large || n > limit - req->body_size) {
                /* Nothing more is stored: the request gets 413. */
                req->too_large = true;
                return;
        }
        if (req->body_size + n > req->body_allocated) {
                size_t a = MAX(req->body_allocated * 2, (size_t) 1024);
                uint8_t *b;

                if (a < req->body_size + n)
                        a = req->body_size + n;
                if (a > limit)
                        a = limit;
                b = realloc(req->body, a);
                if (!b) {
                        req->too_large = true;
                        return;
                }
                req->body = b;
                req->body_allocated = a;
        }
        memcpy(req->body + req->body_size, data, n);
        req->body_size += n;
}

/* --- Connections and their request deadline ------------------------------ */

static HttpConnection *connection_of(struct MHD_Connection *c) {
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

        return info ? info->socket_context : NULL;
}

static void connection_unlink(HttpConnection *hc) {
        HttpServer *s = hc->server;

        if (hc->deadline == USEC_INFINITY)
                return;
        if (hc->prev)
                hc->prev->next = hc->next;
        else
                s->waiting_head = hc->next;
        if (hc->next)
                hc->next->prev = hc->prev;
        else
                s->waiting_tail = hc->prev;
        hc->prev = hc->next = NULL;
        hc->deadline = USEC_INFINITY;
}

static void arm_deadline(HttpServer *s) {
        if (!s->waiting_head) {
                (void) sd_event_source_set_enabled(s->deadline_source, SD_EVENT_OFF);
                return;
        }
        if (sd_event_source_set_time(s->deadline_source, s->waiting_head->deadline) >= 0)
                (void) sd_event_source_set_enabled(s->deadline_source, SD_EVENT_ONESHOT);
}

/* The connection now waits for a request: it has the request timeout from
 * now to deliver all of it. */
static void connection_wait(HttpConnection *hc) {
        HttpServer *s;

        if (!hc)
                return;
        s = hc->server;
        connection_unlink(hc);
        hc->deadline = usec_add(now(CLOCK_MONOTONIC), s->config->http_request_timeout_seconds * USEC_PER_SEC);
        hc->prev = s->waiting_tail;
        if (s->waiting_tail)
                s->waiting_tail->next = hc;
        else
                s->waiting_head = hc;
        s->waiting_tail = hc;
        if (s->waiting_head == hc)
                arm_deadline(s);
}

/* The request has arrived in full, or it was answered early: from here
 * MHD's own (idle) timeout covers the response. */
static void request_received(HttpRequest *req) {
        HttpConnection *hc = connection_of(req->connection);
        bool was_head;

        if (!hc || hc->deadline == USEC_INFINITY)
                return;
        was_head = hc->server->waiting_head == hc;
        connection_unlink(hc);
        if (was_head)
                arm_deadline(hc->server);
}

static void http_server_on_connection_notify(
        void *cls,
        struct MHD_Connection *connection,
        void **socket_context,
        enum MHD_ConnectionNotificationCode toe) {
        HttpServer *s = cls;
        HttpConnection *hc = *socket_context;

        if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
                const union MHD_ConnectionInfo *info = MHD_get_connection_info(
                        connection, MHD_CONNECTION_INFO_CONNECTION_FD);

                s->n_connections++;
                metrics_http_connections_add(1);
                hc = calloc(1, sizeof *hc);
                if (!hc) {
                        log_oom();
                        return; /* no deadline for this one: MHD's idle timeout still applies */
                }
                hc->server = s;
                hc->fd = info ? info->connect_fd : -1;
                hc->deadline = USEC_INFINITY;
                *socket_context = hc;
                connection_wait(hc);
                return;
        }

        /* MHD_CONNECTION_NOTIFY_CLOSED */
        s->n_connections--;
        metrics_http_connections_add(-1);
        s->closed_in_run = true;
        if (hc) {
                bool was_head = s->waiting_head == hc;

                request_free_uncompleted(hc->request);
                connection_unlink(hc);
                if (was_head)
                        arm_deadline(s);
                free(hc);
        }
        *socket_context = NULL;
}

/* Connections past their deadline are shut down: MHD then sees the end of
 * the stream on its next run and closes them itself (the descriptor stays
 * MHD's, so nothing can be closed twice). */
static int http_server_on_deadline(sd_event_source *es, uint64_t usec, void *userdata) {
        HttpServer *s = userdata;
        usec_t t = now(CLOCK_MONOTONIC);
        unsigned n = 0;

        if (http_server_finished(s))
                return 0;
        while (s->waiting_head && s->waiting_head->deadline <= t) {
                HttpConnection *hc = s->waiting_head;

                connection_unlink(hc);
                if (hc->fd >= 0)
                        (void) shutdown(hc->fd, SHUT_RDWR);
                n++;
        }
        if (n > 0)
                log_debug("HTTP: closed %u connection(s) that did not deliver a request in time.", n);
        arm_deadline(s);
        return 0;
}

/* What MHD passes to one call of the access handler. */
typedef struct HttpAccessCall {
        const char *url, *method, *version, *upload_data;
        size_t *upload_data_size;
} HttpAccessCall;

/* One call of the access handler for a request that has its object. */
static enum MHD_Result http_server_handle_request(HttpRequest *req, const HttpAccessCall *call) {
        HttpServer *s = req->server;
        struct MHD_Connection *connection = req->connection;
        const char *url = call->url, *method = call->method, *version = call->version;
        const char *upload_data = call->upload_data;
        size_t *upload_data_size = call->upload_data_size;

        if (!req->begun) {
                req->begun = true;
                s->n_requests++;
                if (request_begin(req, url, method, version))
                        request_received(req);
                return MHD_YES;
        }

        if (req->pending) {
                struct MHD_Response *r = TAKE_PTR(req->pending);

                if (*upload_data_size > 0) {
                        req->discarded += *upload_data_size;
                        *upload_data_size = 0;
                        if (req->discarded > DISCARD_AFTER_LIMIT_BYTES) {
                                MHD_destroy_response(r);
                                return MHD_NO;
                        }
                }
                if (MHD_queue_response(connection, req->pending_status, r) == MHD_YES) {
                        req->responded = true;
                        MHD_destroy_response(r);
                } else
                        req->pending = r;
                return MHD_YES;
        }

        if (req->responded) {
                /* An early answer (403, 413, ...) was queued: drop the rest. */
                *upload_data_size = 0;
                return MHD_YES;
        }

        if (*upload_data_size > 0) {
                request_append(req, upload_data, *upload_data_size);
                *upload_data_size = 0;
                if (req->too_large) {
                        /* Answer at once if MHD lets us; otherwise when the
                         * upload ends, and cut off a client that streams on. */
                        http_reply_error(req, API_ERROR_REQUEST_TOO_LARGE, NULL, NULL);
                }
                return MHD_YES;
        }

        /* The whole request is here. */
        request_received(req);
        if (req->too_large) {
                http_reply_error(req, API_ERROR_REQUEST_TOO_LARGE, NULL, NULL);
                return MHD_YES;
        }
        if (MHD_get_connection_values_n(connection, MHD_FOOTER_KIND, NULL, NULL) > 0) {
                /* Trailer fields of a chunked body take pool space that the
                 * check of the head did not count, as much as the client
                 * likes: refused, before the handler acts. */
                req->bare = true;
                http_reply_error(req, API_ERROR_INVALID_INPUT, "Trailer fields are not accepted", NULL);
                return MHD_YES;
        }
        if (s->handler(req, s->userdata) == HTTP_SUSPENDED && !req->suspended && !req->pending)
                log_error("Handler claimed to suspend but did not.");
        return MHD_YES;
}

static void http_server_on_completed(
        void *cls, struct MHD_Connection *connection, void **con_cls, enum MHD_RequestTerminationCode toe) {
        HttpServer *s = cls;
        HttpRequest *req = *con_cls;

        if (req && req->begun)
                s->n_requests--;
        request_free(req);
        *con_cls = NULL;

        /* The connection stays for the next request: its clock starts now. */
        if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
                connection_wait(connection_of(connection));
}

/* The access handler: http_server_handle_request(), except when the
 * request object could not be made (the static 500, without reading the
 * request) or no reply could be made at all (the connection is closed). */
static enum MHD_Result http_server_on_request(
        void *cls,
        struct MHD_Connection *connection,
        const char *url,
        const char *method,
        const char *version,
        const char *upload_data,
        size_t *upload_data_size,
        void **con_cls) {
        HttpServer *s = cls;
        HttpRequest *req = *con_cls;
        enum MHD_Result k;

        if (!req) {
                /* The URI log callback could not allocate it. */
                struct MHD_Response *r;

                if (*upload_data_size > 0) {
                        /* The answer is queued already: drop the body. */
                        *upload_data_size = 0;
                        return MHD_YES;
                }
                log_oom();
                r = http_response_oom(s);
                if (!r)
                        return MHD_NO;
                metrics_count_http_request(500);
                k = MHD_queue_response(connection, 500, r);
                MHD_destroy_response(r);
                return k;
        }
        if (req->failed)
                return MHD_NO;

        k = http_server_handle_request(
                req,
                &(const HttpAccessCall){
                        .url = url,
                        .method = method,
                        .version = version,
                        .upload_data = upload_data,
                        .upload_data_size = upload_data_size,
                });
        return req->failed ? MHD_NO : k;
}

/* Called by MHD with the request target as received, before it unescapes
 * it or splits off the query: the request object starts here, so that the
 * framing check knows the raw target. Its return value is the request's
 * con_cls; MHD calls http_server_on_completed() for it from here on. */
static void *http_server_on_uri_log(void *cls, const char *uri, struct MHD_Connection *connection) {
        HttpServer *s = cls;
        HttpRequest *req;
        bool bad = false;

        if (TEST_FAULT(s->test_oom == FAULT_HTTP_OOM_REQUEST))
                return NULL;
        req = calloc(1, sizeof *req);
        if (!req)
                return NULL;
        req->server = s;
        req->connection = connection;
        req->owner = connection_of(connection);
        if (req->owner) {
                /* One MHD left without completion on a kept-alive
                 * connection is gone before its successor begins. */
                request_free_uncompleted(req->owner->request);
                req->owner->request = req;
        }
        if (uri) {
                req->raw_uri_len = strlen(uri);
                for (const char *p = uri; *p; p++)
                        if ((unsigned char) *p <= 0x20 || *p == 0x7f)
                                bad = true;
                if (!bad)
                        req->raw_uri = uri;
        }
        return req;
}

/* Percent-decoding of the path and the query arguments, in place, except
 * that "%00" stays as it is (http_percent_decode()). */
static size_t http_server_on_unescape(void *cls, struct MHD_Connection *connection, char *s) {
        return http_percent_decode(s);
}

/* Rate-limited: at most one warning per LIMIT_WARN_INTERVAL_USEC, with the
 * number of refusals folded into it. */
#define LIMIT_WARN_INTERVAL_USEC (10 * USEC_PER_SEC)

static void warn_limit(HttpServer *s, const char *what) {
        usec_t t = now(CLOCK_MONOTONIC);

        if (s->limit_warned_at != 0 && t < s->limit_warned_at + LIMIT_WARN_INTERVAL_USEC) {
                s->limit_suppressed++;
                return;
        }
        log_warning(
                "HTTP: %s (%u connections open, limit %u, %" PRIu64
                " per client address; %u more such events since the last warning); "
                "further clients are refused or wait.",
                what,
                s->n_connections,
                s->connection_limit,
                s->config->http_max_connections_per_ip,
                s->limit_suppressed);
        s->limit_warned_at = t;
        s->limit_suppressed = 0;
}

_printf_(2, 0) static void http_server_on_mhd_log(void *arg, const char *fmt, va_list ap) {
        HttpServer *s = arg;
        char buf[512];

        (void) vsnprintf(buf, sizeof buf, fmt, ap);
        /* MHD says this both for its total limit and for the per-address
         * one; the total is also noticed after each run. */
        if (strstr(buf, "reached connection limit"))
                warn_limit(s, "a connection limit was reached, a connection was refused");
        log_debug("microhttpd: %s", buf);
}

static int run_mhd(HttpServer *s) {
        int r;

        s->closed_in_run = false;
        if (MHD_run(s->daemon) != MHD_YES)
                log_warning("MHD_run() failed.");
        r = mhd_arm_timer(s->daemon, s->timer_source);
        if (r < 0)
                log_warning_errno(r, "Failed to arm the HTTP timer");

        /* At its connection limit MHD takes the listening socket out of its
         * epoll set, and it puts it back only at the start of a run, while
         * connections are freed at the end of one: after a run that closed
         * any, run once more, or pending clients wait in the accept queue
         * until some unrelated event comes. */
        if (s->closed_in_run)
                (void) sd_event_source_set_enabled(s->wake_source, SD_EVENT_ONESHOT);
        if (s->n_connections >= s->connection_limit)
                warn_limit(s, "the connection limit is reached");
        return 0;
}

static int http_server_on_io(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        HttpServer *s = userdata;

        if (http_server_finished(s))
                return 0;
        return run_mhd(s);
}

static int http_server_on_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        HttpServer *s = userdata;

        if (http_server_finished(s))
                return 0;
        return run_mhd(s);
}

static int http_server_on_wake(sd_event_source *es, void *userdata) {
        HttpServer *s = userdata;

        if (http_server_finished(s))
                return 0;
        return run_mhd(s);
}

unsigned http_connection_limit(const Config *config) {
        struct rlimit rl;
        uint64_t limit = HTTP_FD_RESERVE * 2;

        /* Every connection is a descriptor; the daemon's own (the store,
         * the journal, the bus, upstream sockets, the sandbox's pipes) get
         * HTTP_FD_RESERVE of the soft limit. */
        if (getrlimit(RLIMIT_NOFILE, &rl) >= 0)
                limit = rl.rlim_cur == RLIM_INFINITY ? 1000000 : (uint64_t) rl.rlim_cur;
        limit = limit > HTTP_FD_RESERVE + 16 ? limit - HTTP_FD_RESERVE : 16;
        if (config->http_max_connections > 0)
                limit = MIN(limit, config->http_max_connections);
        return (unsigned) MIN(limit, (uint64_t) 1000000);
}

void http_server_set_user_secret(HttpServer *s, const UserKeySecret *secret) {
        assert(s);
        assert(secret);
        s->user_secret = *secret;
}

int http_server_new(
        sd_event *event,
        int listen_fd,
        const Config *config,
        HttpHandler handler,
        void *userdata,
        HttpServer **ret) {
        _cleanup_close_ int fd = listen_fd;
        _cleanup_(http_server_freep) HttpServer *s = NULL;
        int r;

        assert(event);
        assert(config);
        assert(handler);
        assert(ret);

        s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->event = sd_event_ref(event);
        s->config = config;
        s->handler = handler;
        s->userdata = userdata;

        s->test_oom = fault_http_oom();
        r = random_bytes(s->session_secret, sizeof s->session_secret);
        if (r < 0)
                return log_error_errno(r, "Failed to make the secret of user session cookies");
        s->connection_limit = http_connection_limit(config);
        http_server_read_own_addresses(s);
        log_info(
                "HTTP: at most %u connections, %" PRIu64 " per client address (0: no limit).",
                s->connection_limit,
                config->http_max_connections_per_ip);

        s->daemon = MHD_start_daemon(
                MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG,
                0,
                NULL,
                NULL,
                http_server_on_request,
                s,
                MHD_OPTION_EXTERNAL_LOGGER,
                http_server_on_mhd_log,
                s,
                MHD_OPTION_LISTEN_SOCKET,
                fd,
                MHD_OPTION_NOTIFY_COMPLETED,
                http_server_on_completed,
                s,
                MHD_OPTION_NOTIFY_CONNECTION,
                http_server_on_connection_notify,
                s,
                MHD_OPTION_URI_LOG_CALLBACK,
                http_server_on_uri_log,
                s,
                MHD_OPTION_UNESCAPE_CALLBACK,
                http_server_on_unescape,
                s,
                MHD_OPTION_CONNECTION_LIMIT,
                s->connection_limit,
                MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                (unsigned) MIN(config->http_max_connections_per_ip, (uint64_t) UINT_MAX),
                /* The idle timeout, for a response the client does not
                 * read; a request has its own deadline (connection_wait()). */
                MHD_OPTION_CONNECTION_TIMEOUT,
                (unsigned) 60,
                /* MHD clears this per-connection pool on every request (at
                 * 64 KiB that was 61% of the instructions of a status
                 * request, callgrind). It holds the request head, a copy of
                 * the Cookie field and the response head: sized so that any
                 * head within HTTP_HEAD_MAX_BYTES still leaves room for the
                 * largest response head we make. Bodies are ours. */
                MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                (size_t) HTTP_CONNECTION_POOL_BYTES,
                MHD_OPTION_END);
        if (!s->daemon)
                return -EINVAL;
        fd = -1; /* MHD owns it now */

        {
                MhdEventSources sources = { 0 };

                r = mhd_attach_event(
                        event,
                        s->daemon,
                        &(const MhdEventHandlers){ http_server_on_io, http_server_on_timer, s, "http" },
                        &sources);
                s->io_source = sources.io;
                s->timer_source = sources.timer;
                if (r < 0)
                        return r;
        }
        r = sd_event_add_defer(event, &s->wake_source, http_server_on_wake, s);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(s->wake_source, SD_EVENT_OFF);
        (void) sd_event_source_set_description(s->wake_source, "http-wake");
        r = sd_event_add_time(
                event, &s->deadline_source, CLOCK_MONOTONIC, USEC_INFINITY, 0, http_server_on_deadline, s);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(s->deadline_source, SD_EVENT_OFF);
        (void) sd_event_source_set_description(s->deadline_source, "http-request-deadline");
        r = http_stream_hub_new(s, &s->streams);
        if (r < 0)
                return r;

        /* Requests first: a status poll that arrives while the pipeline's
         * or curl's sources are pending too is served before them (sd-event
         * dispatches one pending source per iteration, the most important
         * first). A request's own work is short (API.md's handlers do not
         * wait), the pipeline's sources are served as soon as no request
         * is ready, and the connection limit bounds how many can be. */
        sd_event_source *const sources[] = { s->io_source, s->timer_source, s->wake_source, s->deadline_source };
        for (size_t i = 0; i < ELEMENTSOF(sources); i++) {
                r = sd_event_source_set_priority(sources[i], SD_EVENT_PRIORITY_IMPORTANT);
                if (r < 0)
                        return r;
        }

        *ret = TAKE_PTR(s);
        return 0;
}

void http_server_quiesce(HttpServer *s) {
        MHD_socket fd;

        if (!s || s->quiesced)
                return;
        s->quiesced = true;
        fd = MHD_quiesce_daemon(s->daemon);
        if (fd != MHD_INVALID_SOCKET)
                (void) close(fd);
        http_stream_hub_quiesce(s->streams);
}

HttpServer *http_server_free(HttpServer *s) {
        if (!s)
                return NULL;
        /* A request still suspended (a query running at exit) is resumed as
         * failed: MHD_stop_daemon() then closes its connection, where it
         * would otherwise abort the daemon. MHD's callbacks during the stop
         * still find the event sources. */
        while (s->suspended_head) {
                HttpRequest *req = s->suspended_head;

                req->failed = true;
                http_request_resume(req);
        }
        /* The same for event streams; their owners hear of it as MHD closes
         * each connection (HTTP_STREAM_STOPPED). */
        http_stream_hub_abort(s->streams);
        if (s->daemon)
                MHD_stop_daemon(s->daemon);
        s->streams = http_stream_hub_free(s->streams);
        s->io_source = sd_event_source_disable_unref(s->io_source);
        s->timer_source = sd_event_source_disable_unref(s->timer_source);
        s->wake_source = sd_event_source_disable_unref(s->wake_source);
        s->deadline_source = sd_event_source_disable_unref(s->deadline_source);
        sd_event_unref(s->event);
        free(s);
        return NULL;
}
