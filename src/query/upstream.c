/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <assert.h>
#include <stdarg.h>
#include <curl/curl.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "config-version.h"
#include "query/curl-glue.h"
#include "query/upstream.h"
#include "shared/log.h"
#include "shared/macro.h"
#include "shared/sanitize.h"
#include "shared/strbuf.h"

struct Upstream {
        sd_event *event;
        CurlGlue *glue;
        const DestinationPolicy *policy;
        uint64_t max_response_bytes;
        usec_t connect_timeout;
        char *user_agent;
};

struct UpstreamJar {
        CURLSH *share;
};

struct UpstreamOperation {
        Upstream *upstream;
        UpstreamDone done;
        void *userdata;

        /* The request, copied. */
        char *method;
        char *url; /* the current hop's */
        struct curl_slist *headers;
        char *body;
        size_t body_size;
        usec_t deadline;
        UpstreamJar *jar;
        char *stream_type;
        UpstreamBodyHandler on_body;

        /* The current hop. */
        CURL *easy;
        DestinationUrl hop;
        char errbuf[CURL_ERROR_SIZE];
        char *buf;
        size_t buf_size, buf_alloc;
        uint64_t received; /* body bytes of this hop, collected or streamed */
        bool body_decided; /* whether the body streams is known (first bytes seen) */
        bool streaming;    /* the body goes to on_body */
        bool stopped;      /* on_body stopped the transfer */
        bool over_cap;
        bool denied_address;
        char denied_address_text[INET6_ADDRSTRLEN];

        sd_event_source *defer; /* reports the result */
        bool finished;
        UpstreamResponse response;
};

static void upstream_on_transfer_done(CURL *easy, int error, CURLcode result, void *userdata);

int upstream_new(sd_event *event, const DestinationPolicy *policy, uint64_t max_response_bytes, Upstream **ret) {
        _cleanup_(upstream_freep) Upstream *u = NULL;
        int r;

        assert(event);
        assert(policy);
        assert(ret);

        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                return -EIO;

        u = calloc(1, sizeof *u);
        if (!u)
                return -ENOMEM;
        u->event = sd_event_ref(event);
        u->policy = policy;
        u->max_response_bytes = max_response_bytes;
        u->connect_timeout = UPSTREAM_CONNECT_TIMEOUT_USEC;

        r = upstream_set_user_agent_contact(u, NULL);
        if (r < 0)
                return r;

        r = curl_glue_new(event, upstream_on_transfer_done, u, &u->glue);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(u);
        return 0;
}

Upstream *upstream_free(Upstream *u) {
        if (!u)
                return NULL;
        curl_glue_free(u->glue);
        sd_event_unref(u->event);
        free(u->user_agent);
        free(u);
        return NULL;
}

void upstream_set_connect_timeout(Upstream *u, usec_t timeout) {
        assert(u);
        u->connect_timeout = timeout > 0 ? timeout : UPSTREAM_CONNECT_TIMEOUT_USEC;
}

sd_event *upstream_get_event(const Upstream *u) {
        assert(u);
        return u->event;
}

int upstream_set_user_agent_contact(Upstream *u, const char *contact) {
        const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
        char *ua;

        assert(u);
        if (asprintf(
                    &ua,
                    "%s/%s%s%s%s libcurl/%s",
                    PACKAGE_NAME,
                    PACKAGE_VERSION,
                    contact ? " (+" : "",
                    contact ? contact : "",
                    contact ? ")" : "",
                    v && v->version ? v->version : "unknown") < 0)
                return -ENOMEM;
        free(u->user_agent);
        u->user_agent = ua;
        return 0;
}

const char *upstream_user_agent(const Upstream *u) {
        assert(u);
        return u->user_agent;
}

