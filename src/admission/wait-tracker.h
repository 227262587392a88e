/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "admission/admission.h"
#include "admission/wait-range.h"

/* The recent query durations and the wait range of the status object
 * (API.md 5, "Wait range"): owns a WaitDurations ring, turns a status into
 * a position and the busy slots' elapsed times, and keeps the last ranges
 * computed, so that a status request costs a lookup while nothing has
 * changed (a range is computed again when a duration is added, or when a
 * running query's elapsed time has moved in its first two significant
 * digits, at least 10 ms). Pure, like
 * admission.c: time is passed in. */

typedef struct WaitTracker WaitTracker;

int wait_tracker_new(WaitTracker **ret);
WaitTracker *wait_tracker_free(WaitTracker *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(WaitTracker *, wait_tracker_free);

/* Keep a finished query's duration (seconds, claim to confirmed cleanup);
 * -EINVAL for a negative or non-finite one. */
int wait_tracker_add(WaitTracker *t, double seconds);
size_t wait_tracker_count(const WaitTracker *t);

/* The slots as the range sees them: `total` slots, of which `reserved` are
 * reserved for a ticket and n_running run a query, claimed at
 * running_since[i] (monotonic). */
typedef struct WaitSlots {
        unsigned total;
        unsigned reserved;
        size_t n_running;
        const usec_t *running_since;
} WaitSlots;

/* The range for a ticket at `position` (as wait_range_estimate() takes it)
 * with those slots, at now. 1 and *ret when known; 0 when fewer than
 * WAIT_RANGE_KNOWN_MIN durations are known; -EINVAL for slots that do not
 * add up (more busy than total, none, more than WAIT_RANGE_SLOTS_MAX). */
int wait_tracker_range(WaitTracker *t, uint64_t position, const WaitSlots *slots, usec_t now, WaitRange *ret);

/* The range for the session whose status is st (its ticket's position;
 * without a ticket, the place after everyone waiting, or 0 when a slot is
 * idle), with the slots as the admission machine a has them and the
 * running queries claimed at running_since[0..n_running) (monotonic, as
 * their owner, the Manager, keeps them: ManagerQuery.since). 1 and *ret
 * when known; 0 when fewer than WAIT_RANGE_KNOWN_MIN durations are known
 * (the range is null); negative errno on failure (-EINVAL: more running
 * than the slots have). */
int wait_tracker_status_range(
        WaitTracker *t,
        const Admission *a,
        const AdmissionStatus *st,
        const usec_t *running_since,
        size_t n_running,
        usec_t now,
        WaitRange *ret);
