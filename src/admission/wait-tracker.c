/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "admission/wait-tracker.h"
#include "shared/macro.h"

/* One range per position modulo this: a queue of up to this many waiting
 * sessions, each with its queue stream, reuses its ranges while nothing moves. */
#define CACHE_SIZE 256U

typedef struct CachedRange {
        bool valid;
        uint64_t generation;
        uint64_t position;
        size_t n_busy;
        uint64_t key; /* the busy slots' elapsed times (two significant digits) and the slots */
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

/* FNV-1a over the busy slots' elapsed times: the cache's key for them. */
static uint64_t hash_elapsed(const double *elapsed, size_t n) {
        uint64_t h = UINT64_C(14695981039346656037);

        for (size_t i = 0; i < n; i++) {
                uint64_t bits;

                memcpy(&bits, &elapsed[i], sizeof bits);
                for (unsigned k = 0; k < 8; k++) {
                        h ^= (bits >> (8 * k)) & 0xff;
                        h *= UINT64_C(1099511628211);
                }
        }
        return h;
}

int wait_tracker_range(WaitTracker *t, uint64_t position, const WaitSlots *slots, usec_t now, WaitRange *ret) {
        double elapsed[WAIT_RANGE_SLOTS_MAX];
        size_t n_busy = 0;
        uint64_t key;
        CachedRange *c;
        int r;

        assert(t);
        assert(slots);
        assert(slots->running_since || slots->n_running == 0);
        assert(ret);

        if (slots->total == 0 || slots->total > WAIT_RANGE_SLOTS_MAX ||
            slots->n_running + slots->reserved > slots->total)
                return -EINVAL;
        if (t->durations.n < WAIT_RANGE_KNOWN_MIN)
                return 0;
        for (size_t i = 0; i < slots->n_running; i++) {
                usec_t since = slots->running_since[i];

                elapsed[n_busy++] = since != USEC_INFINITY && now > since ?
                        two_digits((double) (now - since) / USEC_PER_SEC) :
                        0;
        }
        /* A reserved slot is busy from now: its query has not begun. */
        for (unsigned i = 0; i < slots->reserved; i++)
                elapsed[n_busy++] = 0;
        key = hash_elapsed(elapsed, n_busy) ^ slots->total;

        c = &t->cache[position % CACHE_SIZE];
        if (c->valid && c->generation == t->generation && c->position == position && c->n_busy == n_busy &&
            c->key == key) {
                *ret = c->range;
                return 1;
        }
        r = wait_range_estimate(
                t->durations.seconds,
                t->durations.n,
                elapsed,
                n_busy,
                slots->total,
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
        c->n_busy = n_busy;
        c->key = key;
        *ret = c->range;
        return 1;
}

int wait_tracker_status_range(
        WaitTracker *t,
        const Admission *a,
        const AdmissionStatus *st,
        const usec_t *running_since,
        size_t n_running,
        usec_t now,
        WaitRange *ret) {
        WaitSlots slots;
        uint64_t position;

        assert(t);
        assert(a);
        assert(st);
        assert(ret);

        assert(running_since || n_running == 0);

        slots = (WaitSlots){
                .total = st->slots.total,
                .reserved = st->slots.reserved,
                .n_running = n_running,
                .running_since = running_since,
        };
        if (st->has_ticket)
                position = st->ticket.status == TICKET_RESERVED ? 0 : st->ticket.position;
        else /* a claim now: after everyone waiting, or at once on an idle slot */
                position = st->slots.idle > 0 ? 0 : admission_waiting_count(a) + 1;
        return wait_tracker_range(t, position, &slots, now, ret);
}
