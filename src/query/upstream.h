/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "query/destination.h"
#include "shared/api-error.h"
#include "shared/macro.h"
#include "shared/time-util.h"

/* One upstream HTTP exchange (API.md 8, "Upstream failures" and
 * "Destination policy"), asynchronous on an sd-event loop. libcurl stays
 * inside src/query/: this header has no libcurl type.
 *
 * What every exchange does: http/https only; TLS verification always on
 * against the system CA store; no proxy (the environment's *_proxy variables
 * are ignored, so no proxy can bypass the address check); gzip (and
 * deflate, br, zstd) accepted; the User-Agent "wikiweb/VERSION (+URL)
 * libcurl/VERSION"; a deadline; a response-size cap, refused from
 * Content-Length before any body arrives and counted while streaming (on the
 * decoded bytes); redirects (301, 302, 303, 307, 308) followed here, at most
 * UPSTREAM_MAX_REDIRECTS, each hop checked by the destination policy
 * (same host only) before it is requested; the resolved address of every
 * connection checked before the socket is created.
 *
 * Threading and ownership: everything runs on the event loop's thread. An
 * Upstream is shared by all the exchanges of the daemon (one libcurl multi
 * handle: its connection cache gives keep-alive); it must outlive every
 * UpstreamOperation and UpstreamJar made from it. An operation is owned by
 * the caller from upstream_start() until upstream_operation_free(); its
 * done callback runs exactly once, later, from a defer source of the event
 * loop (never inside upstream_start(), never inside a libcurl callback),
 * unless the operation is freed first: freeing cancels it and no callback
 * follows. The callback may free the operation, start others, or free
 * other operations. */

#define UPSTREAM_MAX_REDIRECTS 5
#define UPSTREAM_CONNECT_TIMEOUT_USEC (10 * USEC_PER_SEC)

typedef struct Upstream Upstream;
typedef struct UpstreamOperation UpstreamOperation;
/* A cookie jar (libcurl share): one per query, for the wiki's session. */
typedef struct UpstreamJar UpstreamJar;

/* Borrows event (a reference is taken) and policy (must outlive the
 * Upstream). max_response_bytes: the cap of one body
 * (WIKI_WEB_UPSTREAM_MAX_RESPONSE_BYTES). Returns 0, -ENOMEM, -EIO. */
int upstream_new(sd_event *event, const DestinationPolicy *policy, uint64_t max_response_bytes, Upstream **ret);
/* Every operation and jar must have been freed before. */
Upstream *upstream_free(Upstream *u);
DEFINE_TRIVIAL_CLEANUP_FUNC(Upstream *, upstream_free);

/* The connect timeout of every later exchange (default
 * UPSTREAM_CONNECT_TIMEOUT_USEC; never beyond a request's deadline). */
void upstream_set_connect_timeout(Upstream *u, usec_t timeout);

/* The event loop the Upstream runs on (borrowed). */
sd_event *upstream_get_event(const Upstream *u);

/* The User-Agent sent with every request: "wikiweb/VERSION (+CONTACT)
 * libcurl/VERSION", without the parenthesis when contact is NULL (the
 * operator's email or URL, WIKI_WEB_USER_AGENT_CONTACT, validated by the
 * config). */
int upstream_set_user_agent_contact(Upstream *u, const char *contact);
/* The User-Agent sent with every request (owned by u). */
const char *upstream_user_agent(const Upstream *u);

int upstream_jar_new(Upstream *u, UpstreamJar **ret);
/* Every operation using the jar must have been freed before. */
UpstreamJar *upstream_jar_free(UpstreamJar *j);
DEFINE_TRIVIAL_CLEANUP_FUNC(UpstreamJar *, upstream_jar_free);

/* Body bytes of a streamed response as they arrive (see UpstreamRequest).
 * Called from inside libcurl's write callback: it must not free op, nor
 * start or free any operation of this Upstream; it may do its own work
 * (parse, forward). Returns 0 to go on, or a negative errno to stop the
 * transfer: the exchange then ends as upstream_failed with
 * UpstreamResponse.stopped set, and the handler knows why. */
typedef int (*UpstreamBodyHandler)(UpstreamOperation *op, const void *data, size_t n, void *userdata);

typedef struct UpstreamRequest {
        const char *method;         /* "GET" or "POST"; NULL: GET */
        const char *url;            /* absolute http(s) URL */
        const char *const *headers; /* NULL-terminated "Name: value" lines, or NULL */
        const void *body;           /* POST body, or NULL */
        size_t body_size;           /* bytes at body */
        const char *content_type;   /* of the body, e.g. "application/json"; NULL: none */
        usec_t deadline;            /* CLOCK_MONOTONIC; 0 or USEC_INFINITY: none */
        UpstreamJar *jar;           /* cookies to send and keep, or NULL */
        /* Streaming: a 2xx answer of the last hop whose media type is
         * stream_type (e.g. "text/event-stream") has its body handed to
         * on_body (userdata as for done) piece by piece, as libcurl decodes
         * it, instead of being collected; the cap still counts every byte.
         * Any other answer (an error status, another type, a redirect) is
         * collected as usual. NULL: never. */
        const char *stream_type;
        UpstreamBodyHandler on_body;
} UpstreamRequest;
/* Everything in *req is copied by upstream_start(): nothing is borrowed
 * after it returns (the body and the headers included: they may hold a
 * secret, and the copies are wiped when the operation is freed). */

