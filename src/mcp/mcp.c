/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <json-c/json.h>
#include <math.h>

#include "config-version.h"
#include "api/render.h"
#include "api/request.h"
#include "http/stream.h"
#include "manager/manager-ops.h"
#include "mcp/jsonrpc.h"
#include "mcp/mcp.h"
#include "mcp/tools.h"
#include "shared/json-util.h"
#include "shared/list.h"
#include "shared/log.h"
#include "shared/sanitize.h"
#include "shared/strbuf.h"
#include "shared/time-util.h"

/* The revisions of MCP this face speaks, newest first (the lifecycle: a
 * client's version we support is answered with itself, any other with the
 * newest). 2025-03-26 is what a request without MCP-Protocol-Version is
 * taken to be (the transport), so that header value is accepted too. */
static const char *const mcp_versions[] = { "2025-11-25", "2025-06-18" };
#define MCP_VERSION_ASSUMED "2025-03-26"

/* At most this many tool calls in flight per person (an open stream or a
 * request waiting for its answer): one more is rate_limited. */
#define MCP_CALLS_PER_PERSON 4
/* search_wiki and read_page per person: at most this many a minute. */
#define MCP_WIKI_CALLS_PER_MINUTE 60
#define MCP_WIKI_RATE_SLOTS 256
/* The wait's progress at most once a second (when it changes). */
#define MCP_PROGRESS_INTERVAL_USEC (1 * USEC_PER_SEC)

typedef enum McpCallKind {
        MCP_CALL_ASK,
        MCP_CALL_SEARCH,
        MCP_CALL_READ,
} McpCallKind;

/* Where an ask_wiki is: its follow-up prepared, waiting in the queue,
 * running, or ended (answered, or cancelled and waiting for the query's
 * end to be freed). */
typedef enum McpCallState {
        MCP_CALL_PREPARING,
        MCP_CALL_WAITING,
        MCP_CALL_RUNNING,
        MCP_CALL_ENDED,
} McpCallState;

typedef struct McpCall McpCall;

typedef struct McpRate {
        SessionKey session;
        usec_t window_start;
        unsigned count;
} McpRate;

struct Mcp {
        sd_event *event;
        Manager *manager;
        json_object *tools;    /* the tools/list result */
        sd_event_source *look; /* defer: the waiting calls look at their ticket */
        sd_event_source *tick; /* each second while a call waits: its progress */
        McpCall *calls;
        McpRate rates[MCP_WIKI_RATE_SLOTS];
};

struct McpCall {
        Mcp *mcp;
        McpCallKind kind;
        McpCallState state;
        HttpRequest *req;   /* suspended, answered with JSON; NULL once answered or streaming */
        HttpStream *stream; /* the answer as an event stream; NULL when none or closed */
        uint64_t event_id;
        SessionKey session;
        char *user;
        char *base_url; /* scheme://host of the request, for the links of the result */
        JsonRpcId id;
        json_object *progress_token; /* a reference; NULL: no progress asked */
        uint64_t progress;
        usec_t progress_at;
        char *progress_text; /* the last wait message sent */
        QueryBody body;
        ManagerPreparedFollowUp *prepared;
        const ManagerFollowUp *follow_up; /* borrowed from prepared */
        ManagerWikiOperation *wiki;
        char ticket_id[TICKET_ID_MAX];
        bool holds_ticket;
        bool cancelled;
        bool free_on_close; /* freed while its stream still sends: freed when it has closed */
        char query_id[QUERY_ID_MAX];
        ManagerQueryWaiter waiter;
        McpCall *calls_prev, *calls_next;
};

static void mcp_call_free(McpCall *c) {
        if (!c)
                return;
        /* The stream's closed callback still comes: the call goes then. */
        if (c->stream) {
                c->state = MCP_CALL_ENDED;
                c->free_on_close = true;
                return;
        }
        if (c->holds_ticket)
                (void) manager_hold_ticket(
                        c->mcp->manager, &c->session, c->ticket_id, false, now(CLOCK_MONOTONIC));
        LIST_REMOVE(calls, c->mcp->calls, c);
        manager_follow_up_free(c->prepared);
        manager_wiki_operation_free(c->wiki);
        query_body_done(&c->body);
        json_object_put(c->progress_token);
        free(c->progress_text);
        free(c->user);
        free(c->base_url);
        free(c);
}

/* --- Answers ------------------------------------------------------------- */

/* Send a message of the call (a notification, or the final answer): on its
 * stream, or as the suspended request's JSON answer (final only). Takes
 * text over. */
static void mcp_call_send(McpCall *c, char *text, bool final) {
        _cleanup_free_ char *t = text;

        if (!t) {
                log_oom();
                if (final && c->req)
                        http_reply_error(c->req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
                if (final)
                        c->req = NULL;
                return;
        }
        if (c->stream) {
                if (http_stream_send(c->stream, ++c->event_id, "message", t) >= 0 && final)
                        http_stream_end(c->stream);
                return;
        }
        if (final && c->req) {
                http_reply(c->req, 200, t, NULL);
                c->req = NULL;
        }
}

/* A tools/call result. */
static void mcp_call_result(McpCall *c, json_object *result) {
        mcp_call_send(c, jsonrpc_result_text(&c->id, result), true);
}

/* A tool error (the contract's code and sanitized message) as a result
 * with isError, which the model can read. */
static json_object *mcp_tool_error(ApiError code, const char *message) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object(),
                                                *content = json_object_new_array(),
                                                *text = json_object_new_object(),
                                                *s = json_object_new_object();
        _cleanup_free_ char *clean = NULL, *line = NULL;

        if (!message)
                message = api_error_default_message(code);
        if (sanitize_message(message, strlen(message), &clean) < 0)
                return NULL;
        line = strdup_printf("%s: %s", api_error_to_string(code), clean);
        if (!o || !content || !text || !s || !line)
                return NULL;
        if (json_add(text, "type", json_string("text")) < 0 || json_add(text, "text", json_string(line)) < 0 ||
            json_append(content, TAKE_PTR(text)) < 0 || json_add(o, "content", TAKE_PTR(content)) < 0 ||
            json_add(o, "isError", json_object_new_boolean(true)) < 0)
                return NULL;
        return TAKE_PTR(o);
}

