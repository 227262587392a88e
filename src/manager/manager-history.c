/* SPDX-License-Identifier: MIT */
/* The Manager's writes to a person's history (delete, feedback, share
 * links), each a job on the store's worker, and the follow-up's
 * preparation (API.md 7, 9, 9.1). */
#include <assert.h>
#include <stdio.h>

#include "manager/manager-ops.h"
#include "metrics/metrics.h"
#include "shared/log.h"
#include "shared/strv.h"
#include "shared/time-util.h"

/* A history_*() call on one of the asker's records failed: -ENOENT is
 * query_not_found (not theirs, or gone), -EBUSY busy (its outcome is still
 * to be written: try after), a write the store could not make
 * storage_unavailable, anything else internal_error. Returns r. */
static int manager_history_error(Manager *m, int r, ManagerError *ret_error) {
        assert(r < 0);

        if (r == -ENOENT)
                *ret_error = (ManagerError){ API_ERROR_QUERY_NOT_FOUND, NULL };
        else if (r == -EBUSY)
                *ret_error = (ManagerError){ API_ERROR_BUSY, "The query is still running" };
        else if (!manager_storage_refusal(m, ret_error))
                *ret_error = (ManagerError){ API_ERROR_INTERNAL_ERROR, NULL };
        return r;
}

/* ---- writes on the store's worker ---- */

typedef enum ManagerWriteKind {
        MANAGER_WRITE_DELETE,
        MANAGER_WRITE_FEEDBACK,
        MANAGER_WRITE_SHARE_ADD,
        MANAGER_WRITE_SHARE_REVOKE,
} ManagerWriteKind;

/* What the worker's thread reads: copies, owned by the job. */
typedef struct ManagerWriteJob {
        ManagerWriteKind kind;
        char id[QUERY_ID_MAX];
        SessionKey session;
        char *rating, *reason, *comment;
        uint8_t digest[HISTORY_SHARE_DIGEST_SIZE];
        usec_t at; /* CLOCK_REALTIME */
} ManagerWriteJob;

struct ManagerWrite {
        Manager *manager;
        HistoryJob *job;
        ManagerWriteKind kind;
        bool down; /* a "down" rating */
        char rating[8];
        char token[MANAGER_SHARE_TOKEN_MAX];
        ManagerWriteDone done;
        void *userdata;
};

static void manager_write_job_free(void *p) {
        ManagerWriteJob *j = p;

        if (!j)
                return;
        free(j->rating);
        free(j->reason);
        free(j->comment);
        free(j);
}

/* On the worker's thread: the write, on the worker's connection. */
static int manager_write_run(History *h, void *data) {
        ManagerWriteJob *j = data;
        int r;

        switch (j->kind) {
        case MANAGER_WRITE_DELETE:
                return history_delete(h, j->id, &j->session);
        case MANAGER_WRITE_FEEDBACK:
                return history_set_feedback(h, j->id, &j->session, j->rating, j->reason, j->comment, j->at);
        case MANAGER_WRITE_SHARE_ADD:
                return history_share_add(h, j->id, &j->session, j->digest, j->at);
        case MANAGER_WRITE_SHARE_REVOKE:
                r = history_share_revoke(h, j->id, &j->session);
                return MIN(r, 0);
        }
        return -EINVAL;
}

static void manager_write_on_done(HistoryJob *job, int error, void *data, void *userdata) {
        ManagerWrite *w = userdata;
        ManagerError e;

        w->job = NULL;
        if (error < 0) {
                (void) manager_history_error(w->manager, error, &e);
                w->done(w, &e, NULL, w->userdata);
                return;
        }
        if (w->kind == MANAGER_WRITE_FEEDBACK) {
                metrics_count_feedback(w->rating);
                if (w->down)
                        metrics_count_unanswered("negative_feedback");
        }
        w->done(w,
                NULL,
                &(ManagerWritten){ .token = w->kind == MANAGER_WRITE_SHARE_ADD ? w->token : NULL },
                w->userdata);
}

ManagerWrite *manager_write_free(ManagerWrite *w) {
        if (!w)
                return NULL;
        w->job = history_job_cancel(w->job);
        free(w);
        return NULL;
}

/* What a write is to do: its kind and what it is given (borrowed; copied
 * for the worker's thread by manager_write_start()). */
typedef struct ManagerWriteArgs {
        ManagerWriteKind kind;
        const char *rating, *reason, *comment; /* MANAGER_WRITE_FEEDBACK */
        const uint8_t *digest;                 /* MANAGER_WRITE_SHARE_ADD */
        const char *token;                     /* MANAGER_WRITE_SHARE_ADD: given to done */
} ManagerWriteArgs;

/* The one way a write reaches the store's worker: a copy of a for the
 * worker's thread, submitted for the session's record id, with done
 * called from manager_write_on_done(). The operation's shape of
 * manager-ops.h. */
