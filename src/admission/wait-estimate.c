/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <math.h>

#include "admission/wait-estimate.h"
#include "shared/macro.h"

void wait_average_add(WaitAverage *avg, usec_t duration) {
        double d = (double) duration / (double) USEC_PER_SEC;

        assert(avg);

        if (avg->known)
                avg->seconds = 0.2 * d + 0.8 * avg->seconds;
        else
                *avg = (WaitAverage){ .known = true, .seconds = d };
}

usec_t wait_average_usec(const WaitAverage *avg) {
        assert(avg);

        if (!avg->known)
                return 0;
        /* A sub-microsecond average would read as "unknown"; round up. */
        return MAX((usec_t) llround(avg->seconds * (double) USEC_PER_SEC), (usec_t) 1);
}

/* Each slot is free after f: 0 when idle, avg when reserved (its query
 * has not started), max(0, avg - running time) when running. The waiting
 * tickets take the slots in the order they free up, each for avg; since
 * every f is in [0, avg], that order is round-robin over the f sorted
 * ascending: p starts at f[(p - 1) mod N] + floor((p - 1) / N) * avg.
 * Sorted, the f are the idle slots' zeros, then the running ones oldest
 * claim first, then the reserved ones' avg: no sort needed. */
bool wait_estimate_for_position(
        const AdmissionSlotCounts *slots,
        const WaitAverage *avg,
        const usec_t *running_since,
        size_t n_running,
        uint64_t p,
        usec_t now,
        double *ret) {
        uint64_t n, j, q, idle;
        double f;

        assert(slots);
        assert(avg);
        assert(running_since || n_running == 0);
        assert(ret);
        assert(p >= 1);

        n = MAX(slots->total, 1u);
        j = (p - 1) % n;
        q = (p - 1) / n;
        idle = slots->idle;

        /* With an idle slot no ticket waits: only a caller without a
         * ticket gets here, and its claim would start at once. */
        if (p <= idle) {
                *ret = 0;
                return true;
        }
        if (!avg->known)
                return false;

        if (j < idle)
                f = 0;
        else if (j < idle + slots->running) {
                usec_t since = j - idle < n_running ? running_since[j - idle] : now;
                double running = (double) (now - MIN(now, since)) / (double) USEC_PER_SEC;
                f = MAX(0.0, avg->seconds - running);
        } else
                f = avg->seconds;

        *ret = f + (double) q * avg->seconds;
        return true;
}

void wait_estimate_status(
        AdmissionStatus *st, const WaitAverage *avg, const usec_t *running_since, size_t n_running, usec_t now) {
        assert(st);
        assert(avg);

        st->average_known = avg->known;
        st->average_query_seconds = avg->known ? avg->seconds : 0;

        if (st->has_ticket && st->ticket.status == TICKET_RESERVED) {
                st->estimate_known = true;
                st->estimated_wait_seconds = 0;
                return;
        }
        /* The reserved tickets are the first in the FIFO, one per reserved
         * slot: without a ticket, the place after the waiting ones. */
        st->estimate_known = wait_estimate_for_position(
                &st->slots,
                avg,
                running_since,
                n_running,
                st->has_ticket ? st->ticket.position : st->queue_length - st->slots.reserved + 1,
                now,
                &st->estimated_wait_seconds);
        if (!st->estimate_known)
                st->estimated_wait_seconds = 0;
}