static void mcp_call_fail(McpCall *c, ApiError code, const char *message) {
        mcp_call_result(c, mcp_tool_error(code, message));
}

/* A notifications/progress of the call, progress always increasing. */
static void mcp_call_progress(McpCall *c, const char *message) {
        _cleanup_(json_object_putp) json_object *p = NULL;

        if (!c->progress_token || !c->stream || c->state == MCP_CALL_ENDED)
                return;
        p = json_object_new_object();
        if (!p || json_add(p, "progressToken", json_object_get(c->progress_token)) < 0 ||
            json_add(p, "progress", json_object_new_int64((int64_t) ++c->progress)) < 0 ||
            json_add(p, "message", json_string(message)) < 0) {
                log_oom();
                return;
        }
        c->progress_at = now(CLOCK_MONOTONIC);
        mcp_call_send(c, jsonrpc_notification_text("notifications/progress", TAKE_PTR(p)), false);
}

/* --- ask_wiki: the result ------------------------------------------------ */

static char *mcp_absolute(const McpCall *c, const char *path) {
        return strdup_printf("%s%s", c->base_url, path);
}

/* The answer and its sources in words, for a client that shows text. */
static char *mcp_answer_text(const HistoryRecord *r) {
        StrBuf b = { 0 };

        (void) strbuf_puts(&b, r->answer ? r->answer : "");
        if (r->n_sources > 0)
                (void) strbuf_puts(&b, "\n\nSources:");
        for (size_t i = 0; i < r->n_sources; i++) {
                const Source *s = &r->sources[i];

                (void) strbuf_printf(&b, "\n- %s", s->title);
                if (s->has_revision_id)
                        (void) strbuf_printf(&b, " (revision %" PRIu64 ")", s->revision_id);
                if (s->url)
                        (void) strbuf_printf(&b, ": %s", s->url);
        }
        for (size_t i = 0; i < r->n_citations; i++) {
                const SourceCitation *q = &r->citations[i];

                if (i == 0)
                        (void) strbuf_puts(&b, "\n\nQuotes:");
                (void) strbuf_printf(
                        &b,
                        "\n- [%u] %s: \"%s\" (%s)%s%s",
                        q->n,
                        q->title,
                        q->quote,
                        q->status >= 0 ? citation_status_to_string(q->status) : "not checked",
                        q->url ? " " : "",
                        q->url ? q->url : "");
        }
        return strbuf_steal(&b);
}

/* The result of a query that succeeded: the text, a resource_link per
 * artifact, and structuredContent: the record as GET /history/{id} gives
 * it, with record_url (the record on the page, /#/history/{id}, or on
 * the API without the page), and each artifact's download_url made
 * absolute. */
static json_object *mcp_ask_result(McpCall *c, const HistoryRecord *r) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object(),
                                                *content = json_object_new_array(),
                                                *text = json_object_new_object(), *record = NULL;
        _cleanup_free_ char *words = mcp_answer_text(r), *record_path = NULL, *record_url = NULL;
        json_object *artifacts = NULL;

        record = render_history_record(r);
        /* Without the page (WIKI_WEB_UI=false), the record on the API. */
        record_path = manager_get_config(c->mcp->manager)->web_ui ?
                strdup_printf("/#/history/%s", r->id) :
                strdup_printf("/api/v1/history/%s", r->id);
        record_url = record_path ? mcp_absolute(c, record_path) : NULL;
        if (!o || !content || !text || !record || !words || !record_url)
                return NULL;
        if (json_add(text, "type", json_string("text")) < 0 ||
            json_add(text, "text", json_string(words)) < 0 || json_append(content, TAKE_PTR(text)) < 0)
                return NULL;

        if (json_object_object_get_ex(record, "artifacts", &artifacts))
                for (size_t i = 0; i < json_object_array_length(artifacts); i++) {
                        json_object *a = json_object_array_get_idx(artifacts, i), *v;
                        _cleanup_(json_object_putp) json_object *link = json_object_new_object();
                        _cleanup_free_ char *url = NULL;

                        if (!json_object_object_get_ex(a, "download_url", &v))
                                continue;
                        url = mcp_absolute(c, json_object_get_string(v));
                        if (!link || !url || json_add(a, "download_url", json_string(url)) < 0 ||
                            json_add(link, "type", json_string("resource_link")) < 0 ||
                            json_add(link, "uri", json_string(url)) < 0)
                                return NULL;
                        if (json_object_object_get_ex(a, "name", &v) &&
                            json_add(link, "name", json_object_get(v)) < 0)
                                return NULL;
                        if (json_object_object_get_ex(a, "media_type", &v) &&
                            json_add(link, "mimeType", json_object_get(v)) < 0)
                                return NULL;
                        if (json_object_object_get_ex(a, "size_bytes", &v) &&
                            json_add(link, "size", json_object_get(v)) < 0)
                                return NULL;
                        if (json_append(content, TAKE_PTR(link)) < 0)
                                return NULL;
                }

        if (json_add(record, "record_url", json_string(record_url)) < 0 ||
            json_add(o, "content", TAKE_PTR(content)) < 0 ||
            json_add(o, "structuredContent", TAKE_PTR(record)) < 0 ||
            json_add(o, "isError", json_object_new_boolean(false)) < 0)
                return NULL;
        return TAKE_PTR(o);
}

