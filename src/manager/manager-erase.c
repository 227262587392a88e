/* SPDX-License-Identifier: MIT */
/* A person's erasure (API.md 9 DELETE /api/v1/history, 12.1 EraseUser,
 * wikiwebd(8) "Erasing a person"): every record of theirs, with its
 * artifacts, feedback and share links, then their personal access tokens;
 * the store makes it durable and checkpoints the write-ahead log before it
 * returns, so that nothing of it stays in a file of the state directory. */
#include <assert.h>
#include <stdlib.h>

#include "manager/manager-ops.h"
#include "shared/list.h"
#include "shared/log.h"
#include "shared/strv.h"
#include "shared/time-util.h"
#include "shared/user-key.h"
#include "store/tokens.h"

#define CANCELLED_FOR_ERASURE "Cancelled: the person's history is being erased"

struct ManagerErasure {
        Manager *manager;
        char *user; /* NULL: the person's own erasure */
        char *by;
        SessionKey session;
        /* An administrator's, while the person's queries are awaited: */
        sd_event_source *look;  /* defer: look at their queries again, from the loop */
        sd_event_source *timer; /* MANAGER_ERASE_WAIT_USEC after the start: busy */
        bool subscribed;        /* to the Manager's announcements */
        char **cancelled;       /* the ids of the queries of theirs it cancelled, each once */
        size_t n_cancelled;
        HistoryJob *job; /* the batch or the checkpoint in flight */
        ManagerErased result;
        ManagerEraseDone done;
        void *userdata;
        ManagerErasure *erasures_prev, *erasures_next;
};

/* Whether a query of session still has its record to write: claimed,
 * executing or completing (a query awaiting its cleanup is durable). With
 * an administrator's erasure, the executing ones are cancelled on the way,
 * each once (a cancelled query executes until its run has stopped),
 * counted in its result. Returns how many. */
typedef struct EraseScan {
        Manager *manager;
        const SessionKey *session;
        ManagerErasure *erasure; /* NULL: nothing cancelled */
        unsigned busy;
} EraseScan;

static void erase_scan_query(ManagerQuery *q, void *userdata) {
        EraseScan *s = userdata;
        ManagerErasure *e;

        if (memcmp(manager_query_session(q), s->session, sizeof *s->session) != 0)
                return;
        if (!IN_SET(manager_query_state(q),
                    MANAGER_QUERY_STATE_CLAIMED,
                    MANAGER_QUERY_STATE_EXECUTING,
                    MANAGER_QUERY_STATE_COMPLETING))
                return;
        s->busy++;
        e = s->erasure;
        if (!e || !manager_query_executing(q) || strv_contains(e->cancelled, manager_query_id(q)) ||
            manager_cancel_query(s->manager, manager_query_id(q), CANCELLED_FOR_ERASURE) < 0)
                return;
        e->result.cancelled++;
        /* Without memory for its id, a later look cancels it again (the
         * first reason stays) and counts it twice. */
        (void) strv_extend_unique(&e->cancelled, &e->n_cancelled, manager_query_id(q));
}

static unsigned erase_scan(Manager *m, const SessionKey *session, ManagerErasure *erasure) {
        EraseScan s = { .manager = m, .session = session, .erasure = erasure };

        manager_foreach_query(m, erase_scan_query, &s);
        return s.busy;
}

/* The store's failure as the face's error. */
static int manager_erase_error(Manager *m, int r, ManagerError *ret_error) {
        if (r == -EBUSY)
                *ret_error = (ManagerError){ API_ERROR_BUSY, "A query of this person is still running" };
        else if (!manager_storage_refusal(m, ret_error))
                *ret_error = (ManagerError){ API_ERROR_INTERNAL_ERROR, NULL };
        return r;
}

/* The person's personal access tokens go with their history. */
static int manager_erase_user_tokens(Manager *m, const SessionKey *session, uint64_t *ret_tokens) {
        int r;

        assert(m);
        assert(session);

        r = history_tokens_delete_user(manager_get_history(m), session);
        if (r < 0)
                return r;
        *ret_tokens = (uint64_t) r;
        return 0;
}


