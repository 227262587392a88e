/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "admission/wait-range.h"
#include "admission/wait-tracker.h"
#include "shared/macro.h"
#include "tests.h"

/* The range against a brute-force simulation of the same queue, written
 * the plain way (a linear scan for the slot that frees first, the
 * durations above the elapsed time filtered for each draw, 40000 trials,
 * another generator), on constant, bimodal and heavy-tailed durations.
 * A quantile is checked where it is robust for any distribution: the
 * share of brute-force waits below it, and at or below it, bracket its
 * level within 0.05. */

#define BF_TRIALS 40000

static uint64_t xs_state = 88172645463325252ULL;
static uint64_t xs(void) {
        xs_state ^= xs_state << 13;
        xs_state ^= xs_state >> 7;
        xs_state ^= xs_state << 17;
        return xs_state;
}

static double bf_pick(const double *d, size_t n) {
        return d[xs() % n];
}

static double bf_remaining(const double *d, size_t n, double e) {
        double above[WAIT_DURATIONS_MAX * 8];
        size_t m = 0;

        for (size_t i = 0; i < n; i++)
                if (d[i] > e)
                        above[m++] = d[i];
        if (m == 0)
                return bf_pick(d, n);
        return bf_pick(above, m) - e;
}

static int cmp_double_for_tests(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;

        return (x > y) - (x < y);
}

/* The brute-force waits, sorted. */
static double *brute_force(
        const double *d, size_t n, const double *elapsed, size_t n_running, unsigned slots, unsigned position) {
        double *w = calloc(BF_TRIALS, sizeof(double));
        double freeat[64];

        ASSERT_TRUE(w && slots <= ELEMENTSOF(freeat));
        for (size_t t = 0; t < BF_TRIALS; t++) {
                size_t best = 0;

                for (unsigned i = 0; i < slots; i++)
                        freeat[i] = i < n_running ? bf_remaining(d, n, elapsed[i]) : 0;
                for (unsigned k = 0; k + 1 < position; k++) {
                        best = 0;
                        for (unsigned i = 1; i < slots; i++)
                                if (freeat[i] < freeat[best])
                                        best = i;
                        freeat[best] += bf_pick(d, n);
                }
                best = 0;
                for (unsigned i = 1; i < slots; i++)
                        if (freeat[i] < freeat[best])
                                best = i;
                w[t] = freeat[best];
        }
        qsort(w, BF_TRIALS, sizeof(double), cmp_double_for_tests);
        return w;
}

static void check_level(const double *w, double x, double q, const char *what) {
        size_t below = 0, at_or_below = 0;

        for (size_t i = 0; i < BF_TRIALS; i++) {
                below += w[i] < x - 1e-9;
                at_or_below += w[i] <= x + 1e-9;
        }
        if ((double) below / BF_TRIALS > q + 0.05 || (double) at_or_below / BF_TRIALS < q - 0.05) {
                fprintf(stderr,
                        "%s: %.3f is not the %.2f quantile: %.3f of the brute-force waits are below it, %.3f at or below\n",
                        what,
                        x,
                        q,
                        (double) below / BF_TRIALS,
                        (double) at_or_below / BF_TRIALS);
                abort();
        }
}

static void check_against_brute_force(
        const char *name,
        const double *d,
        size_t n,
        const double *elapsed,
        size_t n_running,
        unsigned slots,
        unsigned position) {
        _cleanup_free_ double *w = brute_force(d, n, elapsed, n_running, slots, position);
        WaitRange r;

        ASSERT_OK(wait_range_estimate(d, n, elapsed, n_running, slots, position, 42, &r));
        ASSERT_TRUE(r.p10 <= r.p50 && r.p50 <= r.p90);
        fprintf(stderr,
                "%s, %u slots, position %u: p10 %.2f p50 %.2f p90 %.2f (brute force %.2f %.2f %.2f)\n",
                name,
                slots,
                position,
                r.p10,
                r.p50,
                r.p90,
                w[BF_TRIALS / 10 - 1],
                w[BF_TRIALS / 2 - 1],
                w[BF_TRIALS * 9 / 10 - 1]);
        check_level(w, r.p10, 0.10, name);
        check_level(w, r.p50, 0.50, name);
        check_level(w, r.p90, 0.90, name);
}

