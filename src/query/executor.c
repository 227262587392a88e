/* SPDX-License-Identifier: MIT */
#include <assert.h>

#include "query/destination.h"
#include "query/executor.h"
#include "query/llm-client.h"
#include "query/llm.h"
#include "query/pipeline.h"
#include "query/upstream.h"
#include "shared/list.h"
#include "query/wiki-client.h"
#include "shared/fault.h"
#include "shared/log.h"
#include "shared/macro.h"

/* One job in flight, the caller's handle (executor.h): its own QueryRun
 * (with its own deadline), or on the unconfigured path its own defer. In
 * the executor's list while it runs (until its done is called). */
struct QueryExecution {
        QueryExecutor *executor; /* NULL once reported */
        char query_id[QUERY_ID_MAX];
        QueryExecutionDone done;
        QueryEventHandler on_event;
        void *userdata;
        QueryRun *run;
        sd_event_source *defer;   /* the unconfigured path (a timer with the test delay) */
        const char *abort_reason; /* static string, set by query_execution_abort() */
        QueryExecution *jobs_prev, *jobs_next;
};

struct QueryExecutor {
        sd_event *event;
        const Config *config;
        Sandbox *sandbox;

        /* Only when wiki and model are configured: shared by every job
         * (one curl multi handle serves all their transfers). */
        DestinationPolicy *policy;
        Upstream *upstream;
        LlmClient *llm;

        /* At start-up with several slots: the model server's own count of
         * them (llama.cpp's GET /props), to warn when it serves fewer. */
        LlmProps *props;

        /* The jobs in flight, at most max_jobs (WIKI_WEB_QUEUE_SLOTS). */
        QueryExecution *jobs;
        unsigned n_jobs;
        unsigned max_jobs;

        usec_t test_delay;
        usec_t test_check_timeout; /* 0: REVISION_CHECK_TIMEOUT_USEC */

        /* WIKI_WEB_WIKI_READ_AS=person: health's probe of the read check. */
        RevisionCheck *read_probe;
        sd_event_source *read_probe_timer; /* every READ_PROBE_INTERVAL_USEC */
        int read_probe_state;              /* 0 unknown, 1 ok, -1 failed */

        /* The message of a query that cannot run (API.md 9, health): the
         * settings that are missing and where to read on. */
        char unconfigured_message[256];
};

static int read_probe_arm(QueryExecutor *x);

/* Out of the executor's list: the job runs no more (reported, or
 * cancelled). */
static void query_execution_detach(QueryExecution *e) {
        if (!e->executor)
                return;
        LIST_REMOVE(jobs, e->executor->jobs, e);
        e->executor->n_jobs--;
        e->executor = NULL;
}

QueryExecution *query_execution_free(QueryExecution *e) {
        if (!e)
                return NULL;
        query_execution_detach(e);
        sd_event_source_disable_unref(e->defer);
        query_run_free(e->run);
        free(e);
        return NULL;
}

bool query_execution_is_running(const QueryExecution *e) {
        assert(e);
        return e->executor;
}

static QueryExecution *executor_find_job(QueryExecutor *x, const char *query_id) {
        for (QueryExecution *j = x->jobs; j; j = j->jobs_next)
                if (streq(j->query_id, query_id))
                        return j;
        return NULL;
}

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

static void query_executor_on_props(LlmProps *p, int error, unsigned slots, void *userdata) {
        QueryExecutor *x = userdata;

        /* A server that does not say (another kind, an older llama.cpp, a
         * router, an error) is fine: nothing is known. */
        if (error < 0) {
                log_debug("The model server does not report its slots (GET /props): not checked.");
                return;
        }
        if (slots < x->max_jobs)
                log_warning(
                        "The model server reports total_slots=%u (GET /props), fewer than "
                        "WIKI_WEB_QUEUE_SLOTS=%u: queries beyond %u wait at the model server. "
                        "Raise its --parallel or lower WIKI_WEB_QUEUE_SLOTS.",
                        slots,
                        x->max_jobs,
                        slots);
        else
                log_debug(
                        "The model server reports total_slots=%u (GET /props), WIKI_WEB_QUEUE_SLOTS=%u.",
                        slots,
                        x->max_jobs);
}

