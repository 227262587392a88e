/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metrics/metrics.h"
#include "query/agent.h"
#include "query/citation.h"
#include "query/llm-client.h"
#include "query/pipeline.h"
#include "query/read-check.h"
#include "query/wiki-client.h"
#include "sandbox/sandbox.h"
#include "shared/json-util.h"
#include "shared/log.h"
#include "shared/macro.h"
#include "shared/sanitize.h"
#include "shared/strv.h"
#include "shared/time-util.h"

static inline usec_t usec_sub_unsigned(usec_t a, usec_t b) {
        return a > b ? a - b : 0;
}

/* Time spent in a phase: into the query's timings (its record) and into
 * wikiweb_query_phase_seconds_total, as the phase ends (API.md 12.3). */
static void query_run_add_phase(usec_t *timing, const char *phase, usec_t usec) {
        *timing += usec;
        metrics_count_query_phase(phase, usec);
}

typedef enum QueryRunState {
        QUERY_RUN_SANDBOX_WAIT,
        QUERY_RUN_PRELOAD,
        QUERY_RUN_STEP,
        QUERY_RUN_MODEL,
        QUERY_RUN_TOOL,
        QUERY_RUN_CLEANUP,
        QUERY_RUN_DONE,
        _QUERY_RUN_STATE_MAX,
} QueryRunState;

static const char *const query_phase_table[_QUERY_PHASE_MAX] = {
        [QUERY_PHASE_WIKI] = "wiki",
        [QUERY_PHASE_MODEL] = "model",
        [QUERY_PHASE_SANDBOX] = "sandbox",
        [QUERY_PHASE_CLEANUP] = "cleanup",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(query_phase, QueryPhase)

static const char *const query_sandbox_table[_QUERY_SANDBOX_MAX] = {
        [QUERY_SANDBOX_OFFERED] = "offered",
        [QUERY_SANDBOX_UNAVAILABLE] = "unavailable",
        [QUERY_SANDBOX_STARTING] = "starting",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(query_sandbox, QuerySandbox)

static const char *const query_run_state_table[_QUERY_RUN_STATE_MAX] = {
        [QUERY_RUN_SANDBOX_WAIT] = "sandbox-wait",
        [QUERY_RUN_PRELOAD] = "preload",
        [QUERY_RUN_STEP] = "step",
        [QUERY_RUN_MODEL] = "model",
        [QUERY_RUN_TOOL] = "tool",
        [QUERY_RUN_CLEANUP] = "cleanup",
        [QUERY_RUN_DONE] = "done",
};

/* A page read, kept for the citations (docs/QUERY.md, "Citations"): each
 * title once, as first read (as the sources), with its wikitext while the
 * query's budget lasts. */
typedef struct QueryReadPage {
        char *title;
        char *redirected_from;
        uint64_t revision_id;
        char *text; /* NULL: over the budget */
        size_t size;
} QueryReadPage;

/* The wikitext kept per query for the citations, at most: each page is
 * already capped by WIKI_WEB_UPSTREAM_MAX_RESPONSE_BYTES (8 MiB by
 * default), so this is 8 whole pages of the largest kind, thousands of
 * ordinary ones. */
#define QUERY_CITATION_TEXT_MAX_BYTES ((size_t) 64 * 1024 * 1024)

static void query_read_page_done(QueryReadPage *p) {
        free(p->title);
        free(p->redirected_from);
        free(p->text);
        *p = (QueryReadPage){ 0 };
}

struct QueryRun {
        sd_event *event;
        const Config *config;
        Upstream *upstream;
        LlmClient *llm;
        Sandbox *sandbox;

        char id[QUERY_ID_MAX];
        char **pages; /* the request's, NULL-terminated */
        size_t next_page;

        QueryRunState state;
        Agent *agent;
        WikiClient *wiki;
        SandboxQuery *sandbox_query; /* NULL: no run_python */
        QuerySandbox offer;          /* whether run_python is offered; _INVALID while waiting */

        /* Waiting for a starting sandbox (SANDBOX_WAIT). */
        char *question;   /* kept to make the agent again with run_python */
        QueryTurn *turns; /* likewise: a follow-up's earlier turns (owned) */
        size_t n_turns;
        sd_event_source *wait_source;
        usec_t wait_until;

        /* The one operation in flight (at most one is set). */
        LlmCall *model_call;
        WikiOperation *wiki_op;
        SandboxRun *sandbox_run;
        bool sandbox_cancelled;
        usec_t op_started; /* monotonic */
        unsigned op_step;
        AgentTool op_tool;
        char *op_title;    /* the title a wiki_read asked for */
        char *op_search;   /* the query a wiki_search asked for */
        unsigned op_limit; /* the hits a wiki_search asked for */

        /* WIKI_WEB_WIKI_READ_AS=person (API.md "Whose permissions"): each
         * search and read is checked for the person before anything of it
         * is used; the check is the wiki operation in flight then. */
        bool read_as_person;
        char *user;         /* the person's identity name; NULL: anonymous */
        bool checking;      /* q->wiki_op is the read check of q->pending */
        bool reader_logged; /* the journal said whose permissions the first check used */
        WikiResult pending; /* the search or read being checked */
        usec_t wiki_mark;   /* wiki time counted up to here (a check follows its read) */

        sd_event_source *deadline_source;
        sd_event_source *defer; /* advances or reports */
        usec_t deadline;
        usec_t started;

        /* The result. */
        bool failed;
        int error;          /* when failed: the first failure's negative errno */
        ApiError api_error; /* when failed */
        char *message;
        char *answer;
        char *citations;       /* the record's JSON array, NULL: [] */
        json_object *searches; /* each wiki_search done: {"query", "results"}, for the report (API.md 9.2) */
        QueryReadPage *read_pages;
        size_t n_read_pages;
        size_t read_bytes; /* of text kept */
        QueryTimings timings;
        SandboxArtifacts artifacts;
        bool reported;

        QueryRunDone done;
        void *userdata;

        /* What it is doing, as it happens (API.md 11.2). */
        QueryEventHandler on_event;
        void *event_userdata;
        QueryPhase phase;
        unsigned call;      /* tool calls of the current step so far */
        unsigned call_step; /* the step they belong to */
        bool cleanup_phase; /* reported */

        /* The model's text of step live_step as it streams in: emitted as
         * the answer will read (agent.c trims it), so leading whitespace is
         * skipped and trailing whitespace held until more text follows. */
        unsigned live_step;
        bool live_started;
        size_t live_emitted;
        char *live_held;
        size_t live_held_size;
};

static void query_run_advance(QueryRun *q);
static void query_run_step_text(QueryRun *q, const char *text);

/* Log one line about the query, with its id as a journal field. */
_printf_(3, 4) static void query_run_log(QueryRun *q, int level, const char *format, ...) {
        char f_id[64], f_state[64], line[1024];
        const char *fields[] = { f_id, f_state, "WIKIWEB_EVENT=query_step", NULL };
        va_list ap;

        snprintf(f_id, sizeof f_id, "QUERY_ID=%s", q->id);
        snprintf(f_state, sizeof f_state, "QUERY_STATE=%s", query_run_state_table[q->state]);
        va_start(ap, format);
        vsnprintf(line, sizeof line, format, ap);
        va_end(ap);
        log_fields(level, fields, "Query %s: %s", q->id, line);
}

static void query_run_emit(QueryRun *q, QueryEvent ev) {
        if (ev.type == QUERY_EVENT_PHASE || ev.type == QUERY_EVENT_STEP || ev.type == QUERY_EVENT_TOOL)
                q->phase = ev.phase;
        ev.phase = q->phase;
        if (q->on_event)
                q->on_event(q->id, &ev, q->event_userdata);
}

/* The text the model wrote in a step, in deltas of at most
 * QUERY_TEXT_DELTA_MAX bytes (cut between characters), so that no event is
 * large. A streamed reply passes each delta through here as it arrives
 * (query_run_on_model_text()); a reply the server sent whole goes through
 * here at the step's end (query_run_step_text()). */
#define QUERY_TEXT_DELTA_MAX (16U * 1024U)

static void query_run_text(QueryRun *q, unsigned step, const char *text, size_t size) {
        while (size > 0) {
                size_t n = MIN(size, (size_t) QUERY_TEXT_DELTA_MAX);

                while (n < size && n > 1 && ((unsigned char) text[n] & 0xc0) == 0x80)
                        n--;
                query_run_emit(
                        q,
                        (QueryEvent){ .type = QUERY_EVENT_TEXT, .step = step, .text = text, .text_size = n });
                text += n;
                size -= n;
        }
}

/* Strings of a tool call as shown on the stream: cut to 200 bytes (on a
 * character boundary). */
#define QUERY_EVENT_STRING_MAX 200

static json_object *query_run_shown_string(const char *s) {
        size_t n = strlen(s);

        if (n > QUERY_EVENT_STRING_MAX) {
                n = QUERY_EVENT_STRING_MAX;
                while (n > 0 && ((unsigned char) s[n] & 0xc0) == 0x80)
                        n--;
        }
        return json_string_n(s, n);
}

/* Number the next tool call of step (API.md 11.2: calls count from 1
 * within their step). */
static void query_run_next_call(QueryRun *q, unsigned step) {
        if (q->call_step != step) {
                q->call_step = step;
                q->call = 0;
        }
        q->call++;
}

/* A tool call's arguments as validated, strings cut, the code replaced by
 * its size, added to o. */
static int query_run_tool_arguments(json_object *o, const AgentCall *c) {
        int r;

        switch (c->tool) {
        case AGENT_TOOL_WIKI_SEARCH:
                r = json_add(o, "query", query_run_shown_string(c->query));
                if (r < 0)
                        return r;
                return json_add(o, "limit", json_object_new_int64(c->limit));
        case AGENT_TOOL_WIKI_READ:
                return json_add(o, "title", query_run_shown_string(c->title));
        case AGENT_TOOL_RUN_PYTHON:
                return json_add(o, "code_bytes", json_object_new_int64((int64_t) c->code_size));
        default:
                return 0;
        }
}

/* A tool call starts: its event, with its arguments ({} when they cannot
 * be rendered). */
static void query_run_emit_tool(QueryRun *q, const AgentAction *a) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        const AgentCall *c = &a->call;
        int r = o ? query_run_tool_arguments(o, c) : -ENOMEM;

        if (r < 0)
                query_run_log(
                        q,
                        LOG_WARNING,
                        "step %u: the tool event's arguments could not be rendered: %s",
                        a->step,
                        strerror(-r));
        query_run_next_call(q, a->step);
        query_run_emit(
                q,
                (QueryEvent){
                        .type = QUERY_EVENT_TOOL,
                        .phase = c->tool == AGENT_TOOL_RUN_PYTHON ? QUERY_PHASE_SANDBOX : QUERY_PHASE_WIKI,
                        .step = a->step,
                        .call = q->call,
                        .name = agent_tool_to_string(c->tool),
                        .json = r >= 0 ? json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN) : "{}",
                });
}