int upstream_jar_new(Upstream *u, UpstreamJar **ret) {
        _cleanup_(upstream_jar_freep) UpstreamJar *j = NULL;

        assert(ret);

        j = calloc(1, sizeof *j);
        if (!j)
                return -ENOMEM;
        j->share = curl_share_init();
        if (!j->share || curl_share_setopt(j->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_COOKIE) != CURLSHE_OK)
                return -ENOMEM;
        *ret = TAKE_PTR(j);
        return 0;
}

UpstreamJar *upstream_jar_free(UpstreamJar *j) {
        if (!j)
                return NULL;
        if (j->share)
                curl_share_cleanup(j->share);
        free(j);
        return NULL;
}

/* ---- classification ---- */

/* A failure as upstream_classify() reports it. */
static int upstream_classified(int error, ApiError api_error, ApiError *ret_api_error) {
        *ret_api_error = api_error;
        return error;
}

int upstream_classify(const UpstreamOutcome *o, ApiError *ret_api_error) {
        assert(o);
        assert(ret_api_error);

        if (o->denied)
                return upstream_classified(-EPERM, API_ERROR_DESTINATION_DENIED, ret_api_error);
        if (o->over_cap || o->curl_code == CURLE_FILESIZE_EXCEEDED)
                return upstream_classified(-EFBIG, API_ERROR_UPSTREAM_RESPONSE_TOO_LARGE, ret_api_error);

        switch ((CURLcode) o->curl_code) {
        case CURLE_OK:
                if (o->too_many_redirects)
                        return upstream_classified(-ELOOP, API_ERROR_UPSTREAM_FAILED, ret_api_error);
                if (o->bad_redirect)
                        return upstream_classified(-EBADMSG, API_ERROR_UPSTREAM_FAILED, ret_api_error);
                if (o->http_status >= 200 && o->http_status <= 299)
                        return 0;
                return upstream_classified(-EIO, API_ERROR_UPSTREAM_FAILED, ret_api_error);

        case CURLE_OPERATION_TIMEDOUT:
                /* curl's overall timeout is the deadline; only a timeout
                 * before any connection, with time left, is the connect
                 * timeout. */
                if (o->deadline_passed || o->connected)
                        return upstream_classified(-ETIMEDOUT, API_ERROR_QUERY_TIMEOUT, ret_api_error);
                return upstream_classified(-ETIMEDOUT, API_ERROR_CONNECTIVITY_FAILED, ret_api_error);

        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_RESOLVE_PROXY:
                return upstream_classified(-EHOSTUNREACH, API_ERROR_CONNECTIVITY_FAILED, ret_api_error);
        case CURLE_COULDNT_CONNECT:
                return upstream_classified(-ECONNREFUSED, API_ERROR_CONNECTIVITY_FAILED, ret_api_error);

        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CERTPROBLEM:
        case CURLE_SSL_CIPHER:
        case CURLE_SSL_CACERT_BADFILE:
        case CURLE_SSL_ISSUER_ERROR:
        case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
        case CURLE_SSL_INVALIDCERTSTATUS:
        case CURLE_SSL_CRL_BADFILE:
        case CURLE_SSL_ENGINE_NOTFOUND:
        case CURLE_SSL_ENGINE_SETFAILED:
        case CURLE_SSL_ENGINE_INITFAILED:
        case CURLE_USE_SSL_FAILED:
                return upstream_classified(-EPROTO, API_ERROR_TLS_FAILED, ret_api_error);

        case CURLE_UNSUPPORTED_PROTOCOL:
                return upstream_classified(-EPROTONOSUPPORT, API_ERROR_DESTINATION_DENIED, ret_api_error);

        case CURLE_OUT_OF_MEMORY:
                return upstream_classified(-ENOMEM, API_ERROR_INTERNAL_ERROR, ret_api_error);

        default:
                /* Send/receive errors, an empty reply, bad encoding, a
                 * weird reply, ...: the upstream failed. */
                if (o->deadline_passed)
                        return upstream_classified(-ETIMEDOUT, API_ERROR_QUERY_TIMEOUT, ret_api_error);
                return upstream_classified(-EIO, API_ERROR_UPSTREAM_FAILED, ret_api_error);
        }
}

