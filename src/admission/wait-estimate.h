/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "admission/admission.h"
#include "shared/time-util.h"

/* The average query time and the wait estimate of the status object
 * (API.md 5), as pure functions: the Manager keeps the average (it
 * measures every query, from its claim to its confirmed cleanup) and
 * the running queries' claim times (ManagerQuery.since); the admission
 * knows slots and tickets only. Time is passed in. */

/* A moving average of query durations: each new one weighs 0.2. Unknown
 * ({ false }) until the first. */
typedef struct WaitAverage {
        bool known;
        double seconds;
} WaitAverage;

/* Add one query's duration (claim to confirmed cleanup). */
void wait_average_add(WaitAverage *avg, usec_t duration);

/* The average in usec, 0 when unknown (a known one is at least 1). */
usec_t wait_average_usec(const WaitAverage *avg);

/* The estimate for a ticket at position p >= 1 behind the slots of
 * `slots`, with the running queries claimed at running_since[0..n_running)
 * (oldest claim first), at now. true and *ret when known: 0 when p finds
 * an idle slot, else known only with a known average. A running slot
 * without a claim time in running_since counts as just claimed. */
bool wait_estimate_for_position(
        const AdmissionSlotCounts *slots,
        const WaitAverage *avg,
        const usec_t *running_since,
        size_t n_running,
        uint64_t p,
        usec_t now,
        double *ret);

/* Fill the estimate and the average of st (estimate_known,
 * estimated_wait_seconds, average_known, average_query_seconds), as the
 * admission status st (admission_peek()) places its session: a reserved
 * ticket waits 0; a waiting one has its position; a session without a
 * ticket is placed after everyone waiting. */
void wait_estimate_status(
        AdmissionStatus *st, const WaitAverage *avg, const usec_t *running_since, size_t n_running, usec_t now);