/* {key: value} (value taken over), or NULL when out of memory. */
static json_object *query_run_summary(const char *key, json_object *value) {
        json_object *o = json_object_new_object();

        if (!o) {
                json_object_put(value);
                return NULL;
        }
        if (json_add(o, key, value) < 0) {
                json_object_put(o);
                return NULL;
        }
        return o;
}

/* The calls the agent answered with an error (API.md 11.2): each a tool
 * event without arguments and at once its tool_result, not ok, with the
 * error sanitized. */
static void query_run_emit_rejected(QueryRun *q, const AgentAction *a) {
        for (size_t i = 0; i < a->n_rejected; i++) {
                const AgentRejectedCall *c = &a->rejected[i];
                _cleanup_(json_object_putp) json_object *summary = NULL;
                _cleanup_free_ char *error = NULL;

                query_run_next_call(q, c->step);
                query_run_emit(
                        q,
                        (QueryEvent){ .type = QUERY_EVENT_TOOL,
                                      .phase = q->phase,
                                      .step = c->step,
                                      .call = q->call,
                                      .name = c->name,
                                      .json = "{}" });
                if (sanitize_message(c->error, strlen(c->error), &error) >= 0)
                        summary = query_run_summary("error", json_string(error));
                query_run_emit(
                        q,
                        (QueryEvent){ .type = QUERY_EVENT_TOOL_RESULT,
                                      .step = c->step,
                                      .call = q->call,
                                      .name = c->name,
                                      .ok = false,
                                      .json = summary ?
                                              json_object_to_json_string_ext(summary, JSON_C_TO_STRING_PLAIN) :
                                              "{}" });
        }
}

/* The tool call in flight ended; summary is taken over (NULL: {}). */
static void query_run_emit_tool_result(QueryRun *q, bool ok, json_object *summary) {
        _cleanup_(json_object_putp) json_object *o = summary;

        query_run_emit(
                q,
                (QueryEvent){
                        .type = QUERY_EVENT_TOOL_RESULT,
                        .step = q->op_step,
                        .call = q->call,
                        .name = agent_tool_to_string(q->op_tool),
                        .ok = ok,
                        .duration = usec_sub_unsigned(now(CLOCK_MONOTONIC), q->op_started),
                        .json = o ? json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN) : "{}",
                });
}


static json_object *query_run_page_summary(const WikiPage *p) {
        json_object *o = json_object_new_object();

        if (o &&
            (json_add(o, "title", json_string(p->title)) < 0 || json_add(o, "url", json_string(p->url)) < 0 ||
             json_add(o, "revision_id", json_object_new_int64((int64_t) p->revision_id)) < 0)) {
                json_object_put(o);
                return NULL;
        }
        return o;
}

/* A run's summary (API.md 11.2), or NULL when out of memory. */
static json_object *query_run_python_summary(const SandboxResult *res) {
        json_object *o = NULL;

        if (sandbox_result_to_json(res, SANDBOX_RESULT_SUMMARY, &o) < 0)
                return NULL;
        return o;
}

/* The first error wins: a negative errno and the API error. The agent
 * learns it too, so its next decision is FAIL (it may be in the middle of a
 * step). */
static void query_run_fail(QueryRun *q, int error, ApiError api_error, const char *message) {
        assert(error < 0);

        if (q->failed)
                return;
        q->failed = true;
        q->error = error;
        q->api_error = api_error;
        q->message = message ? strdup(message) : NULL;
        if (q->agent)
                (void) agent_abort(
                        q->agent, api_error, message ? message : api_error_default_message(api_error));
}

/* Stop whatever is in flight. Upstream and wiki operations end at once
 * (freeing cancels, no callback); a sandbox run is killed and its callback
 * comes after the cleanup. */
static void query_run_cancel_in_flight(QueryRun *q) {
        q->wait_source = sd_event_source_disable_unref(q->wait_source);
        if (q->model_call) {
                q->model_call = llm_call_free(q->model_call);
                query_run_add_phase(
                        &q->timings.model, "model", usec_sub_unsigned(now(CLOCK_MONOTONIC), q->op_started));
        }
        if (q->wiki_op) {
                q->wiki_op = wiki_operation_free(q->wiki_op);
                q->checking = false;
                wiki_result_done(&q->pending);
                query_run_add_phase(
                        &q->timings.wiki, "wiki", usec_sub_unsigned(now(CLOCK_MONOTONIC), q->wiki_mark));
        }
        if (q->sandbox_run && !q->sandbox_cancelled) {
                q->sandbox_cancelled = true;
                sandbox_run_cancel(q->sandbox_run);
        }
}

