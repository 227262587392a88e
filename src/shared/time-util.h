/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>
#include <time.h>

/* Microseconds, as systemd's usec_t. Deadlines are on CLOCK_MONOTONIC;
 * CLOCK_REALTIME is only for timestamps shown to people. */
typedef uint64_t usec_t;

#define USEC_INFINITY ((usec_t) UINT64_MAX)
#define USEC_PER_MSEC ((usec_t) 1000ULL)
#define USEC_PER_SEC ((usec_t) 1000000ULL)
#define NSEC_PER_USEC ((uint64_t) 1000ULL)

usec_t now(clockid_t clock);

/* Saturating add: never wraps past USEC_INFINITY. */
static inline usec_t usec_add(usec_t a, usec_t b) {
        return a > USEC_INFINITY - b ? USEC_INFINITY : a + b;
}

/* The wall-clock time of a monotonic time point, through an offset that is
 * cached and re-read only when the wall clock has been stepped by a second
 * or more: the same point then shows the same time in every response (two
 * separate readings of the two clocks would jitter by a millisecond).
 * USEC_INFINITY stays USEC_INFINITY. */
usec_t monotonic_to_wallclock(usec_t mono);

/* Writes "2026-11-22T10:00:00.000Z" (24 chars + NUL) into buf.
 * Returns buf. */
#define RFC3339_MS_MAX 64
char *format_rfc3339_ms(char buf[static RFC3339_MS_MAX], usec_t realtime);
