/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "shared/api-error.h"
#include "shared/artifact.h"
#include "shared/ids.h"
#include "shared/source.h"
#include "shared/time-util.h"

/* The types of a query's execution, as the pipeline (query/pipeline.h: a
 * QueryRun) takes its job and produces its events and its outcome; the
 * executor passes them on, and the Manager and its faces read them. */

/* An earlier turn of the conversation a follow-up continues (API.md 7),
 * as its record says. */
typedef struct QueryTurn {
        const char *question;
        const char *answer;    /* NULL: the turn failed */
        const Source *sources; /* the record's sources */
        size_t n_sources;
} QueryTurn;

typedef struct QueryJob {
        char id[QUERY_ID_MAX];
        SessionKey session;
        const char *question; /* borrowed for the duration of start() */
        /* The asking person's wiki user name (their identity name, API.md
         * "Whose permissions"); NULL: an anonymous reader. Borrowed for the
         * duration of start(). */
        const char *user;
        char *const *pages; /* borrowed, NULL-terminated */
        /* A follow-up's earlier turns, oldest first, borrowed for the
         * duration of start(); n_turns 0: a new conversation. */
        const QueryTurn *turns;
        size_t n_turns;
} QueryJob;

/* Time spent in each phase of one query (API.md 9 timings_ms). */
typedef struct QueryTimings {
        usec_t wiki, model, sandbox, cleanup;
} QueryTimings;

/* Whether the model was offered run_python (API.md 9, the record's
 * "sandbox"). */
typedef enum QuerySandbox {
        QUERY_SANDBOX_OFFERED,     /* the sandbox was available when the query started, or within its wait */
        QUERY_SANDBOX_UNAVAILABLE, /* not offered: no sandbox here (or none could be set up for the query) */
        QUERY_SANDBOX_STARTING,    /* not offered: the sandbox was still starting when the wait ended */
        _QUERY_SANDBOX_MAX,
        _QUERY_SANDBOX_INVALID = -EINVAL,
} QuerySandbox;

/* "offered", "unavailable", "starting"; NULL out of range. */
const char *query_sandbox_to_string(QuerySandbox s);

/* How long a query that starts while the sandbox is starting waits for it,
 * at most (query/pipeline.h): the sandbox is there about 0.1 s after the
 * daemon's start, or within a reconnection (2 s) while the user manager is
 * still starting. A constant: an administrator has nothing to tune here;
 * the query's deadline bounds it too. */
#define QUERY_SANDBOX_WAIT_MAX_USEC (10 * USEC_PER_SEC)

typedef struct QueryOutcome {
        const char *query_id;
        /* 0 when the query succeeded; else a negative errno (the first
         * failure's: the wiki's, the model exchange's, the sandbox's, an
         * allocation's; -ETIMEDOUT at the deadline, -ECANCELED when
         * aborted, -EBUSY for a cleanup not confirmed, -EIO when the agent
         * ends the query, -EOPNOTSUPP when execution is not configured) and
         * api_error is what the client is told. */
        int error;
        ApiError api_error;     /* when error < 0 */
        const char *message;    /* raw, the caller sanitizes; NULL: the default */
        const char *answer;     /* when error is 0 */
        bool cleanup_confirmed; /* false: the slot must not be promoted yet */

        /* The record (API.md 9), also for a failed query: */
        const char *sources_json; /* JSON array of {"title", "url", "revision_id"}; NULL: [] */
        /* JSON array of {"n", "title", "revision_id", "quote", "status",
         * "url", "section"} (query/citation.h); NULL: [] */
        const char *citations_json;
        const char *model;                         /* the model name of "usage"; NULL: the configured one */
        uint64_t prompt_tokens, completion_tokens; /* summed over the steps */
        unsigned steps;                            /* model requests sent */
        QueryTimings timings;
        const Artifact *artifacts; /* the files left in /out, to keep (API.md 9); fds borrowed */
        size_t n_artifacts;
        const char *sandbox; /* query_sandbox_to_string(); NULL: no pipeline ran */
        /* The wiki_search calls done: a JSON array of {"query", "results"}
         * in order (API.md 9.2); NULL: none. */
        const char *searches_json;
} QueryOutcome;

/* What a running query is doing (API.md 11.2 and 11.4), as it happens:
 * the pipeline reports each model step, the text the model wrote, each
 * tool call and its result, and the phase it is in. */
typedef enum QueryPhase {
        QUERY_PHASE_WIKI,    /* reading the request's pages, or a wiki tool */
        QUERY_PHASE_MODEL,   /* a model request */
        QUERY_PHASE_SANDBOX, /* run_python */
        QUERY_PHASE_CLEANUP, /* the last sandbox cleanup, /out collected */
        _QUERY_PHASE_MAX,
        _QUERY_PHASE_INVALID = -EINVAL,
} QueryPhase;

/* "wiki", "model", "sandbox", "cleanup" */
const char *query_phase_to_string(QueryPhase p);

typedef enum QueryEventType {
        QUERY_EVENT_STEP,        /* step: a model request starts */
        QUERY_EVENT_TEXT,        /* step, text: text the model wrote */
        QUERY_EVENT_TOOL,        /* step, call, name, json: the arguments as shown */
        QUERY_EVENT_TOOL_RESULT, /* step, call, name, ok, duration, json: the summary */
        QUERY_EVENT_PHASE,       /* phase: the query moved to it (also implied by the others) */
        _QUERY_EVENT_TYPE_MAX,
        _QUERY_EVENT_TYPE_INVALID = -EINVAL,
} QueryEventType;

typedef struct QueryEvent {
        QueryEventType type;
        QueryPhase phase; /* the phase the query is in now, for every event */
        unsigned step;    /* 1.. ; 0 before the first model request */
        unsigned call;    /* 1.. within the step */
        const char *name; /* the tool's */
        const char *text; /* TEXT: text_size bytes of UTF-8 */
        size_t text_size;
        const char *json; /* TOOL: the arguments object; TOOL_RESULT: the summary object */
        bool ok;
        usec_t duration;
} QueryEvent;

/* Called synchronously as the run goes, with everything borrowed for the
 * call; it must not call back into the executor. */
typedef void (*QueryEventHandler)(const char *query_id, const QueryEvent *event, void *userdata);
