/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* The range of a ticket's wait (API.md 5, "Wait range"): p10, p50 and p90
 * of the time until its turn, from the durations of recent queries (claim
 * to confirmed cleanup), the ticket's position, the number of slots and
 * how long each running query has been running. Pure: no I/O, no clock;
 * the randomness comes from the seed, so a result can be reproduced.
 *
 * The method is a bounded Monte Carlo over the empirical distribution:
 * WAIT_RANGE_TRIALS trials; in each, every busy slot frees after the
 * remaining time of its query (a duration drawn from those longer than the
 * query's elapsed time, less that elapsed time), every ticket ahead takes
 * the slot that frees first for a duration drawn from all of them, and the
 * ticket's wait is when a slot frees for it. At most WAIT_RANGE_EXACT
 * tickets ahead are simulated one by one; beyond them, each further ticket
 * adds its mean share of a slot (mean / slots) and the spread of a sum of
 * independent durations (a normal approximation). */

#define WAIT_DURATIONS_MAX 200  /* the durations kept: the most recent */
#define WAIT_RANGE_KNOWN_MIN 10 /* fewer durations than this: the wait is not known */
#define WAIT_RANGE_TRIALS 512U
#define WAIT_RANGE_EXACT 64U
#define WAIT_RANGE_SLOTS_MAX 1024U

typedef struct WaitRange {
        double p10, p50, p90; /* seconds */
} WaitRange;

/* The most recent durations, a ring of WAIT_DURATIONS_MAX. Zero it to
 * start empty. */
typedef struct WaitDurations {
        double seconds[WAIT_DURATIONS_MAX];
        size_t n;    /* how many are kept, up to WAIT_DURATIONS_MAX */
        size_t next; /* where the next one goes */
} WaitDurations;

/* Keep one duration (seconds, >= 0; a negative, NaN or infinite one is
 * ignored and -EINVAL returned), forgetting the oldest when full. */
int wait_durations_add(WaitDurations *d, double seconds);

/* The range for a ticket that has `position` tickets up to and including
 * itself still to go through a slot (1: it is next; 0: it holds a slot,
 * the range is 0), with `n_slots` slots of which `n_running` are busy, the
 * i-th for elapsed[i] seconds (a reserved slot is busy with elapsed 0).
 * n_running > n_slots is -EINVAL. -ENODATA when fewer than
 * WAIT_RANGE_KNOWN_MIN durations are given. Cost: O(WAIT_RANGE_TRIALS *
 * (n_slots + min(position, WAIT_RANGE_EXACT)) * log n_slots) time,
 * O(n_durations + n_slots + WAIT_RANGE_TRIALS) memory; independent of the
 * position beyond WAIT_RANGE_EXACT. */
int wait_range_estimate(
        const double *durations,
        size_t n_durations,
        const double *elapsed,
        size_t n_running,
        unsigned n_slots,
        uint64_t position,
        uint64_t seed,
        WaitRange *ret);