static int manager_write_start(
        Manager *m,
        const ManagerWriteArgs *a,
        const SessionKey *session,
        const char *id,
        ManagerWriteDone done,
        void *userdata,
        ManagerWrite **ret,
        ManagerError *ret_error) {
        _cleanup_free_ ManagerWrite *w = NULL;
        ManagerWriteJob *j;
        int r;

        assert(m);
        assert(a);
        assert(session);
        assert(id);
        assert(done);
        assert(ret);
        assert(ret_error);

        /* An id longer than any of ours is no record of theirs. */
        if (strlen(id) >= sizeof j->id) {
                *ret_error = (ManagerError){ API_ERROR_QUERY_NOT_FOUND, NULL };
                return -ENOENT;
        }
        w = calloc(1, sizeof *w);
        j = calloc(1, sizeof *j);
        if (!w || !j || (a->rating && !(j->rating = strdup(a->rating))) ||
            (a->reason && !(j->reason = strdup(a->reason))) ||
            (a->comment && !(j->comment = strdup(a->comment)))) {
                manager_write_job_free(j);
                *ret_error = (ManagerError){ API_ERROR_INTERNAL_ERROR, NULL };
                return -ENOMEM;
        }
        *w = (ManagerWrite){ .manager = m, .kind = a->kind, .done = done, .userdata = userdata };
        if (a->rating) {
                snprintf(w->rating, sizeof w->rating, "%s", a->rating);
                w->down = streq(a->rating, "down");
        }
        if (a->token)
                snprintf(w->token, sizeof w->token, "%s", a->token);
        j->kind = a->kind;
        snprintf(j->id, sizeof j->id, "%s", id);
        j->session = *session;
        if (a->digest)
                memcpy(j->digest, a->digest, sizeof j->digest);
        j->at = now(CLOCK_REALTIME);
        r = history_worker_submit(
                manager_get_history_worker(m),
                manager_write_run,
                j,
                manager_write_job_free,
                manager_write_on_done,
                w,
                &w->job);
        if (r < 0) {
                *ret_error = (ManagerError){ API_ERROR_INTERNAL_ERROR, NULL };
                return r;
        }
        *ret = TAKE_PTR(w);
        return 0;
}

int manager_delete_record(
        Manager *m,
        const SessionKey *session,
        const char *id,
        ManagerWriteDone done,
        void *userdata,
        ManagerWrite **ret,
        ManagerError *ret_error) {
        return manager_write_start(
                m, &(ManagerWriteArgs){ .kind = MANAGER_WRITE_DELETE }, session, id, done, userdata, ret, ret_error);
}

int manager_set_feedback(
        Manager *m,
        const SessionKey *session,
        const char *id,
        const char *rating,
        const char *reason,
        const char *comment,
        ManagerWriteDone done,
        void *userdata,
        ManagerWrite **ret,
        ManagerError *ret_error) {
        ManagerWriteArgs a;

        assert(rating);
        assert(ret_error);

        if (!streq(rating, "up") && !streq(rating, "down")) {
                *ret_error = (ManagerError){ API_ERROR_INVALID_INPUT, "rating must be up or down" };
                return -EINVAL;
        }
        a = (ManagerWriteArgs){
                .kind = MANAGER_WRITE_FEEDBACK, .rating = rating, .reason = reason, .comment = comment
        };
        return manager_write_start(m, &a, session, id, done, userdata, ret, ret_error);
}

int manager_write_share(
        Manager *m,
        const SessionKey *session,
        const char *id,
        const uint8_t *digest,
        const char *token,
        ManagerWriteDone done,
        void *userdata,
        ManagerWrite **ret,
        ManagerError *ret_error) {
        ManagerWriteArgs a = {
                .kind = digest ? MANAGER_WRITE_SHARE_ADD : MANAGER_WRITE_SHARE_REVOKE,
                .digest = digest,
                .token = token,
        };

        return manager_write_start(m, &a, session, id, done, userdata, ret, ret_error);
}

struct ManagerPreparedFollowUp {
        Manager *manager;
        HistoryRecord *records;
        size_t n_records;
        QueryTurn *turns;
        char **notes;
        ManagerFollowUp follow_up;
        ManagerReadableCheck *readable;
        ManagerFollowUpDone done;
        void *userdata;
};

ManagerPreparedFollowUp *manager_follow_up_free(ManagerPreparedFollowUp *p) {
        if (!p)
                return NULL;
        manager_readable_check_free(p->readable);
        history_conversation_free_records(p->records, p->n_records);
        free(p->turns);
        strv_free(p->notes);
        free(p);
        return NULL;
}

char **manager_records_titles(const HistoryRecord *records, size_t n) {
        _cleanup_(strv_freep) char **titles = calloc(1, sizeof(char *));
        size_t k = 0;

        if (!titles)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                for (size_t j = 0; j < records[i].n_sources; j++)
                        if (strv_extend_unique(&titles, &k, records[i].sources[j].title) < 0)
                                return NULL;
                for (size_t j = 0; records[i].given_titles && records[i].given_titles[j]; j++)
                        if (strv_extend_unique(&titles, &k, records[i].given_titles[j]) < 0)
                                return NULL;
        }
        return TAKE_PTR(titles);
}