/* Ask the model server for its slots, once, without waiting for it: the
 * answer only adds a line to the journal. With one slot any server has
 * enough, so nothing is asked. */
static int query_executor_check_props(QueryExecutor *x) {
        if (x->max_jobs <= 1)
                return 0;
        return llm_props_start(
                x->llm, usec_add(now(CLOCK_MONOTONIC), 10 * USEC_PER_SEC), query_executor_on_props, x, &x->props);
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
        x->max_jobs = (unsigned) MAX(config->queue_slots, (uint64_t) 1);
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
                r = query_executor_check_props(x);
                if (r < 0)
                        log_debug_errno(r, "Cannot ask the model server for its slots");
                r = read_probe_arm(x);
                if (r < 0)
                        return log_error_errno(
                                r, "Query execution: the read check's probe could not be set up");
        }
        *ret = TAKE_PTR(x);
        return 0;
}

QueryExecutor *query_executor_free(QueryExecutor *x) {
        if (!x)
                return NULL;
        /* Only after the loop has ended, and after every handle (each frees
         * its run): nothing can be in flight any more that needs these. */
        while (x->jobs)
                query_execution_detach(x->jobs);
        llm_props_free(x->props);
        revision_check_free(x->read_probe);
        sd_event_source_disable_unref(x->read_probe_timer);
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
        return x->n_jobs;
}

/* Report the job's end: a job that nothing ran needs no cleanup. The job
 * is out of the list before done is called, so done may start another
 * (and free this one). */
static void query_executor_report(QueryExecution *j) {
        QueryExecutor *x = j->executor;
        QueryOutcome o = {
                .query_id = j->query_id,
                .error = j->abort_reason ? -ECANCELED : -EOPNOTSUPP,
                .api_error = API_ERROR_EXECUTION_FAILED,
                .message = j->abort_reason ? j->abort_reason : x->unconfigured_message,
                /* Nothing was started, so there is nothing to clean up. */
                .cleanup_confirmed = true,
        };

        j->defer = sd_event_source_disable_unref(j->defer);
        query_execution_detach(j);
        j->done(j, o.error, &o, j->userdata);
}

static int query_executor_on_defer(sd_event_source *s, void *userdata) {
        query_executor_report(userdata);
        return 0;
}

static int query_executor_on_test_delay(sd_event_source *s, uint64_t usec, void *userdata) {
        query_executor_report(userdata);
        return 0;
}

/* The run's report. The run stays with the handle (the outcome points
 * into it) until the caller frees the handle: its query directory goes
 * with it. A cleanup not yet confirmed goes on in the Sandbox, which
 * announces it. */
static void query_executor_on_run_done(QueryRun *q, int error, const QueryOutcome *o, void *userdata) {
        QueryExecution *j = userdata;

        assert(q == j->run);
        /* Out of the list first: done may start another job in its place. */
        query_execution_detach(j);
        j->done(j, error, o, j->userdata);
}

/* The run's events, to the caller's handler. */
static void query_executor_on_run_event(const char *query_id, const QueryEvent *ev, void *userdata) {
        QueryExecution *j = userdata;

        if (j->on_event)
                j->on_event(query_id, ev, j->userdata);
}

void query_executor_sandbox_changed(QueryExecutor *x) {
        assert(x);
        for (QueryExecution *j = x->jobs; j; j = j->jobs_next)
                if (j->run)
                        query_run_sandbox_changed(j->run);
}

int query_execution_abort(QueryExecution *j, const char *reason) {
        int r;

        assert(j);
        assert(reason);

        if (!j->executor)
                return -ESRCH;
        if (j->run) {
                query_run_abort(j->run, -ECANCELED, API_ERROR_EXECUTION_FAILED, reason);
                return 0;
        }
        j->abort_reason = reason;
        /* Still report from the loop, never from inside the caller. */
        j->defer = sd_event_source_disable_unref(j->defer);
        r = sd_event_add_defer(j->executor->event, &j->defer, query_executor_on_defer, j);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(j->defer, "query-executor-abort");
        return 0;
}

