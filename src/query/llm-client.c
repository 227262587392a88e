/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/llm-client.h"
#include "shared/log.h"
#include "shared/macro.h"

#define LLM_CLIENT_STREAM_TYPE "text/event-stream"

struct LlmClient {
        Upstream *upstream;
        char *chat_url;
        char *props_url;     /* NULL: the URL has no server root to ask */
        char *authorization; /* "Authorization: Bearer …": wiped on free */
        usec_t idle_timeout;
        /* What the server taught us, for the daemon's life. */
        LlmStreamMode mode;
};

struct LlmProps {
        UpstreamOperation *op;
        LlmPropsDone done;
        void *userdata;
};

struct LlmCall {
        LlmClient *client;
        LlmCallDone done;
        void *userdata;

        usec_t deadline;
        LlmReplyLimits limits;
        LlmStreamHandlers live;
        LlmCallRebuild rebuild;
        LlmStreamMode mode; /* the one the body in flight was built in */

        UpstreamOperation *op;
        LlmStream *stream;     /* the parser of the exchange in flight */
        bool stream_oom;       /* the parser ran out of memory inside the write callback */
        sd_event_source *idle; /* between two pieces of a streamed reply */
        sd_event_source *defer;

        /* The outcome. */
        bool finished;
        LlmCallResult result;
        char *message; /* result.message, owned */
        bool has_reply;
        int reply_r; /* 0: reply, -EBADMSG: error */
        LlmReply reply;
        LlmError error;
};

usec_t llm_client_idle_timeout(usec_t query_timeout) {
        return MIN(query_timeout / 2, (usec_t) LLM_CLIENT_IDLE_TIMEOUT_MAX_USEC);
}

int llm_client_new(Upstream *u, const LlmClientSettings *s, LlmClient **ret) {
        _cleanup_(llm_client_freep) LlmClient *c = NULL;
        size_t n;
        int r;

        assert(u);
        assert(s);
        assert(s->url);
        assert(ret);

        c = calloc(1, sizeof *c);
        if (!c)
                return -ENOMEM;
        c->upstream = u;
        c->idle_timeout = s->idle_timeout;
        c->mode = LLM_STREAM_WITH_USAGE;

        /* The base URL with or without a trailing slash. */
        n = strlen(s->url);
        if (asprintf(&c->chat_url, "%s%schat/completions", s->url, n > 0 && s->url[n - 1] == '/' ? "" : "/") <
            0) {
                c->chat_url = NULL;
                return -ENOMEM;
        }
        r = llm_props_url(s->url, &c->props_url);
        if (r == -ENOMEM)
                return r;
        if (s->api_key && asprintf(&c->authorization, "Authorization: Bearer %s", s->api_key) < 0) {
                c->authorization = NULL;
                return -ENOMEM;
        }
        *ret = TAKE_PTR(c);
        return 0;
}

LlmClient *llm_client_free(LlmClient *c) {
        if (!c)
                return NULL;
        if (c->authorization) {
                explicit_bzero(c->authorization, strlen(c->authorization));
                free(c->authorization);
        }
        free(c->chat_url);
        free(c->props_url);
        free(c);
        return NULL;
}

LlmStreamMode llm_client_stream_mode(const LlmClient *c) {
        assert(c);
        return c->mode;
}

static void llm_call_stop_exchange(LlmCall *call) {
        call->op = upstream_operation_free(call->op);
        call->stream = llm_stream_free(call->stream);
        call->stream_oom = false;
        if (call->idle)
                (void) sd_event_source_set_enabled(call->idle, SD_EVENT_OFF);
}

LlmCall *llm_call_free(LlmCall *call) {
        if (!call)
                return NULL;
        llm_call_stop_exchange(call);
        sd_event_source_disable_unref(call->idle);
        sd_event_source_disable_unref(call->defer);
        free(call->message);
        llm_reply_done(&call->reply);
        llm_error_done(&call->error);
        free(call);
        return NULL;
}

