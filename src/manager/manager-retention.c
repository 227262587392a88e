/* SPDX-License-Identifier: MIT */
/* The history's retention (WIKI_WEB_HISTORY_RETENTION_DAYS, wikiwebd(8)
 * "What is kept"): at start and then every hour, the records asked longer
 * ago than that go, with their artifacts, feedback and share links, in
 * batches of one transaction each, on the store's worker: the loop never
 * waits for them, and the jobs submitted meanwhile (a person's delete,
 * the report) run between two batches. After the last the write-ahead log
 * is checkpointed (TRUNCATE), so what went is in no file of the state
 * directory. A stop ends the run after the batch in flight; the next
 * start's run goes on from there. */
#include <assert.h>
#include <stdlib.h>

#include "manager/manager-ops.h"
#include "metrics/metrics.h"
#include "shared/log.h"
#include "shared/time-util.h"

/* Records a batch: one transaction on the store's worker. The loop's own
 * writes (a query's record) wait for the worker's transaction, so it is
 * kept short: about 100 records (with their artifacts) take a few ms at
 * 10^6 records (docs/PERFORMANCE.md). */
#define RETENTION_BATCH 100u
#define RETENTION_INTERVAL_USEC (3600 * USEC_PER_SEC)
#define RETENTION_USEC_PER_DAY (86400 * USEC_PER_SEC)

struct ManagerRetention {
        Manager *manager;
        sd_event_source *timer;
        usec_t days;
        usec_t interval; /* between the end of a run and the next */
        HistoryJob *job; /* the batch or the checkpoint in flight */
        /* The run under way: its cutoff, start and counts. */
        bool running;
        usec_t cutoff;
        usec_t started;
        uint64_t records, artifacts;
};

/* One batch, or the checkpoint at the end, on the worker's thread. */
typedef struct RetentionJob {
        usec_t cutoff; /* 0: the checkpoint */
        unsigned records, artifacts;
} RetentionJob;

static int retention_job_run(History *h, void *data) {
        RetentionJob *j = data;

        if (j->cutoff == 0)
                return history_checkpoint(h);
        return history_prune(h, j->cutoff, RETENTION_BATCH, &j->records, &j->artifacts);
}

static int retention_arm(ManagerRetention *r, usec_t delay) {
        int k;

        k = sd_event_source_set_time_relative(r->timer, delay);
        if (k < 0)
                return log_error_errno(k, "Failed to arm the history's retention timer");
        return sd_event_source_set_enabled(r->timer, SD_EVENT_ONESHOT);
}

static void retention_on_job(HistoryJob *job, int error, void *data, void *userdata);

static int retention_submit(ManagerRetention *r, usec_t cutoff) {
        RetentionJob *j = calloc(1, sizeof *j);

        if (!j)
                return -ENOMEM;
        j->cutoff = cutoff;
        return history_worker_submit(
                manager_get_history_worker(r->manager), retention_job_run, j, free, retention_on_job, r, &r->job);
}

static void retention_end(ManagerRetention *r) {
        usec_t took = now(CLOCK_MONOTONIC) - r->started;

        log_info(
                "History retention (%" PRIu64 " days): %" PRIu64 " %s and %" PRIu64 " %s removed in %" PRIu64
                " ms.",
                (uint64_t) r->days,
                r->records,
                r->records == 1 ? "record" : "records",
                r->artifacts,
                r->artifacts == 1 ? "artifact" : "artifacts",
                (uint64_t) (took / USEC_PER_MSEC));
        r->running = false;
        (void) retention_arm(r, r->interval);
}

/* A batch ended: the next one (behind whatever else was submitted
 * meanwhile), or the checkpoint, or the end of the run. */
static void retention_on_job(HistoryJob *job, int error, void *data, void *userdata) {
        ManagerRetention *r = userdata;
        RetentionJob *j = data;
        int k;

        r->job = NULL;
        if (j->cutoff == 0) {
                if (error < 0)
                        log_warning_errno(
                                error, "History retention: the write-ahead log could not be checkpointed");
                retention_end(r);
                return;
        }
        if (error >= 0) {
                r->records += j->records;
                r->artifacts += j->artifacts;
                metrics_count_pruned(j->records, j->artifacts);
        } else
                log_warning_errno(
                        error,
                        "History retention stopped after a failed batch; it is tried again in an hour.");
        /* More to go, or the checkpoint that cuts the log. */
        k = retention_submit(r, error > 0 ? r->cutoff : 0);
        if (k < 0) {
                log_warning_errno(k, "History retention could not go on");
                retention_end(r);
        }
}

static int retention_on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        ManagerRetention *r = userdata;
        usec_t t = now(CLOCK_REALTIME), age;
        int k;

        assert(r);

        if (r->running)
                return 0;
        age = r->days * RETENTION_USEC_PER_DAY;
        r->running = true;
        r->started = now(CLOCK_MONOTONIC);
        /* 0 means the checkpoint: a cutoff before 1970 prunes nothing either. */
        r->cutoff = MAX(t > age ? t - age : 0, (usec_t) 1);
        r->records = r->artifacts = 0;
        k = retention_submit(r, r->cutoff);
        if (k < 0) {
                log_warning_errno(k, "History retention could not start; it is tried again in an hour.");
                r->running = false;
                return retention_arm(r, r->interval);
        }
        return 0;
}

int manager_retention_new(Manager *m, ManagerRetention **ret) {
        _cleanup_free_ ManagerRetention *r = NULL;
        const Config *c = manager_get_config(m);
        int k;

        assert(m);
        assert(ret);

        if (c->history_retention_days == 0) {
                *ret = NULL;
                return 0;
        }
        r = calloc(1, sizeof *r);
        if (!r)
                return log_oom();
        r->manager = m;
        r->days = c->history_retention_days;
        r->interval = RETENTION_INTERVAL_USEC;
        /* The first run at once: at start. */
        k = sd_event_add_time_relative(
                manager_get_event(m), &r->timer, CLOCK_MONOTONIC, 0, USEC_PER_SEC, retention_on_timer, r);
        if (k < 0)
                return log_error_errno(k, "Failed to set up the history's retention timer");
        (void) sd_event_source_set_description(r->timer, "manager-retention");
        *ret = TAKE_PTR(r);
        return 0;
}

#if ENABLE_TEST_FAULTS
void manager_retention_set_test_interval(ManagerRetention *r, usec_t interval) {
        assert(r);
        assert(interval > 0);

        r->interval = interval;
}
#endif

ManagerRetention *manager_retention_free(ManagerRetention *r) {
        if (!r)
                return NULL;
        r->job = history_job_cancel(r->job);
        r->timer = sd_event_source_disable_unref(r->timer);
        free(r);
        return NULL;
}