static size_t constant(double *d) {
        for (size_t i = 0; i < WAIT_DURATIONS_MAX; i++)
                d[i] = 10;
        return WAIT_DURATIONS_MAX;
}

/* Most queries take a few seconds, one in four a minute. */
static size_t bimodal(double *d) {
        for (size_t i = 0; i < WAIT_DURATIONS_MAX; i++)
                d[i] = i % 4 == 0 ? 55 + (double) (i % 11) : 2 + (double) (i % 5) * 0.5;
        return WAIT_DURATIONS_MAX;
}

/* Pareto with shape 1.5 and scale 2: a heavy tail. */
static size_t heavy(double *d) {
        for (size_t i = 0; i < WAIT_DURATIONS_MAX; i++)
                d[i] = 2.0 / pow(1.0 - ((double) i + 0.5) / WAIT_DURATIONS_MAX, 1.0 / 1.5);
        return WAIT_DURATIONS_MAX;
}


typedef struct FinishFind {
        const char *query_id;
        unsigned slot;
        bool found;
} FinishFind;

static void finish_find(const char *query_id, unsigned slot, void *userdata) {
        FinishFind *f = userdata;

        if (f->query_id && strcmp(query_id, f->query_id) == 0)
                *f = (FinishFind){ .query_id = f->query_id, .slot = slot, .found = true };
}

/* The end of query_id, claimed at since, at now, measured as the Manager
 * measures it: from its claim, given to admission_finish() with its slot.
 * -ESRCH when it does not run. */
static int finish(Admission *a, const char *query_id, usec_t since, usec_t now) {
        FinishFind f = { .query_id = query_id };

        admission_foreach_running(a, finish_find, &f);
        if (!f.found)
                return -ESRCH;
        return admission_finish(a, f.slot, now - MIN(now, since), now);
}

TEST(constant_is_exact) {
        double d[WAIT_DURATIONS_MAX], e[] = { 4 };
        size_t n = constant(d);
        WaitRange r;

        /* 6 s left of the running one, then two of 10 s ahead. */
        ASSERT_OK(wait_range_estimate(d, n, e, 1, 1, 3, 1, &r));
        ASSERT_TRUE(fabs(r.p10 - 26) < 1e-9 && fabs(r.p50 - 26) < 1e-9 && fabs(r.p90 - 26) < 1e-9);
        /* Idle: the first waits nothing. */
        ASSERT_OK(wait_range_estimate(d, n, NULL, 0, 1, 1, 1, &r));
        ASSERT_TRUE(r.p90 == 0);
        /* Holding the slot: nothing to wait for. */
        ASSERT_OK(wait_range_estimate(d, n, e, 1, 1, 0, 1, &r));
        ASSERT_TRUE(r.p10 == 0 && r.p90 == 0);
}

TEST(n_slots_constant) {
        double d[WAIT_DURATIONS_MAX], e[] = { 2, 7 };
        size_t n = constant(d);
        const double want[] = { 3, 8, 13, 18, 23 };
        WaitRange r;

        /* Two slots, freeing at 3 and 8; then every 10 s each. */
        for (unsigned p = 1; p <= ELEMENTSOF(want); p++) {
                ASSERT_OK(wait_range_estimate(d, n, e, 2, 2, p, 1, &r));
                ASSERT_TRUE(fabs(r.p50 - want[p - 1]) < 1e-9);
        }
        /* A free slot of three: the next waits nothing. */
        ASSERT_OK(wait_range_estimate(d, n, e, 2, 3, 1, 1, &r));
        ASSERT_TRUE(r.p90 == 0);
}

/* A query running for 50 s whose peers took 10 to 60 s has a remaining
 * time drawn from the durations above 50 s: at most 10 s, not the mean. */