usec_t query_sandbox_wait_until(usec_t started, usec_t deadline) {
        return MIN(usec_add(started, QUERY_SANDBOX_WAIT_MAX_USEC), deadline);
}

bool query_sandbox_decide(SandboxState state, usec_t t, usec_t wait_until, QuerySandbox *ret) {
        assert(ret);

        switch (state) {
        case SANDBOX_AVAILABLE:
                *ret = QUERY_SANDBOX_OFFERED;
                return true;
        case SANDBOX_STARTING:
                if (t < wait_until)
                        return false;
                *ret = QUERY_SANDBOX_STARTING;
                return true;
        default:
                *ret = QUERY_SANDBOX_UNAVAILABLE;
                return true;
        }
}

/* (Re)make the agent for question, offering run_python if q->offer says so
 * and the query's sandbox directory can be made (if not, it is not offered
 * after all). Before the first step only. */
static int query_run_make_agent(QueryRun *q, const char *question, const QueryTurn *turns, size_t n_turns) {
        const Config *c = q->config;
        int r;

        if (q->offer == QUERY_SANDBOX_OFFERED && !q->sandbox_query) {
                r = sandbox_query_new(q->sandbox, q->id, &q->sandbox_query);
                if (r < 0) {
                        log_warning_errno(
                                r, "Query %s: no sandbox for this query, run_python not offered", q->id);
                        q->offer = QUERY_SANDBOX_UNAVAILABLE;
                }
        }
        q->agent = agent_free(q->agent);
        return agent_new_follow_up(
                &(AgentSettings){
                        .model = c->llm_model,
                        .max_steps = (unsigned) c->query_max_steps,
                        .context_tokens = c->model_context_tokens,
                        .max_output_bytes = c->model_max_output_bytes,
                        .tool_result_max_bytes = c->tool_result_max_bytes,
                        .sandbox_available = q->offer == QUERY_SANDBOX_OFFERED,
                        .stream = llm_client_stream_mode(q->llm),
                },
                question,
                turns,
                n_turns,
                &q->agent);
}

/* The wait for a starting sandbox ends with offer (also when the query
 * ends during it: QUERY_SANDBOX_STARTING). One journal line says how long
 * it took; the wait counts as sandbox time (timings_ms.sandbox). */
static int query_run_end_wait(QueryRun *q, QuerySandbox offer) {
        usec_t waited = usec_sub_unsigned(now(CLOCK_MONOTONIC), q->started);
        int r = 0;

        q->wait_source = sd_event_source_disable_unref(q->wait_source);
        query_run_add_phase(&q->timings.sandbox, "sandbox", waited);
        q->offer = offer;
        if (offer == QUERY_SANDBOX_OFFERED)
                r = query_run_make_agent(q, q->question, q->turns, q->n_turns);
        q->question = mfree(q->question);
        query_turns_free(q->turns, q->n_turns);
        q->turns = NULL;
        q->n_turns = 0;
        query_run_log(
                q,
                offer == QUERY_SANDBOX_STARTING ? LOG_NOTICE : LOG_INFO,
                "waited %" PRIu64 " ms for the sandbox to start: %s%s%s; run_python %s.",
                waited / USEC_PER_MSEC,
                offer == QUERY_SANDBOX_OFFERED          ? "available" :
                        offer == QUERY_SANDBOX_STARTING ? "still starting, gave up" :
                                                          "unavailable",
                offer == QUERY_SANDBOX_OFFERED ? "" : ", ",
                offer == QUERY_SANDBOX_OFFERED ? "" : sandbox_unavailable_reason(q->sandbox),
                q->offer == QUERY_SANDBOX_OFFERED ? "offered" : "not offered");
        return r;
}

static int query_run_on_defer(sd_event_source *s, void *userdata) {
        QueryRun *q = userdata;

        q->defer = sd_event_source_disable_unref(q->defer);
        query_run_advance(q);
        return 0;
}

/* Advance from a defer: never inside the caller (start, abort, timer). */
static void query_run_kick(QueryRun *q) {
        int r;

        if (q->defer)
                return;
        r = sd_event_add_defer(q->event, &q->defer, query_run_on_defer, q);
        if (r < 0) {
                /* Cannot happen short of OOM; advance directly rather than hang. */
                log_error_errno(r, "Query %s: cannot schedule its next step", q->id);
                query_run_advance(q);
                return;
        }
        (void) sd_event_source_set_description(q->defer, "query-run-defer");
}

void query_run_abort(QueryRun *q, int error, ApiError api_error, const char *message) {
        assert(q);

        if (q->reported || q->state >= QUERY_RUN_CLEANUP)
                return;
        if (q->state == QUERY_RUN_SANDBOX_WAIT)
                (void) query_run_end_wait(q, QUERY_SANDBOX_STARTING);
        query_run_fail(q, error, api_error, message);
        query_run_cancel_in_flight(q);
        q->state = QUERY_RUN_CLEANUP;
        query_run_kick(q);
}

static int query_run_on_wait_over(sd_event_source *s, uint64_t usec, void *userdata) {
        QueryRun *q = userdata;

        q->wait_source = sd_event_source_disable_unref(q->wait_source);
        query_run_kick(q);
        return 0;
}

void query_run_sandbox_changed(QueryRun *q) {
        assert(q);

        if (q->state == QUERY_RUN_SANDBOX_WAIT && !q->reported)
                query_run_kick(q);
}

static int query_run_on_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        QueryRun *q = userdata;
        char m[128];

        q->deadline_source = sd_event_source_disable_unref(q->deadline_source);
        snprintf(
                m,
                sizeof m,
                "the query did not finish within %" PRIu64 " s",
                (uint64_t) q->config->query_timeout_seconds);
        query_run_log(
                q, LOG_WARNING, "deadline reached in state %s, cancelling.", query_run_state_table[q->state]);
        query_run_abort(q, -ETIMEDOUT, API_ERROR_QUERY_TIMEOUT, m);
        return 0;
}

/* A wiki failure ends the query with the wiki's error (API.md 8.1). */
static void query_run_wiki_failed(QueryRun *q, const WikiResult *r) {
        query_run_log(q, LOG_INFO, "wiki request failed: %s", api_error_to_string(r->api_error));
        query_run_fail(q, r->error, r->api_error, r->message);
        q->state = QUERY_RUN_CLEANUP;
}

/* Keep a page for the citations (QueryReadPage). */
static int query_run_keep_page(QueryRun *q, const WikiPage *p) {
        QueryReadPage *n;

        if (p->missing || !p->title)
                return 0;
        for (size_t i = 0; i < q->n_read_pages; i++)
                if (streq(q->read_pages[i].title, p->title))
                        return 0;
        n = reallocarray(q->read_pages, q->n_read_pages + 1, sizeof(QueryReadPage));
        if (!n)
                return -ENOMEM;
        q->read_pages = n;
        n = &q->read_pages[q->n_read_pages];
        *n = (QueryReadPage){
                .title = strdup(p->title),
                .redirected_from = p->redirected_from ? strdup(p->redirected_from) : NULL,
                .revision_id = p->revision_id,
        };
        if (!n->title || (p->redirected_from && !n->redirected_from)) {
                query_read_page_done(n);
                return -ENOMEM;
        }
        if (p->content && p->content_size <= QUERY_CITATION_TEXT_MAX_BYTES - q->read_bytes) {
                n->text = malloc(p->content_size + 1);
                if (!n->text) {
                        query_read_page_done(n);
                        return -ENOMEM;
                }
                memcpy(n->text, p->content, p->content_size);
                n->text[p->content_size] = 0;
                n->size = p->content_size;
                q->read_bytes += p->content_size;
        } else if (p->content)
                query_run_log(
                        q,
                        LOG_NOTICE,
                        "the text of %s is not kept for the citations: over the query's %zu MiB",
                        p->title,
                        QUERY_CITATION_TEXT_MAX_BYTES / (1024 * 1024));
        q->n_read_pages++;
        return 0;
}