/* The query's record is durable: the call's answer. */
static void mcp_on_query_done(ManagerQuery *q, const ManagerOutcome *outcome, void *userdata) {
        McpCall *c = userdata;
        _cleanup_(history_record_freep) HistoryRecord *record = NULL;
        int r;

        if (c->state == MCP_CALL_ENDED || (!c->req && !c->stream)) {
                mcp_call_free(c);
                return;
        }
        c->state = MCP_CALL_ENDED;
        if (!outcome->succeeded) {
                mcp_call_fail(c, outcome->api_error, outcome->message);
                mcp_call_free(c);
                return;
        }
        r = history_get_record(manager_get_history(c->mcp->manager), c->query_id, &c->session, &record);
        if (r < 0) {
                log_error_errno(r, "Query %s: its record cannot be read", c->query_id);
                mcp_call_fail(c, API_ERROR_INTERNAL_ERROR, NULL);
        } else
                mcp_call_result(c, mcp_ask_result(c, record));
        mcp_call_free(c);
}

/* --- ask_wiki: the queue ------------------------------------------------- */

static void mcp_call_end_failed(McpCall *c, ApiError code, const char *message) {
        c->state = MCP_CALL_ENDED;
        mcp_call_fail(c, code, message);
        mcp_call_free(c);
}

/* The ticket's turn came (or the slot was free): claim and run. */
static void mcp_call_start(McpCall *c) {
        Mcp *m = c->mcp;
        ManagerQuery *q;
        int r;

        r = manager_start_query(
                m->manager,
                &(ManagerQueryRequest){
                        .session = &c->session,
                        .user = c->user,
                        .question = c->body.question,
                        .pages = c->body.pages,
                        .follow_up = c->follow_up,
                },
                &q);
        if (r == -EBUSY) {
                mcp_call_end_failed(c, API_ERROR_BUSY, NULL);
                return;
        }
        if (r == MANAGER_STORAGE_UNAVAILABLE) {
                mcp_call_end_failed(c, API_ERROR_STORAGE_UNAVAILABLE, manager_storage_cause(m->manager));
                return;
        }
        if (r == -ENOSPC || r == -ESHUTDOWN) {
                mcp_call_end_failed(c, API_ERROR_QUEUE_FULL, NULL);
                return;
        }
        if (r < 0) {
                mcp_call_end_failed(c, API_ERROR_INTERNAL_ERROR, NULL);
                return;
        }

        /* The claim took the ticket. */
        c->holds_ticket = false;
        c->state = MCP_CALL_RUNNING;
        snprintf(c->query_id, sizeof c->query_id, "%s", manager_query_id(q));
        log_info("Query %s asked through MCP.", c->query_id);
        manager_query_wait(q, &c->waiter, mcp_on_query_done, c);
        if (c->cancelled)
                (void) manager_cancel_query(m->manager, c->query_id, "Cancelled by the MCP client");
}

static const char *ordinal_suffix(uint64_t n) {
        if (n % 100 >= 11 && n % 100 <= 13)
                return "th";
        switch (n % 10) {
        case 1:
                return "st";
        case 2:
                return "nd";
        case 3:
                return "rd";
        default:
                return "th";
        }
}

/* "2nd in the queue, about 40–90 s": the place and the wait range in
 * words, as the page says them. NULL when out of memory. */
static char *mcp_wait_text(const ManagerStatus *st) {
        const TicketView *t = &st->admission.ticket;
        double lo, hi;

        if (t->status == TICKET_RESERVED)
                return strdup("It is your turn: starting");
        if (st->range_known) {
                lo = st->range.p10;
                hi = st->range.p90;
        } else if (st->admission.estimate_known)
                lo = hi = st->admission.estimated_wait_seconds;
        else
                return strdup_printf("%" PRIu64 "%s in the queue", t->position, ordinal_suffix(t->position));
        if (hi >= 120)
                return strdup_printf(
                        "%" PRIu64 "%s in the queue, about %.0f\u2013%.0f min",
                        t->position,
                        ordinal_suffix(t->position),
                        MAX(1.0, floor(lo / 60)),
                        MAX(1.0, ceil(hi / 60)));
        if (lo == hi)
                return strdup_printf(
                        "%" PRIu64 "%s in the queue, about %.0f s",
                        t->position,
                        ordinal_suffix(t->position),
                        ceil(hi));
        return strdup_printf(
                "%" PRIu64 "%s in the queue, about %.0f\u2013%.0f s",
                t->position,
                ordinal_suffix(t->position),
                floor(lo),
                ceil(hi));
}

/* A waiting call looks at its ticket: its turn (start), gone (an error),
 * or still waiting (its progress, when the words changed and a second has
 * passed since the last). */
static void mcp_call_look(McpCall *c) {
        usec_t t = now(CLOCK_MONOTONIC);
        ManagerStatus st;
        _cleanup_free_ char *text = NULL;

        manager_status(c->mcp->manager, &c->session, t, &st);
        if (!st.admission.has_ticket || !streq(st.admission.ticket.id, c->ticket_id)) {
                c->holds_ticket = false;
                mcp_call_end_failed(c, API_ERROR_TICKET_NOT_FOUND, "The place in the queue was given up");
                return;
        }
        if (st.admission.ticket.status == TICKET_RESERVED) {
                mcp_call_start(c);
                return;
        }
        if (!c->progress_token || !c->stream)
                return;
        if (c->progress_text && t < c->progress_at + MCP_PROGRESS_INTERVAL_USEC)
                return;
        text = mcp_wait_text(&st);
        if (!text || (c->progress_text && streq(text, c->progress_text)))
                return;
        mcp_call_progress(c, text);
        free(c->progress_text);
        c->progress_text = TAKE_PTR(text);
}

static void mcp_look_all(Mcp *m) {
        McpCall *next;
        bool waiting = false;

        for (McpCall *c = m->calls; c; c = next) {
                next = c->calls_next;
                if (c->state == MCP_CALL_WAITING)
                        mcp_call_look(c);
        }
        for (McpCall *c = m->calls; c; c = c->calls_next)
                waiting = waiting || c->state == MCP_CALL_WAITING;
        if (waiting)
                (void) sd_event_source_set_enabled(m->tick, SD_EVENT_ON);
}

static int mcp_on_look(sd_event_source *s, void *userdata) {
        mcp_look_all(userdata);
        return 0;
}

