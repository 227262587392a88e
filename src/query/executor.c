/* SPDX-License-Identifier: MIT */
#include <assert.h>

#include "query/destination.h"
#include "query/executor.h"
#include "query/llm-client.h"
#include "query/pipeline.h"
#include "query/upstream.h"
#include "query/wiki-client.h"
#include "shared/fault.h"
#include "shared/log.h"
#include "shared/macro.h"

struct QueryExecutor {
        sd_event *event;
        const Config *config;
        Sandbox *sandbox;

        /* Only when wiki and model are configured. */
        DestinationPolicy *policy;
        Upstream *upstream;
        LlmClient *llm;

        /* The job in flight. */
        bool busy;
        char query_id[QUERY_ID_MAX];
        QueryExecutorDone done;
        void *userdata;
        QueryEventHandler on_event;
        void *event_userdata;
        QueryRun *run;
        sd_event_source *defer;   /* the unconfigured path (a timer with the test delay) */
        const char *abort_reason; /* static string, set by query_executor_abort() */

        usec_t test_delay;

        /* The message of a query that cannot run (API.md 9, health): the
         * settings that are missing and where to read on. */
        char unconfigured_message[256];
};

/* "query execution is not configured: WIKI_WEB_LLM_URL and
 * WIKI_WEB_LLM_MODEL are not set (see "Quick start" in the README)". */
static void format_unconfigured_message(const Config *c, char *buf, size_t size) {
        const char *missing[CONFIG_EXECUTION_SETTINGS_MAX + 1];
        size_t n = config_missing_execution_settings(c, missing), k;
        int w;

        if (n == 0) {
                /* Only with the test delay: nothing is missing. */
                snprintf(buf, size, "query execution is not configured");
                return;
        }
        w = snprintf(buf, size, "query execution is not configured: ");
        k = w > 0 ? (size_t) w : 0;
        for (size_t i = 0; i < n && k < size; i++) {
                const char *sep = i == 0 ? "" : ", ";

                if (i > 0 && i + 1 == n)
                        sep = " and ";
                w = snprintf(buf + k, size - k, "%s%s", sep, missing[i]);
                k += w > 0 ? (size_t) w : 0;
        }
        if (k < size)
                snprintf(
                        buf + k,
                        size - k,
                        " %s not set (see \"Quick start\" in the README)",
                        n == 1 ? "is" : "are");
}

static bool configured(const Config *c) {
        return c->wiki_api_url && c->llm_url && c->llm_model;
}

int query_executor_new(sd_event *event, const Config *config, QueryExecutor **ret) {
        _cleanup_(query_executor_freep) QueryExecutor *x = NULL;
        int r;

        assert(event);
        assert(config);
        assert(ret);

        x = calloc(1, sizeof *x);
        if (!x)
                return -ENOMEM;
        x->event = event;
        x->config = config;
        format_unconfigured_message(config, x->unconfigured_message, sizeof x->unconfigured_message);

        if (configured(config)) {
                r = destination_policy_new(
                        config->wiki_api_url, config->llm_url, config->allowed_destinations, &x->policy);
                if (r < 0)
                        return log_error_errno(r, "Query execution: the destination policy could not be made");
                r = upstream_new(event, x->policy, config->upstream_max_response_bytes, &x->upstream);
                if (r < 0)
                        return log_error_errno(r, "Query execution: the upstream client could not be made");
                r = upstream_set_user_agent_contact(x->upstream, config->user_agent_contact);
                if (r < 0)
                        return log_error_errno(r, "Query execution: the User-Agent contact could not be set");
                r = llm_client_new(
                        x->upstream,
                        &(LlmClientSettings){
                                .url = config->llm_url,
                                .api_key = config->llm_api_key,
                                .idle_timeout = llm_client_idle_timeout(
                                        config->query_timeout_seconds * USEC_PER_SEC),
                        },
                        &x->llm);
                if (r < 0)
                        return log_error_errno(r, "Query execution: the model client could not be made");
        }
        *ret = TAKE_PTR(x);
        return 0;
}

QueryExecutor *query_executor_free(QueryExecutor *x) {
        if (!x)
                return NULL;
        sd_event_source_disable_unref(x->defer);
        /* Only after the loop has ended: nothing can be in flight in the
         * sandbox any more that still needs these. */
        x->run = query_run_free(x->run);
        llm_client_free(x->llm);
        upstream_free(x->upstream);
        destination_policy_free(x->policy);
        free(x);
        return NULL;
}

void query_executor_set_sandbox(QueryExecutor *x, Sandbox *sandbox) {
        assert(x);
        x->sandbox = sandbox;
}

bool query_executor_is_configured(const QueryExecutor *x) {
        assert(x);
        return x->upstream;
}

unsigned query_executor_n_running(const QueryExecutor *x) {
        assert(x);
        return x->busy ? 1 : 0;
}

/* Report the job's end: a job that nothing ran needs no cleanup. */
static void query_executor_report(QueryExecutor *x) {
        QueryExecutorDone done = x->done;
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
                .error = x->abort_reason ? -ECANCELED : -EOPNOTSUPP,
                .api_error = API_ERROR_EXECUTION_FAILED,
                .message = x->abort_reason ? x->abort_reason : x->unconfigured_message,
                /* Nothing was started, so there is nothing to clean up. */
                .cleanup_confirmed = true,
        };
        x->abort_reason = NULL;
        done(x, o.error, &o, u);
}