/* A page read (by the request or the model) goes to the agent, to the
 * pages kept for the citations, and to /data as well. */
static int query_run_take_page(QueryRun *q, const WikiPage *p) {
        int r;

        if (q->state == QUERY_RUN_PRELOAD)
                r = agent_preload_page(q->agent, q->op_title, p);
        else
                r = agent_tool_read_done(q->agent, p);
        if (r < 0)
                return r;
        r = query_run_keep_page(q, p);
        if (r < 0 || !q->sandbox_query || p->missing)
                return r;
        return sandbox_query_add_page(q->sandbox_query, p);
}

/* A wiki_search done: what was asked and how many pages it found, kept
 * for the unanswered report (at most 64 per query; a failure to keep one
 * loses only that). */
static void query_run_keep_search(QueryRun *q, size_t n_hits) {
        json_object *e;

        if (!q->op_search)
                return;
        if (!q->searches && !(q->searches = json_object_new_array()))
                return;
        if (json_object_array_length(q->searches) >= 64)
                return;
        e = json_object_new_object();
        if (!e || json_add(e, "query", json_string(q->op_search)) < 0 ||
            json_add(e, "results", json_object_new_int64((int64_t) n_hits)) < 0 ||
            json_object_array_add(q->searches, e) < 0)
                json_object_put(e);
        q->op_search = mfree(q->op_search);
}

/* A search or read as the model (or the request) gets it: after the read
 * check in person mode. */
static void query_run_wiki_result(QueryRun *q, int error, const WikiResult *r) {
        int k = 0;

        if (q->state != QUERY_RUN_PRELOAD)
                query_run_emit_tool_result(
                        q,
                        error >= 0,
                        error < 0 ?
                                query_run_summary("error", json_string(api_error_to_string(r->api_error))) :
                                q->op_tool == AGENT_TOOL_WIKI_SEARCH ?
                                query_run_summary("results", json_object_new_int64((int64_t) r->n_hits)) :
                                r->page.missing ? query_run_summary("missing", json_object_new_boolean(true)) :
                                                  query_run_page_summary(&r->page));
        if (error < 0)
                query_run_wiki_failed(q, r);
        else if (q->state == QUERY_RUN_PRELOAD) {
                k = query_run_take_page(q, &r->page);
                query_run_log(
                        q,
                        LOG_INFO,
                        "read requested page %zu of the request%s.",
                        q->next_page,
                        r->page.missing ? " (missing)" : "");
        } else if (q->op_tool == AGENT_TOOL_WIKI_READ) {
                k = query_run_take_page(q, &r->page);
                query_run_log(
                        q,
                        LOG_INFO,
                        "step %u: wiki_read done in %" PRIu64 " ms%s.",
                        q->op_step,
                        usec_sub_unsigned(now(CLOCK_MONOTONIC), q->op_started) / USEC_PER_MSEC,
                        r->page.missing                 ? " (missing)" :
                                r->page.redirected_from ? " (redirected)" :
                                                          "");
                q->state = QUERY_RUN_STEP;
        } else {
                query_run_keep_search(q, r->n_hits);
                k = agent_tool_search_done(q->agent, r->hits, r->n_hits);
                query_run_log(
                        q,
                        LOG_INFO,
                        "step %u: wiki_search done in %" PRIu64 " ms, %zu results.",
                        q->op_step,
                        usec_sub_unsigned(now(CLOCK_MONOTONIC), q->op_started) / USEC_PER_MSEC,
                        r->n_hits);
                q->state = QUERY_RUN_STEP;
        }
        if (k < 0) {
                log_error_errno(k, "Query %s: cannot take the wiki's result", q->id);
                query_run_fail(q, k, API_ERROR_INTERNAL_ERROR, NULL);
                q->state = QUERY_RUN_CLEANUP;
        }
}

/* The titles of a search or read result to check for the person: each
 * hit; the page, and the title asked for when a redirect was followed (a
 * public redirect into a page the person may not read is withheld, and so
 * is a redirect the person may not read itself). NULL strv and 0: nothing
 * to check (no hits, a missing page). */
