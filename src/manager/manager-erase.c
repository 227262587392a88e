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
#include "shared/time-util.h"
#include "shared/user-key.h"
#include "store/tokens.h"

/* How often an administrator's erasure looks again whether the person's
 * cancelled queries have ended (their records durable): a cancel reaches
 * the record in milliseconds, the sandbox's stop in at most its grace. */
#define MANAGER_ERASE_POLL_USEC (20 * USEC_PER_MSEC)

#define CANCELLED_FOR_ERASURE "Cancelled: the person's history is being erased"

/* Whether a query of session still has its record to write: claimed,
 * executing or completing (a query awaiting its cleanup is durable). With
 * cancel, the executing ones are cancelled on the way. Returns how many. */
typedef struct EraseScan {
        Manager *manager;
        const SessionKey *session;
        bool cancel;
        unsigned busy, cancelled;
} EraseScan;

static void erase_scan_query(ManagerQuery *q, void *userdata) {
        EraseScan *s = userdata;

        if (memcmp(manager_query_session(q), s->session, sizeof *s->session) != 0)
                return;
        if (!IN_SET(manager_query_state(q),
                    MANAGER_QUERY_STATE_CLAIMED,
                    MANAGER_QUERY_STATE_EXECUTING,
                    MANAGER_QUERY_STATE_COMPLETING))
                return;
        s->busy++;
        if (s->cancel && manager_query_executing(q) &&
            manager_cancel_query(s->manager, manager_query_id(q), CANCELLED_FOR_ERASURE) >= 0)
                s->cancelled++;
}

static EraseScan erase_scan(Manager *m, const SessionKey *session, bool cancel) {
        EraseScan s = { .manager = m, .session = session, .cancel = cancel };

        manager_foreach_query(m, erase_scan_query, &s);
        return s;
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

struct ManagerErasure {
        Manager *manager;
        char *user; /* NULL: the person's own erasure */
        char *by;
        SessionKey session;
        sd_event_source *timer; /* the look again, then the erase, from the loop */
        usec_t deadline;        /* monotonic: busy after it */
        HistoryJob *job;        /* the batch or the checkpoint in flight */
        ManagerErased result;
        ManagerEraseDone done;
        void *userdata;
        ManagerErasure *erasures_prev, *erasures_next;
};

/* The erasures under way, of every Manager (the tests run several). */
static ManagerErasure *erasures = NULL;

static bool manager_erasure_running(Manager *m, const SessionKey *session) {
        for (ManagerErasure *e = erasures; e; e = e->erasures_next)
                if (e->manager == m && memcmp(&e->session, session, sizeof *session) == 0)
                        return true;
        return false;
}

ManagerErasure *manager_erasure_free(ManagerErasure *e) {
        if (!e)
                return NULL;
        LIST_REMOVE(erasures, erasures, e);
        e->job = history_job_cancel(e->job);
        sd_event_source_disable_unref(e->timer);
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
        if (manager_erasure_running(m, session) || erase_scan(m, session, false).busy > 0)
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

static int manager_erasure_on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        ManagerErasure *e = userdata;
        EraseScan scan;
        int r;

        assert(e);

        if (sd_event_get_state(manager_get_event(e->manager)) == SD_EVENT_FINISHED)
                return 0;
        /* A query that claimed meanwhile is cancelled too. */
        scan = erase_scan(e->manager, &e->session, true);
        e->result.cancelled += scan.cancelled;
        if (scan.busy == 0) {
                manager_erasure_finish(e);
                return 0;
        }
        if (now(CLOCK_MONOTONIC) >= e->deadline) {
                log_warning(
                        "History: %s could not erase the history of %s: a query of theirs has not ended.",
                        e->by,
                        e->user);
                e->done(e,
                        &(ManagerError){ API_ERROR_BUSY, "A query of this person has not ended yet" },
                        NULL,
                        e->userdata);
                return 0;
        }
        r = sd_event_source_set_time_relative(s, MANAGER_ERASE_POLL_USEC);
        if (r >= 0)
                r = sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        if (r < 0) {
                log_error_errno(r, "History: cannot wait for the queries of %s to end", e->user);
                e->done(e, &(ManagerError){ API_ERROR_INTERNAL_ERROR, NULL }, NULL, e->userdata);
        }
        return 0;
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
        EraseScan scan;
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

        /* What waits goes first, so nothing of theirs is claimed after. */
        (void) manager_leave(m, &e->session, now(CLOCK_MONOTONIC));
        scan = erase_scan(m, &e->session, true);
        e->result.cancelled = scan.cancelled;
        e->deadline = now(CLOCK_MONOTONIC) + MANAGER_ERASE_WAIT_USEC;
        /* From the loop, even with nothing to wait for (manager-ops.h). */
        r = sd_event_add_time_relative(
                manager_get_event(m),
                &e->timer,
                CLOCK_MONOTONIC,
                scan.busy > 0 ? MANAGER_ERASE_POLL_USEC : 0,
                0,
                manager_erasure_on_timer,
                e);
        if (r < 0)
                return manager_erase_oom(ret_error);
        (void) sd_event_source_set_description(e->timer, "manager-erasure");
        *ret = TAKE_PTR(e);
        return 0;
}