TEST(conditioning_on_elapsed) {
        double d[WAIT_DURATIONS_MAX], e[] = { 50 };
        WaitRange r;

        for (size_t i = 0; i < WAIT_DURATIONS_MAX; i++)
                d[i] = 10 + 50.0 * (double) i / (WAIT_DURATIONS_MAX - 1);
        ASSERT_OK(wait_range_estimate(d, WAIT_DURATIONS_MAX, e, 1, 1, 1, 7, &r));
        ASSERT_TRUE(r.p90 <= 10 && r.p10 >= 0);
        ASSERT_TRUE(r.p50 > 2 && r.p50 < 8);
        /* Just started: the whole distribution. */
        e[0] = 0;
        ASSERT_OK(wait_range_estimate(d, WAIT_DURATIONS_MAX, e, 1, 1, 1, 7, &r));
        ASSERT_TRUE(r.p50 > 25 && r.p50 < 45 && r.p90 > 50);
        /* Past every known duration: as if just begun (nothing better is known). */
        e[0] = 100;
        ASSERT_OK(wait_range_estimate(d, WAIT_DURATIONS_MAX, e, 1, 1, 1, 7, &r));
        ASSERT_TRUE(r.p10 >= 10 && r.p90 <= 60);
        check_against_brute_force(
                "uniform 10..60, running 50 s", d, WAIT_DURATIONS_MAX, (double[]){ 50 }, 1, 1, 1);
        check_against_brute_force(
                "uniform 10..60, running 50 s", d, WAIT_DURATIONS_MAX, (double[]){ 50 }, 1, 1, 3);
}

TEST(against_brute_force) {
        double d[WAIT_DURATIONS_MAX];
        const double e1[] = { 3 }, e3[] = { 1, 20, 60 };
        static const unsigned positions[] = { 1, 2, 5, 12 };
        size_t n;

        for (size_t k = 0; k < ELEMENTSOF(positions); k++) {
                unsigned p = positions[k];

                n = bimodal(d);
                check_against_brute_force("bimodal", d, n, e1, 1, 1, p);
                check_against_brute_force("bimodal", d, n, e3, 3, 3, p);
                check_against_brute_force("bimodal", d, n, e1, 1, 4, p);
                n = heavy(d);
                check_against_brute_force("heavy-tailed", d, n, e1, 1, 1, p);
                check_against_brute_force("heavy-tailed", d, n, e3, 3, 3, p);
                check_against_brute_force("heavy-tailed", d, n, e3, 2, 4, p);
        }
}

/* Far back in a long queue, the sum is approximated: still close to the
 * simulation, and the cost does not grow with the position. */
TEST(long_queue) {
        double d[WAIT_DURATIONS_MAX];
        const double e[] = { 5, 30 };
        size_t n = bimodal(d);
        WaitRange r, r2;

        check_against_brute_force("bimodal, far back", d, n, e, 2, 2, 300);
        ASSERT_OK(wait_range_estimate(d, n, e, 2, 2, 1000000, 3, &r));
        ASSERT_OK(wait_range_estimate(d, n, e, 2, 2, 2000000, 3, &r2));
        ASSERT_TRUE(r.p50 > 0 && r2.p50 > 1.9 * r.p50 && r2.p50 < 2.1 * r.p50);
        ASSERT_TRUE(r.p10 < r.p50 && r.p50 < r.p90);
}

TEST(not_known_and_invalid) {
        double d[WAIT_DURATIONS_MAX], e[] = { 1, 2 };
        size_t n = constant(d);
        WaitRange r = { .p50 = -1 };

        ASSERT_EQ_INT(wait_range_estimate(d, WAIT_RANGE_KNOWN_MIN - 1, NULL, 0, 1, 1, 1, &r), -ENODATA);
        ASSERT_EQ_INT(wait_range_estimate(NULL, 0, NULL, 0, 1, 1, 1, &r), -ENODATA);
        ASSERT_TRUE(r.p50 == -1); /* untouched */
        ASSERT_OK(wait_range_estimate(d, WAIT_RANGE_KNOWN_MIN, NULL, 0, 1, 2, 1, &r));
        ASSERT_EQ_INT(wait_range_estimate(d, n, e, 2, 1, 1, 1, &r), -EINVAL);
        ASSERT_EQ_INT(wait_range_estimate(d, n, NULL, 0, 0, 1, 1, &r), -EINVAL);
        ASSERT_EQ_INT(wait_range_estimate(d, n, NULL, 0, WAIT_RANGE_SLOTS_MAX + 1, 1, 1, &r), -EINVAL);
}