#if ENABLE_TEST_FAULTS
void query_executor_set_test_delay(QueryExecutor *x, usec_t delay) {
        assert(x);
        x->test_delay = delay;
}

void query_executor_set_test_check_timeout(QueryExecutor *x, usec_t timeout) {
        assert(x);
        x->test_check_timeout = timeout;
}
#endif

int query_executor_start(
        QueryExecutor *x,
        const QueryJob *job,
        QueryExecutionDone done,
        QueryEventHandler on_event,
        void *userdata,
        QueryExecution **ret) {
        _cleanup_(query_execution_freep) QueryExecution *j = NULL;
        int r;

        assert(x);
        assert(job);
        assert(done);
        assert(ret);

        if (x->n_jobs >= x->max_jobs || executor_find_job(x, job->id))
                return -EBUSY;

        j = calloc(1, sizeof *j);
        if (!j)
                return -ENOMEM;
        memcpy(j->query_id, job->id, sizeof j->query_id);
        j->done = done;
        j->on_event = on_event;
        j->userdata = userdata;

        if (x->upstream && !TEST_FAULT(x->test_delay > 0)) {
                r = query_run_new(
                        &(QueryRunContext){
                                .event = x->event,
                                .config = x->config,
                                .upstream = x->upstream,
                                .llm = x->llm,
                                .sandbox = x->sandbox,
                                .on_event = query_executor_on_run_event,
                                .event_userdata = j,
                        },
                        job,
                        query_executor_on_run_done,
                        j,
                        &j->run);
                if (r < 0)
                        return r;
        } else {
                /* Complete from the event loop, never from inside start(), so
                 * the caller sees the same ordering as with a real pipeline. */
                if (TEST_FAULT(x->test_delay > 0))
                        r = sd_event_add_time_relative(
                                x->event,
                                &j->defer,
                                CLOCK_MONOTONIC,
                                x->test_delay,
                                0,
                                query_executor_on_test_delay,
                                j);
                else
                        r = sd_event_add_defer(x->event, &j->defer, query_executor_on_defer, j);
                if (r < 0)
                        return r;
                (void) sd_event_source_set_description(
                        j->defer,
                        TEST_FAULT(x->test_delay > 0) ? "query-executor-test-delay" : "query-executor-defer");
        }

        j->executor = x;
        LIST_PREPEND(jobs, x->jobs, j);
        x->n_jobs++;
        *ret = TAKE_PTR(j);
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

static int wiki_check_new(QueryExecutor *x, RevisionCheckDone done, void *userdata, RevisionCheck **ret) {
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
                        .user_map = &cfg->wiki_user,
                        .deadline = now(CLOCK_MONOTONIC) +
                                (TEST_FAULT(x->test_check_timeout > 0) ? x->test_check_timeout :
                                                                         REVISION_CHECK_TIMEOUT_USEC),
                },
                &c->wiki);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(c);
        return 0;
}

int query_executor_check_revisions(
        QueryExecutor *x, char **titles, RevisionCheckDone done, void *userdata, RevisionCheck **ret) {
        _cleanup_(revision_check_freep) RevisionCheck *c = NULL;
        int r;

        r = wiki_check_new(x, done, userdata, &c);
        if (r < 0)
                return r;
        r = wiki_client_revisions(c->wiki, titles, revision_check_on_done, c, &c->op);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(c);
        return 0;
}

int query_executor_check_readable(
        QueryExecutor *x,
        const char *user,
        char **titles,
        RevisionCheckDone done,
        void *userdata,
        RevisionCheck **ret) {
        _cleanup_(revision_check_freep) RevisionCheck *c = NULL;
        int r;

        r = wiki_check_new(x, done, userdata, &c);
        if (r < 0)
                return r;
        r = wiki_client_readcheck(c->wiki, user, titles, revision_check_on_done, c, &c->op);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(c);
        return 0;
}