static int mcp_on_tick(sd_event_source *s, uint64_t usec, void *userdata) {
        Mcp *m = userdata;

        (void) sd_event_source_set_time_relative(s, MCP_PROGRESS_INTERVAL_USEC);
        (void) sd_event_source_set_enabled(s, SD_EVENT_OFF);
        mcp_look_all(m);
        return 0;
}

/* Join the queue (or keep the person's ticket) and wait for the turn. */
static void mcp_call_enqueue(McpCall *c) {
        Mcp *m = c->mcp;
        usec_t t = now(CLOCK_MONOTONIC);
        ManagerStatus st;
        int r;

        /* One person, one query: the page's query runs already. */
        if (manager_get_query_by_session(m->manager, &c->session)) {
                mcp_call_end_failed(c, API_ERROR_BUSY, NULL);
                return;
        }
        r = manager_join(m->manager, &c->session, c->user, t);
        if (r == -ENOSPC || r == -ESHUTDOWN) {
                mcp_call_end_failed(c, API_ERROR_QUEUE_FULL, NULL);
                return;
        }
        if (r == MANAGER_STORAGE_UNAVAILABLE) {
                mcp_call_end_failed(c, API_ERROR_STORAGE_UNAVAILABLE, manager_storage_cause(m->manager));
                return;
        }
        if (r < 0) {
                mcp_call_end_failed(c, API_ERROR_INTERNAL_ERROR, NULL);
                return;
        }
        manager_status(m->manager, &c->session, t, &st);
        if (!st.admission.has_ticket) {
                mcp_call_end_failed(c, API_ERROR_INTERNAL_ERROR, NULL);
                return;
        }
        memcpy(c->ticket_id, st.admission.ticket.id, sizeof c->ticket_id);
        /* Waiting here is the ticket's heartbeat, as an open queue stream. */
        if (manager_hold_ticket(m->manager, &c->session, c->ticket_id, true, t) >= 0)
                c->holds_ticket = true;
        c->state = MCP_CALL_WAITING;
        mcp_call_look(c);
        if (c->state == MCP_CALL_WAITING)
                (void) sd_event_source_set_enabled(m->tick, SD_EVENT_ON);
}

static void mcp_on_follow_up(
        ManagerPreparedFollowUp *p, const ManagerError *error, const ManagerFollowUp *result, void *userdata) {
        McpCall *c = userdata;

        if (error) {
                mcp_call_end_failed(c, error->api_error, error->message);
                return;
        }
        if (c->cancelled) {
                mcp_call_end_failed(c, API_ERROR_EXECUTION_FAILED, "Cancelled by the MCP client");
                return;
        }
        c->follow_up = result;
        mcp_call_enqueue(c);
}

/* Cancel: leave the queue, or cancel the running query (which then ends
 * as CancelQuery makes it end). A cancelled request gets no answer: its
 * stream ends without one. */
static void mcp_call_cancel(McpCall *c) {
        Mcp *m = c->mcp;

        c->cancelled = true;
        switch (c->state) {
        case MCP_CALL_WAITING:
                c->holds_ticket = false;
                (void) manager_leave(m->manager, &c->session, now(CLOCK_MONOTONIC));
                log_info("MCP: a waiting ask_wiki was cancelled; its ticket left the queue.");
                c->state = MCP_CALL_ENDED;
                if (c->stream)
                        http_stream_end(c->stream);
                mcp_call_free(c);
                break;
        case MCP_CALL_RUNNING:
                c->state = MCP_CALL_ENDED;
                if (c->stream)
                        http_stream_end(c->stream);
                (void) manager_cancel_query(m->manager, c->query_id, "Cancelled by the MCP client");
                break;
        default:
                break;
        }
}

static void mcp_on_stream_closed(HttpStream *s, HttpStreamEnd why, void *userdata) {
        McpCall *c = userdata;

        c->stream = NULL;
        if (c->free_on_close) {
                mcp_call_free(c);
                return;
        }
        if (why != HTTP_STREAM_GONE)
                return;
        /* The client went away before the answer: as a cancel. */
        if (c->state == MCP_CALL_WAITING || c->state == MCP_CALL_RUNNING)
                mcp_call_cancel(c);
}

/* --- The Manager's announcements ----------------------------------------- */

/* What a step of the running query does, in words: "reading Roastery
 * Lyon". NULL for events that say nothing new. */
static char *mcp_step_text(const QueryEvent *ev) {
        _cleanup_(json_object_putp) json_object *args = NULL;
        json_object *v;

        switch (ev->type) {
        case QUERY_EVENT_STEP:
                return strdup_printf("step %u: asking the model", ev->step);
        case QUERY_EVENT_TOOL:
                args = ev->json ? json_tokener_parse(ev->json) : NULL;
                if (ev->name && streq(ev->name, "wiki_read") && args &&
                    json_object_object_get_ex(args, "title", &v))
                        return strdup_printf("reading %s", json_object_get_string(v));
                if (ev->name && streq(ev->name, "wiki_search") && args &&
                    json_object_object_get_ex(args, "query", &v))
                        return strdup_printf(
                                "searching the wiki for \u201c%s\u201d", json_object_get_string(v));
                if (ev->name && streq(ev->name, "run_python"))
                        return strdup("running Python in the sandbox");
                return strdup_printf("using %s", ev->name ? ev->name : "a tool");
        case QUERY_EVENT_PHASE:
                if (ev->phase == QUERY_PHASE_CLEANUP)
                        return strdup("cleaning up the sandbox");
                return NULL;
        default:
                return NULL;
        }
}

