/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "admission/admission.h"
#include "admission/wait-range.h"
#include "query/executor.h"
#include "shared/api-error.h"
#include "shared/config.h"
#include "shared/ids.h"
#include "shared/macro.h"
#include "shared/user-key.h"
#include "shared/time-util.h"
#include "store/history.h"

/* The Manager: the life of every query, between the daemon's faces
 * (http/: the API and its streams; bus/: org.wikiweb.Queue1; the metrics
 * scrape; the journal) and the work (admission/, query/, store/,
 * sandbox/), as machined's Manager sits under machined-dbus.c.
 *
 * It owns the admission controller and its timer, the executor, the
 * sandbox, the history store, the durable-sync worker, the recent
 * durations of the wait range (the WaitTracker: seeded from the history at
 * start-up, fed with each query that ends), the average query time of the
 * wait estimate (a WaitAverage, fed with each query that ends; unknown at
 * start-up), and the one record of every running query (ManagerQuery):
 * id, session, user, slot, state, phase, step, claim time, the handle of
 * its run. The admission controller knows slots and tickets (a ticket
 * holder's name until the claim); manager_status() adds the estimate and
 * the range to its status (wait_estimate_status(), the WaitTracker), from
 * the Manager's average, durations and claim times. The faces keep no copy of a query's
 * state: they ask the Manager
 * (manager_get_query(), manager_foreach_query(), manager_status(),
 * manager_get_health()), act through it (manager_join(), manager_leave(),
 * manager_hold_ticket(), manager_set_draining(), manager_remove_ticket(),
 * manager_start_query(), manager_cancel_query()) and subscribe to its
 * announcements.
 *
 * A query's life, as the Manager drives it, one ManagerQueryState at a
 * time (manager_query_set_state() makes every transition):
 *   CLAIMED: manager_start_query() claims a slot (admission_claim(),
 *   which may join implicitly); from then on the query is held, by id in a
 *   hashmap and oldest claim first in a list, and its clock runs from the
 *   claim (ManagerQuery.since). Its record is written "running"
 *   (history_begin()).
 *   EXECUTING: the executor runs it; the ManagerQuery holds the run's
 *   handle (QueryExecution: freeing it cancels). Announces
 *   MANAGER_QUERY_STARTED; then MANAGER_QUERY_EVENT for each pipeline
 *   event (step, text, tool, tool_result, phase) and MANAGER_QUERY_PHASE
 *   when its phase changes.
 *   Every end after the claim goes through manager_query_end(), however it
 *   ends (the executor's outcome, a cancel, the stop grace, an executor
 *   that could not start it, a record that could not be written): the end
 *   is timed there, once, on the Manager's clock.
 *   COMPLETING: the record completed (manager_record_outcome()), then made
 *   durable (the sync worker).
 *   Then, if its cleanup was confirmed, FINISHED: the slot is given up
 *   (admission_finish() with the Manager's duration: its MANAGER_ADMISSION
 *   events, a promotion, come first), and the duration from the claim is
 *   counted once for the average, the metrics and the wait
 *   range. Else AWAITING_CLEANUP: the slot stays taken, its phase is
 *   "cleanup" (MANAGER_QUERY_PHASE) and health goes degraded
 *   (MANAGER_HEALTH_CHANGED follows).
 *   manager_query_finalize() then announces MANAGER_QUERY_DURABLE to every
 *   subscriber (with the outcome's status, code and sanitized message:
 *   D-Bus QueryFinished, the STATUS= line), and after that answers the
 *   waiters of that query (manager_query_wait(): the HTTP API's waiting
 *   request, the query's streams), each once, in the order they
 *   subscribed to it. Last, once the slot is given up (at once, or when
 *   the Sandbox announces the cleanup confirmed at last: its duration runs
 *   to then), MANAGER_QUERY_CLEANUP_CONFIRMED is announced: the
 *   ManagerQuery is freed after that announcement.
 *   A query whose record could not be written ends from CLAIMED straight
 *   to FINISHED: its slot is given up with its (short) duration, counted
 *   as every other, and it is freed, never announced.
 *
 * Every announcement is made once, synchronously on the event loop (from
 * inside the Manager's operation or event source that caused it), to every
 * subscriber, with everything borrowed for the duration of the call. A
 * handler may call the Manager's read functions but must not start,
 * cancel or free anything from inside it. No face depends on the order in
 * which the faces subscribed: what must follow an announcement (the
 * answer to a query's request after QueryFinished) is a waiter of that
 * query, which the Manager answers after the announcement. The metrics
 * face only reads.
 *
 * Slots: the Manager holds any number of running queries (one per
 * admission slot); the admission controller decides how many there may
 * be. */

