/* SPDX-License-Identifier: MIT */
#include <microhttpd.h>
#include <stdarg.h>
#include <sys/epoll.h>

#include "http/httpd.h"
#include "shared/log.h"
#include "shared/macro.h"
#include "shared/parse-util.h"
#include "shared/sanitize.h"
#include "shared/time-util.h"

struct HttpServer {
        sd_event *event;
        const Config *config;
        struct MHD_Daemon *daemon;
        sd_event_source *io_source;
        sd_event_source *timer_source;
        sd_event_source *wake_source; /* runs MHD once more after a resume */
        HttpHandler handler;
        void *userdata;
        unsigned n_requests; /* requests alive (begun, not yet completed) */
        bool quiesced;
};

struct HttpRequest {
        HttpServer *server;
        struct MHD_Connection *connection;

        HttpMethod method;
        RouteMatch route;
        bool is_api;
        OriginVerdict origin;
        char *origin_value; /* copy, for Access-Control-Allow-Origin */

        char token[SESSION_TOKEN_LEN + 1];
        bool new_session;
        SessionKey session;

        char *content_type;
        uint8_t *body;
        size_t body_size, body_allocated;
        bool too_large;
        size_t discarded;

        bool responded; /* a response was queued */
        bool suspended;
        struct MHD_Response *pending; /* completed while suspended */
        unsigned pending_status;
};

/* Request bodies are accumulated up to the configured limit; past it we
 * stop storing and answer 413. A client that keeps streaming after that is
 * cut off once it has sent this much more. */
#define DISCARD_AFTER_LIMIT_BYTES (1024 * 1024)