typedef struct UpstreamResponse {
        /* The outcome: 0 when the last hop answered with a 2xx status;
         * otherwise a negative errno (upstream_classify()'s, or -ENOMEM, or
         * the policy's -EPERM), api_error says what the client is told and
         * message what happened. */
        int error;
        ApiError api_error; /* when error < 0 */
        /* Already sanitized (API.md 2, sanitize_message()): safe for an error
         * response, the history and the log. NULL when error is 0. */
        char *message;

        /* The last hop's response, also for a non-2xx status (an LLM's error
         * body must be readable): status 0 when no response arrived. The body
         * is what arrived, at most the cap, NUL-terminated after body_size
         * (body is "" when empty, never NULL when status > 0). Raw upstream
         * bytes: the caller sanitizes anything taken from them into a
         * message. */
        long status;
        char *body;
        size_t body_size;
        /* The body went to on_body (body is then "" and body_size 0):
         * streamed_bytes were handed over. */
        bool streamed;
        uint64_t streamed_bytes;
        bool stopped;              /* on_body stopped the transfer */
        char *content_type;        /* header values, NULL when absent */
        char *retry_after;         /* raw value; see upstream_parse_retry_after() */
        char *mediawiki_api_error; /* MediaWiki-API-Error */
        char *url;                 /* the last hop's URL */
        unsigned redirects;        /* redirects followed */
        /* Why the policy refused, for tests and logs: "url", "redirect",
         * "address" or NULL (static string). */
        const char *denied_by;
} UpstreamResponse;

/* error is r->error. r is borrowed for the duration of the call; it stays
 * readable through upstream_operation_response() until the operation is
 * freed. */
typedef void (*UpstreamDone)(UpstreamOperation *op, int error, const UpstreamResponse *r, void *userdata);

/* Start an exchange. Returns 0 and the operation in *ret, or -EINVAL (bad
 * method or headers: a programming error), -ENOMEM. A URL the policy refuses
 * is not an error here: the callback reports destination_denied. */
int upstream_start(
        Upstream *u, const UpstreamRequest *req, UpstreamDone done, void *userdata, UpstreamOperation **ret);
/* Cancel (if running) and free; NULL is fine. */
UpstreamOperation *upstream_operation_free(UpstreamOperation *op);
DEFINE_TRIVIAL_CLEANUP_FUNC(UpstreamOperation *, upstream_operation_free);
/* NULL until the operation is done. */
const UpstreamResponse *upstream_operation_response(const UpstreamOperation *op);
/* Take the body out of the response (the caller frees it); the response's
 * body becomes NULL. */
char *upstream_operation_take_body(UpstreamOperation *op, size_t *ret_size);

/* How the three upstream clients (this exchange, llm-client.c's call and
 * wiki-client.c's operation) end an operation. upstream_completion_new():
 * the client's report, a one-shot defer source on event, off until
 * upstream_complete(); 0 or a negative errno. upstream_complete(): record
 * the end, *ret_error = error, *ret_api_error = api_error (or
 * _API_ERROR_INVALID when error is 0), and for an error *ret_message =
 * message (raw, NULL: the API error's default; it may point into what
 * *ret_message held) sanitized (API.md 2), replacing what it held (NULL
 * when out of memory); then enable the report, so that it always comes
 * from the loop, never from inside the caller. */
int upstream_completion_new(
        sd_event *event,
        sd_event_handler_t handler,
        void *userdata,
        const char *description,
        sd_event_source **ret);
void upstream_complete(
        sd_event_source *defer,
        int error,
        ApiError api_error,
        const char *message,
        int *ret_error,
        ApiError *ret_api_error,
        char **ret_message);

/* The facts upstream_classify() decides on. */
typedef struct UpstreamOutcome {
        int curl_code;        /* CURLcode of the last hop */
        long http_status;     /* 0: none */
        bool denied;          /* the policy refused a URL, redirect or address */
        bool over_cap;        /* the body passed the cap while streaming */
        bool deadline_passed; /* the request's deadline has passed */
        bool connected;       /* a connection had been established */
        bool too_many_redirects;
        bool bad_redirect; /* a 3xx without a usable Location */
} UpstreamOutcome;

/* The one mapping of an exchange's end to an API error (API.md 8): policy
 * destination_denied (-EPERM, -EPROTONOSUPPORT for a scheme libcurl
 * refused); over the cap upstream_response_too_large (-EFBIG); the
 * deadline query_timeout (-ETIMEDOUT); TLS tls_failed (-EPROTO); DNS,
 * refused, unreachable, connect timeout connectivity_failed
 * (-EHOSTUNREACH, -ECONNREFUSED, -ETIMEDOUT); other failures and non-2xx
 * upstream_failed (-EIO; -ELOOP for too many redirects, -EBADMSG for a
 * redirect without a usable Location); libcurl out of memory
 * internal_error (-ENOMEM). Returns 0 for a 2xx, else the negative errno
 * and the API error in *ret_api_error (set only then, as sd_bus_error
 * *ret_error is). Pure. */
int upstream_classify(const UpstreamOutcome *o, ApiError *ret_api_error);

/* Whether a Content-Type value names the media type type (its part before
 * any ";" parameters, case-insensitive, surrounding spaces ignored). Pure. */
bool upstream_media_type_is(const char *content_type, const char *type);

/* Retry-After as seconds: delta-seconds (at most 1 day) or an HTTP date
 * relative to now_realtime. Returns 0 and *ret_usec, or -EINVAL. */
int upstream_parse_retry_after(const char *value, usec_t now_realtime, usec_t *ret_usec);