int upstream_parse_retry_after(const char *value, usec_t now_realtime, usec_t *ret_usec) {
        struct tm tm = { 0 };
        const char *end;
        time_t t;

        if (!value)
                return -EINVAL;
        while (*value == ' ' || *value == '\t')
                value++;
        if (*value >= '0' && *value <= '9') {
                uint64_t s = 0;
                const char *p = value;

                for (; *p >= '0' && *p <= '9'; p++) {
                        s = s * 10 + (uint64_t) (*p - '0');
                        if (s > 86400)
                                return -EINVAL;
                }
                while (*p == ' ' || *p == '\t')
                        p++;
                if (*p)
                        return -EINVAL;
                *ret_usec = s * USEC_PER_SEC;
                return 0;
        }
        /* IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT". */
        end = strptime(value, "%a, %d %b %Y %H:%M:%S GMT", &tm);
        if (!end || *end)
                return -EINVAL;
        t = timegm(&tm);
        if (t < 0)
                return -EINVAL;
        if ((usec_t) t * USEC_PER_SEC <= now_realtime)
                *ret_usec = 0;
        else if ((usec_t) t * USEC_PER_SEC - now_realtime > 86400 * USEC_PER_SEC)
                return -EINVAL;
        else
                *ret_usec = (usec_t) t * USEC_PER_SEC - now_realtime;
        return 0;
}

/* ---- one operation ---- */

static void upstream_response_done(UpstreamResponse *r) {
        free(r->message);
        free(r->body);
        free(r->content_type);
        free(r->retry_after);
        free(r->mediawiki_api_error);
        free(r->url);
        *r = (UpstreamResponse){ 0 };
}

static void upstream_operation_stop_hop(UpstreamOperation *op) {
        if (op->easy) {
                curl_glue_remove(op->upstream->glue, op->easy);
                curl_easy_cleanup(op->easy);
                op->easy = NULL;
        }
        free(op->buf);
        op->buf = NULL;
        op->buf_size = op->buf_alloc = 0;
        op->received = 0;
        op->body_decided = op->streaming = op->stopped = false;
        op->over_cap = false;
        op->denied_address = false;
        op->errbuf[0] = 0;
}

UpstreamOperation *upstream_operation_free(UpstreamOperation *op) {
        if (!op)
                return NULL;
        upstream_operation_stop_hop(op);
        sd_event_source_disable_unref(op->defer);
        free(op->method);
        free(op->url);
        free(op->stream_type);
        /* Headers may carry a secret (Authorization: Bearer ...). */
        for (struct curl_slist *l = op->headers; l; l = l->next)
                if (l->data)
                        explicit_bzero(l->data, strlen(l->data));
        curl_slist_free_all(op->headers);
        if (op->body) {
                explicit_bzero(op->body, op->body_size);
                free(op->body);
        }
        upstream_response_done(&op->response);
        free(op);
        return NULL;
}

const UpstreamResponse *upstream_operation_response(const UpstreamOperation *op) {
        assert(op);
        return op->finished ? &op->response : NULL;
}

char *upstream_operation_take_body(UpstreamOperation *op, size_t *ret_size) {
        assert(op);

        if (ret_size)
                *ret_size = op->response.body_size;
        op->response.body_size = 0;
        return TAKE_PTR(op->response.body);
}

static int upstream_on_defer(sd_event_source *s, void *userdata) {
        UpstreamOperation *op = userdata;

        (void) sd_event_source_set_enabled(op->defer, SD_EVENT_OFF);
        /* The callback may free op: nothing after it. */
        op->done(op, op->response.error, &op->response, op->userdata);
        return 0;
}

