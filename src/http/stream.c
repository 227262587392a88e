/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/httpd-internal.h"
#include "http/sse.h"
#include "http/stream.h"
#include "metrics/metrics.h"
#include "shared/list.h"
#include "shared/log.h"
#include "shared/macro.h"

/* MHD's buffer for a response read without chunked encoding (an HTTP/1.0
 * client): allocated with each stream's response, so small. With chunked
 * encoding MHD reads into the connection's own memory pool instead. */
#define HTTP_STREAM_BLOCK_BYTES 1024
/* Keep-alives due within this much of each other are sent in one wakeup. */
#define HTTP_STREAM_KEEPALIVE_SLACK_USEC (1 * USEC_PER_SEC)
/* The smallest buffer allocated for unsent bytes; a drained buffer is freed,
 * so an idle stream holds none. */
#define HTTP_STREAM_BUFFER_MIN 1024

struct HttpStreamHub {
        HttpServer *server;
        sd_event *event;
        sd_event_source *keepalive_source;
        HttpStream *streams_head; /* every open stream */
        /* Streams that get keep-alives, in order of their last event, so of
         * their keep-alive deadline: the head is due first. */
        HttpStream *idle_head, *idle_tail;
        unsigned n_open;
        uint64_t n_cut;
};

struct HttpStream {
        HttpStreamHub *hub;
        struct MHD_Connection *connection;
        int fd;
        SessionKey session;
        HttpStreamFlags flags;

        /* Bytes queued and not yet taken by MHD: buf[start..end). */
        char *buf;
        size_t start, end, allocated;

        /* The whole pages of the reader's buffer last given back to the
         * kernel (http_stream_release_pages()); empty when none are. */
        uintptr_t released_start, released_end;

        usec_t last_event; /* monotonic; keep-alive due HTTP_STREAM_KEEPALIVE_USEC after */
        bool in_idle_list;
        bool suspended; /* by the reader, and not resumed since */
        bool ending;    /* end once the buffer is drained */
        bool failed;    /* the reader ends the response with an error */
        HttpStreamEnd why;

        /* While suspended MHD does not watch the socket: this does, for the
         * client going away. Off while MHD has the connection. */
        sd_event_source *hangup_source;

        HttpStreamClosed closed;
        void *userdata;

        HttpStream *streams_prev, *streams_next;
        HttpStream *idle_prev, *idle_next;
};