/* The erasures under way, of every Manager (the tests run several). */
static ManagerErasure *erasures = NULL;

static bool manager_erasure_running(Manager *m, const SessionKey *session) {
        for (ManagerErasure *e = erasures; e; e = e->erasures_next)
                if (e->manager == m && memcmp(&e->session, session, sizeof *session) == 0)
                        return true;
        return false;
}

static void manager_erasure_on_event(Manager *m, const ManagerEvent *ev, void *userdata);

/* The wait for the person's queries is over: no more looking. */
static void manager_erasure_stop_waiting(ManagerErasure *e) {
        if (e->subscribed) {
                manager_unsubscribe(e->manager, manager_erasure_on_event, e);
                e->subscribed = false;
        }
        e->look = sd_event_source_disable_unref(e->look);
        e->timer = sd_event_source_disable_unref(e->timer);
}

ManagerErasure *manager_erasure_free(ManagerErasure *e) {
        if (!e)
                return NULL;
        LIST_REMOVE(erasures, erasures, e);
        e->job = history_job_cancel(e->job);
        manager_erasure_stop_waiting(e);
        strv_free(e->cancelled);
        free(e->user);
        free(e->by);
        free(e);
        return NULL;
}

static ManagerErasure *
        manager_erasure_new(Manager *m, const SessionKey *session, ManagerEraseDone done, void *userdata) {
        ManagerErasure *e = calloc(1, sizeof *e);

        if (!e)
                return NULL;
        e->manager = m;
        e->session = *session;
        e->done = done;
        e->userdata = userdata;
        LIST_PREPEND(erasures, erasures, e);
        return e;
}

/* One batch, or the sync and checkpoint at the end, on the worker's
 * thread: it touches the worker's connection and this only. */
typedef struct EraseJob {
        SessionKey session;
        bool checkpoint;
        unsigned records, artifacts;
} EraseJob;

static int erase_job_run(History *h, void *data) {
        EraseJob *j = data;
        int r;

        if (j->checkpoint) {
                /* Durable, then no copy of what went is left in the log. */
                r = history_sync(h);
                if (r < 0)
                        return r;
                return history_checkpoint(h);
        }
        return history_erase_session_batch(h, &j->session, HISTORY_ERASE_BATCH, &j->records, &j->artifacts);
}

static void manager_erasure_on_job(HistoryJob *job, int error, void *data, void *userdata);

static int manager_erasure_submit(ManagerErasure *e, bool checkpoint) {
        EraseJob *j = calloc(1, sizeof *j);

        if (!j)
                return -ENOMEM;
        j->session = e->session;
        j->checkpoint = checkpoint;
        return history_worker_submit(
                manager_get_history_worker(e->manager), erase_job_run, j, free, manager_erasure_on_job, e, &e->job);
}

/* The erasure failed (what went before stays gone): the journal, then done. */
static void manager_erasure_fail(ManagerErasure *e, int r) {
        ManagerError error;

        if (e->user)
                log_error_errno(r, "History: %s could not erase the history of %s", e->by, e->user);
        else if (r != -EBUSY)
                log_error_errno(r, "History: a person's history could not be erased");
        (void) manager_erase_error(e->manager, r, &error);
        e->done(e, &error, NULL, e->userdata);
}

/* Everything went: the journal once, then done. */
static void manager_erasure_end(ManagerErasure *e) {
        const ManagerErased *result = &e->result;

        e->result.user = e->user;
        if (!e->user)
                /* Who it was is not said: a person's own request, no content. */
                log_info(
                        "History: a person erased their own history: %" PRIu64 " %s and %" PRIu64 " %s.",
                        result->records,
                        result->records == 1 ? "record" : "records",
                        result->artifacts,
                        result->artifacts == 1 ? "artifact" : "artifacts");
        else
                /* The name as the administrator gave it: the journal is the
                 * record of who was erased, by whom and when (wikiwebd(8),
                 * "Erasing a person"); never what they asked. */
                log_notice(
                        "History: %s erased the history of %s: %" PRIu64 " %s, %" PRIu64 " %s, %" PRIu64
                        " %s; %u running %s cancelled.",
                        e->by,
                        e->user,
                        result->records,
                        result->records == 1 ? "record" : "records",
                        result->artifacts,
                        result->artifacts == 1 ? "artifact" : "artifacts",
                        result->tokens,
                        result->tokens == 1 ? "access token" : "access tokens",
                        result->cancelled,
                        result->cancelled == 1 ? "query" : "queries");
        e->done(e, NULL, result, e->userdata);
}

