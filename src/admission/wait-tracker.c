/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "admission/wait-tracker.h"
#include "shared/macro.h"

#define CACHE_SIZE 32U

typedef struct CachedRange {
        bool valid;
        uint64_t generation;
        uint64_t position;
        size_t n_running;
        double elapsed; /* the running query's elapsed time, to two significant digits */
        WaitRange range;
} CachedRange;

struct WaitTracker {
        WaitDurations durations;
        uint64_t generation; /* one more for each duration added */
        CachedRange cache[CACHE_SIZE];
};

int wait_tracker_new(WaitTracker **ret) {
        WaitTracker *t;

        assert(ret);
        t = calloc(1, sizeof *t);
        if (!t)
                return -ENOMEM;
        *ret = t;
        return 0;
}

WaitTracker *wait_tracker_free(WaitTracker *t) {
        free(t);
        return NULL;
}

int wait_tracker_add(WaitTracker *t, double seconds) {
        int r;

        assert(t);
        r = wait_durations_add(&t->durations, seconds);
        if (r < 0)
                return r;
        t->generation++;
        return 0;
}

size_t wait_tracker_count(const WaitTracker *t) {
        assert(t);
        return t->durations.n;
}

/* Seconds to two significant digits, at least 10 ms: 0.234 -> 0.23, 12.34 ->
 * 12, 157 -> 150. The range is computed again when this moves: every 10 ms
 * in the first second, every 100 ms to 10 s, every second to 100 s, and so on. */
static double two_digits(double s) {
        double step = 0.01;

        while (s >= 10 * step * 10)
                step *= 10;
        return floor(s / step) * step;
}

int wait_tracker_status_range(
        WaitTracker *t,
        const AdmissionStatus *st,
        uint64_t waiting,
        usec_t running_since,
        usec_t now,
        WaitRange *ret) {
        uint64_t position;
        double elapsed = 0;
        size_t n_running = 0;
        CachedRange *c;
        int r;

        assert(t);
        assert(st);
        assert(ret);

        if (t->durations.n < WAIT_RANGE_KNOWN_MIN)
                return 0;
        if (st->has_ticket)
                position = st->ticket.status == TICKET_RESERVED ? 0 : st->ticket.position;
        else
                position = st->state == ADMISSION_IDLE ? 0 : waiting + 1;
        if (st->state == ADMISSION_RUNNING) {
                n_running = 1;
                if (running_since != USEC_INFINITY && now > running_since)
                        elapsed = two_digits((double) (now - running_since) / USEC_PER_SEC);
        } else if (st->state == ADMISSION_RESERVED)
                n_running = 1;

        c = &t->cache[position % CACHE_SIZE];
        if (c->valid && c->generation == t->generation && c->position == position &&
            c->n_running == n_running && c->elapsed == elapsed) {
                *ret = c->range;
                return 1;
        }
        r = wait_range_estimate(
                t->durations.seconds,
                t->durations.n,
                &elapsed,
                n_running,
                1,
                position,
                t->generation * 1000003 + position,
                &c->range);
        if (r == -ENODATA)
                return 0;
        if (r < 0) {
                c->valid = false;
                return r;
        }
        c->valid = true;
        c->generation = t->generation;
        c->position = position;
        c->n_running = n_running;
        c->elapsed = elapsed;
        *ret = c->range;
        return 1;
}