static void mcp_on_manager_event(Manager *manager, const ManagerEvent *ev, void *userdata) {
        Mcp *m = userdata;

        switch (ev->type) {
        case MANAGER_ADMISSION:
                /* Looked at from a defer: an announcement must not start
                 * anything. */
                (void) sd_event_source_set_enabled(m->look, SD_EVENT_ONESHOT);
                break;
        case MANAGER_QUERY_EVENT:
                for (McpCall *c = m->calls; c; c = c->calls_next) {
                        _cleanup_free_ char *text = NULL;

                        if (c->state != MCP_CALL_RUNNING || !c->progress_token ||
                            !streq(c->query_id, manager_query_id(ev->query)))
                                continue;
                        text = mcp_step_text(ev->event);
                        if (text)
                                mcp_call_progress(c, text);
                }
                break;
        default:
                break;
        }
}

/* --- search_wiki and read_page ------------------------------------------ */

static void mcp_on_search(
        ManagerWikiOperation *o, const ManagerError *error, const ManagerWikiHits *hits, void *userdata) {
        McpCall *c = userdata;
        _cleanup_(json_object_putp) json_object *res = NULL, *content = NULL, *text = NULL, *sc = NULL,
                                                *list = NULL;
        StrBuf b = { 0 };
        _cleanup_free_ char *words = NULL;

        if (error) {
                mcp_call_fail(c, error->api_error, error->message);
                mcp_call_free(c);
                return;
        }
        res = json_object_new_object();
        content = json_object_new_array();
        text = json_object_new_object();
        sc = json_object_new_object();
        list = json_object_new_array();
        if (hits->n == 0)
                (void) strbuf_puts(&b, "No page found.");
        for (size_t i = 0; i < hits->n; i++) {
                _cleanup_(json_object_putp) json_object *h = json_object_new_object();

                (void) strbuf_printf(
                        &b,
                        "%s- %s: %s",
                        i > 0 ? "\n" : "",
                        hits->hits[i].title,
                        hits->hits[i].snippet ? hits->hits[i].snippet : "");
                if (!h || json_add(h, "title", json_string(hits->hits[i].title)) < 0 ||
                    json_add(h, "snippet", json_string(hits->hits[i].snippet)) < 0 ||
                    json_append(list, TAKE_PTR(h)) < 0)
                        b.failed = true;
        }
        words = strbuf_steal(&b);
        if (!res || !content || !text || !sc || !list || !words ||
            json_add(text, "type", json_string("text")) < 0 ||
            json_add(text, "text", json_string(words)) < 0 || json_append(content, TAKE_PTR(text)) < 0 ||
            json_add(sc, "results", TAKE_PTR(list)) < 0 || json_add(res, "content", TAKE_PTR(content)) < 0 ||
            json_add(res, "structuredContent", TAKE_PTR(sc)) < 0)
                mcp_call_fail(c, API_ERROR_INTERNAL_ERROR, NULL);
        else
                mcp_call_result(c, TAKE_PTR(res));
        c->wiki = manager_wiki_operation_free(c->wiki);
        mcp_call_free(c);
}

static void mcp_on_read(ManagerWikiOperation *o, const ManagerError *error, const WikiPage *page, void *userdata) {
        McpCall *c = userdata;
        _cleanup_(json_object_putp) json_object *res = NULL, *content = NULL, *text = NULL, *sc = NULL;
        _cleanup_free_ char *missing = NULL;

        if (error) {
                mcp_call_fail(c, error->api_error, error->message);
                mcp_call_free(c);
                return;
        }
        res = json_object_new_object();
        content = json_object_new_array();
        text = json_object_new_object();
        sc = json_object_new_object();
        if (page->missing)
                missing = strdup("The page does not exist.");
        if (!res || !content || !text || !sc || (page->missing && !missing) ||
            json_add(text, "type", json_string("text")) < 0 ||
            json_add(
                    text,
                    "text",
                    page->missing ? json_string(missing) :
                                    json_string_bytes(page->content, page->content_size)) < 0 ||
            json_append(content, TAKE_PTR(text)) < 0 || json_add(sc, "title", json_string(page->title)) < 0 ||
            json_add(sc, "missing", json_object_new_boolean(page->missing)) < 0 ||
            (!page->missing && json_add(sc, "url", json_string(page->url)) < 0) ||
            (!page->missing &&
             json_add(sc, "revision_id", json_object_new_int64((int64_t) page->revision_id)) < 0) ||
            (!page->missing && json_add(sc, "truncated", json_object_new_boolean(page->truncated)) < 0) ||
            (!page->missing &&
             json_add(sc, "content", json_string_bytes(page->content, page->content_size)) < 0) ||
            json_add(res, "content", TAKE_PTR(content)) < 0 ||
            json_add(res, "structuredContent", TAKE_PTR(sc)) < 0)
                mcp_call_fail(c, API_ERROR_INTERNAL_ERROR, NULL);
        else
                mcp_call_result(c, TAKE_PTR(res));
        c->wiki = manager_wiki_operation_free(c->wiki);
        mcp_call_free(c);
}

/* search_wiki and read_page per person: MCP_WIKI_CALLS_PER_MINUTE in a
 * window of a minute. The table is small and bounded: the slot of the
 * oldest window is taken over when it is full (a person lost from it
 * starts afresh, which only ever allows more). */
static bool mcp_rate_allows(Mcp *m, const SessionKey *session) {
        usec_t t = now(CLOCK_MONOTONIC);
        McpRate *oldest = &m->rates[0];

        for (size_t i = 0; i < MCP_WIKI_RATE_SLOTS; i++) {
                McpRate *r = &m->rates[i];

                if (r->window_start != 0 && memcmp(&r->session, session, sizeof *session) == 0) {
                        if (t >= r->window_start + (60 * USEC_PER_SEC)) {
                                r->window_start = t;
                                r->count = 0;
                        }
                        return ++r->count <= MCP_WIKI_CALLS_PER_MINUTE;
                }
                if (r->window_start < oldest->window_start)
                        oldest = r;
        }
        *oldest = (McpRate){ .session = *session, .window_start = t, .count = 1 };
        return true;
}

/* --- tools/call ---------------------------------------------------------- */

static unsigned mcp_calls_of(Mcp *m, const SessionKey *session) {
        unsigned n = 0;

        for (McpCall *c = m->calls; c; c = c->calls_next)
                if (c->state != MCP_CALL_ENDED && memcmp(&c->session, session, sizeof *session) == 0)
                        n++;
        return n;
}