static const char *const http_stream_end_table[_HTTP_STREAM_END_MAX] = {
        [HTTP_STREAM_ENDED] = "ended",
        [HTTP_STREAM_GONE] = "gone",
        [HTTP_STREAM_CUT] = "cut",
        [HTTP_STREAM_STOPPED] = "stopped",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(http_stream_end, HttpStreamEnd)

/* --- Keep-alive order ----------------------------------------------------- */

static void hub_arm_keepalive(HttpStreamHub *h) {
        if (!h->idle_head) {
                (void) sd_event_source_set_enabled(h->keepalive_source, SD_EVENT_OFF);
                return;
        }
        if (sd_event_source_set_time(
                    h->keepalive_source, usec_add(h->idle_head->last_event, HTTP_STREAM_KEEPALIVE_USEC)) >= 0)
                (void) sd_event_source_set_enabled(h->keepalive_source, SD_EVENT_ONESHOT);
}

static void idle_unlink(HttpStream *s) {
        HttpStreamHub *h = s->hub;
        bool was_head = h->idle_head == s;

        if (!s->in_idle_list)
                return;
        if (s->idle_prev)
                s->idle_prev->idle_next = s->idle_next;
        else
                h->idle_head = s->idle_next;
        if (s->idle_next)
                s->idle_next->idle_prev = s->idle_prev;
        else
                h->idle_tail = s->idle_prev;
        s->idle_prev = s->idle_next = NULL;
        s->in_idle_list = false;
        if (was_head)
                hub_arm_keepalive(h);
}

/* Something was queued now: the keep-alive is due a full interval later,
 * so the stream goes to the tail (the list stays in deadline order). */
static void idle_touch(HttpStream *s) {
        HttpStreamHub *h = s->hub;
        bool rearm;

        idle_unlink(s);
        (void) sd_event_now(h->event, CLOCK_MONOTONIC, &s->last_event);
        s->idle_prev = h->idle_tail;
        if (h->idle_tail)
                h->idle_tail->idle_next = s;
        else
                h->idle_head = s;
        h->idle_tail = s;
        s->in_idle_list = true;
        rearm = h->idle_head == s;
        if (rearm)
                hub_arm_keepalive(h);
}

/* --- The connection ------------------------------------------------------ */

/* Hand the connection back to MHD: it calls the reader again on its next
 * run, which the wake makes happen from the loop. */
static void http_stream_resume(HttpStream *s) {
        if (!s->suspended)
                return;
        s->suspended = false;
        (void) sd_event_source_set_enabled(s->hangup_source, SD_EVENT_OFF);
        MHD_resume_connection(s->connection);
        http_server_wake(s->hub->server);
}

/* Nothing is waiting (drained or dropped): give the memory back, so that an
 * idle stream holds no buffer. */
static void http_stream_drop_buffer(HttpStream *s) {
        free(s->buf);
        s->buf = NULL;
        s->start = s->end = s->allocated = 0;
}

static void http_stream_fail(HttpStream *s, HttpStreamEnd why) {
        if (s->failed)
                return;
        s->failed = true;
        s->why = why;
        idle_unlink(s);
        http_stream_drop_buffer(s);
}

/* The stream waits: the buffer MHD hands the reader holds nothing it needs
 * (it is where the reader is to write). With chunked encoding that buffer
 * is the rest of the connection's memory pool, most of it (libmicrohttpd
 * 0.9.75 gives the chunk writer all that is free, and had zeroed half of
 * the pool when it gave back the read buffer): its whole pages go back to
 * the kernel, read as zeroes and come back on the next write. That is what
 * keeps an idle stream small (docs/PERFORMANCE.md, "Event streams"). Again
 * only when a write reached into them since. */
static void http_stream_release_pages(HttpStream *s, char *out, size_t max) {
        static size_t page_size = 0;
        uintptr_t start, end;

        if (page_size == 0) {
                long p = sysconf(_SC_PAGESIZE);
                page_size = p > 0 ? (size_t) p : 4096;
        }
        start = ((uintptr_t) out + page_size - 1) / page_size * page_size;
        end = ((uintptr_t) out + max) / page_size * page_size;
        if (end <= start || (start == s->released_start && end == s->released_end))
                return;
        if (madvise((void *) start, end - start, MADV_DONTNEED) < 0)
                return;
        s->released_start = start;
        s->released_end = end;
}

/* The MHD content reader: what is queued, else the end, else suspend until
 * the next event (returning 0 without suspending would make MHD call again
 * at once: a busy loop). */
static ssize_t http_stream_read(void *cls, uint64_t pos, char *out, size_t max) {
        HttpStream *s = cls;
        size_t n;

        if (s->failed)
                return MHD_CONTENT_READER_END_WITH_ERROR;
        if (s->end > s->start) {
                n = MIN(max, s->end - s->start);
                memcpy(out, s->buf + s->start, n);
                s->start += n;
                if (s->start == s->end)
                        http_stream_drop_buffer(s);
                if ((uintptr_t) out + n > s->released_start)
                        s->released_start = s->released_end = 0;
                return (ssize_t) n;
        }
        if (s->ending)
                return MHD_CONTENT_READER_END_OF_STREAM;

        http_stream_release_pages(s, out, max);
        MHD_suspend_connection(s->connection);
        s->suspended = true;
        (void) sd_event_source_set_enabled(s->hangup_source, SD_EVENT_ON);
        return 0;
}

/* The client closed its end while the stream waited for an event. */
static int http_stream_on_hangup(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        HttpStream *s = userdata;

        (void) sd_event_source_set_enabled(es, SD_EVENT_OFF);
        http_stream_fail(s, HTTP_STREAM_GONE);
        http_stream_resume(s);
        return 0;
}

/* Too much waits unsent: the stream is cut. MHD is waiting for the socket
 * to drain, which it will not: shut the socket down, so that MHD sees the
 * end on its next run and closes the connection itself (the descriptor
 * stays MHD's). */
static void http_stream_cut(HttpStream *s) {
        HttpStreamHub *h = s->hub;

        http_stream_fail(s, HTTP_STREAM_CUT);
        h->n_cut++;
        log_warning(
                "HTTP: an event stream was closed: more than %u bytes waited unsent (%" PRIu64
                " streams cut so far).",
                (unsigned) HTTP_STREAM_BUFFER_MAX,
                h->n_cut);
        if (s->suspended)
                http_stream_resume(s);
        else if (s->fd >= 0) {
                (void) shutdown(s->fd, SHUT_RDWR);
                http_server_wake(h->server);
        }
}

/* Room for n more bytes within HTTP_STREAM_BUFFER_MAX unsent. One event
 * larger than that on its own (a long record) is let through when nothing
 * waits: the client has read everything so far. */
static int http_stream_reserve(HttpStream *s, size_t n) {
        size_t used = s->end - s->start, a,
               max = used == 0 ? MAX(n, (size_t) HTTP_STREAM_BUFFER_MAX) : (size_t) HTTP_STREAM_BUFFER_MAX;
        char *b;

        if (n > max - used)
                return -ENOBUFS;
        if (s->end + n <= s->allocated)
                return 0;
        if (s->start > 0) {
                /* Move the unsent bytes to the front first. */
                memmove(s->buf, s->buf + s->start, used);
                s->start = 0;
                s->end = used;
                if (used + n <= s->allocated)
                        return 0;
        }
        a = MAX(s->allocated * 2, (size_t) HTTP_STREAM_BUFFER_MIN);
        a = MAX(a, used + n);
        a = MIN(a, max);
        b = realloc(s->buf, a);
        if (!b)
                return -ENOMEM;
        s->buf = b;
        s->allocated = a;
        return 0;
}

/* Room for n more bytes at s->buf + s->end, or the stream is cut. */
static int http_stream_make_room(HttpStream *s, size_t n) {
        int r;

        if (s->failed || s->ending)
                return -EPIPE;
        r = http_stream_reserve(s, n);
        if (r == -ENOBUFS)
                http_stream_cut(s);
        return r;
}

/* n bytes were written at s->buf + s->end: they go out as soon as the
 * socket takes them. */
static void http_stream_queued(HttpStream *s, size_t n) {
        s->end += n;
        idle_touch(s);
        http_stream_resume(s);
}

static int http_stream_send_keepalive(HttpStream *s) {
        int r;

        r = http_stream_make_room(s, STRLEN(SSE_KEEPALIVE));
        if (r < 0)
                return r;
        memcpy(s->buf + s->end, SSE_KEEPALIVE, STRLEN(SSE_KEEPALIVE));
        http_stream_queued(s, STRLEN(SSE_KEEPALIVE));
        return 0;
}

int http_stream_send(HttpStream *s, uint64_t id, const char *event, const char *json) {
        size_t json_size;
        int r;

        assert(s);
        assert(event);
        assert(json);

        json_size = strlen(json);
        r = http_stream_make_room(s, sse_event_size(id, event, json, json_size));
        if (r < 0)
                return r;
        http_stream_queued(s, sse_event_write(s->buf + s->end, id, event, json, json_size));
        return 0;
}

void http_stream_end(HttpStream *s) {
        assert(s);

        if (s->failed || s->ending)
                return;
        s->ending = true;
        idle_unlink(s);
        http_stream_resume(s);
}

const SessionKey *http_stream_session(const HttpStream *s) {
        assert(s);
        return &s->session;
}

static unsigned session_streams(const HttpStreamHub *h, const SessionKey *session) {
        unsigned n = 0;

        /* A scan: streams are few per server (connections are), a session
         * opens them rarely, and the scan touches one cache line each. */
        for (const HttpStream *s = h->streams_head; s; s = s->streams_next)
                if (memcmp(&s->session, session, sizeof *session) == 0)
                        n++;
        return n;
}

bool http_stream_allowed(HttpRequest *req) {
        HttpStreamHub *h = http_server_stream_hub(http_request_server(req));

        return session_streams(h, http_request_session(req)) < HTTP_STREAM_MAX_PER_SESSION;
}

static HttpStream *http_stream_free(HttpStream *s) {
        if (!s)
                return NULL;
        s->hangup_source = sd_event_source_disable_unref(s->hangup_source);
        free(s->buf);
        free(s);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(HttpStream *, http_stream_free);

int http_stream_open(
        HttpRequest *req,
        HttpStreamFlags flags,
        const char *const *extra_headers,
        HttpStreamClosed closed,
        void *userdata,
        HttpStream **ret) {
        HttpServer *server;
        HttpStreamHub *h;
        _cleanup_(http_stream_freep) HttpStream *s = NULL;
        struct MHD_Response *r;
        int k;

        assert(req);
        assert(closed);
        assert(ret);

        server = http_request_server(req);
        h = http_server_stream_hub(server);
        if (!http_stream_allowed(req))
                return -EMFILE;

        s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->hub = h;
        s->connection = http_request_connection(req);
        s->fd = http_request_fd(req);
        s->session = *http_request_session(req);
        s->flags = flags;
        s->closed = closed;
        s->userdata = userdata;

        if (s->fd >= 0) {
                k = sd_event_add_io(h->event, &s->hangup_source, s->fd, EPOLLRDHUP, http_stream_on_hangup, s);
                if (k < 0)
                        return k;
                (void) sd_event_source_set_enabled(s->hangup_source, SD_EVENT_OFF);
                (void) sd_event_source_set_description(s->hangup_source, "http-stream-hangup");
        }

        r = MHD_create_response_from_callback(
                MHD_SIZE_UNKNOWN, HTTP_STREAM_BLOCK_BYTES, http_stream_read, s, NULL);
        if (!r)
                return -ENOMEM;
        if (MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream; charset=utf-8") !=
                    MHD_YES ||
            MHD_add_response_header(r, "X-Accel-Buffering", "no") != MHD_YES) {
                MHD_destroy_response(r);
                return -ENOMEM;
        }
        k = http_request_queue_response(req, r, 200, extra_headers);
        if (k < 0)
                return k;

        LIST_PREPEND(streams, h->streams_head, s);
        h->n_open++;
        metrics_event_streams_add(+1);
        http_request_set_stream(req, s);
        idle_touch(s);
        *ret = TAKE_PTR(s);
        return 0;
}

void http_stream_detach(HttpStream *s) {
        HttpStreamHub *h;
        HttpStreamEnd why;

        if (!s)
                return;
        h = s->hub;
        if (s->failed)
                why = s->why;
        else if (s->ending && s->end == s->start)
                why = HTTP_STREAM_ENDED;
        else
                why = HTTP_STREAM_GONE; /* MHD closed it: the client went, or a write failed */

        idle_unlink(s);
        LIST_REMOVE(streams, h->streams_head, s);
        h->n_open--;
        metrics_event_streams_add(-1);
        log_debug("HTTP: an event stream closed (%s).", http_stream_end_to_string(why));
        s->closed(s, why, s->userdata);
        http_stream_free(s);
}

static int http_stream_hub_on_keepalive(sd_event_source *es, uint64_t usec, void *userdata) {
        HttpStreamHub *h = userdata;
        usec_t t;

        if (sd_event_get_state(h->event) == SD_EVENT_FINISHED)
                return 0;
        (void) sd_event_now(h->event, CLOCK_MONOTONIC, &t);
        /* Each stream handled is either moved to the tail with a deadline a
         * full interval from now, or cut and unlinked: this ends. */
        while (h->idle_head &&
               usec_add(h->idle_head->last_event, HTTP_STREAM_KEEPALIVE_USEC) <=
                       usec_add(t, HTTP_STREAM_KEEPALIVE_SLACK_USEC))
                if (http_stream_send_keepalive(h->idle_head) == -ENOMEM)
                        /* Try again at the next interval rather than now. */
                        idle_touch(h->idle_head);
        hub_arm_keepalive(h);
        return 0;
}

int http_stream_hub_new(HttpServer *server, HttpStreamHub **ret) {
        _cleanup_free_ HttpStreamHub *h = NULL;
        int r;

        assert(server);
        assert(ret);

        h = calloc(1, sizeof *h);
        if (!h)
                return -ENOMEM;
        h->server = server;
        h->event = http_server_event(server);
        r = sd_event_add_time(
                h->event,
                &h->keepalive_source,
                CLOCK_MONOTONIC,
                USEC_INFINITY,
                HTTP_STREAM_KEEPALIVE_SLACK_USEC / 4,
                http_stream_hub_on_keepalive,
                h);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(h->keepalive_source, SD_EVENT_OFF);
        (void) sd_event_source_set_description(h->keepalive_source, "http-stream-keepalive");
        *ret = TAKE_PTR(h);
        return 0;
}

HttpStreamHub *http_stream_hub_free(HttpStreamHub *h) {
        if (!h)
                return NULL;
        assert(!h->streams_head);
        h->keepalive_source = sd_event_source_disable_unref(h->keepalive_source);
        free(h);
        return NULL;
}

void http_stream_hub_quiesce(HttpStreamHub *h) {
        if (!h)
                return;
        for (HttpStream *s = h->streams_head; s; s = s->streams_next)
                if (s->flags & HTTP_STREAM_END_ON_QUIESCE)
                        http_stream_end(s);
}

void http_stream_hub_abort(HttpStreamHub *h) {
        if (!h)
                return;
        for (HttpStream *s = h->streams_head; s; s = s->streams_next) {
                http_stream_fail(s, HTTP_STREAM_STOPPED);
                http_stream_resume(s);
        }
}

unsigned http_server_streams_open(const HttpServer *s) {
        HttpStreamHub *h = s ? http_server_stream_hub(s) : NULL;
        return h ? h->n_open : 0;
}

uint64_t http_server_streams_cut(const HttpServer *s) {
        HttpStreamHub *h = s ? http_server_stream_hub(s) : NULL;
        return h ? h->n_cut : 0;
}