typedef struct Manager Manager;
typedef struct ManagerQuery ManagerQuery;

/* Where a query is in its life (see above). */
typedef enum ManagerQueryState {
        MANAGER_QUERY_STATE_CLAIMED,          /* "claimed": its slot claimed, its record not yet written */
        MANAGER_QUERY_STATE_EXECUTING,        /* "executing": the executor runs it */
        MANAGER_QUERY_STATE_COMPLETING,       /* "completing": its record is being made durable */
        MANAGER_QUERY_STATE_AWAITING_CLEANUP, /* "awaiting_cleanup": durable, the slot taken until cleanup */
        MANAGER_QUERY_STATE_FINISHED,         /* "finished": its slot given up; freed right after */
        _MANAGER_QUERY_STATE_MAX,
        _MANAGER_QUERY_STATE_INVALID = -EINVAL,
} ManagerQueryState;

const char *manager_query_state_to_string(ManagerQueryState s);

/* Health as GET /api/v1/health and D-Bus Health report it (API.md 6, 10). */
typedef enum ManagerSandboxHealth {
        MANAGER_SANDBOX_OK,          /* "ok" */
        MANAGER_SANDBOX_STARTING,    /* "starting" */
        MANAGER_SANDBOX_UNAVAILABLE, /* "unavailable" */
        _MANAGER_SANDBOX_HEALTH_MAX,
        _MANAGER_SANDBOX_HEALTH_INVALID = -EINVAL,
} ManagerSandboxHealth;

const char *manager_sandbox_health_to_string(ManagerSandboxHealth h);

typedef struct ManagerHealth {
        bool degraded; /* a cleanup is not confirmed (a query's, or the sandbox's), or storage is not ok */
        HistoryStorageState storage; /* "storage" */
        const char *storage_cause; /* "storage_cause": its words, NULL when ok; valid until the next call */
        ManagerSandboxHealth sandbox; /* "sandbox" */
        bool draining;                /* "admission": "draining" */
        AdmissionState state;         /* "state" */
        bool execution_configured;    /* "execution": "ok" | "not_configured" */
        /* The settings that are missing when !execution_configured, a
         * NULL-terminated list of static names ("WIKI_WEB_WIKI_API_URL",
         * "WIKI_WEB_LLM_URL", "WIKI_WEB_LLM_MODEL"); empty when configured. */
        const char *missing_settings[CONFIG_EXECUTION_SETTINGS_MAX + 1];
} ManagerHealth;

typedef enum ManagerEventType {
        MANAGER_QUERY_STARTED,           /* query */
        MANAGER_QUERY_EVENT,             /* query, event: one pipeline event as it happens */
        MANAGER_QUERY_PHASE,             /* query: its phase changed (manager_query_phase()) */
        MANAGER_QUERY_DURABLE,           /* query, outcome: its record is complete and durable */
        MANAGER_QUERY_CLEANUP_CONFIRMED, /* query: its slot is given up; the query is freed after this */
        MANAGER_HEALTH_CHANGED,          /* health: manager_get_health() differs from before */
        MANAGER_ADMISSION,               /* admission: an event of the admission controller */
        MANAGER_STOPPING,                /* manager_stop() was called: no new query starts */
        _MANAGER_EVENT_TYPE_MAX,
        _MANAGER_EVENT_TYPE_INVALID = -EINVAL,
} ManagerEventType;

/* How a query ended, as its record says (borrowed for the call). */
typedef struct ManagerOutcome {
        bool succeeded;
        ApiError api_error;     /* when !succeeded */
        const char *message;    /* when !succeeded: sanitized, never NULL */
        usec_t duration;        /* from the claim to the end of execution */
        bool cleanup_confirmed; /* false: the slot stays taken until it is */
} ManagerOutcome;

typedef struct ManagerEvent {
        ManagerEventType type;
        ManagerQuery *query;             /* every MANAGER_QUERY_* */
        const QueryEvent *event;         /* MANAGER_QUERY_EVENT */
        const ManagerOutcome *outcome;   /* MANAGER_QUERY_DURABLE */
        const AdmissionEvent *admission; /* MANAGER_ADMISSION */
} ManagerEvent;

