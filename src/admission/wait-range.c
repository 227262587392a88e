/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "admission/wait-range.h"
#include "shared/macro.h"

int wait_durations_add(WaitDurations *d, double seconds) {
        assert(d);

        if (!isfinite(seconds) || seconds < 0)
                return -EINVAL;
        d->seconds[d->next] = seconds;
        d->next = (d->next + 1) % WAIT_DURATIONS_MAX;
        if (d->n < WAIT_DURATIONS_MAX)
                d->n++;
        return 0;
}

/* splitmix64: small, fast, and good enough to draw indices. */
static uint64_t rng_next(uint64_t *s) {
        uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));

        z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
        return z ^ (z >> 31);
}

/* Uniform in [0, n), n > 0 (the bias of a modulo of 64 bits is nil here). */
static size_t rng_index(uint64_t *s, size_t n) {
        return (size_t) (rng_next(s) % n);
}

/* Uniform in (0, 1). */
static double rng_unit(uint64_t *s) {
        return ((double) (rng_next(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* A standard normal (Box-Muller). */
static double rng_normal(uint64_t *s) {
        double u = rng_unit(s), v = rng_unit(s);

        return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;

        return (x > y) - (x < y);
}

/* A min-heap of the times at which the slots free. */
static void heap_down(double *h, size_t n, size_t i) {
        for (;;) {
                size_t l = 2 * i + 1, r = l + 1, m = i;
                double t;

                if (l < n && h[l] < h[m])
                        m = l;
                if (r < n && h[r] < h[m])
                        m = r;
                if (m == i)
                        return;
                t = h[i];
                h[i] = h[m];
                h[m] = t;
                i = m;
        }
}

/* The q-quantile of n sorted samples: the nearest rank. */
static double quantile(const double *sorted, size_t n, double q) {
        size_t k = (size_t) ceil(q * (double) n);

        return sorted[k > 0 ? k - 1 : 0];
}

/* The remaining time of a query running for `e` seconds: a duration drawn
 * from those longer than e, less e. When e is past every known duration,
 * nothing is known of how long it still runs: a duration drawn from all of
 * them, as if it had just begun. */
static double draw_remaining(const double *sorted, size_t n, double e, uint64_t *s) {
        size_t lo = 0, hi = n;

        while (lo < hi) { /* the first duration > e */
                size_t mid = lo + (hi - lo) / 2;

                if (sorted[mid] > e)
                        hi = mid;
                else
                        lo = mid + 1;
        }
        if (lo == n)
                return sorted[rng_index(s, n)];
        return sorted[lo + rng_index(s, n - lo)] - e;
}

int wait_range_estimate(
        const double *durations,
        size_t n_durations,
        const double *elapsed,
        size_t n_running,
        unsigned n_slots,
        uint64_t position,
        uint64_t seed,
        WaitRange *ret) {

        _cleanup_free_ double *sorted = NULL, *heap = NULL, *waits = NULL;
        double mean = 0, var = 0, spread_mean = 0, spread_sd = 0;
        uint64_t ahead, exact, s = seed;

        assert(ret);
        assert(durations || n_durations == 0);
        assert(elapsed || n_running == 0);

        if (n_slots == 0 || n_slots > WAIT_RANGE_SLOTS_MAX || n_running > n_slots)
                return -EINVAL;
        if (n_durations < WAIT_RANGE_KNOWN_MIN)
                return -ENODATA;
        if (position == 0) {
                *ret = (WaitRange){ .p10 = 0 };
                return 0;
        }

        sorted = malloc(n_durations * sizeof(double));
        heap = calloc(n_slots, sizeof(double));
        waits = calloc(WAIT_RANGE_TRIALS, sizeof(double));
        if (!sorted || !heap || !waits)
                return -ENOMEM;
        memcpy(sorted, durations, n_durations * sizeof(double));
        qsort(sorted, n_durations, sizeof(double), cmp_double);
        for (size_t i = 0; i < n_durations; i++)
                mean += sorted[i];
        mean /= (double) n_durations;
        for (size_t i = 0; i < n_durations; i++)
                var += (sorted[i] - mean) * (sorted[i] - mean);
        var /= (double) n_durations;

        /* Tickets ahead of this one: simulated up to WAIT_RANGE_EXACT, the
         * rest as a sum. k further tickets over n slots add k * mean / n on
         * average, and a sum of k independent durations spread over n slots
         * varies by sqrt(k) * sd / n. */
        ahead = position - 1;
        exact = MIN(ahead, (uint64_t) WAIT_RANGE_EXACT);
        if (ahead > exact) {
                double k = (double) (ahead - exact);

                spread_mean = k * mean / n_slots;
                spread_sd = sqrt(k * var) / n_slots;
        }

        for (unsigned t = 0; t < WAIT_RANGE_TRIALS; t++) {
                double w;

                for (unsigned i = 0; i < n_slots; i++)
                        heap[i] = i < n_running ?
                                draw_remaining(sorted, n_durations, MAX(elapsed[i], 0.0), &s) :
                                0;
                for (unsigned i = n_slots / 2; i-- > 0;)
                        heap_down(heap, n_slots, i);
                /* Each ticket ahead takes the slot that frees first. */
                for (uint64_t k = 0; k < exact; k++) {
                        heap[0] += sorted[rng_index(&s, n_durations)];
                        heap_down(heap, n_slots, 0);
                }
                w = heap[0];
                if (ahead > exact)
                        w += MAX(0.0, spread_mean + spread_sd * rng_normal(&s));
                waits[t] = w;
        }

        qsort(waits, WAIT_RANGE_TRIALS, sizeof(double), cmp_double);
        *ret = (WaitRange){
                .p10 = quantile(waits, WAIT_RANGE_TRIALS, 0.10),
                .p50 = quantile(waits, WAIT_RANGE_TRIALS, 0.50),
                .p90 = quantile(waits, WAIT_RANGE_TRIALS, 0.90),
        };
        return 0;
}