static int llm_call_on_defer(sd_event_source *s, void *userdata) {
        LlmCall *call = userdata;

        (void) sd_event_source_set_enabled(call->defer, SD_EVENT_OFF);
        /* The callback may free the call: nothing after it. */
        call->done(call, call->result.error, &call->result, call->userdata);
        return 0;
}

/* The end: a negative errno and the API error without a reply (message
 * raw, sanitized here; NULL: the API error's default), or 0 with
 * call->has_reply set. Reported from the defer. */
static void llm_call_finish(LlmCall *call, int error, ApiError api_error, const char *message) {
        assert(!call->finished);
        call->finished = true;
        if (call->stream)
                call->result.events = llm_stream_events(call->stream);
        /* Sanitized before the exchange goes: message may point into it. */
        upstream_complete(
                call->defer, error, api_error, message, &call->result.error, &call->result.api_error, &call->message);
        call->result.message = error < 0 ? call->message : NULL;
        llm_call_stop_exchange(call);
}

/* The stream's outcome as the call's reply. */
static void llm_call_finish_stream(LlmCall *call, const char *transport) {
        int r;

        r = llm_stream_finish(call->stream, &call->reply, &call->error);
        if (r == -ENOMEM) {
                llm_call_finish(call, r, API_ERROR_INTERNAL_ERROR, NULL);
                return;
        }
        if (r == -EBADMSG && transport && call->error.code == API_ERROR_UPSTREAM_FAILED) {
                /* A cut stream: say what the transport saw too. */
                char *m;

                if (asprintf(&m, "%s (%s)", call->error.message, transport) >= 0) {
                        free(call->error.message);
                        call->error.message = m;
                }
        }
        call->has_reply = true;
        call->reply_r = r;
        llm_call_finish(call, 0, _API_ERROR_INVALID, NULL);
}

static int llm_call_on_idle(sd_event_source *s, uint64_t usec, void *userdata) {
        LlmCall *call = userdata;
        char m[128];

        if (llm_stream_complete(call->stream)) {
                /* All but the usage chunk or [DONE] is there: keep it. */
                llm_call_finish_stream(call, NULL);
                return 0;
        }
        (void) snprintf(
                m,
                sizeof m,
                "Model server sent nothing for %" PRIu64 " s in the middle of its reply",
                (uint64_t) (call->client->idle_timeout / USEC_PER_SEC));
        llm_call_finish(call, -ETIMEDOUT, API_ERROR_UPSTREAM_FAILED, m);
        return 0;
}

/* (Re)arm the idle timer from now; not beyond the deadline, which fires
 * first with its own error. */
static void llm_call_arm_idle(LlmCall *call) {
        sd_event *e = upstream_get_event(call->client->upstream);
        usec_t t;
        int r;

        if (call->client->idle_timeout == 0)
                return;
        if (sd_event_now(e, CLOCK_MONOTONIC, &t) < 0)
                return;
        t = usec_add(t, call->client->idle_timeout);
        if (call->deadline != 0 && call->deadline != USEC_INFINITY && t >= call->deadline) {
                if (call->idle)
                        (void) sd_event_source_set_enabled(call->idle, SD_EVENT_OFF);
                return;
        }
        if (!call->idle) {
                r = sd_event_add_time(e, &call->idle, CLOCK_MONOTONIC, t, 0, llm_call_on_idle, call);
                if (r < 0) {
                        log_warning_errno(r, "llm-client: cannot add the idle timer");
                        return;
                }
                (void) sd_event_source_set_description(call->idle, "llm-call-idle");
                return;
        }
        r = sd_event_source_set_time(call->idle, t);
        if (r < 0) {
                log_warning_errno(r, "llm-client: cannot set the idle timer's time");
                return;
        }
        r = sd_event_source_set_enabled(call->idle, SD_EVENT_ONESHOT);
        if (r < 0)
                log_warning_errno(r, "llm-client: cannot enable the idle timer");
}

/* Inside libcurl's write callback: parse at once, so each content delta
 * reaches the live handler as soon as curl hands its bytes over. */
