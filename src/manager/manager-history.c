/* SPDX-License-Identifier: MIT */
/* The Manager's writes to a person's history (delete, feedback) and the
 * follow-up's preparation (API.md 7, 9, 9.1). */
#include <assert.h>

#include "manager/manager-ops.h"
#include "metrics/metrics.h"
#include "shared/log.h"
#include "shared/time-util.h"

/* A history_*() call on one of the asker's records failed: -ENOENT is
 * query_not_found (not theirs, or gone), -EBUSY busy (its outcome is still
 * to be written: try after), anything else internal_error. Returns r. */
static int manager_history_error(int r, ManagerError *ret_error) {
        assert(r < 0);

        if (r == -ENOENT)
                *ret_error = (ManagerError){ API_ERROR_QUERY_NOT_FOUND, NULL };
        else if (r == -EBUSY)
                *ret_error = (ManagerError){ API_ERROR_BUSY, "The query is still running" };
        else
                *ret_error = (ManagerError){ API_ERROR_INTERNAL_ERROR, NULL };
        return r;
}

int manager_delete_record(Manager *m, const SessionKey *session, const char *id, ManagerError *ret_error) {
        int r;

        assert(m);
        assert(session);
        assert(id);
        assert(ret_error);

        r = history_delete(manager_get_history(m), id, session);
        if (r < 0)
                return manager_history_error(r, ret_error);
        return 0;
}

int manager_set_feedback(
        Manager *m,
        const SessionKey *session,
        const char *id,
        const char *rating,
        const char *reason,
        const char *comment,
        ManagerError *ret_error) {
        int r;

        assert(m);
        assert(session);
        assert(id);
        assert(rating);
        assert(ret_error);

        r = history_set_feedback(
                manager_get_history(m), id, session, rating, reason, comment, now(CLOCK_REALTIME));
        if (r == -EINVAL) {
                *ret_error = (ManagerError){ API_ERROR_INVALID_INPUT, "rating must be up or down" };
                return r;
        }
        if (r < 0) /* -EBUSY: there is no answer to rate yet. */
                return manager_history_error(r, ret_error);
        metrics_count_feedback(rating);
        if (streq(rating, "down"))
                metrics_count_unanswered("negative_feedback");
        return 0;
}

struct ManagerPreparedFollowUp {
        HistoryRecord *records;
        size_t n_records;
        QueryTurn *turns;
        ManagerFollowUp follow_up;
};

ManagerPreparedFollowUp *manager_follow_up_free(ManagerPreparedFollowUp *p) {
        if (!p)
                return NULL;
        history_conversation_free_records(p->records, p->n_records);
        free(p->turns);
        free(p);
        return NULL;
}

const ManagerFollowUp *manager_follow_up_get(const ManagerPreparedFollowUp *p) {
        assert(p);
        return &p->follow_up;
}

int manager_prepare_follow_up(
        Manager *m,
        const SessionKey *session,
        const char *user,
        const char *follow_up,
        ManagerPreparedFollowUp **ret,
        ManagerError *ret_error) {
        _cleanup_(manager_follow_up_freep) ManagerPreparedFollowUp *p = NULL;
        const HistoryRecord *last;
        int r;

        assert(m);
        assert(session);
        assert(follow_up);
        assert(ret);
        assert(ret_error);

        p = calloc(1, sizeof *p);
        if (!p) {
                *ret_error = (ManagerError){ API_ERROR_INTERNAL_ERROR, NULL };
                return -ENOMEM;
        }
        r = history_get_conversation(
                manager_get_history(m),
                follow_up,
                session,
                HISTORY_CONVERSATION_MAX_TURNS,
                &p->records,
                &p->n_records);
        if (r < 0)
                return manager_history_error(r, ret_error);
        last = &p->records[p->n_records - 1];
        if (streq(last->status, "running")) {
                *ret_error = (ManagerError){ API_ERROR_BUSY, "The query followed is still running" };
                return -EBUSY;
        }
        p->turns = calloc(p->n_records, sizeof *p->turns);
        if (!p->turns) {
                *ret_error = (ManagerError){ API_ERROR_INTERNAL_ERROR, NULL };
                return -ENOMEM;
        }
        for (size_t i = 0; i < p->n_records; i++)
                p->turns[i] = (QueryTurn){
                        .question = p->records[i].question,
                        .answer = p->records[i].answer,
                        .sources_json = p->records[i].sources_json,
                };
        p->follow_up = (ManagerFollowUp){
                .follow_up = last->id,
                .conversation = last->conversation,
                .turns = p->turns,
                .n_turns = p->n_records,
        };
        *ret = TAKE_PTR(p);
        return 0;
}