int upstream_completion_new(
        sd_event *event,
        sd_event_handler_t handler,
        void *userdata,
        const char *description,
        sd_event_source **ret) {
        int r;

        assert(event);
        assert(handler);
        assert(ret);

        r = sd_event_add_defer(event, ret, handler, userdata);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(*ret, SD_EVENT_OFF);
        (void) sd_event_source_set_description(*ret, description);
        return 0;
}

void upstream_complete(
        sd_event_source *defer,
        int error,
        ApiError api_error,
        const char *message,
        int *ret_error,
        ApiError *ret_api_error,
        char **ret_message) {
        const char *name = NULL;
        int r;

        assert(defer);
        assert(ret_error);
        assert(ret_api_error);
        assert(ret_message);

        *ret_error = error;
        *ret_api_error = error < 0 ? api_error : _API_ERROR_INVALID;
        if (error < 0) {
                const char *m = message ? message : api_error_default_message(api_error);
                char *sanitized = NULL;

                /* Sanitized first: m may point into the old message. */
                if (sanitize_message(m, strlen(m), &sanitized) < 0)
                        sanitized = NULL;
                free(*ret_message);
                *ret_message = sanitized;
        }
        r = sd_event_source_set_enabled(defer, SD_EVENT_ONESHOT);
        if (r < 0) {
                (void) sd_event_source_get_description(defer, &name);
                log_error_errno(r, "%s: cannot schedule a completion", name ? name : "upstream");
        }
}

/* Record the end of the operation and schedule the report: error 0 for a
 * 2xx, else a negative errno and the API error. message: raw, sanitized
 * here; NULL for the API error's default message. */
static void upstream_operation_finish(UpstreamOperation *op, int error, ApiError api_error, const char *message) {
        op->finished = true;
        if (!op->response.url)
                op->response.url = strdup(op->url);
        upstream_operation_stop_hop(op);
        upstream_complete(
                op->defer,
                error,
                api_error,
                message,
                &op->response.error,
                &op->response.api_error,
                &op->response.message);
}

bool upstream_media_type_is(const char *content_type, const char *type) {
        size_t n;

        if (!content_type || !type)
                return false;
        content_type += strspn(content_type, " \t");
        n = strcspn(content_type, ";");
        while (n > 0 && strchr(" \t", content_type[n - 1]))
                n--;
        return n == strlen(type) && strncasecmp(content_type, type, n) == 0;
}

/* At the first body bytes of a hop: whether they go to on_body. The status
 * and the headers are known by then. */