static int llm_call_on_body(UpstreamOperation *op, const void *data, size_t n, void *userdata) {
        LlmCall *call = userdata;
        int r;

        llm_call_arm_idle(call);
        r = llm_stream_feed(call->stream, data, n);
        if (r == -ENOMEM)
                call->stream_oom = true;
        /* A failed reply (an error in the 200 stream, the budget) ends the
         * transfer now; after [DONE] the server ends it. */
        return r < 0 ? r : 0;
}

static void llm_call_on_upstream_done(UpstreamOperation *op, int error, const UpstreamResponse *r, void *userdata);

static int llm_call_start_exchange(LlmCall *call, const char *body, size_t size) {
        const char *headers[] = { call->client->authorization, NULL };
        int r;

        r = llm_stream_new(&call->limits, &call->live, &call->stream);
        if (r < 0)
                return r;
        return upstream_start(
                call->client->upstream,
                &(UpstreamRequest){
                        .method = "POST",
                        .url = call->client->chat_url,
                        .headers = call->client->authorization ? headers : NULL,
                        .body = body,
                        .body_size = size,
                        .content_type = "application/json",
                        .deadline = call->deadline,
                        .stream_type = LLM_CLIENT_STREAM_TYPE,
                        .on_body = llm_call_on_body,
                },
                llm_call_on_upstream_done,
                call,
                &call->op);
}

/* The server refused stream_options: remember it for the daemon's life and
 * send the request once more without. Returns 0 when sent again. */
static int llm_call_retry_without_stream_options(LlmCall *call) {
        const char *body = NULL;
        size_t size = 0;
        int r;

        if (call->client->mode == LLM_STREAM_WITH_USAGE)
                log_notice("The model server refused stream_options: streaming without usage from now on.");
        call->client->mode = LLM_STREAM_ON;

        r = call->rebuild(LLM_STREAM_ON, &body, &size, call->userdata);
        if (r < 0)
                return r;
        llm_call_stop_exchange(call);
        call->mode = LLM_STREAM_ON;
        call->result.attempts++;
        return llm_call_start_exchange(call, body, size);
}

static void llm_call_on_upstream_done(
        UpstreamOperation *op, int error, const UpstreamResponse *r, void *userdata) {
        LlmCall *call = userdata;
        bool ok_status = r->status >= 200 && r->status <= 299;
        int k;

        assert(op == call->op);
        if (call->idle)
                (void) sd_event_source_set_enabled(call->idle, SD_EVENT_OFF);
        call->result.status = r->status;
        call->result.bytes = r->streamed ? r->streamed_bytes : r->body_size;

        if (r->streamed || (ok_status && upstream_media_type_is(r->content_type, LLM_CLIENT_STREAM_TYPE))) {
                call->result.streamed = true;
                /* An event stream that came whole (none of it reached on_body,
                 * e.g. an empty one) is read the same way. */
                if (!r->streamed && r->body_size > 0) {
                        k = llm_stream_feed(call->stream, r->body, r->body_size);
                        call->stream_oom = k == -ENOMEM;
                }
                if (call->stream_oom)
                        llm_call_finish(call, -ENOMEM, API_ERROR_INTERNAL_ERROR, NULL);
                else if (llm_stream_failed(call->stream) || llm_stream_complete(call->stream))
                        llm_call_finish_stream(call, NULL);
                else if (error < 0 && r->api_error != API_ERROR_UPSTREAM_FAILED)
                        /* A timeout or the cap mid-stream: the transport's error. */
                        llm_call_finish(call, error, r->api_error, r->message);
                else
                        llm_call_finish_stream(call, error < 0 ? r->message : NULL);
                return;
        }

        /* A whole answer. An HTTP error status still has a body to read
         * (the context-window errors are 400s); anything without a response
         * is the exchange's own error. */
        if (r->status == 0 || (error < 0 && (r->api_error != API_ERROR_UPSTREAM_FAILED || !r->body))) {
                llm_call_finish(call, error, r->api_error, r->message);
                return;
        }
        if (call->mode == LLM_STREAM_WITH_USAGE && call->rebuild && call->result.attempts == 1 &&
            llm_refuses_stream_options(
                    (unsigned) MIN(r->status, 999L), (const uint8_t *) r->body, r->body_size)) {
                k = llm_call_retry_without_stream_options(call);
                if (k < 0) {
                        log_error_errno(k, "llm-client: cannot send the request again");
                        llm_call_finish(call, k, API_ERROR_INTERNAL_ERROR, NULL);
                }
                return;
        }
        k = llm_parse_reply(
                (unsigned) MIN(r->status, 999L),
                (const uint8_t *) r->body,
                r->body_size,
                &call->limits,
                &call->reply,
                &call->error);
        if (k == -ENOMEM) {
                llm_call_finish(call, k, API_ERROR_INTERNAL_ERROR, NULL);
                return;
        }
        call->has_reply = true;
        call->reply_r = k;
        llm_call_finish(call, 0, _API_ERROR_INVALID, NULL);
}

