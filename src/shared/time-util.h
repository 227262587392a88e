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

/* Convert a monotonic time point to the wall clock, using a pair of "now"
 * readings taken together. USEC_INFINITY stays USEC_INFINITY. */
usec_t monotonic_to_realtime(usec_t mono, usec_t now_mono, usec_t now_real);

/* Writes "2026-11-22T10:00:00.000Z" (24 chars + NUL) into buf.
 * Returns buf. */
#define RFC3339_MS_MAX 64
char *format_rfc3339_ms(char buf[static RFC3339_MS_MAX], usec_t realtime);