typedef void (*ManagerEventHandler)(Manager *m, const ManagerEvent *event, void *userdata);

/* Sets up every part of the work from config (borrowed; must outlive the
 * Manager) on event: opens the history (recovering records left running),
 * the admission controller and its timer, the executor, the sandbox.
 * Returns 0 or a negative errno, logged. */
int manager_new(sd_event *event, const Config *config, Manager **ret);
/* Frees everything, announcing nothing. */
Manager *manager_free(Manager *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(Manager *, manager_free);

/* Subscribe to every announcement (see above). Returns 0 or -ENOMEM. */
int manager_subscribe(Manager *m, ManagerEventHandler handler, void *userdata);
/* Undo manager_subscribe() (not from inside an announcement). */
void manager_unsubscribe(Manager *m, ManagerEventHandler handler, void *userdata);

/* The queue's operations (API.md 5, 11.1, 12.1), as the admission
 * controller defines them (admission/admission.h); each may announce
 * MANAGER_ADMISSION events before it returns.
 *
 * manager_join(): join, and keep user (NULL: none) as the ticket holder's
 * name. 1 (a new ticket), 0 (the session had one; its heartbeat
 * refreshed), -ENOSPC, -ESHUTDOWN (draining), MANAGER_STORAGE_UNAVAILABLE,
 * -ENOMEM. */
int manager_join(Manager *m, const SessionKey *session, const char *user, usec_t now);
/* 0, or -ENOENT (no ticket). */
int manager_leave(Manager *m, const SessionKey *session, usec_t now);
/* A queue call's heartbeat of the session's ticket, if it has one
 * (session NULL: nobody's); the expiries due by now are applied first
 * either way. */
void manager_heartbeat(Manager *m, const SessionKey *session, usec_t now);
/* admission_hold(): an open queue stream holds its ticket. */
int manager_hold_ticket(Manager *m, const SessionKey *session, const char *ticket_id, bool hold, usec_t now);
/* Drain (true) or open admission; announces MANAGER_HEALTH_CHANGED. */
void manager_set_draining(Manager *m, bool draining);
/* An administrator's RemoveTicket: 0, or -ENOENT. */
int manager_remove_ticket(Manager *m, const char *ticket_id, usec_t now);

/* The session's own running query in a status (API.md 11.4). */
typedef struct ManagerStatusQuery {
        const char *id; /* borrowed */
        unsigned step;
        const char *phase; /* borrowed, static */
} ManagerStatusQuery;

/* The status object of API.md 6 as one session sees it: the admission
 * status, the session's running query (until its record is durable), the
 * wait range (API.md 5) and the queue's settings. Borrowed strings: valid
 * until the Manager changes. */
typedef struct ManagerStatus {
        AdmissionStatus admission;
        bool has_query;
        ManagerStatusQuery query;
        bool range_known; /* false: the wait range is null */
        WaitRange range;
        uint64_t reservation_seconds;
        uint64_t heartbeat_seconds;
} ManagerStatus;

/* The status of session (NULL: a session without ticket or query) at now
 * (monotonic), without a heartbeat (manager_heartbeat()). */
void manager_status(Manager *m, const SessionKey *session, usec_t now, ManagerStatus *ret);

/* The average query time (claim to confirmed cleanup, a moving average
 * of the durations the Manager measured since start-up) in usec, 0 while
 * unknown: the status's average_query_seconds, the D-Bus property
 * AverageQueryUSec, the STATUS line. */
usec_t manager_average_usec(const Manager *m);

/* Whether the wait range is known: enough recent durations are kept
 * (WAIT_RANGE_KNOWN_MIN). */
bool manager_wait_known(const Manager *m);

/* The admission controller, read-only, for the faces' counters and lists
 * (D-Bus properties, ListTickets, the metrics gauges, STATUS=); every
 * change to it is a Manager operation above. Borrowed. */
const Admission *manager_get_admission(const Manager *m);
/* The history, for reading records (list, get, artifacts, a
 * conversation's export), as machined reads its images; every write is a
 * Manager operation (manager-ops.h). Borrowed. */
History *manager_get_history(Manager *m);
/* The key a person's records are kept under, from their identity name:
 * the transport's session_key_from_user() (which main passes in: the
 * Manager knows no HTTP), sealed with the user key
 * (manager_get_user_secret()), as the transport seals every request's.
 * Until the function is set, operations that need it fail with
 * -EOPNOTSUPP. */
typedef int (*ManagerUserKeyFunction)(const char *user, SessionKey *ret);
void manager_set_user_key_function(Manager *m, ManagerUserKeyFunction f);
int manager_user_key(Manager *m, const char *user, SessionKey *ret);
const Config *manager_get_config(Manager *m);
/* The secret that seals every session key before it reaches the history
 * (user_key_seal()): the HTTP transport is given it by main. Borrowed. */
const UserKeySecret *manager_get_user_secret(const Manager *m);
/* Whether the wiki is read as the asking person (WIKI_WEB_WIKI_READ_AS=person). */
bool manager_reads_as_person(const Manager *m);
/* Health's "wiki_read_check" in person mode ("ok", "failed", "unknown");
 * NULL in service mode. */
const char *manager_read_check_health(Manager *m);

/* A follow-up (API.md 7): the record it follows, which the face has found
 * to be the session's and ended, with the turns of its conversation. */
typedef struct ManagerFollowUp {
        const char *follow_up;    /* the record followed */
        const char *conversation; /* the id of its conversation (its first record) */
        const QueryTurn *turns;   /* the earlier turns given to the model, oldest first */
        size_t n_turns;
        char *const *notes; /* the record's notes (API.md 9), NULL-terminated; NULL: none */
} ManagerFollowUp;

/* What a query is started with. Borrowed for the call; what the query
 * keeps is copied. */
typedef struct ManagerQueryRequest {
        const SessionKey *session;
        const char *user; /* identity name or NULL */
        const char *question;
        char *const *pages;
        /* A follow-up: the record says what it follows and its
         * conversation, and the model is given the earlier turns. NULL: a
         * new conversation. */
        const ManagerFollowUp *follow_up;
} ManagerQueryRequest;

/* Start a query for req->session: claim, record, execute. Its user is
 * req->user, or without one the name its ticket held (API.md "Identity").
 * On success returns 0 with the new query in *ret (owned by the Manager;
 * valid until MANAGER_QUERY_CLEANUP_CONFIRMED has been announced for it).
 * Errors, nothing started: -EBUSY (busy), -ENOSPC (queue_full), -ESHUTDOWN
 * (draining, or the service is stopping), MANAGER_STORAGE_UNAVAILABLE (the
 * store cannot take the record), -ENOMEM, -EIO (the record could not be
 * written for another reason: internal_error; for both the slot it had
 * claimed is given up through manager_query_end(), nothing announced).
 * MANAGER_QUERY_STARTED is announced
 * before this returns, and before the query's first MANAGER_QUERY_EVENT
 * (the pipeline may report from inside the executor's start). -EIO also
 * when the executor could not start it: the query has started then, and
 * ends as every query ends (internal_error): its record failed, then
 * MANAGER_QUERY_DURABLE and MANAGER_QUERY_CLEANUP_CONFIRMED once the
 * record is durable. */
int manager_start_query(Manager *m, const ManagerQueryRequest *req, ManagerQuery **ret);

/* The operations on the history and the wiki for a person (delete,
 * feedback, shares, the follow-up's preparation, the read check, a
 * record's sources, the unanswered report) are in manager/manager-ops.h. */

/* End a running query now, as its deadline would (an administrator's
 * CancelQuery; the service stopping): it fails with execution_failed and
 * the reason as its message, after its cleanup. 0, or -ESRCH when no query
 * with that id is still executing (it ended, or its record is being made
 * durable, or it waits for its cleanup). */
int manager_cancel_query(Manager *m, const char *query_id, const char *reason);

/* The running query with this id (a hashmap lookup), or the one of this
 * session; NULL when none. A query stays findable until its cleanup is
 * confirmed. */
ManagerQuery *manager_get_query(Manager *m, const char *query_id);
ManagerQuery *manager_get_query_by_session(Manager *m, const SessionKey *session);

/* Every query the Manager holds, oldest claim first. */
typedef void (*ManagerQueryVisitor)(ManagerQuery *q, void *userdata);
void manager_foreach_query(Manager *m, ManagerQueryVisitor f, void *userdata);
/* How many queries it holds (executing, completing, or awaiting cleanup). */
unsigned manager_n_queries(const Manager *m);
/* The oldest running query (D-Bus RunningQueryId/RunningQueryPhase), NULL
 * when none. */
ManagerQuery *manager_oldest_query(Manager *m);

const char *manager_query_id(const ManagerQuery *q);
const SessionKey *manager_query_session(const ManagerQuery *q);
unsigned manager_query_slot(const ManagerQuery *q);
/* Who asked it (API.md "Identity"), NULL: anonymous. */
const char *manager_query_user(const ManagerQuery *q);
/* "wiki", "model", "sandbox", "cleanup"; "" before the first phase: the
 * pipeline's last reported phase, "cleanup" while AWAITING_CLEANUP. */
const char *manager_query_phase(const ManagerQuery *q);
ManagerQueryState manager_query_state(const ManagerQuery *q);
unsigned manager_query_step(const ManagerQuery *q);
usec_t manager_query_since(const ManagerQuery *q);          /* monotonic, the claim */
usec_t manager_query_created(const ManagerQuery *q);        /* realtime, the record's created_at */
bool manager_query_executing(const ManagerQuery *q);        /* EXECUTING */
bool manager_query_awaiting_cleanup(const ManagerQuery *q); /* AWAITING_CLEANUP */

/* Waiting for the end of one query (as a D-Bus caller waits on its own
 * reply, not on a broadcast): done is called once, when its record is
 * durable, after MANAGER_QUERY_DURABLE has been announced to every
 * subscriber, with the query and its outcome (borrowed for the call); the
 * waiters of a query are answered in the order they subscribed to it. w is
 * the caller's (embedded in whatever waits), borrowed by the query until
 * done is called; done may free it. A waiter whose query is freed with the
 * Manager is never called. Only a query that is CLAIMED or EXECUTING may
 * be waited for (e.g. the one manager_start_query() returned, before the
 * caller returns to the loop). Cannot fail. */
typedef void (*ManagerQueryDone)(ManagerQuery *q, const ManagerOutcome *outcome, void *userdata);
typedef struct ManagerQueryWaiter ManagerQueryWaiter;
struct ManagerQueryWaiter {
        ManagerQueryDone done;
        void *userdata;
        ManagerQueryWaiter *waiters_prev, *waiters_next; /* the query's, while it waits */
};
void manager_query_wait(ManagerQuery *q, ManagerQueryWaiter *w, ManagerQueryDone done, void *userdata);

void manager_get_health(Manager *m, ManagerHealth *ret);

/* What manager_start_query() and manager_join() return, before any work,
 * while the store cannot take a new record (full, read-only, an I/O
 * error, damaged, or too many outcomes waiting to land): the face answers
 * storage_unavailable with manager_storage_cause(). */
#define MANAGER_STORAGE_UNAVAILABLE (-ENOMEDIUM)

/* The store's condition (health's "storage", the metrics). */
void manager_get_storage(Manager *m, HistoryStorage *ret);
/* Its cause in words while it is not ok; valid until the next call. */
const char *manager_storage_cause(Manager *m);

/* Counted since the Manager was set up (D-Bus QueriesStarted,
 * QueriesFailed, TicketsExpired). */
typedef struct ManagerCounters {
        uint64_t queries_started; /* claims */
        uint64_t queries_failed;  /* records made durable as failed */
        uint64_t tickets_expired; /* heartbeat and reservation removals */
} ManagerCounters;

void manager_get_counters(Manager *m, ManagerCounters *ret);

/* The service is stopping (SIGTERM): no new query starts (-ESHUTDOWN);
 * the running ones may finish until grace_usec has passed, then they are
 * cancelled with reason. Announces MANAGER_STOPPING (once). */
void manager_stop(Manager *m, usec_t grace_usec, const char *reason);
/* The one handler that hears when a stop is done as far as the queries
 * go: manager_stop() was called and nothing of a query's life is in flight
 * any more (manager_busy() false). Called once, from the loop (after the
 * iteration in which it became true). */
typedef void (*ManagerStoppedHandler)(Manager *m, void *userdata);
void manager_set_stopped_handler(Manager *m, ManagerStoppedHandler handler, void *userdata);
/* Whether manager_stop() was called. */
bool manager_is_stopping(const Manager *m);
/* Whether anything of a query's life is still in flight: a query
 * executing, or a record being made durable. The daemon exits once this is
 * false (and its requests are done). */
bool manager_busy(const Manager *m);