int llm_call_start(LlmClient *c, const LlmCallRequest *req, LlmCallDone done, void *userdata, LlmCall **ret) {
        _cleanup_(llm_call_freep) LlmCall *call = NULL;
        int r;

        assert(c);
        assert(req);
        assert(done);
        assert(ret);

        call = calloc(1, sizeof *call);
        if (!call)
                return -ENOMEM;
        call->client = c;
        call->done = done;
        call->userdata = userdata;
        call->deadline = req->deadline;
        call->limits = req->limits;
        call->live = req->live;
        call->rebuild = req->rebuild;
        call->mode = c->mode;
        call->result = (LlmCallResult){ .api_error = _API_ERROR_INVALID, .attempts = 1 };

        r = upstream_completion_new(
                upstream_get_event(c->upstream), llm_call_on_defer, call, "llm-call-defer", &call->defer);
        if (r < 0)
                return r;

        r = llm_call_start_exchange(call, req->body, req->body_size);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(call);
        return 0;
}

int llm_call_take_reply(LlmCall *call, LlmReply *ret, LlmError *ret_error) {
        assert(call);
        assert(ret);
        assert(ret_error);

        if (!call->has_reply)
                return -ENODATA;
        call->has_reply = false;
        if (call->reply_r == 0) {
                *ret = call->reply;
                call->reply = (LlmReply){ .content = NULL };
                return 0;
        }
        *ret_error = call->error;
        call->error = (LlmError){ .message = NULL };
        return -EBADMSG;
}

static void llm_props_on_upstream_done(
        UpstreamOperation *op, int error, const UpstreamResponse *r, void *userdata) {
        LlmProps *p = userdata;
        unsigned slots = 0;

        if (error >= 0)
                error = llm_parse_props_total_slots((const uint8_t *) r->body, r->body_size, &slots);
        p->done(p, error < 0 ? error : 0, error < 0 ? 0 : slots, p->userdata);
}

int llm_props_start(LlmClient *c, usec_t deadline, LlmPropsDone done, void *userdata, LlmProps **ret) {
        _cleanup_(llm_props_freep) LlmProps *p = NULL;
        const char *headers[2] = { c ? c->authorization : NULL, NULL };
        int r;

        assert(c);
        assert(done);
        assert(ret);

        if (!c->props_url)
                return -EINVAL;
        p = calloc(1, sizeof *p);
        if (!p)
                return -ENOMEM;
        p->done = done;
        p->userdata = userdata;
        r = upstream_start(
                c->upstream,
                &(UpstreamRequest){
                        .method = "GET",
                        .url = c->props_url,
                        .headers = headers,
                        .deadline = deadline,
                },
                llm_props_on_upstream_done,
                p,
                &p->op);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(p);
        return 0;
}

LlmProps *llm_props_free(LlmProps *p) {
        if (!p)
                return NULL;
        upstream_operation_free(p->op);
        free(p);
        return NULL;
}
