/* SPDX-License-Identifier: MIT */
#include <time.h>

#include "shared/macro.h"
#include "shared/time-util.h"

usec_t now(clockid_t clock) {
        struct timespec ts;

        /* clock_gettime() cannot fail for the clocks we use. */
        (void) clock_gettime(clock, &ts);
        return (usec_t) ts.tv_sec * USEC_PER_SEC + (usec_t) ts.tv_nsec / NSEC_PER_USEC;
}

usec_t monotonic_to_wallclock(usec_t mono) {
        static int64_t cached_offset = 0;
        static bool have_offset = false;
        int64_t offset, diff;

        if (mono == USEC_INFINITY)
                return USEC_INFINITY;
        offset = (int64_t) now(CLOCK_REALTIME) - (int64_t) now(CLOCK_MONOTONIC);
        diff = offset - cached_offset;
        if (!have_offset || diff >= (int64_t) USEC_PER_SEC || diff <= -(int64_t) USEC_PER_SEC) {
                cached_offset = offset;
                have_offset = true;
        }
        if (cached_offset < 0 && (uint64_t) -cached_offset > mono)
                return 0;
        return (usec_t) ((int64_t) mono + cached_offset);
}

char *format_rfc3339_ms(char buf[static RFC3339_MS_MAX], usec_t realtime) {
        time_t sec = (time_t) (realtime / USEC_PER_SEC);
        unsigned ms = (unsigned) ((realtime % USEC_PER_SEC) / USEC_PER_MSEC);
        struct tm tm;

        if (!gmtime_r(&sec, &tm)) {
                snprintf(buf, RFC3339_MS_MAX, "1970-01-01T00:00:00.000Z");
                return buf;
        }
        snprintf(
                buf,
                RFC3339_MS_MAX,
                "%04d-%02d-%02dT%02d:%02d:%02d.%03uZ",
                tm.tm_year + 1900,
                tm.tm_mon + 1,
                tm.tm_mday,
                tm.tm_hour,
                tm.tm_min,
                tm.tm_sec,
                ms);
        return buf;
}