TEST(durations_ring) {
        WaitDurations w = { .n = 0 };

        ASSERT_EQ_INT(wait_durations_add(&w, -1), -EINVAL);
        ASSERT_EQ_INT(wait_durations_add(&w, NAN), -EINVAL);
        ASSERT_EQ_INT(wait_durations_add(&w, INFINITY), -EINVAL);
        ASSERT_EQ_INT(w.n, 0);
        for (int i = 0; i < WAIT_DURATIONS_MAX + 50; i++)
                ASSERT_OK(wait_durations_add(&w, i));
        ASSERT_EQ_INT(w.n, WAIT_DURATIONS_MAX);
        /* The last 200 are kept: 50 .. 249. */
        for (size_t i = 0; i < w.n; i++)
                ASSERT_TRUE(w.seconds[i] >= 50 && w.seconds[i] < WAIT_DURATIONS_MAX + 50);
}

static SessionKey session(unsigned n) {
        SessionKey k = { .bytes = { 0 } };

        k.bytes[0] = (uint8_t) n;
        k.bytes[31] = 0x5a;
        return k;
}

/* The tracker on a real admission machine: a status becomes a position and
 * a busy slot; the range is null until 10 durations are known; it is
 * computed again when a duration is added or the running query's time
 * moves, and is the same otherwise. */
TEST(tracker) {
        _cleanup_(wait_tracker_freep) WaitTracker *t = NULL;
        _cleanup_(admission_freep) Admission *a = NULL;
        const AdmissionSettings settings = {
                .reservation_usec = 60 * USEC_PER_SEC,
                .heartbeat_usec = 3600 * USEC_PER_SEC,
                .max_length = 10,
                .slots = 1,
        };
        const SessionKey s1 = session(1), s2 = session(2), s3 = session(3), s4 = session(4);
        usec_t t0 = 1000 * USEC_PER_SEC;
        /* The running queries' claim times, as the Manager keeps them. */
        const usec_t running[] = { t0 };
        size_t n_running = 0;
        AdmissionStatus st;
        WaitRange r, r2;

        ASSERT_OK(wait_tracker_new(&t));
        ASSERT_OK(admission_new(&settings, &a));

        /* Idle, no ticket: nothing to wait for, once the range is known. */
        ASSERT_OK(admission_status(a, &s4, t0, &st));
        ASSERT_EQ_INT(wait_tracker_status_range(t, a, &st, running, n_running, t0, &r), 0);
        for (int i = 0; i < WAIT_RANGE_KNOWN_MIN - 1; i++)
                ASSERT_OK(wait_tracker_add(t, 10));
        ASSERT_EQ_INT(wait_tracker_status_range(t, a, &st, running, n_running, t0, &r), 0);
        ASSERT_EQ_INT(wait_tracker_add(t, -1), -EINVAL);
        ASSERT_OK(wait_tracker_add(t, 10));
        ASSERT_EQ_INT(wait_tracker_count(t), WAIT_RANGE_KNOWN_MIN);
        ASSERT_EQ_INT(wait_tracker_status_range(t, a, &st, running, n_running, t0, &r), 1);
        ASSERT_TRUE(r.p90 == 0);

        /* s1 runs since t0; s2 waits at 1, s3 at 2. */
        ASSERT_TRUE(admission_claim(a, &s1, "qr_1", t0) >= 0);
        n_running = 1;
        ASSERT_TRUE(admission_join(a, &s2, t0) >= 0);
        ASSERT_TRUE(admission_join(a, &s3, t0) >= 0);

        /* s3 at 4 s: 6 s left of the running one, then 10 s of s2's. */
        ASSERT_OK(admission_status(a, &s3, t0 + 4 * USEC_PER_SEC, &st));
        ASSERT_EQ_INT(wait_tracker_status_range(t, a, &st, running, n_running, t0 + 4 * USEC_PER_SEC, &r), 1);
        ASSERT_TRUE(fabs(r.p50 - 16) < 1e-9 && fabs(r.p10 - 16) < 1e-9 && fabs(r.p90 - 16) < 1e-9);
        /* 5 ms later: the same (the time moves in two digits). */
        ASSERT_EQ_INT(
                wait_tracker_status_range(t, a, &st, running, n_running, t0 + 4 * USEC_PER_SEC + 5000, &r2),
                1);
        ASSERT_TRUE(r2.p50 == r.p50);
        /* A second later: a second less. */
        ASSERT_OK(admission_status(a, &s3, t0 + 5 * USEC_PER_SEC, &st));
        ASSERT_EQ_INT(wait_tracker_status_range(t, a, &st, running, n_running, t0 + 5 * USEC_PER_SEC, &r), 1);
        ASSERT_TRUE(fabs(r.p50 - 15) < 1e-9);
        /* Without a ticket: after both waiting ones. */
        ASSERT_OK(admission_status(a, &s4, t0 + 5 * USEC_PER_SEC, &st));
        ASSERT_EQ_INT(wait_tracker_status_range(t, a, &st, running, n_running, t0 + 5 * USEC_PER_SEC, &r), 1);
        ASSERT_TRUE(fabs(r.p50 - 25) < 1e-9);
        /* New durations are seen at once. */
        for (int i = 0; i < WAIT_DURATIONS_MAX; i++)
                ASSERT_OK(wait_tracker_add(t, 20));
        ASSERT_OK(admission_status(a, &s3, t0 + 5 * USEC_PER_SEC, &st));
        ASSERT_EQ_INT(wait_tracker_status_range(t, a, &st, running, n_running, t0 + 5 * USEC_PER_SEC, &r), 1);
        ASSERT_TRUE(fabs(r.p50 - 35) < 1e-9);

        /* s1 finishes: s2 holds the reservation (nothing to wait for), and
         * the reserved slot is busy from now for s3, now first. */
        ASSERT_OK(finish(a, "qr_1", t0, t0 + 6 * USEC_PER_SEC));
        n_running = 0;
        ASSERT_OK(admission_status(a, &s2, t0 + 6 * USEC_PER_SEC, &st));
        ASSERT_EQ_INT(wait_tracker_status_range(t, a, &st, running, n_running, t0 + 6 * USEC_PER_SEC, &r), 1);
        ASSERT_TRUE(r.p90 == 0);
        ASSERT_OK(admission_status(a, &s3, t0 + 6 * USEC_PER_SEC, &st));
        ASSERT_EQ_INT(wait_tracker_status_range(t, a, &st, running, n_running, t0 + 6 * USEC_PER_SEC, &r), 1);
        ASSERT_TRUE(fabs(r.p50 - 20) < 1e-9);
}