static bool mcp_wants_stream(HttpRequest *req) {
        const char *accept = http_request_header(req, "Accept");

        return accept && strcasestr(accept, "text/event-stream");
}

static HttpHandlerResult mcp_reply_rpc_error(
        HttpRequest *req, unsigned status, const JsonRpcId *id, int code, const char *message) {
        _cleanup_free_ char *t = jsonrpc_error_text(id, code, message);

        if (!t)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        return http_reply(req, status, t, NULL);
}

static HttpHandlerResult mcp_reply_result(HttpRequest *req, const JsonRpcId *id, json_object *result) {
        _cleanup_free_ char *t = jsonrpc_result_text(id, result);

        if (!t)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        return http_reply(req, 200, t, NULL);
}

static HttpHandlerResult
        mcp_reply_tool_error(HttpRequest *req, const JsonRpcId *id, ApiError code, const char *message) {
        return mcp_reply_result(req, id, mcp_tool_error(code, message));
}

static int mcp_call_new(Mcp *m, HttpRequest *req, const JsonRpcId *id, McpCallKind kind, McpCall **ret) {
        const char *host = http_request_header(req, "Host");
        McpCall *c = calloc(1, sizeof *c);

        if (!c)
                return -ENOMEM;
        c->mcp = m;
        c->kind = kind;
        c->id = *id;
        c->session = *http_request_session(req);
        LIST_PREPEND(calls, m->calls, c);
        if (http_request_user(req) && !(c->user = strdup(http_request_user(req)))) {
                mcp_call_free(c);
                return -ENOMEM;
        }
        c->base_url = strdup_printf(
                "%s://%s",
                manager_get_config(m->manager)->cookie_secure ? "https" : "http",
                host ? host : "localhost");
        if (!c->base_url) {
                mcp_call_free(c);
                return -ENOMEM;
        }
        *ret = c;
        return 0;
}

/* Whether o has no key but these (NULL-terminated). */
static bool mcp_keys_are(json_object *o, const char *const *keys) {
        json_object_object_foreach(o, key, value) {
                bool known = false;

                (void) value;
                for (size_t i = 0; keys[i]; i++)
                        known = known || streq(key, keys[i]);
                if (!known)
                        return false;
        }
        return true;
}

static HttpHandlerResult
        mcp_tool_ask(Mcp *m, HttpRequest *req, const JsonRpcId *id, json_object *args, json_object *token) {
        static const char *const keys[] = { "question", "follow_up", NULL };
        _cleanup_free_ char *message = NULL;
        const char *text;
        QueryBody body = { 0 };
        ManagerError e;
        McpCall *c;
        bool streaming;
        int r;

        if (!mcp_keys_are(args, keys))
                return mcp_reply_tool_error(
                        req,
                        id,
                        API_ERROR_INVALID_INPUT,
                        "Unknown argument: ask_wiki takes question and follow_up");
        /* The same validation as the body of POST /api/v1/query. */
        text = json_object_to_json_string_ext(args, JSON_C_TO_STRING_PLAIN);
        r = request_parse_query("application/json", (const uint8_t *) text, strlen(text), &body, &message);
        if (r == -ENOMEM)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        if (r < 0)
                return mcp_reply_tool_error(req, id, API_ERROR_INVALID_INPUT, message);
        if (manager_storage_refusal(m->manager, &e)) {
                query_body_done(&body);
                return mcp_reply_tool_error(req, id, e.api_error, e.message);
        }

        r = mcp_call_new(m, req, id, MCP_CALL_ASK, &c);
        if (r < 0) {
                query_body_done(&body);
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        }
        c->body = body;
        streaming = token && mcp_wants_stream(req) && http_stream_allowed(req) &&
                http_stream_open(req, 0, NULL, mcp_on_stream_closed, c, &c->stream) >= 0;
        if (streaming)
                c->progress_token = json_object_get(token);
        else {
                c->req = req;
                http_request_suspend(req);
        }

        if (c->body.follow_up) {
                r = manager_prepare_follow_up(
                        m->manager, &c->session, c->user, c->body.follow_up, mcp_on_follow_up, c, &c->prepared, &e);
                if (r < 0)
                        mcp_call_end_failed(c, e.api_error, e.message);
        } else
                mcp_call_enqueue(c);
        /* c may be gone here: it may have ended at once (busy, queue_full). */
        return streaming ? HTTP_HANDLED : HTTP_SUSPENDED;
}