static void request_free(HttpRequest *req) {
        if (!req)
                return;
        if (req->pending)
                MHD_destroy_response(req->pending);
        free(req->origin_value);
        free(req->content_type);
        free(req->body);
        free(req);
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

static int add_header(struct MHD_Response *r, const char *name, const char *value) {
        return MHD_add_response_header(r, name, value) == MHD_YES ? 0 : -ENOMEM;
}

/* The headers every response carries (API.md 1, 3, 4). */
static int add_common_headers(HttpRequest *req, struct MHD_Response *r) {
        const Config *c = req->server->config;
        int k = 0;

        k |= add_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        k |= add_header(r, "X-Content-Type-Options", "nosniff");
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

static HttpHandlerResult queue_or_store(HttpRequest *req, struct MHD_Response *r, unsigned status) {
        if (req->suspended) {
                /* MHD only takes a response from inside the access handler:
                 * keep it and resume; the handler queues it on the next call. */
                if (req->pending)
                        MHD_destroy_response(req->pending);
                req->pending = r;
                req->pending_status = status;
                req->suspended = false;
                MHD_resume_connection(req->connection);
                /* MHD picks up a resumed connection only when it runs, and
                 * nothing on its sockets may wake it: run it from the loop. */
                (void) sd_event_source_set_enabled(req->server->wake_source, SD_EVENT_ONESHOT);
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

HttpHandlerResult http_reply_bytes(
        HttpRequest *req,
        unsigned status,
        const char *content_type,
        const void *data,
        size_t size,
        const char *const *extra_headers) {
        struct MHD_Response *r;

        r = MHD_create_response_from_buffer(size, (void *) (size > 0 ? data : ""), MHD_RESPMEM_MUST_COPY);
        if (!r) {
                log_oom();
                return HTTP_HANDLED;
        }
        if (add_common_headers(req, r) < 0 ||
            (content_type && add_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type) < 0))
                log_oom();
        for (const char *const *h = extra_headers; h && h[0] && h[1]; h += 2)
                (void) add_header(r, h[0], h[1]);
        return queue_or_store(req, r, status);
}

HttpHandlerResult http_reply(
        HttpRequest *req, unsigned status, const char *json_body, const char *const *extra_headers) {
        return http_reply_bytes(
                req,
                status,
                json_body ? "application/json; charset=utf-8" : NULL,
                json_body,
                json_body ? strlen(json_body) : 0,
                extra_headers);
}

/* Escape a UTF-8 string as a JSON string literal (with quotes). */
static char *json_quote(const char *s) {
        size_t n = strlen(s), k = 0;
        char *out = malloc(n * 6 + 3);

        if (!out)
                return NULL;
        out[k++] = '"';
        for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
                if (*p == '"' || *p == '\\') {
                        out[k++] = '\\';
                        out[k++] = (char) *p;
                } else if (*p < 0x20 || *p == 0x7f) {
                        k += (size_t) snprintf(out + k, 7, "\\u%04x", *p);
                } else
                        out[k++] = (char) *p;
        }
        out[k++] = '"';
        out[k] = 0;
        return out;
}

HttpHandlerResult http_reply_error(
        HttpRequest *req, ApiError error, const char *message, const char *const *extra_headers) {
        _cleanup_free_ char *clean = NULL, *quoted = NULL, *body = NULL;
        const char *m = message ? message : api_error_default_message(error);

        if (sanitize_message(m, strlen(m), &clean) < 0 || !(quoted = json_quote(clean)) ||
            asprintf(&body, "{\"error\":{\"code\":\"%s\",\"message\":%s}}", api_error_to_string(error), quoted) <
                    0) {
                body = NULL;
                log_oom();
                return http_reply(
                        req,
                        500,
                        "{\"error\":{\"code\":\"internal_error\",\"message\":\"Internal error\"}}",
                        extra_headers);
        }
        return http_reply(req, api_error_http_status(error), body, extra_headers);
}

void http_request_suspend(HttpRequest *req) {
        if (req->suspended)
                return;
        req->suspended = true;
        MHD_suspend_connection(req->connection);
}

unsigned http_server_active_count(const HttpServer *s) {
        return s ? s->n_requests : 0;
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

/* Everything decided from the request line and headers alone, before any
 * body byte is read (API.md 7: origin → size → ...). Returns true when a
 * response was queued. */
static bool request_begin(HttpRequest *req, const char *url, const char *method) {
        struct MHD_Connection *c = req->connection;
        const Config *cfg = req->server->config;
        const char *v;
        int r;

        req->method = http_method_from_string(method);
        req->is_api = router_path_is_api(url);

        if (!req->is_api) {
                http_reply_error(req, API_ERROR_NOT_FOUND, NULL, NULL);
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
        if (session_cookie_parse(header(c, MHD_HTTP_HEADER_COOKIE), req->token) <= 0) {
                r = session_token_new(req->token);
                if (r < 0) {
                        log_error_errno(r, "Failed to make a session token");
                        http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
                        return true;
                }
                req->new_session = true;
        }
        r = session_key_from_token(req->token, &req->session);
        if (r < 0) {
                log_error_errno(r, "Failed to hash the session token");
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

static enum MHD_Result on_request(
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

        if (!req) {
                req = calloc(1, sizeof *req);
                if (!req)
                        return MHD_NO;
                req->server = s;
                req->connection = connection;
                *con_cls = req;
                s->n_requests++;
                (void) request_begin(req, url, method);
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
        if (req->too_large) {
                http_reply_error(req, API_ERROR_REQUEST_TOO_LARGE, NULL, NULL);
                return MHD_YES;
        }
        if (s->handler(req, s->userdata) == HTTP_SUSPENDED && !req->suspended && !req->pending)
                log_error("Handler claimed to suspend but did not.");
        return MHD_YES;
}

static void on_completed(
        void *cls, struct MHD_Connection *connection, void **con_cls, enum MHD_RequestTerminationCode toe) {
        HttpRequest *req = *con_cls;

        if (req)
                req->server->n_requests--;
        request_free(req);
        *con_cls = NULL;
}

_printf_(2, 0) static void on_mhd_log(void *arg, const char *fmt, va_list ap) {
        char buf[512];

        (void) vsnprintf(buf, sizeof buf, fmt, ap);
        log_debug("microhttpd: %s", buf);
}

static int arm_timer(HttpServer *s) {
        MHD_UNSIGNED_LONG_LONG timeout_ms;
        int r;

        if (MHD_get_timeout(s->daemon, &timeout_ms) != MHD_YES)
                return sd_event_source_set_enabled(s->timer_source, SD_EVENT_OFF);

        /* MHD_get_timeout() is relative, in milliseconds. */
        r = sd_event_source_set_time(
                s->timer_source, usec_add(now(CLOCK_MONOTONIC), (usec_t) timeout_ms * USEC_PER_MSEC));
        if (r < 0)
                return r;
        return sd_event_source_set_enabled(s->timer_source, SD_EVENT_ONESHOT);
}

static int run_mhd(HttpServer *s) {
        int r;

        if (MHD_run(s->daemon) != MHD_YES)
                log_warning("MHD_run() failed.");
        r = arm_timer(s);
        if (r < 0)
                log_warning_errno(r, "Failed to arm the HTTP timer");
        return 0;
}

static int on_io(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        return run_mhd(userdata);
}

static int on_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        return run_mhd(userdata);
}

static int on_wake(sd_event_source *es, void *userdata) {
        return run_mhd(userdata);
}

int http_server_new(
        sd_event *event,
        int listen_fd,
        const Config *config,
        HttpHandler handler,
        void *userdata,
        HttpServer **ret) {
        _cleanup_close_ int fd = listen_fd;
        const union MHD_DaemonInfo *info;
        HttpServer *s;
        int r;

        s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->event = sd_event_ref(event);
        s->config = config;
        s->handler = handler;
        s->userdata = userdata;

        s->daemon = MHD_start_daemon(
                MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG,
                0,
                NULL,
                NULL,
                on_request,
                s,
                MHD_OPTION_EXTERNAL_LOGGER,
                on_mhd_log,
                s,
                MHD_OPTION_LISTEN_SOCKET,
                fd,
                MHD_OPTION_NOTIFY_COMPLETED,
                on_completed,
                s,
                MHD_OPTION_CONNECTION_LIMIT,
                (unsigned) 1024,
                MHD_OPTION_CONNECTION_TIMEOUT,
                (unsigned) 60,
                /* MHD clears this per-connection pool on every request: at
                 * 64 KiB that was 61% of the instructions of a status request
                 * (callgrind). Headers must fit in it; bodies are ours. */
                MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                (size_t) (16 * 1024),
                MHD_OPTION_END);
        if (!s->daemon) {
                http_server_free(s);
                return -EINVAL;
        }
        fd = -1; /* MHD owns it now */

        info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_EPOLL_FD);
        if (!info) {
                http_server_free(s);
                return -EINVAL;
        }
        r = sd_event_add_io(event, &s->io_source, info->epoll_fd, EPOLLIN, on_io, s);
        if (r < 0) {
                http_server_free(s);
                return r;
        }
        (void) sd_event_source_set_description(s->io_source, "http-io");
        r = sd_event_add_time(event, &s->timer_source, CLOCK_MONOTONIC, USEC_INFINITY, 0, on_timer, s);
        if (r < 0) {
                http_server_free(s);
                return r;
        }
        (void) sd_event_source_set_description(s->timer_source, "http-timer");
        r = sd_event_add_defer(event, &s->wake_source, on_wake, s);
        if (r < 0) {
                http_server_free(s);
                return r;
        }
        (void) sd_event_source_set_enabled(s->wake_source, SD_EVENT_OFF);
        (void) sd_event_source_set_description(s->wake_source, "http-wake");

        *ret = s;
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
}

HttpServer *http_server_free(HttpServer *s) {
        if (!s)
                return NULL;
        sd_event_source_disable_unref(s->io_source);
        sd_event_source_disable_unref(s->timer_source);
        sd_event_source_disable_unref(s->wake_source);
        if (s->daemon)
                MHD_stop_daemon(s->daemon);
        sd_event_unref(s->event);
        free(s);
        return NULL;
}