static bool upstream_operation_wants_stream(UpstreamOperation *op) {
        struct curl_header *h = NULL;
        long status = 0;

        if (!op->on_body)
                return false;
        if (curl_easy_getinfo(op->easy, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK || status < 200 ||
            status > 299)
                return false;
        if (curl_easy_header(op->easy, "Content-Type", 0, CURLH_HEADER, -1, &h) != CURLHE_OK || !h)
                return false;
        return upstream_media_type_is(h->value, op->stream_type);
}

static size_t upstream_write_callback(char *ptr, size_t size, size_t nmemb, void *userdata) {
        UpstreamOperation *op = userdata;
        size_t n = size * nmemb;
        uint64_t cap = op->upstream->max_response_bytes;

        if (n > cap || op->received > cap - n) {
                op->over_cap = true;
                return 0; /* CURLE_WRITE_ERROR */
        }
        op->received += n;
        if (!op->body_decided) {
                op->body_decided = true;
                op->streaming = upstream_operation_wants_stream(op);
        }
        if (op->streaming) {
                /* Handed over at once: nothing waits for the end. */
                if (op->on_body(op, ptr, n, op->userdata) < 0) {
                        op->stopped = true;
                        return 0; /* CURLE_WRITE_ERROR */
                }
                return n;
        }
        if (op->buf_size + n + 1 > op->buf_alloc) {
                size_t a = MAX(op->buf_alloc * 2, (size_t) 4096);
                char *b;

                while (a < op->buf_size + n + 1)
                        a *= 2;
                a = MIN(a, (size_t) cap + 1);
                b = realloc(op->buf, a);
                if (!b)
                        return 0;
                op->buf = b;
                op->buf_alloc = a;
        }
        memcpy(op->buf + op->buf_size, ptr, n);
        op->buf_size += n;
        op->buf[op->buf_size] = 0;
        return n;
}

static curl_socket_t
        upstream_opensocket_callback(void *userdata, curlsocktype purpose, struct curl_sockaddr *address) {
        UpstreamOperation *op = userdata;
        int fd;

        if (purpose != CURLSOCKTYPE_IPCXN || !address)
                return CURL_SOCKET_BAD;
        if (!destination_address_allowed(
                    op->upstream->policy, op->hop.host, &address->addr, (socklen_t) address->addrlen)) {
                const void *a = NULL;

                op->denied_address = true;
                if (address->family == AF_INET)
                        a = &((const struct sockaddr_in *) &address->addr)->sin_addr;
                else if (address->family == AF_INET6)
                        a = &((const struct sockaddr_in6 *) &address->addr)->sin6_addr;
                if (!a ||
                    !inet_ntop(address->family, a, op->denied_address_text, sizeof op->denied_address_text))
                        memcpy(op->denied_address_text, "?", 2);
                return CURL_SOCKET_BAD;
        }
        fd = socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
        return fd < 0 ? CURL_SOCKET_BAD : fd;
}

static bool upstream_operation_deadline_passed(const UpstreamOperation *op) {
        return op->deadline != 0 && op->deadline != USEC_INFINITY && now(CLOCK_MONOTONIC) >= op->deadline;
}

#define SETOPT(easy, opt, val)                                          \
        do {                                                            \
                if (curl_easy_setopt((easy), (opt), (val)) != CURLE_OK) \
                        return -EIO;                                    \
        } while (0)

/* Start op->url as a new hop. Returns 0, or a negative errno; a policy
 * refusal is not an error here: the caller checked the URL. */
static int upstream_operation_start_hop(UpstreamOperation *op) {
        Upstream *u = op->upstream;
        CURL *e;
        usec_t timeout = 0, connect_timeout = u->connect_timeout;
        int r;

        if (op->deadline != 0 && op->deadline != USEC_INFINITY) {
                usec_t n = now(CLOCK_MONOTONIC);
                timeout = op->deadline > n ? op->deadline - n : 1;
                connect_timeout = MIN(connect_timeout, timeout);
        }

        e = op->easy = curl_easy_init();
        if (!e)
                return -ENOMEM;
        SETOPT(e, CURLOPT_URL, op->url);
        SETOPT(e, CURLOPT_PROTOCOLS_STR, "http,https");
        SETOPT(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
        SETOPT(e, CURLOPT_FOLLOWLOCATION, 0L);
        SETOPT(e, CURLOPT_PROXY, "");
        SETOPT(e, CURLOPT_NOPROXY, "*");
        SETOPT(e, CURLOPT_NOSIGNAL, 1L);
        SETOPT(e, CURLOPT_SSL_VERIFYPEER, 1L);
        SETOPT(e, CURLOPT_SSL_VERIFYHOST, 2L);
        SETOPT(e, CURLOPT_ACCEPT_ENCODING, "");
        SETOPT(e, CURLOPT_USERAGENT, u->user_agent);
        SETOPT(e, CURLOPT_PRIVATE, op);
        SETOPT(e, CURLOPT_ERRORBUFFER, op->errbuf);
        SETOPT(e, CURLOPT_WRITEFUNCTION, upstream_write_callback);
        SETOPT(e, CURLOPT_WRITEDATA, op);
        SETOPT(e, CURLOPT_OPENSOCKETFUNCTION, upstream_opensocket_callback);
        SETOPT(e, CURLOPT_OPENSOCKETDATA, op);
        SETOPT(e, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t) u->max_response_bytes);
        /* Rounded up: curl's timeout then fires at or after the deadline, so
         * upstream_classify() sees it passed (query_timeout, not a connect
         * timeout). */
        SETOPT(e,
               CURLOPT_CONNECTTIMEOUT_MS,
               (long) MAX((connect_timeout + USEC_PER_MSEC - 1) / USEC_PER_MSEC, (usec_t) 1));
        if (timeout > 0)
                SETOPT(e,
                       CURLOPT_TIMEOUT_MS,
                       (long) MAX((timeout + USEC_PER_MSEC - 1) / USEC_PER_MSEC, (usec_t) 1));
        SETOPT(e, CURLOPT_HTTPHEADER, op->headers);
        if (op->jar) {
                SETOPT(e, CURLOPT_SHARE, op->jar->share);
                SETOPT(e, CURLOPT_COOKIEFILE, ""); /* the cookie engine, no file */
        }
        if (streq(op->method, "POST")) {
                SETOPT(e, CURLOPT_POST, 1L);
                SETOPT(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) op->body_size);
                SETOPT(e, CURLOPT_POSTFIELDS, op->body ? op->body : "");
        } else
                SETOPT(e, CURLOPT_HTTPGET, 1L);

        r = curl_glue_add(u->glue, e);
        if (r < 0)
                return r;
        return 0;
}