/* A batch ended: the next one (behind whatever else was submitted
 * meanwhile), or the checkpoint, or the end. */
static void manager_erasure_on_job(HistoryJob *job, int error, void *data, void *userdata) {
        ManagerErasure *e = userdata;
        EraseJob *j = data;
        int r;

        e->job = NULL;
        if (error < 0) {
                manager_erasure_fail(e, error);
                return;
        }
        if (j->checkpoint) {
                manager_erasure_end(e);
                return;
        }
        e->result.records += j->records;
        e->result.artifacts += j->artifacts;
        if (error > 0)
                r = manager_erasure_submit(e, false);
        else if (e->result.records > 0 || e->result.tokens > 0)
                r = manager_erasure_submit(e, true);
        else {
                manager_erasure_end(e);
                return;
        }
        if (r < 0)
                manager_erasure_fail(e, r);
}

/* An administrator's: the tokens on the loop (one statement; the
 * checkpoint then takes them out of the log too), then the batches. */
static void manager_erasure_finish(ManagerErasure *e) {
        int r;

        r = manager_erase_user_tokens(e->manager, &e->session, &e->result.tokens);
        if (r >= 0)
                r = manager_erasure_submit(e, false);
        if (r < 0)
                manager_erasure_fail(e, r);
}

int manager_erase_session(
        Manager *m,
        const SessionKey *session,
        ManagerEraseDone done,
        void *userdata,
        ManagerErasure **ret,
        ManagerError *ret_error) {
        _cleanup_(manager_erasure_freep) ManagerErasure *e = NULL;
        int r;

        assert(m);
        assert(session);
        assert(done);
        assert(ret);
        assert(ret_error);

        /* Busy while a query of theirs runs: its outcome is still to be
         * written (API.md 9, as DELETE /history/{id}); busy too while an
         * erasure of theirs is under way. */
        if (manager_erasure_running(m, session) || erase_scan(m, session, NULL) > 0)
                return manager_erase_error(m, -EBUSY, ret_error);
        r = history_session_running(manager_get_history(m), session);
        if (r < 0)
                return manager_erase_error(m, r, ret_error);
        if (r > 0)
                return manager_erase_error(m, -EBUSY, ret_error);

        e = manager_erasure_new(m, session, done, userdata);
        if (!e)
                return manager_erase_error(m, -ENOMEM, ret_error);
        r = manager_erasure_submit(e, false);
        if (r < 0)
                return manager_erase_error(m, r, ret_error);
        *ret = TAKE_PTR(e);
        return 0;
}

/* Look at the person's queries: a query that claimed meanwhile is
 * cancelled too. None with its record still to write: the wait is over,
 * the erase goes on. Else, at the deadline, busy; before it, the next
 * announcement of one of their queries looks again. */
static void manager_erasure_look(ManagerErasure *e, bool deadline) {
        if (erase_scan(e->manager, &e->session, e) == 0) {
                manager_erasure_stop_waiting(e);
                manager_erasure_finish(e);
                return;
        }
        if (!deadline)
                return;
        manager_erasure_stop_waiting(e);
        log_warning(
                "History: %s could not erase the history of %s: a query of theirs has not ended.",
                e->by,
                e->user);
        e->done(e,
                &(ManagerError){ API_ERROR_BUSY, "A query of this person has not ended yet" },
                NULL,
                e->userdata);
}

static int manager_erasure_on_look(sd_event_source *s, void *userdata) {
        ManagerErasure *e = userdata;

        assert(e);

        if (sd_event_get_state(manager_get_event(e->manager)) == SD_EVENT_FINISHED)
                return 0;
        manager_erasure_look(e, /* deadline= */ false);
        return 0;
}