static bool follow_up_title_readable(const ManagerReadable *result, const char *title) {
        for (size_t i = 0; i < result->n; i++)
                if (streq(result->titles[i], title))
                        return result->readable[i];
        return false;
}

/* Whether the person may read every title that reached record r's model. */
static bool follow_up_turn_readable(const HistoryRecord *r, const ManagerReadable *result) {
        for (size_t j = 0; j < r->n_sources; j++)
                if (!follow_up_title_readable(result, r->sources[j].title))
                        return false;
        for (size_t j = 0; r->given_titles && r->given_titles[j]; j++)
                if (!follow_up_title_readable(result, r->given_titles[j]))
                        return false;
        return true;
}

/* The turns the model is given: oldest first, up to the first one whose
 * titles the person may no longer read; that one and every later one are
 * left out (a later answer may repeat what it read, also when the record
 * is older than the titles it was given), and the notes say how many. */
static void manager_follow_up_on_readable(
        ManagerReadableCheck *c, const ManagerError *error, const ManagerReadable *result, void *userdata) {
        ManagerPreparedFollowUp *p = userdata;
        size_t kept = 0;

        if (error) {
                p->done(p, error, NULL, p->userdata);
                return;
        }
        while (kept < p->n_records && follow_up_turn_readable(&p->records[kept], result))
                kept++;
        for (size_t i = 0; i < kept; i++)
                p->turns[i] = (QueryTurn){
                        .question = p->records[i].question,
                        .answer = p->records[i].answer,
                        .sources = p->records[i].sources,
                        .n_sources = p->records[i].n_sources,
                };
        if (kept < p->n_records) {
                size_t n = p->n_records - kept;
                char *note = NULL;

                log_info(
                        "Follow-up of %s: %zu earlier turns left out, whose pages the asker may no longer read.",
                        p->records[p->n_records - 1].id,
                        n);
                if (asprintf(
                            &note,
                            "%zu earlier %s of this conversation %s left out of what the model was given: "
                            "%s pages the asker may no longer read.",
                            n,
                            n == 1 ? "turn" : "turns",
                            n == 1 ? "was" : "were",
                            n == 1 ? "it read" : "they read") < 0 ||
                    !(p->notes = calloc(2, sizeof(char *)))) {
                        free(note);
                        p->done(p, &(ManagerError){ API_ERROR_INTERNAL_ERROR, NULL }, NULL, p->userdata);
                        return;
                }
                p->notes[0] = note;
        }
        p->follow_up.turns = p->turns;
        p->follow_up.n_turns = kept;
        p->follow_up.notes = p->notes;
        p->done(p, NULL, &p->follow_up, p->userdata);
}

int manager_prepare_follow_up(
        Manager *m,
        const SessionKey *session,
        const char *user,
        const char *follow_up,
        ManagerFollowUpDone done,
        void *userdata,
        ManagerPreparedFollowUp **ret,
        ManagerError *ret_error) {
        _cleanup_(manager_follow_up_freep) ManagerPreparedFollowUp *p = NULL;
        _cleanup_(strv_freep) char **titles = NULL;
        const HistoryRecord *last;
        int r;

        assert(m);
        assert(session);
        assert(follow_up);
        assert(done);
        assert(ret);
        assert(ret_error);

        p = calloc(1, sizeof *p);
        if (!p) {
                *ret_error = (ManagerError){ API_ERROR_INTERNAL_ERROR, NULL };
                return -ENOMEM;
        }
        *p = (ManagerPreparedFollowUp){ .manager = m, .done = done, .userdata = userdata };
        r = history_get_conversation(
                manager_get_history(m),
                follow_up,
                session,
                HISTORY_CONVERSATION_MAX_TURNS,
                &p->records,
                &p->n_records);
        if (r < 0)
                return manager_history_error(m, r, ret_error);
        last = &p->records[p->n_records - 1];
        if (streq(last->status, "running")) {
                *ret_error = (ManagerError){ API_ERROR_BUSY, "The query followed is still running" };
                return -EBUSY;
        }
        p->turns = calloc(p->n_records, sizeof *p->turns);
        titles = manager_records_titles(p->records, p->n_records);
        if (!p->turns || !titles) {
                *ret_error = (ManagerError){ API_ERROR_INTERNAL_ERROR, NULL };
                return -ENOMEM;
        }
        p->follow_up = (ManagerFollowUp){
                .follow_up = last->id,
                .conversation = last->conversation,
        };
        /* Checked like a read (API.md 7): in person mode, asked of the
         * wiki now; in service mode answered from a defer. */
        r = manager_check_readable(m, user, titles, manager_follow_up_on_readable, p, &p->readable, ret_error);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(p);
        return 0;
}