static char *upstream_header_dup(CURL *e, const char *name) {
        struct curl_header *h = NULL;

        if (curl_easy_header(e, name, 0, CURLH_HEADER, -1, &h) != CURLHE_OK || !h || !h->value)
                return NULL;
        return strdup(h->value);
}

/* One hop's transfer ended: error (0 or -EIO) says less than result, which
 * upstream_classify() maps. */
static void upstream_on_transfer_done(CURL *easy, int error, CURLcode result, void *userdata) {
        Upstream *u = userdata;
        UpstreamOperation *op = NULL;
        UpstreamOutcome o = { .curl_code = result };
        ApiError api_error = _API_ERROR_INVALID;
        long status = 0;
        char *redirect = NULL;
        _cleanup_free_ char *msg = NULL;
        int r;

        if (curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **) &op) != CURLE_OK || !op) {
                curl_glue_remove(u->glue, easy);
                return;
        }
        assert(op->easy == easy);

        (void) curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
        {
                char *ip = NULL;
                o.connected = curl_easy_getinfo(easy, CURLINFO_PRIMARY_IP, &ip) == CURLE_OK && ip && *ip &&
                        !op->denied_address;
                if (status > 0)
                        o.connected = true;
        }

        /* Keep the last hop's response. */
        {
                unsigned redirects = op->response.redirects;
                upstream_response_done(&op->response);
                op->response.redirects = redirects;
        }
        op->response.status = status;
        op->response.url = strdup(op->url);
        op->response.streamed = op->streaming;
        op->response.streamed_bytes = op->streaming ? op->received : 0;
        op->response.stopped = op->stopped;
        if (status > 0) {
                op->response.content_type = upstream_header_dup(easy, "Content-Type");
                op->response.retry_after = upstream_header_dup(easy, "Retry-After");
                op->response.mediawiki_api_error = upstream_header_dup(easy, "MediaWiki-API-Error");
                op->response.body = op->buf ? TAKE_PTR(op->buf) : strdup("");
                op->response.body_size = op->buf_size;
                op->buf_size = op->buf_alloc = 0;
        }

        o.http_status = status;
        o.denied = op->denied_address;
        o.over_cap = op->over_cap;
        o.deadline_passed = upstream_operation_deadline_passed(op);

        if (result == CURLE_OK &&
            (status == 301 || status == 302 || status == 303 || status == 307 || status == 308)) {
                DestinationUrl next;

                (void) curl_easy_getinfo(easy, CURLINFO_REDIRECT_URL, &redirect);
                if (!redirect) {
                        o.bad_redirect = true;
                        r = upstream_classify(&o, &api_error);
                        upstream_operation_finish(
                                op, r, api_error, "Upstream redirect without a usable Location");
                        return;
                }
                if (op->response.redirects >= UPSTREAM_MAX_REDIRECTS) {
                        o.too_many_redirects = true;
                        msg = strdup_printf("Upstream redirected more than %d times", UPSTREAM_MAX_REDIRECTS);
                        r = upstream_classify(&o, &api_error);
                        upstream_operation_finish(op, r, api_error, msg);
                        return;
                }
                r = destination_check_redirect(op->upstream->policy, &op->hop, redirect, &next);
                if (r < 0) {
                        o.denied = true;
                        op->response.denied_by = "redirect";
                        r = upstream_classify(&o, &api_error);
                        upstream_operation_finish(
                                op, r, api_error, "Redirect to a destination denied by policy");
                        return;
                }
                /* Follow: 303, and 301/302 after a POST, become a GET. */
                {
                        unsigned redirects = op->response.redirects + 1;
                        char *url = strdup(redirect);

                        if (!url) {
                                upstream_operation_finish(op, -ENOMEM, API_ERROR_INTERNAL_ERROR, NULL);
                                return;
                        }
                        free(op->url);
                        op->url = url;
                        op->hop = next;
                        if (status == 303 || ((status == 301 || status == 302) && streq(op->method, "POST"))) {
                                free(op->method);
                                op->method = strdup("GET");
                                if (!op->method) {
                                        upstream_operation_finish(op, -ENOMEM, API_ERROR_INTERNAL_ERROR, NULL);
                                        return;
                                }
                        }
                        upstream_operation_stop_hop(op);
                        upstream_response_done(&op->response);
                        op->response.redirects = redirects;
                        r = upstream_operation_start_hop(op);
                        if (r < 0) {
                                op->response.redirects = redirects;
                                upstream_operation_finish(op, r, API_ERROR_INTERNAL_ERROR, NULL);
                        }
                        return;
                }
        }

        r = upstream_classify(&o, &api_error);
        if (r >= 0) {
                upstream_operation_finish(op, 0, _API_ERROR_INVALID, NULL);
                return;
        }
        if (o.denied) {
                op->response.denied_by = "address";
                msg = strdup_printf(
                        "Connection to %s (%s) denied by policy", op->hop.host, op->denied_address_text);
        } else if (api_error == API_ERROR_UPSTREAM_RESPONSE_TOO_LARGE)
                msg = strdup_printf(
                        "Upstream response exceeds %" PRIu64 " bytes", op->upstream->max_response_bytes);
        else if (api_error == API_ERROR_QUERY_TIMEOUT)
                msg = NULL; /* the default message says it */
        else if (op->stopped)
                msg = strdup_printf("Upstream %s: the reply was stopped by its reader", op->hop.host);
        else if (result == CURLE_OK)
                msg = strdup_printf("Upstream %s answered HTTP %ld", op->hop.host, status);
        else
                msg = strdup_printf(
                        "Upstream %s: %s",
                        op->hop.host,
                        op->errbuf[0] ? op->errbuf : curl_easy_strerror(result));
        upstream_operation_finish(op, r, api_error, msg);
}