static int manager_erasure_on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        ManagerErasure *e = userdata;

        assert(e);

        if (sd_event_get_state(manager_get_event(e->manager)) == SD_EVENT_FINISHED)
                return 0;
        manager_erasure_look(e, /* deadline= */ true);
        return 0;
}

/* A query of the person started (it is to be cancelled too), or its
 * record is durable (MANAGER_QUERY_DURABLE: it has nothing more to
 * write): they are looked at again, from the loop, as a handler starts
 * and cancels nothing. */
static void manager_erasure_on_event(Manager *m, const ManagerEvent *ev, void *userdata) {
        ManagerErasure *e = userdata;
        int r;

        if (!IN_SET(ev->type, MANAGER_QUERY_STARTED, MANAGER_QUERY_DURABLE) ||
            memcmp(manager_query_session(ev->query), &e->session, sizeof e->session) != 0)
                return;
        r = sd_event_source_set_enabled(e->look, SD_EVENT_ONESHOT);
        if (r < 0)
                /* The deadline looks again. */
                log_warning_errno(r, "History: cannot look again at the queries of %s", e->user);
}

static int manager_erase_oom(ManagerError *ret_error) {
        *ret_error = (ManagerError){ API_ERROR_INTERNAL_ERROR, NULL };
        return -ENOMEM;
}

int manager_erase_user(
        Manager *m,
        const char *user,
        const char *by,
        ManagerEraseDone done,
        void *userdata,
        ManagerErasure **ret,
        ManagerError *ret_error) {
        _cleanup_(manager_erasure_freep) ManagerErasure *e = NULL;
        SessionKey session;
        int r;

        assert(m);
        assert(user);
        assert(by);
        assert(done);
        assert(ret);
        assert(ret_error);

        if (!user_name_is_valid(user, strlen(user))) {
                *ret_error = (ManagerError){ API_ERROR_INVALID_INPUT, "Not a valid identity name" };
                return -EINVAL;
        }
        /* The key the HTTP transport gives the person's requests. */
        r = manager_user_key(m, user, &session);
        if (r < 0) {
                *ret_error = (ManagerError){ API_ERROR_INTERNAL_ERROR, NULL };
                return r;
        }
        /* One at a time: the one under way answers for both. */
        if (manager_erasure_running(m, &session)) {
                *ret_error = (ManagerError){ API_ERROR_BUSY, "This person's history is already being erased" };
                return -EBUSY;
        }
        e = manager_erasure_new(m, &session, done, userdata);
        if (!e)
                return manager_erase_oom(ret_error);
        e->user = strdup(user);
        e->by = strdup(by);
        if (!e->user || !e->by)
                return manager_erase_oom(ret_error);

        /* Their queries are looked at from the loop (done is never called
         * from inside this call, manager-ops.h), and again each time one of
         * them is announced, until none has its record still to write, for
         * at most MANAGER_ERASE_WAIT_USEC. Subscribed before the cancels
         * below, so that no end of theirs goes unheard. */
        r = sd_event_add_defer(manager_get_event(m), &e->look, manager_erasure_on_look, e);
        if (r < 0)
                return manager_erase_oom(ret_error);
        (void) sd_event_source_set_description(e->look, "manager-erasure-look");
        r = sd_event_add_time_relative(
                manager_get_event(m),
                &e->timer,
                CLOCK_MONOTONIC,
                MANAGER_ERASE_WAIT_USEC,
                0,
                manager_erasure_on_timer,
                e);
        if (r < 0)
                return manager_erase_oom(ret_error);
        (void) sd_event_source_set_description(e->timer, "manager-erasure-deadline");
        r = manager_subscribe(m, manager_erasure_on_event, e);
        if (r < 0)
                return manager_erase_oom(ret_error);
        e->subscribed = true;

        /* What waits goes first, so nothing of theirs is claimed after. */
        (void) manager_leave(m, &e->session, now(CLOCK_MONOTONIC));
        (void) erase_scan(m, &e->session, e);
        *ret = TAKE_PTR(e);
        return 0;
}