static HttpHandlerResult
        mcp_tool_wiki(Mcp *m, HttpRequest *req, const JsonRpcId *id, McpCallKind kind, json_object *args) {
        static const char *const search_keys[] = { "query", "limit", NULL }, *const read_keys[] = { "title", NULL };
        json_object *query = NULL, *limit = NULL, *title = NULL;
        int64_t n = 10;
        ManagerError e = { 0 };
        McpCall *c;
        int r;

        if (kind == MCP_CALL_SEARCH) {
                if (!mcp_keys_are(args, search_keys) || !json_object_object_get_ex(args, "query", &query) ||
                    !json_object_is_type(query, json_type_string))
                        return mcp_reply_tool_error(
                                req,
                                id,
                                API_ERROR_INVALID_INPUT,
                                "search_wiki takes query (a string) and limit (an integer)");
                if (json_object_object_get_ex(args, "limit", &limit)) {
                        if (!json_object_is_type(limit, json_type_int))
                                return mcp_reply_tool_error(
                                        req,
                                        id,
                                        API_ERROR_INVALID_INPUT,
                                        "limit: must be an integer from 1 to 50");
                        n = json_object_get_int64(limit);
                        if (n < 1 || n > MANAGER_WIKI_SEARCH_MAX)
                                return mcp_reply_tool_error(
                                        req,
                                        id,
                                        API_ERROR_INVALID_INPUT,
                                        "limit: must be an integer from 1 to 50");
                }
        } else if (
                !mcp_keys_are(args, read_keys) || !json_object_object_get_ex(args, "title", &title) ||
                !json_object_is_type(title, json_type_string))
                return mcp_reply_tool_error(
                        req, id, API_ERROR_INVALID_INPUT, "read_page takes title (a string)");

        if (!mcp_rate_allows(m, http_request_session(req)))
                return mcp_reply_tool_error(
                        req,
                        id,
                        API_ERROR_RATE_LIMITED,
                        "Too many wiki searches and reads; try again in a minute");

        r = mcp_call_new(m, req, id, kind, &c);
        if (r < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        if (kind == MCP_CALL_SEARCH)
                r = manager_wiki_search(
                        m->manager,
                        c->user,
                        json_object_get_string(query),
                        (unsigned) n,
                        mcp_on_search,
                        c,
                        &c->wiki,
                        &e);
        else
                r = manager_wiki_read(
                        m->manager, c->user, json_object_get_string(title), mcp_on_read, c, &c->wiki, &e);
        if (r < 0) {
                mcp_call_free(c);
                if (r == -ENOMEM)
                        return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
                return mcp_reply_tool_error(req, id, e.api_error, e.message);
        }
        c->req = req;
        http_request_suspend(req);
        return HTTP_SUSPENDED;
}

static HttpHandlerResult mcp_tools_call(Mcp *m, HttpRequest *req, const JsonRpcMessage *msg) {
        static const char *const keys[] = { "name", "arguments", "_meta", NULL };
        _cleanup_(json_object_putp) json_object *empty = NULL;
        json_object *name = NULL, *args = NULL, *meta = NULL, *token = NULL;
        const char *tool;

        if (!msg->params || !json_object_is_type(msg->params, json_type_object) ||
            !mcp_keys_are(msg->params, keys) || !json_object_object_get_ex(msg->params, "name", &name) ||
            !json_object_is_type(name, json_type_string))
                return mcp_reply_rpc_error(
                        req,
                        200,
                        &msg->id,
                        JSONRPC_INVALID_PARAMS,
                        "Invalid params: tools/call takes name, arguments and _meta");
        if (json_object_object_get_ex(msg->params, "arguments", &args) &&
            !json_object_is_type(args, json_type_object))
                return mcp_reply_rpc_error(
                        req, 200, &msg->id, JSONRPC_INVALID_PARAMS, "Invalid params: arguments must be an object");
        if (json_object_object_get_ex(msg->params, "_meta", &meta)) {
                if (!json_object_is_type(meta, json_type_object))
                        return mcp_reply_rpc_error(
                                req,
                                200,
                                &msg->id,
                                JSONRPC_INVALID_PARAMS,
                                "Invalid params: _meta must be an object");
                if (json_object_object_get_ex(meta, "progressToken", &token) &&
                    !json_object_is_type(token, json_type_string) &&
                    !json_object_is_type(token, json_type_int))
                        return mcp_reply_rpc_error(
                                req,
                                200,
                                &msg->id,
                                JSONRPC_INVALID_PARAMS,
                                "Invalid params: progressToken must be a string or an integer");
                if (token && json_object_is_type(token, json_type_string) &&
                    json_object_get_string_len(token) > JSONRPC_ID_MAX)
                        return mcp_reply_rpc_error(
                                req,
                                200,
                                &msg->id,
                                JSONRPC_INVALID_PARAMS,
                                "Invalid params: progressToken is too long");
        }
        if (!args) {
                args = empty = json_object_new_object();
                if (!args)
                        return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        }

        tool = json_object_get_string(name);
        if (!streq(tool, "ask_wiki") && !streq(tool, "search_wiki") && !streq(tool, "read_page"))
                return mcp_reply_rpc_error(req, 200, &msg->id, JSONRPC_INVALID_PARAMS, "Unknown tool");
        if (mcp_calls_of(m, http_request_session(req)) >= MCP_CALLS_PER_PERSON)
                return mcp_reply_tool_error(
                        req, &msg->id, API_ERROR_RATE_LIMITED, "Too many tool calls in progress");
        if (streq(tool, "ask_wiki"))
                return mcp_tool_ask(m, req, &msg->id, args, token);
        return mcp_tool_wiki(
                m, req, &msg->id, streq(tool, "search_wiki") ? MCP_CALL_SEARCH : MCP_CALL_READ, args);
}

/* --- The lifecycle ------------------------------------------------------- */

static HttpHandlerResult mcp_initialize(Mcp *m, HttpRequest *req, const JsonRpcMessage *msg) {
        _cleanup_(json_object_putp) json_object *o = NULL, *caps = NULL, *tools = NULL, *info = NULL;
        json_object *v = NULL;
        const char *version = mcp_versions[0];

        if (!msg->params || !json_object_is_type(msg->params, json_type_object) ||
            !json_object_object_get_ex(msg->params, "protocolVersion", &v) ||
            !json_object_is_type(v, json_type_string))
                return mcp_reply_rpc_error(
                        req,
                        200,
                        &msg->id,
                        JSONRPC_INVALID_PARAMS,
                        "Invalid params: initialize takes protocolVersion");
        for (size_t i = 0; i < ELEMENTSOF(mcp_versions); i++)
                if (streq(json_object_get_string(v), mcp_versions[i]))
                        version = mcp_versions[i];

        o = json_object_new_object();
        caps = json_object_new_object();
        tools = json_object_new_object();
        info = json_object_new_object();
        if (!o || !caps || !tools || !info ||
            json_add(tools, "listChanged", json_object_new_boolean(false)) < 0 ||
            json_add(caps, "tools", TAKE_PTR(tools)) < 0 ||
            json_add(info, "name", json_string("wikiweb")) < 0 ||
            json_add(info, "title", json_string("wikiweb")) < 0 ||
            json_add(info, "version", json_string(PACKAGE_VERSION)) < 0 ||
            json_add(o, "protocolVersion", json_string(version)) < 0 ||
            json_add(o, "capabilities", TAKE_PTR(caps)) < 0 || json_add(o, "serverInfo", TAKE_PTR(info)) < 0 ||
            json_add(o, "instructions", json_string(MCP_INSTRUCTIONS)) < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        return mcp_reply_result(req, &msg->id, TAKE_PTR(o));
}

/* notifications/cancelled: the call of this session with that id. */
static void mcp_cancelled(Mcp *m, HttpRequest *req, const JsonRpcMessage *msg) {
        json_object *v;
        JsonRpcId id = { 0 };

        if (!msg->params || !json_object_is_type(msg->params, json_type_object) ||
            !json_object_object_get_ex(msg->params, "requestId", &v))
                return;
        if (json_object_is_type(v, json_type_string)) {
                if (json_object_get_string_len(v) > JSONRPC_ID_MAX)
                        return;
                id.is_string = true;
                memcpy(id.string, json_object_get_string(v), (size_t) json_object_get_string_len(v));
        } else if (json_object_is_type(v, json_type_int))
                id.number = json_object_get_int64(v);
        else
                return;
        for (McpCall *c = m->calls; c; c = c->calls_next)
                if (c->kind == MCP_CALL_ASK && jsonrpc_id_equal(&c->id, &id) &&
                    memcmp(&c->session, http_request_session(req), sizeof c->session) == 0 &&
                    (c->state == MCP_CALL_WAITING || c->state == MCP_CALL_RUNNING ||
                     c->state == MCP_CALL_PREPARING)) {
                        /* The answer to a cancelled request is not sent. */
                        if (c->req) {
                                http_reply(c->req, 200, NULL, NULL);
                                c->req = NULL;
                        }
                        if (c->state == MCP_CALL_PREPARING)
                                c->cancelled = true;
                        else
                                mcp_call_cancel(c);
                        return;
                }
}

static bool mcp_version_is_known(const char *v) {
        for (size_t i = 0; i < ELEMENTSOF(mcp_versions); i++)
                if (streq(v, mcp_versions[i]))
                        return true;
        return streq(v, MCP_VERSION_ASSUMED);
}

HttpHandlerResult mcp_handle(HttpRequest *req, void *userdata) {
        Mcp *m = userdata;
        _cleanup_(jsonrpc_message_done) JsonRpcMessage msg = { 0 };
        const char *version;
        const uint8_t *body;
        JsonRpcError e;
        size_t size;
        int r;

        assert(req);
        assert(m);

        if (!manager_get_config(m->manager)->mcp)
                return http_reply_error(req, API_ERROR_NOT_FOUND, NULL, NULL);

        /* The transport: a version we do not speak is 400. */
        version = http_request_header(req, "MCP-Protocol-Version");
        if (version && !mcp_version_is_known(version))
                return mcp_reply_rpc_error(
                        req, 400, NULL, JSONRPC_INVALID_REQUEST, "Unsupported MCP-Protocol-Version");
        if (!request_content_type_is_json(http_request_content_type(req)))
                return mcp_reply_rpc_error(
                        req, 415, NULL, JSONRPC_INVALID_REQUEST, "Content-Type must be application/json");

        body = http_request_body(req, &size);
        r = jsonrpc_parse(body, size, &msg, &e);
        if (r == -ENOMEM)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        if (r < 0)
                return mcp_reply_rpc_error(req, 400, e.has_id ? &e.id : NULL, e.code, e.message);

        if (msg.kind == JSONRPC_KIND_NOTIFICATION) {
                if (streq(msg.method, "notifications/cancelled"))
                        mcp_cancelled(m, req, &msg);
                return http_reply(req, 202, NULL, NULL);
        }
        if (msg.kind == JSONRPC_KIND_RESPONSE)
                return http_reply(req, 202, NULL, NULL);

        if (streq(msg.method, "initialize"))
                return mcp_initialize(m, req, &msg);
        if (streq(msg.method, "ping"))
                return mcp_reply_result(req, &msg.id, json_object_new_object());
        if (streq(msg.method, "tools/list"))
                return mcp_reply_result(req, &msg.id, json_object_get(m->tools));
        if (streq(msg.method, "tools/call"))
                return mcp_tools_call(m, req, &msg);
        return mcp_reply_rpc_error(req, 200, &msg.id, JSONRPC_METHOD_NOT_FOUND, "Method not found");
}

int mcp_new(sd_event *event, Manager *manager, Mcp **ret) {
        _cleanup_(mcp_freep) Mcp *m = NULL;
        int r;

        assert(event);
        assert(manager);
        assert(ret);

        m = calloc(1, sizeof *m);
        if (!m)
                return -ENOMEM;
        m->event = sd_event_ref(event);
        m->manager = manager;
        m->tools = json_tokener_parse(MCP_TOOLS_JSON);
        if (!m->tools)
                return -ENOMEM;
        r = sd_event_add_defer(event, &m->look, mcp_on_look, m);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(m->look, SD_EVENT_OFF);
        (void) sd_event_source_set_description(m->look, "mcp-look");
        r = sd_event_add_time_relative(
                event, &m->tick, CLOCK_MONOTONIC, MCP_PROGRESS_INTERVAL_USEC, 0, mcp_on_tick, m);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(m->tick, SD_EVENT_OFF);
        (void) sd_event_source_set_description(m->tick, "mcp-tick");
        r = manager_subscribe(manager, mcp_on_manager_event, m);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(m);
        return 0;
}

Mcp *mcp_free(Mcp *m) {
        if (!m)
                return NULL;
        /* A call still waiting for its query's end is the query's waiter:
         * the Manager, freed after us, never calls it. */
        while (m->calls)
                mcp_call_free(m->calls);
        manager_unsubscribe(m->manager, mcp_on_manager_event, m);
        sd_event_source_disable_unref(m->look);
        sd_event_source_disable_unref(m->tick);
        json_object_put(m->tools);
        sd_event_unref(m->event);
        free(m);
        return NULL;
}
