/* SPDX-License-Identifier: MIT */
/* The history's retention (WIKI_WEB_HISTORY_RETENTION_DAYS, wikiwebd(8)
 * "What is kept"): at start and then every hour, the records asked longer
 * ago than that go, with their artifacts, feedback and share links, in
 * batches of one transaction each. Between two batches the loop serves
 * everything else (the next batch is a timer due at once); after the last
 * the write-ahead log is checkpointed (TRUNCATE), so what went is in no
 * file of the state directory. */
#include <assert.h>
#include <stdlib.h>

#include "manager/manager-ops.h"
#include "metrics/metrics.h"
#include "shared/log.h"
#include "shared/time-util.h"

#define RETENTION_BATCH 500u
#define RETENTION_INTERVAL_USEC (3600 * USEC_PER_SEC)
#define RETENTION_USEC_PER_DAY (86400 * USEC_PER_SEC)

struct ManagerRetention {
        Manager *manager;
        sd_event_source *timer;
        usec_t days;
        /* The run under way: its cutoff, start and counts. */
        bool running;
        usec_t cutoff;
        usec_t started;
        uint64_t records, artifacts;
};

static int retention_arm(ManagerRetention *r, usec_t delay) {
        int k;

        k = sd_event_source_set_time_relative(r->timer, delay);
        if (k < 0)
                return log_error_errno(k, "Failed to arm the history's retention timer");
        return sd_event_source_set_enabled(r->timer, SD_EVENT_ONESHOT);
}

static void retention_end(ManagerRetention *r) {
        usec_t took = now(CLOCK_MONOTONIC) - r->started;

        (void) history_checkpoint(manager_get_history(r->manager));
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
}

static int retention_on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        ManagerRetention *r = userdata;
        unsigned records = 0, artifacts = 0;
        int k;

        assert(r);

        if (!r->running) {
                usec_t t = now(CLOCK_REALTIME), age = r->days * RETENTION_USEC_PER_DAY;

                r->running = true;
                r->started = now(CLOCK_MONOTONIC);
                r->cutoff = t > age ? t - age : 0;
                r->records = r->artifacts = 0;
        }
        k = history_prune(manager_get_history(r->manager), r->cutoff, RETENTION_BATCH, &records, &artifacts);
        if (k >= 0) {
                r->records += records;
                r->artifacts += artifacts;
                metrics_count_pruned(records, artifacts);
        }
        if (k > 0) /* More to go: the next batch after what else waits. */
                return retention_arm(r, 0);
        if (k < 0)
                log_warning_errno(
                        k, "History retention stopped after a failed batch; it is tried again in an hour.");
        retention_end(r);
        return retention_arm(r, RETENTION_INTERVAL_USEC);
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
        /* The first run at once: at start. */
        k = sd_event_add_time_relative(
                manager_get_event(m), &r->timer, CLOCK_MONOTONIC, 0, USEC_PER_SEC, retention_on_timer, r);
        if (k < 0)
                return log_error_errno(k, "Failed to set up the history's retention timer");
        (void) sd_event_source_set_description(r->timer, "manager-retention");
        *ret = TAKE_PTR(r);
        return 0;
}

ManagerRetention *manager_retention_free(ManagerRetention *r) {
        if (!r)
                return NULL;
        r->timer = sd_event_source_disable_unref(r->timer);
        free(r);
        return NULL;
}