/* N slots through the tracker: the running ones by their claim times, the
 * reserved ones busy from now, the idle ones free. */
TEST(tracker_n_slots) {
        _cleanup_(wait_tracker_freep) WaitTracker *t = NULL;
        const usec_t now = 100 * USEC_PER_SEC;
        const usec_t since[] = { now - 2 * USEC_PER_SEC, now - 7 * USEC_PER_SEC };
        WaitSlots slots = { .total = 3, .reserved = 1, .n_running = 2, .running_since = since };
        const double want[] = { 3, 8, 10, 13, 18, 20 };
        WaitRange r;

        ASSERT_OK(wait_tracker_new(&t));
        for (int i = 0; i < WAIT_RANGE_KNOWN_MIN; i++)
                ASSERT_OK(wait_tracker_add(t, 10));
        /* Frees at 3 (running for 7 s), 8 (for 2 s), 10 (reserved). */
        for (unsigned p = 1; p <= ELEMENTSOF(want); p++) {
                ASSERT_EQ_INT(wait_tracker_range(t, p, &slots, now, &r), 1);
                ASSERT_TRUE(fabs(r.p50 - want[p - 1]) < 1e-9);
        }
        /* A fourth slot, idle: the next waits nothing. */
        slots.total = 4;
        ASSERT_EQ_INT(wait_tracker_range(t, 1, &slots, now, &r), 1);
        ASSERT_TRUE(r.p90 == 0);
        /* More busy than there are slots, or none at all. */
        slots.total = 2;
        ASSERT_EQ_INT(wait_tracker_range(t, 1, &slots, now, &r), -EINVAL);
        slots.total = 0;
        ASSERT_EQ_INT(wait_tracker_range(t, 1, &slots, now, &r), -EINVAL);
}

DEFINE_TEST_MAIN()