int query_executor_wiki_search(
        QueryExecutor *x,
        const char *query,
        unsigned limit,
        RevisionCheckDone done,
        void *userdata,
        RevisionCheck **ret) {
        _cleanup_(revision_check_freep) RevisionCheck *c = NULL;
        int r;

        r = wiki_check_new(x, done, userdata, &c);
        if (r < 0)
                return r;
        r = wiki_client_search(c->wiki, query, limit, revision_check_on_done, c, &c->op);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(c);
        return 0;
}

int query_executor_wiki_read(
        QueryExecutor *x, const char *title, RevisionCheckDone done, void *userdata, RevisionCheck **ret) {
        _cleanup_(revision_check_freep) RevisionCheck *c = NULL;
        int r;

        r = wiki_check_new(x, done, userdata, &c);
        if (r < 0)
                return r;
        r = wiki_client_read(c->wiki, title, revision_check_on_done, c, &c->op);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(c);
        return 0;
}

void revision_check_take_result(RevisionCheck *c, WikiResult *ret) {
        assert(c);
        assert(c->op);
        wiki_operation_take_result(c->op, ret);
}

#define READ_PROBE_INTERVAL_USEC (60 * USEC_PER_SEC)

static void read_probe_on_done(RevisionCheck *c, int error, const WikiResult *r, void *userdata) {
        QueryExecutor *x = userdata;
        int state = error >= 0 ? 1 : -1;

        if (state != x->read_probe_state) {
                if (state < 0)
                        log_warning(
                                "The wiki cannot say what a person may read: %s",
                                r->message ? r->message : api_error_to_string(r->api_error));
                else
                        log_info("The wiki answers read checks (WikiwebReadCheck).");
        }
        x->read_probe_state = state;
        x->read_probe = revision_check_free(x->read_probe);
}

static void read_probe_start(QueryExecutor *x) {
        char *titles[] = { (char *) "Main Page", NULL };
        int r;

        if (x->read_probe)
                return;
        r = query_executor_check_readable(x, NULL, titles, read_probe_on_done, x, &x->read_probe);
        if (r < 0) {
                log_warning_errno(r, "Cannot check whether the wiki answers read checks");
                x->read_probe_state = -1;
        }
}

static int read_probe_on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        QueryExecutor *x = userdata;
        int r;

        read_probe_start(x);
        r = sd_event_source_set_time_relative(s, READ_PROBE_INTERVAL_USEC);
        if (r >= 0)
                r = sd_event_source_set_enabled(s, SD_EVENT_ON);
        if (r < 0)
                log_warning_errno(r, "The read check's probe cannot be scheduled again");
        return 0;
}

/* WIKI_WEB_WIKI_READ_AS=person: the probe at once, then every
 * READ_PROBE_INTERVAL_USEC, on the loop; health reads its last result. */
static int read_probe_arm(QueryExecutor *x) {
        int r;

        if (x->config->wiki_read_as != CONFIG_READ_AS_PERSON || !x->upstream)
                return 0;
        read_probe_start(x);
        r = sd_event_add_time_relative(
                x->event,
                &x->read_probe_timer,
                CLOCK_MONOTONIC,
                READ_PROBE_INTERVAL_USEC,
                0,
                read_probe_on_timer,
                x);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(x->read_probe_timer, "executor-read-probe");
        return 0;
}

bool query_executor_reads_as_person(const QueryExecutor *x) {
        assert(x);
        return x->config->wiki_read_as == CONFIG_READ_AS_PERSON;
}

const char *query_executor_read_check_health(const QueryExecutor *x) {
        assert(x);

        if (x->config->wiki_read_as != CONFIG_READ_AS_PERSON)
                return NULL;
        if (!x->upstream)
                return "failed";
        return x->read_probe_state > 0 ? "ok" : x->read_probe_state < 0 ? "failed" : "unknown";
}