static int query_executor_on_defer(sd_event_source *s, void *userdata) {
        query_executor_report(userdata);
        return 0;
}

static int query_executor_on_test_delay(sd_event_source *s, uint64_t usec, void *userdata) {
        query_executor_report(userdata);
        return 0;
}

static void query_executor_on_run_done(QueryRun *q, int error, const QueryOutcome *o, void *userdata) {
        QueryExecutor *x = userdata;
        QueryExecutorDone done = x->done;
        void *u = x->userdata;

        assert(q == x->run);
        x->busy = false;
        x->done = NULL;
        x->userdata = NULL;
        x->run = NULL;
        done(x, error, o, u);
        /* The run ends with its report (the outcome points into it): its
         * query directory goes with it. A cleanup not yet confirmed goes on
         * in the Sandbox, which announces it. */
        query_run_free(q);
}

void query_executor_set_event_handler(QueryExecutor *x, QueryEventHandler handler, void *userdata) {
        assert(x);
        x->on_event = handler;
        x->event_userdata = userdata;
}

void query_executor_sandbox_changed(QueryExecutor *x) {
        assert(x);
        if (x->run)
                query_run_sandbox_changed(x->run);
}

int query_executor_abort(QueryExecutor *x, const char *query_id, const char *reason) {
        int r;

        assert(x);
        assert(query_id);
        assert(reason);

        if (!x->busy || !streq(x->query_id, query_id))
                return -ESRCH;
        if (x->run) {
                query_run_abort(x->run, -ECANCELED, API_ERROR_EXECUTION_FAILED, reason);
                return 0;
        }
        x->abort_reason = reason;
        /* Still report from the loop, never from inside the caller. */
        x->defer = sd_event_source_disable_unref(x->defer);
        r = sd_event_add_defer(x->event, &x->defer, query_executor_on_defer, x);
        if (r < 0)
                return r;
        return 0;
}

#if ENABLE_TEST_FAULTS
void query_executor_set_test_delay(QueryExecutor *x, usec_t delay) {
        assert(x);
        x->test_delay = delay;
}
#endif

int query_executor_start(QueryExecutor *x, const QueryJob *job, QueryExecutorDone done, void *userdata) {
        int r;

        assert(x);
        assert(job);
        assert(done);

        if (x->busy)
                return -EBUSY;

        if (x->upstream && !TEST_FAULT(x->test_delay > 0)) {
                r = query_run_new(
                        &(QueryRunContext){
                                .event = x->event,
                                .config = x->config,
                                .upstream = x->upstream,
                                .llm = x->llm,
                                .sandbox = x->sandbox,
                                .on_event = x->on_event,
                                .event_userdata = x->event_userdata,
                        },
                        job,
                        query_executor_on_run_done,
                        x,
                        &x->run);
                if (r < 0)
                        return r;
        } else {
                /* Complete from the event loop, never from inside start(), so
                 * the caller sees the same ordering as with a real pipeline. */
                if (TEST_FAULT(x->test_delay > 0))
                        r = sd_event_add_time_relative(
                                x->event,
                                &x->defer,
                                CLOCK_MONOTONIC,
                                x->test_delay,
                                0,
                                query_executor_on_test_delay,
                                x);
                else
                        r = sd_event_add_defer(x->event, &x->defer, query_executor_on_defer, x);
                if (r < 0)
                        return r;
                (void) sd_event_source_set_description(
                        x->defer,
                        TEST_FAULT(x->test_delay > 0) ? "query-executor-test-delay" : "query-executor-defer");
        }

        memcpy(x->query_id, job->id, sizeof x->query_id);
        x->done = done;
        x->userdata = userdata;
        x->busy = true;
        return 0;
}

struct RevisionCheck {
        WikiClient *wiki;
        WikiOperation *op;
        RevisionCheckDone done;
        void *userdata;
};

RevisionCheck *revision_check_free(RevisionCheck *c) {
        if (!c)
                return NULL;
        wiki_operation_free(c->op);
        wiki_client_free(c->wiki);
        free(c);
        return NULL;
}

static void revision_check_on_done(WikiOperation *op, int error, const WikiResult *r, void *userdata) {
        RevisionCheck *c = userdata;

        c->done(c, error, r, c->userdata);
}

int query_executor_check_revisions(
        QueryExecutor *x, char **titles, RevisionCheckDone done, void *userdata, RevisionCheck **ret) {
        _cleanup_(revision_check_freep) RevisionCheck *c = NULL;
        const Config *cfg;
        int r;

        assert(x);
        assert(done);
        assert(ret);

        cfg = x->config;
        if (!x->upstream || !cfg->wiki_api_url)
                return -EOPNOTSUPP;
        c = calloc(1, sizeof *c);
        if (!c)
                return -ENOMEM;
        c->done = done;
        c->userdata = userdata;
        r = wiki_client_new(
                x->upstream,
                &(WikiClientSettings){
                        .api_url = cfg->wiki_api_url,
                        .username = cfg->wiki_username,
                        .password = cfg->wiki_username ? cfg->wiki_password : NULL,
                        .deadline = now(CLOCK_MONOTONIC) + REVISION_CHECK_TIMEOUT_USEC,
                },
                &c->wiki);
        if (r < 0)
                return r;
        r = wiki_client_revisions(c->wiki, titles, revision_check_on_done, c, &c->op);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(c);
        return 0;
}