static int query_run_check_titles(QueryRun *q, const WikiResult *r, char ***ret) {
        _cleanup_(strv_freep) char **l = NULL;
        size_t n = 0;
        bool search = q->op_tool == AGENT_TOOL_WIKI_SEARCH && q->state != QUERY_RUN_PRELOAD;

        if (search)
                n = MIN(r->n_hits, (size_t) MEDIAWIKI_TITLES_MAX);
        else if (!r->page.missing && r->page.title)
                n = r->page.redirected_from ? 2 : 1;
        if (n == 0) {
                *ret = NULL;
                return 0;
        }
        l = calloc(n + 1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const char *t = search ? r->hits[i].title : i == 0 ? r->page.title : r->page.redirected_from;

                l[i] = strdup(t);
                if (!l[i])
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

static void query_run_on_wiki_done(WikiOperation *op, int error, const WikiResult *r, void *userdata);

/* Person mode: after a search or read, ask the wiki what the person may
 * read of it (one request). 1: the check is in flight (q->pending holds
 * the result), 0: nothing to check, < 0: it could not start. */
static int query_run_start_check(QueryRun *q, WikiOperation *op, const WikiResult *r) {
        _cleanup_(strv_freep) char **titles = NULL;
        int k;

        k = query_run_check_titles(q, r, &titles);
        if (k < 0 || !titles)
                return k;
        wiki_operation_take_result(op, &q->pending);
        q->wiki_op = wiki_operation_free(q->wiki_op);
        k = wiki_client_readcheck(q->wiki, q->user, titles, query_run_on_wiki_done, q, &q->wiki_op);
        if (k < 0) {
                wiki_result_done(&q->pending);
                return k;
        }
        q->checking = true;
        return 1;
}

/* Person mode: keep of q->pending what the person may read. A search keeps
 * the first op_limit readable hits; a page the person may not read becomes
 * the missing page of the title asked for, exactly as the wiki reports a
 * page that does not exist. Returns the pages withheld. */
static unsigned query_run_filter_pending(QueryRun *q, const bool *readable, size_t n) {
        WikiResult *r = &q->pending;
        unsigned withheld = 0;

        if (q->op_tool == AGENT_TOOL_WIKI_SEARCH && q->state != QUERY_RUN_PRELOAD) {
                size_t kept = 0;

                for (size_t i = 0; i < r->n_hits; i++) {
                        bool ok = i < n && readable[i];

                        if (!ok)
                                withheld++;
                        if (ok && kept < q->op_limit) {
                                MediaWikiSearchHit h = r->hits[i];
                                r->hits[i] = (MediaWikiSearchHit){ 0 };
                                r->hits[kept++] = h;
                        } else {
                                free(r->hits[i].title);
                                free(r->hits[i].snippet);
                                r->hits[i] = (MediaWikiSearchHit){ 0 };
                        }
                }
                r->n_hits = kept;
                return withheld;
        }
        for (size_t i = 0; i < n; i++)
                if (!readable[i]) {
                        withheld = 1;
                        break;
                }
        if (withheld || n == 0) {
                char *asked = r->page.redirected_from ? r->page.redirected_from : r->page.title;

                /* Take the title asked for; drop everything else. */
                if (asked == r->page.redirected_from)
                        r->page.redirected_from = NULL;
                else
                        r->page.title = NULL;
                wiki_page_done(&r->page);
                r->page = (WikiPage){ .missing = true, .title = asked };
                withheld = 1;
        }
        return withheld;
}

static void query_run_on_check_done(QueryRun *q, int error, const WikiResult *r) {
        q->checking = false;
        metrics_count_read_check(error >= 0);
        if (error < 0) {
                _cleanup_free_ char *m = NULL;

                /* Never the wiki's own text here: it may name a title. */
                query_run_log(
                        q,
                        LOG_WARNING,
                        "the read check failed: %s; failing closed.",
                        api_error_to_string(r->api_error));
                /* Fail closed as every read check does (query/read-check.h). */
                if (read_check_failure(r->api_error, r->message, &m) < 0)
                        m = NULL;
                if (q->state != QUERY_RUN_PRELOAD)
                        query_run_emit_tool_result(
                                q, false, query_run_summary("error", json_string("wiki_auth_failed")));
                query_run_fail(q, -EACCES, READ_CHECK_API_ERROR, m ? m : "The wiki's read check failed");
                q->state = QUERY_RUN_CLEANUP;
        } else {
                unsigned withheld = query_run_filter_pending(q, r->readable, r->n_readable);
                bool search = q->op_tool == AGENT_TOOL_WIKI_SEARCH && q->state != QUERY_RUN_PRELOAD;

                if (!q->reader_logged) {
                        /* The account the wiki resolved the sign-on's name to (API.md "Whose name"). */
                        if (r->reader)
                                query_run_log(q, LOG_INFO, "read as the wiki account %s.", r->reader);
                        else
                                query_run_log(q, LOG_INFO, "read as an anonymous reader of the wiki.");
                        q->reader_logged = true;
                }

                if (withheld > 0) {
                        metrics_count_withheld(search ? "search" : "read", withheld);
                        /* The count only: a withheld title is never logged. */
                        query_run_log(
                                q,
                                LOG_INFO,
                                "%u %s withheld: the person may not read %s.",
                                withheld,
                                withheld == 1 ? "page" : "pages",
                                withheld == 1 ? "it" : "them");
                }
                query_run_wiki_result(q, 0, &q->pending);
        }
        wiki_result_done(&q->pending);
}

static void query_run_on_wiki_done(WikiOperation *op, int error, const WikiResult *r, void *userdata) {
        QueryRun *q = userdata;
        int k;

        assert(op == q->wiki_op);
        /* Since the operation (or its read check's search or read) began. */
        query_run_add_phase(&q->timings.wiki, "wiki", usec_sub_unsigned(now(CLOCK_MONOTONIC), q->wiki_mark));
        q->wiki_mark = now(CLOCK_MONOTONIC);

        if (q->checking)
                query_run_on_check_done(q, error, r);
        else if (error >= 0 && q->read_as_person) {
                k = query_run_start_check(q, op, r);
                if (k > 0)
                        return; /* the check's completion comes here again */
                if (k < 0) {
                        log_error_errno(k, "Query %s: cannot start the read check", q->id);
                        query_run_fail(q, k, API_ERROR_INTERNAL_ERROR, NULL);
                        q->state = QUERY_RUN_CLEANUP;
                } else
                        query_run_wiki_result(q, error, r);
        } else
                query_run_wiki_result(q, error, r);

        q->wiki_op = wiki_operation_free(q->wiki_op);
        q->op_title = mfree(q->op_title);
        query_run_advance(q);
}

static void query_run_on_model_done(LlmCall *call, int error, const LlmCallResult *r, void *userdata) {
        QueryRun *q = userdata;
        usec_t took = usec_sub_unsigned(now(CLOCK_MONOTONIC), q->op_started);
        LlmReply reply = { .content = NULL };
        LlmError err = { .message = NULL };
        int k;

        assert(call == q->model_call);
        query_run_add_phase(&q->timings.model, "model", took);

        if (error < 0) {
                /* No reply to read: the exchange's own error. */
                query_run_log(
                        q,
                        LOG_INFO,
                        "step %u: model request failed after %" PRIu64 " ms: %s.",
                        q->op_step,
                        took / USEC_PER_MSEC,
                        api_error_to_string(r->api_error));
                query_run_fail(q, error, r->api_error, r->message);
                q->state = QUERY_RUN_CLEANUP;
        } else {
                query_run_log(
                        q,
                        LOG_INFO,
                        "step %u: model replied in %" PRIu64 " ms, HTTP %ld, %" PRIu64 " bytes%s.",
                        q->op_step,
                        took / USEC_PER_MSEC,
                        r->status,
                        r->bytes,
                        r->streamed ? ", streamed" : "");
                uint64_t prompt0, completion0, prompt, completion;

                /* The reply's usage, into wikiweb_model_tokens_total as it
                 * arrives (API.md 12.3): what the agent added to its sums. */
                agent_usage(q->agent, &prompt0, &completion0);
                k = llm_call_take_reply(call, &reply, &err);
                if (k == 0 || k == -EBADMSG)
                        k = agent_model_parsed(q->agent, k == 0 ? &reply : NULL, k == 0 ? NULL : &err);
                agent_usage(q->agent, &prompt, &completion);
                metrics_count_model_tokens("prompt", prompt - prompt0);
                metrics_count_model_tokens("completion", completion - completion0);
                if (k < 0) {
                        log_error_errno(k, "Query %s: cannot take the model's reply", q->id);
                        query_run_fail(q, k, API_ERROR_INTERNAL_ERROR, NULL);
                        q->state = QUERY_RUN_CLEANUP;
                } else {
                        size_t n;
                        const LlmMessage *m = agent_messages(q->agent, &n);

                        /* A reply with tool calls: its text is the model
                         * thinking aloud (an answer's text goes out with
                         * the answer). */
                        if (n > 0 && m[n - 1].role == LLM_ROLE_ASSISTANT && m[n - 1].n_tool_calls > 0 &&
                            m[n - 1].content)
                                query_run_step_text(q, m[n - 1].content);
                        q->state = QUERY_RUN_STEP;
                }
        }

        q->model_call = llm_call_free(q->model_call);
        query_run_advance(q);
}

static void query_run_on_sandbox_done(SandboxRun *run, int error, const SandboxResult *res, void *userdata) {
        QueryRun *q = userdata;
        int k = 0;

        assert(run == q->sandbox_run);
        q->sandbox_run = NULL;
        query_run_add_phase(
                &q->timings.sandbox,
                "sandbox",
                res ? res->run_usec : usec_sub_unsigned(now(CLOCK_MONOTONIC), q->op_started));
        if (res)
                query_run_add_phase(&q->timings.cleanup, "cleanup", res->cleanup_usec);

        if (res && !res->cleanup_confirmed) {
                query_run_log(
                        q, LOG_ERR, "step %u: the container's cleanup could not be confirmed.", q->op_step);
                query_run_fail(q, -EBUSY, API_ERROR_CLEANUP_FAILED, NULL);
        }
        if (error < 0) {
                query_run_log(q, LOG_ERR, "step %u: no container could run: %s", q->op_step, strerror(-error));
                query_run_fail(q, error, API_ERROR_EXECUTION_FAILED, "the sandbox could not start a container");
        }

        query_run_emit_tool_result(
                q,
                res && error >= 0,
                res && error >= 0 ? query_run_python_summary(res) :
                                    query_run_summary("error", json_string("no container could run")));
        if (q->failed || q->sandbox_cancelled)
                q->state = QUERY_RUN_CLEANUP;
        else {
                k = agent_tool_python_done(q->agent, res);
                if (k < 0) {
                        log_error_errno(k, "Query %s: cannot take the sandbox's result", q->id);
                        query_run_fail(q, k, API_ERROR_INTERNAL_ERROR, NULL);
                        q->state = QUERY_RUN_CLEANUP;
                } else {
                        query_run_log(
                                q,
                                LOG_INFO,
                                "step %u: run_python done in %" PRIu64 " ms, exit %d%s%s.",
                                q->op_step,
                                res->run_usec / USEC_PER_MSEC,
                                res->has_exit_code ? res->exit_code : -1,
                                res->signal ? ", " : "",
                                res->signal ? res->signal : "");
                        q->state = QUERY_RUN_STEP;
                }
        }
        query_run_advance(q);
}

static int query_run_start_read(QueryRun *q, const char *title) {
        q->op_title = strdup(title);
        if (!q->op_title)
                return -ENOMEM;
        q->op_started = q->wiki_mark = now(CLOCK_MONOTONIC);
        return wiki_client_read(q->wiki, title, query_run_on_wiki_done, q, &q->wiki_op);
}

/* The live text of the model's reply, delta by delta as it streams in
 * (from inside libcurl's write callback: nothing may be freed or started
 * here). The handler for the query's event stream (API.md 11.2 "text"). */
static bool query_run_is_space(char c) {
        return c && strchr(" \t\r\n\v\f", c);
}

static void query_run_on_model_text(const char *delta, size_t n, void *userdata) {
        QueryRun *q = userdata;
        size_t e;

        if (q->live_step != q->op_step) {
                q->live_step = q->op_step;
                q->live_started = false;
                q->live_emitted = 0;
                q->live_held_size = 0;
        }
        if (!q->live_started) {
                while (n > 0 && query_run_is_space(*delta)) {
                        delta++;
                        n--;
                }
                if (n == 0)
                        return;
                q->live_started = true;
        }
        for (e = n; e > 0 && query_run_is_space(delta[e - 1]); e--)
                ;
        if (e > 0) {
                if (q->live_held_size > 0)
                        query_run_text(q, q->op_step, q->live_held, q->live_held_size);
                query_run_text(q, q->op_step, delta, e);
                q->live_emitted += q->live_held_size + e;
                q->live_held_size = 0;
        }
        if (e < n) {
                /* Whitespace only, bounded by the model's output budget. */
                char *h = realloc(q->live_held, q->live_held_size + (n - e));

                if (!h) {
                        log_oom();
                        return;
                }
                memcpy(h + q->live_held_size, delta + e, n - e);
                q->live_held = h;
                q->live_held_size += n - e;
        }
}

/* The end of a model step with text: what was not streamed goes out whole
 * (a server that answered with one JSON body). */
static void query_run_step_text(QueryRun *q, const char *text) {
        if (q->live_step == q->op_step && q->live_emitted > 0)
                return;
        query_run_text(q, q->op_step, text, strlen(text));
}

/* A tool call starts in the model's reply (the "tool" event itself comes
 * when the call is validated and run). */
static void query_run_on_model_tool_call(size_t index, const char *name, void *userdata) {
        QueryRun *q = userdata;

        log_debug("Query %s: step %u: the model calls %s.", q->id, q->op_step, name);
}

/* The server refused stream_options: the same request without them. */
static int query_run_rebuild_request(LlmStreamMode mode, const char **ret_body, size_t *ret_size, void *userdata) {
        QueryRun *q = userdata;
        AgentAction a;
        int r;

        r = agent_set_stream(q->agent, mode);
        if (r < 0)
                return r;
        r = agent_rebuild_request(q->agent, &a);
        if (r < 0)
                return r;
        *ret_body = a.body;
        *ret_size = a.body_size;
        return 0;
}

static int query_run_send(QueryRun *q, const AgentAction *a) {
        query_run_log(
                q,
                LOG_INFO,
                "step %u: model request, %zu bytes, ~%" PRIu64 " prompt tokens, max_tokens %" PRIu64 "%s.",
                a->step,
                a->body_size,
                a->prompt_tokens_estimate,
                a->max_tokens,
                a->with_tools ? "" : ", without tools (the last step)");
        q->op_started = now(CLOCK_MONOTONIC);
        q->op_step = a->step;
        query_run_emit(
                q, (QueryEvent){ .type = QUERY_EVENT_STEP, .phase = QUERY_PHASE_MODEL, .step = a->step });
        return llm_call_start(
                q->llm,
                &(LlmCallRequest){
                        .body = a->body,
                        .body_size = a->body_size,
                        .deadline = q->deadline,
                        .limits = agent_reply_limits(q->agent),
                        .live = { .text = query_run_on_model_text,
                                  .tool_call = query_run_on_model_tool_call,
                                  .userdata = q },
                        .rebuild = query_run_rebuild_request,
                },
                query_run_on_model_done,
                q,
                &q->model_call);
}

static int query_run_start_tool(QueryRun *q, const AgentAction *a) {
        q->op_started = q->wiki_mark = now(CLOCK_MONOTONIC);
        q->op_step = a->step;
        q->op_tool = a->call.tool;
        query_run_log(q, LOG_INFO, "step %u: %s.", a->step, agent_tool_to_string(a->call.tool));

        switch (a->call.tool) {
        case AGENT_TOOL_WIKI_SEARCH:
                log_debug("Query %s: wiki_search limit %u.", q->id, a->call.limit);
                free(q->op_search);
                q->op_search = a->call.query ? strdup(a->call.query) : NULL;
                /* A person gets up to limit hits they may read where the
                 * wiki has them: the check sees up to 50 (one request). */
                q->op_limit = a->call.limit;
                return wiki_client_search(
                        q->wiki,
                        a->call.query,
                        q->read_as_person ? MEDIAWIKI_SEARCH_MAX : a->call.limit,
                        query_run_on_wiki_done,
                        q,
                        &q->wiki_op);
        case AGENT_TOOL_WIKI_READ:
                return query_run_start_read(q, a->call.title);
        case AGENT_TOOL_RUN_PYTHON:
                if (!q->sandbox_query)
                        return -EAGAIN;
                q->sandbox_cancelled = false;
                return sandbox_run_start(
                        q->sandbox_query,
                        a->call.code,
                        a->call.code_size,
                        query_run_on_sandbox_done,
                        q,
                        &q->sandbox_run);
        default:
                return -EINVAL;
        }
}

/* A tool that cannot even start: the model hears about it (it may work
 * around it), except a sandbox that cannot start a container at all. */
static void query_run_tool_start_failed(QueryRun *q, const AgentAction *a, int r) {
        query_run_emit_tool_result(q, false, query_run_summary("error", json_string("the tool could not run")));
        query_run_log(
                q,
                LOG_WARNING,
                "step %u: %s could not start: %s",
                a->step,
                agent_tool_to_string(a->call.tool),
                strerror(-r));
        if (r == -ENOMEM) {
                query_run_fail(q, r, API_ERROR_INTERNAL_ERROR, NULL);
                return;
        }
        if (a->call.tool == AGENT_TOOL_RUN_PYTHON) {
                query_run_fail(q, r, API_ERROR_EXECUTION_FAILED, "the sandbox could not start a container");
                return;
        }
        r = agent_tool_failed(q->agent, "the tool could not run");
        if (r < 0)
                query_run_fail(q, r, API_ERROR_INTERNAL_ERROR, NULL);
}

/* The record's sources as history_finish() stores them (shared/source.h). */
static int query_run_sources_json(QueryRun *q, char **ret) {
        _cleanup_(json_object_putp) json_object *a = NULL;
        const Source *s;
        const char *t;
        char *copy;
        size_t n;

        s = agent_sources(q->agent, &n);
        a = source_to_json(s, n);
        t = a ? json_object_to_json_string_ext(a, JSON_C_TO_STRING_PLAIN) : NULL;
        copy = t ? strdup(t) : NULL;
        if (!copy)
                return -ENOMEM;
        *ret = copy;
        return 0;
}

/* The citations of a successful answer (docs/QUERY.md, "Citations"): the
 * citation lines out of q->answer, the verified list in q->citations,
 * counted in wikiweb_citations_total. A failure leaves the answer as it is
 * and the list empty. */
static void query_run_cite(QueryRun *q) {
        _cleanup_free_ CitationSource *src = NULL;
        _cleanup_free_ char *rest = NULL, *json = NULL;
        unsigned counts[_CITATION_STATUS_MAX] = { 0 };
        int r;

        if (q->failed || !q->answer)
                return;
        if (q->n_read_pages > 0) {
                src = calloc(q->n_read_pages, sizeof(CitationSource));
                if (!src) {
                        log_oom();
                        return;
                }
        }
        for (size_t i = 0; i < q->n_read_pages; i++)
                src[i] = (CitationSource){
                        .title = q->read_pages[i].title,
                        .redirected_from = q->read_pages[i].redirected_from,
                        .revision_id = q->read_pages[i].revision_id,
                        .text = q->read_pages[i].text,
                        .size = q->read_pages[i].size,
                };
        r = citation_answer(q->answer, src, q->n_read_pages, q->config->wiki_api_url, &rest, &json, counts);
        if (r < 0) {
                query_run_log(q, LOG_WARNING, "the citations could not be read: %s", strerror(-r));
                return;
        }
        free(q->answer);
        q->answer = TAKE_PTR(rest);
        free(q->citations);
        q->citations = TAKE_PTR(json);
        for (CitationStatus st = 0; st < _CITATION_STATUS_MAX; st++)
                metrics_count_citations(citation_status_to_string(st), counts[st]);
        query_run_log(
                q,
                LOG_INFO,
                "citations: %u verified, %u not found, %u not read, %u too short.",
                counts[CITATION_VERIFIED],
                counts[CITATION_NOT_FOUND],
                counts[CITATION_NOT_READ],
                counts[CITATION_TOO_SHORT]);
}

/* The searches as the record keeps them; NULL: [] (also when out of memory:
 * the report then lacks them, the query does not fail for it). */
static char *query_run_searches_json(QueryRun *q) {
        const char *t;

        if (!q->searches)
                return NULL;
        t = json_object_to_json_string_ext(q->searches, JSON_C_TO_STRING_PLAIN);
        return t ? strdup(t) : NULL;
}

/* DONE: report once, from the defer that got us here. */
static void query_run_report(QueryRun *q) {
        _cleanup_free_ char *sources = NULL, *searches = query_run_searches_json(q);
        uint64_t prompt = 0, completion = 0;
        QueryOutcome o;

        q->deadline_source = sd_event_source_disable_unref(q->deadline_source);
        if (query_run_sources_json(q, &sources) < 0)
                log_oom();
        query_run_cite(q);
        agent_usage(q->agent, &prompt, &completion);

        o = (QueryOutcome){
                .query_id = q->id,
                .error = q->failed ? q->error : 0,
                .api_error = q->failed ? q->api_error : _API_ERROR_INVALID,
                .message = q->failed ? q->message : NULL,
                .answer = q->failed ? NULL : q->answer,
                .cleanup_confirmed = !q->sandbox_query || sandbox_query_cleanup_confirmed(q->sandbox_query),
                .sources_json = sources,
                .citations_json = q->citations,
                .model = q->config->llm_model,
                .prompt_tokens = prompt,
                .completion_tokens = completion,
                .steps = agent_steps(q->agent),
                .timings = q->timings,
                .artifacts = q->artifacts.items,
                .n_artifacts = q->artifacts.n,
                .sandbox = query_sandbox_to_string(q->offer),
                .searches_json = searches,
        };
        q->reported = true;
        q->done(q, o.error, &o, q->userdata);
}

/* CLEANUP: nothing else may start; wait for a cancelled container, then
 * collect /out (also when the query failed). */
static bool query_run_cleanup(QueryRun *q) {
        usec_t t0;
        int r;

        query_run_cancel_in_flight(q);
        if (q->sandbox_run)
                return false; /* its callback brings us back */

        t0 = now(CLOCK_MONOTONIC);
        if (q->sandbox_query && q->artifacts.n == 0) {
                r = sandbox_query_collect(q->sandbox_query, &q->artifacts);
                if (r < 0)
                        query_run_log(q, LOG_ERR, "cannot collect the files in /out: %s", strerror(-r));
                else if (q->artifacts.n > 0 || q->artifacts.skipped_too_many > 0 || q->artifacts.skipped_too_large > 0)
                        query_run_log(
                                q,
                                LOG_INFO,
                                "%zu files in /out kept as artifacts (%zu over the count cap, %zu over the "
                                "byte cap, %zu not regular files left out).",
                                q->artifacts.n,
                                q->artifacts.skipped_too_many,
                                q->artifacts.skipped_too_large,
                                q->artifacts.skipped_not_regular);
        }
        query_run_add_phase(&q->timings.cleanup, "cleanup", usec_sub_unsigned(now(CLOCK_MONOTONIC), t0));
        return true;
}

static void query_run_advance(QueryRun *q) {
        AgentAction a;
        int r;

        for (;;) {
                if (q->model_call || q->wiki_op || (q->sandbox_run && q->state != QUERY_RUN_CLEANUP))
                        return; /* its completion calls us again */

                switch (q->state) {
                case QUERY_RUN_SANDBOX_WAIT: {
                        QuerySandbox offer;

                        if (!query_sandbox_decide(
                                    sandbox_get_state(q->sandbox), now(CLOCK_MONOTONIC), q->wait_until, &offer))
                                return; /* the Sandbox's announcement or the timer brings us back */
                        r = query_run_end_wait(q, offer);
                        if (r < 0) {
                                log_error_errno(r, "Query %s: cannot make its agent", q->id);
                                query_run_fail(q, r, API_ERROR_INTERNAL_ERROR, NULL);
                                q->state = QUERY_RUN_CLEANUP;
                                break;
                        }
                        q->state = QUERY_RUN_PRELOAD;
                        break;
                }

                case QUERY_RUN_PRELOAD:
                        if (q->pages && q->pages[q->next_page]) {
                                if (q->next_page == 0)
                                        query_run_emit(
                                                q,
                                                (QueryEvent){ .type = QUERY_EVENT_PHASE,
                                                              .phase = QUERY_PHASE_WIKI });
                                r = query_run_start_read(q, q->pages[q->next_page++]);
                                if (r < 0) {
                                        log_error_errno(r, "Query %s: cannot read a requested page", q->id);
                                        query_run_fail(q, r, API_ERROR_INTERNAL_ERROR, NULL);
                                        q->state = QUERY_RUN_CLEANUP;
                                        break;
                                }
                                return;
                        }
                        q->state = QUERY_RUN_STEP;
                        break;

                case QUERY_RUN_STEP:
                        r = agent_next(q->agent, &a);
                        if (r < 0) {
                                log_error_errno(r, "Query %s: the agent cannot decide", q->id);
                                query_run_fail(q, r, API_ERROR_INTERNAL_ERROR, NULL);
                                q->state = QUERY_RUN_CLEANUP;
                                break;
                        }
                        query_run_emit_rejected(q, &a);
                        switch (a.type) {
                        case AGENT_ACTION_SEND:
                                r = query_run_send(q, &a);
                                if (r < 0) {
                                        log_error_errno(r, "Query %s: cannot send the model request", q->id);
                                        query_run_fail(q, r, API_ERROR_INTERNAL_ERROR, NULL);
                                        q->state = QUERY_RUN_CLEANUP;
                                        break;
                                }
                                q->state = QUERY_RUN_MODEL;
                                return;
                        case AGENT_ACTION_TOOL:
                                query_run_emit_tool(q, &a);
                                r = query_run_start_tool(q, &a);
                                if (r < 0) {
                                        query_run_tool_start_failed(q, &a, r);
                                        if (q->failed)
                                                q->state = QUERY_RUN_CLEANUP;
                                        break; /* STEP again: the agent has the tool's error */
                                }
                                q->state = QUERY_RUN_TOOL;
                                return;
                        case AGENT_ACTION_ANSWER:
                                query_run_log(
                                        q,
                                        LOG_INFO,
                                        "answered after %u steps (%zu bytes).",
                                        agent_steps(q->agent),
                                        strlen(a.answer));
                                query_run_step_text(q, a.answer);
                                q->answer = strdup(a.answer);
                                if (!q->answer)
                                        query_run_fail(q, -ENOMEM, API_ERROR_INTERNAL_ERROR, NULL);
                                q->state = QUERY_RUN_CLEANUP;
                                break;
                        case AGENT_ACTION_FAIL:
                        default:
                                query_run_log(
                                        q,
                                        LOG_INFO,
                                        "failed after %u steps: %s.",
                                        agent_steps(q->agent),
                                        api_error_to_string(a.error));
                                /* The agent's decision (a model's error
                                 * reply, the context, the step bound). */
                                query_run_fail(q, -EIO, a.error, a.message);
                                q->state = QUERY_RUN_CLEANUP;
                                break;
                        }
                        break;

                case QUERY_RUN_MODEL:
                case QUERY_RUN_TOOL:
                        /* Their completions move on to STEP or CLEANUP. */
                        q->state = QUERY_RUN_STEP;
                        break;

                case QUERY_RUN_CLEANUP:
                        if (!q->cleanup_phase) {
                                q->cleanup_phase = true;
                                query_run_emit(
                                        q,
                                        (QueryEvent){ .type = QUERY_EVENT_PHASE,
                                                      .phase = QUERY_PHASE_CLEANUP });
                        }
                        if (!query_run_cleanup(q))
                                return;
                        /* Report from a defer of our own, never from inside
                         * a curl or sandbox callback: the executor may free
                         * the run while being told. */
                        q->state = QUERY_RUN_DONE;
                        query_run_kick(q);
                        return;

                case QUERY_RUN_DONE:
                        if (!q->reported)
                                query_run_report(q); /* may free q: return at once */
                        return;

                default:
                        abort();
                }
        }
}

int query_run_new(
        const QueryRunContext *ctx, const QueryJob *job, QueryRunDone done, void *userdata, QueryRun **ret) {

        _cleanup_(query_run_freep) QueryRun *q = NULL;
        const Config *c;
        size_t n = 0;
        SandboxState state;
        bool waiting;
        int r;

        assert(ctx);
        assert(job);
        assert(done);
        assert(ret);
        c = ctx->config;
        if (!c->wiki_api_url || !c->llm_url || !c->llm_model || !ctx->llm)
                return -EINVAL;

        q = calloc(1, sizeof *q);
        if (!q)
                return -ENOMEM;
        q->event = ctx->event;
        q->config = c;
        q->upstream = ctx->upstream;
        q->llm = ctx->llm;
        q->sandbox = ctx->sandbox;
        q->on_event = ctx->on_event;
        q->event_userdata = ctx->event_userdata;
        q->phase = QUERY_PHASE_MODEL;
        q->done = done;
        q->userdata = userdata;
        q->state = QUERY_RUN_PRELOAD;
        q->offer = _QUERY_SANDBOX_INVALID;
        q->api_error = _API_ERROR_INVALID;
        memcpy(q->id, job->id, sizeof q->id);
        q->read_as_person = c->wiki_read_as == CONFIG_READ_AS_PERSON;
        q->pending.api_error = _API_ERROR_INVALID;
        if (job->user) {
                q->user = strdup(job->user);
                if (!q->user)
                        return -ENOMEM;
        }
        q->started = now(CLOCK_MONOTONIC);
        q->deadline = usec_add(q->started, c->query_timeout_seconds * USEC_PER_SEC);

        while (job->pages && job->pages[n])
                n++;
        q->pages = calloc(n + 1, sizeof(char *));
        if (!q->pages)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                q->pages[i] = strdup(job->pages[i]);
                if (!q->pages[i])
                        return -ENOMEM;
        }

        /* A sandbox that is starting (the daemon was just started by this
         * query's connection, or the user manager is being reconnected) is
         * waited for; one that is not there is not. */
        state = q->sandbox ? sandbox_get_state(q->sandbox) : SANDBOX_UNAVAILABLE;
        q->wait_until = query_sandbox_wait_until(q->started, q->deadline);
        waiting = !query_sandbox_decide(state, q->started, q->wait_until, &q->offer);
        if (waiting) {
                q->offer = _QUERY_SANDBOX_INVALID;
                q->question = strdup(job->question);
                if (!q->question)
                        return -ENOMEM;
                if (job->n_turns > 0) {
                        r = query_turns_copy(job->turns, job->n_turns, &q->turns);
                        if (r < 0)
                                return r;
                        q->n_turns = job->n_turns;
                }
                q->state = QUERY_RUN_SANDBOX_WAIT;
        }
        /* Made now also while waiting (it checks the question), and again
         * with run_python if the sandbox comes. */
        r = query_run_make_agent(q, job->question, job->turns, job->n_turns);
        if (r < 0)
                return r;
        if (job->n_turns > 0) {
                size_t kept, dropped;
                bool cut;

                agent_turns(q->agent, &kept, &dropped, &cut);
                query_run_log(
                        q,
                        LOG_INFO,
                        "a follow-up: %zu earlier turns given to the model, %zu older ones left out%s.",
                        kept,
                        dropped,
                        cut ? ", the one before cut to fit" : "");
        }

        r = wiki_client_new(
                q->upstream,
                &(WikiClientSettings){
                        .api_url = c->wiki_api_url,
                        .username = c->wiki_username,
                        .password = c->wiki_username ? c->wiki_password : NULL,
                        .deadline = q->deadline,
                        .user_map = &c->wiki_user,
                },
                &q->wiki);
        if (r < 0)
                return r;

        r = sd_event_add_time(
                q->event, &q->deadline_source, CLOCK_MONOTONIC, q->deadline, 0, query_run_on_deadline, q);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(q->deadline_source, "query-run-deadline");
        if (waiting) {
                r = sd_event_add_time(
                        q->event, &q->wait_source, CLOCK_MONOTONIC, q->wait_until, 0, query_run_on_wait_over, q);
                if (r < 0)
                        return r;
                (void) sd_event_source_set_description(q->wait_source, "query-run-sandbox-wait");
        }

        query_run_log(
                q,
                LOG_INFO,
                "started: %zu requested pages, up to %" PRIu64 " steps, run_python %s.",
                n,
                (uint64_t) c->query_max_steps,
                waiting                                   ? "waits for the sandbox to start" :
                        q->offer == QUERY_SANDBOX_OFFERED ? "offered" :
                                                            "not offered");
        /* The phase while it waits, as the query starts: a status request
         * must not see it in another one before the first step. */
        if (waiting)
                query_run_emit(q, (QueryEvent){ .type = QUERY_EVENT_PHASE, .phase = QUERY_PHASE_SANDBOX });
        query_run_kick(q);
        *ret = TAKE_PTR(q);
        return 0;
}

QueryRun *query_run_free(QueryRun *q) {
        if (!q)
                return NULL;
        q->model_call = llm_call_free(q->model_call);
        q->wiki_op = wiki_operation_free(q->wiki_op);
        wiki_result_done(&q->pending);
        free(q->user);
        /* A run must not outlive its query context: sandbox.h says cancel
         * and wait. Freeing with a run in flight is a bug of the caller. */
        assert(!q->sandbox_run);
        q->defer = sd_event_source_disable_unref(q->defer);
        q->deadline_source = sd_event_source_disable_unref(q->deadline_source);
        q->wait_source = sd_event_source_disable_unref(q->wait_source);
        sandbox_artifacts_done(&q->artifacts);
        q->sandbox_query = sandbox_query_free(q->sandbox_query);
        q->wiki = wiki_client_free(q->wiki);
        q->agent = agent_free(q->agent);
        strv_free(q->pages);
        free(q->question);
        query_turns_free(q->turns, q->n_turns);
        free(q->op_title);
        free(q->op_search);
        json_object_put(q->searches);
        free(q->message);
        free(q->answer);
        free(q->citations);
        for (size_t i = 0; i < q->n_read_pages; i++)
                query_read_page_done(&q->read_pages[i]);
        free(q->read_pages);
        free(q->live_held);
        free(q);
        return NULL;
}
