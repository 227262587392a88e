/* SPDX-License-Identifier: MIT */
#include "query/executor.h"
#include "shared/log.h"
#include "shared/macro.h"

struct QueryExecutor {
        sd_event *event;
        const Config *config;

        /* The job in flight. */
        bool busy;
        char query_id[QUERY_ID_MAX];
        QueryDoneHandler done;
        void *userdata;
        sd_event_source *defer;
        const char *abort_reason; /* static string, set by query_executor_abort() */

        usec_t test_delay;
};

int query_executor_new(sd_event *event, const Config *config, QueryExecutor **ret) {
        QueryExecutor *x;

        x = calloc(1, sizeof *x);
        if (!x)
                return -ENOMEM;
        x->event = event;
        x->config = config;
        *ret = x;
        return 0;
}

QueryExecutor *query_executor_free(QueryExecutor *x) {
        if (!x)
                return NULL;
        sd_event_source_disable_unref(x->defer);
        free(x);
        return NULL;
}

bool query_executor_is_configured(const QueryExecutor *x) {
        /* The pipeline (wiki, model, sandbox) is a later piece of work: no
         * configuration makes it run yet, so say so rather than pretend. */
        return false;
}

bool query_executor_busy(const QueryExecutor *x) {
        return x->busy;
}

/* Report the job's end: a job that nothing ran needs no cleanup. */
static void complete(QueryExecutor *x) {
        QueryDoneHandler done = x->done;
        void *u = x->userdata;
        char id[QUERY_ID_MAX];
        QueryOutcome o;

        x->defer = sd_event_source_disable_unref(x->defer);
        memcpy(id, x->query_id, sizeof id);
        x->busy = false;
        x->done = NULL;
        x->userdata = NULL;

        o = (QueryOutcome){
                .query_id = id,
                .succeeded = false,
                .error = API_ERROR_EXECUTION_FAILED,
                .message = x->abort_reason ? x->abort_reason : "query execution is not configured",
                /* Nothing was started, so there is nothing to clean up. */
                .cleanup_confirmed = true,
        };
        x->abort_reason = NULL;
        done(&o, u);
}

static int on_unconfigured(sd_event_source *s, void *userdata) {
        complete(userdata);
        return 0;
}

static int on_unconfigured_later(sd_event_source *s, uint64_t usec, void *userdata) {
        complete(userdata);
        return 0;
}

int query_executor_abort(QueryExecutor *x, const char *reason) {
        int r;

        if (!x->busy)
                return -ESRCH;
        x->abort_reason = reason;
        /* Still report from the loop, never from inside the caller. */
        x->defer = sd_event_source_disable_unref(x->defer);
        r = sd_event_add_defer(x->event, &x->defer, on_unconfigured, x);
        if (r < 0)
                return r;
        return 0;
}

void query_executor_set_test_delay(QueryExecutor *x, usec_t delay) {
        x->test_delay = delay;
}

int query_executor_start(QueryExecutor *x, const QueryJob *job, QueryDoneHandler done, void *userdata) {
        int r;

        if (x->busy)
                return -EBUSY;

        /* Complete from the event loop, never from inside start(), so the
         * caller sees the same ordering as with a real pipeline. */
        if (x->test_delay > 0)
                r = sd_event_add_time_relative(
                        x->event, &x->defer, CLOCK_MONOTONIC, x->test_delay, 0, on_unconfigured_later, x);
        else
                r = sd_event_add_defer(x->event, &x->defer, on_unconfigured, x);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(x->defer, "query-unconfigured");

        memcpy(x->query_id, job->id, sizeof x->query_id);
        x->done = done;
        x->userdata = userdata;
        x->busy = true;
        return 0;
}
