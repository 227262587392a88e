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

static int on_unconfigured(sd_event_source *s, void *userdata) {
        QueryExecutor *x = userdata;
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
                .message = "query execution is not configured",
                /* Nothing was started, so there is nothing to clean up. */
                .cleanup_confirmed = true,
        };
        done(&o, u);
        return 0;
}

int query_executor_start(QueryExecutor *x, const QueryJob *job, QueryDoneHandler done, void *userdata) {
        int r;

        if (x->busy)
                return -EBUSY;

        /* Complete from the event loop, never from inside start(), so the
         * caller sees the same ordering as with a real pipeline. */
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