int upstream_start(
        Upstream *u, const UpstreamRequest *req, UpstreamDone done, void *userdata, UpstreamOperation **ret) {
        _cleanup_(upstream_operation_freep) UpstreamOperation *op = NULL;
        const char *method;
        int r;

        assert(u);
        assert(req);
        assert(done);
        assert(ret);

        method = req->method ? req->method : "GET";
        if (!streq(method, "GET") && !streq(method, "POST"))
                return -EINVAL;
        if (!req->url)
                return -EINVAL;

        op = calloc(1, sizeof *op);
        if (!op)
                return -ENOMEM;
        op->upstream = u;
        op->done = done;
        op->userdata = userdata;
        op->deadline = req->deadline;
        op->jar = req->jar;
        op->on_body = req->stream_type ? req->on_body : NULL;
        op->response.api_error = _API_ERROR_INVALID;
        op->method = strdup(method);
        op->url = strdup(req->url);
        if (!op->method || !op->url)
                return -ENOMEM;
        if (op->on_body) {
                op->stream_type = strdup(req->stream_type);
                if (!op->stream_type)
                        return -ENOMEM;
        }
        for (const char *const *h = req->headers; h && *h; h++) {
                struct curl_slist *l;

                if (strpbrk(*h, "\r\n") || !strchr(*h, ':'))
                        return -EINVAL;
                l = curl_slist_append(op->headers, *h);
                if (!l)
                        return -ENOMEM;
                op->headers = l;
        }
        {
                /* No "Expect: 100-continue" round trip. */
                struct curl_slist *l = curl_slist_append(op->headers, "Expect:");
                if (!l)
                        return -ENOMEM;
                op->headers = l;
        }
        if (req->content_type) {
                _cleanup_free_ char *h = NULL;
                struct curl_slist *l;

                if (strpbrk(req->content_type, "\r\n"))
                        return -EINVAL;
                h = strdup_printf("Content-Type: %s", req->content_type);
                if (!h)
                        return -ENOMEM;
                l = curl_slist_append(op->headers, h);
                if (!l)
                        return -ENOMEM;
                op->headers = l;
        }
        if (req->body_size > 0) {
                op->body = malloc(req->body_size);
                if (!op->body)
                        return -ENOMEM;
                memcpy(op->body, req->body, req->body_size);
                op->body_size = req->body_size;
        }

        r = upstream_completion_new(u->event, upstream_on_defer, op, "upstream-defer", &op->defer);
        if (r < 0)
                return r;

        /* Check 1 before anything else: a refused URL is never requested. */
        r = destination_check_url(u->policy, op->url, &op->hop);
        if (r < 0) {
                op->response.denied_by = "url";
                upstream_operation_finish(
                        op,
                        r,
                        API_ERROR_DESTINATION_DENIED,
                        r == -EPERM ? "Destination denied by policy" :
                                      "Destination denied by policy: not a valid http(s) URL");
        } else if (upstream_operation_deadline_passed(op))
                upstream_operation_finish(op, -ETIMEDOUT, API_ERROR_QUERY_TIMEOUT, NULL);
        else {
                /* The URL as libcurl parses it must name the host we checked,
                 * or a parser differential could reach another host. */
                CURLU *cu = curl_url();
                char *h = NULL;
                bool same = false;

                if (cu && curl_url_set(cu, CURLUPART_URL, op->url, 0) == CURLUE_OK &&
                    curl_url_get(cu, CURLUPART_HOST, &h, 0) == CURLUE_OK && h) {
                        size_t n = strlen(h);
                        if (h[0] == '[' && n > 2) {
                                h[n - 1] = 0;
                                same = strcasecmp(h + 1, op->hop.host) == 0 ||
                                        destination_host_named(u->policy, h + 1);
                        } else
                                same = destination_host_named(u->policy, h) &&
                                        (strcasecmp(h, op->hop.host) == 0 ||
                                         (n > 0 && h[n - 1] == '.' &&
                                          strncasecmp(h, op->hop.host, n - 1) == 0));
                }
                curl_free(h);
                curl_url_cleanup(cu);
                if (!same) {
                        op->response.denied_by = "url";
                        upstream_operation_finish(
                                op, -EPERM, API_ERROR_DESTINATION_DENIED, "Destination denied by policy");
                } else {
                        r = upstream_operation_start_hop(op);
                        if (r < 0)
                                return r;
                }
        }

        *ret = TAKE_PTR(op);
        return 0;
}
