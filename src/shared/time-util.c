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

usec_t monotonic_to_realtime(usec_t mono, usec_t now_mono, usec_t now_real) {
        if (mono == USEC_INFINITY)
                return USEC_INFINITY;
        if (mono >= now_mono)
                return usec_add(now_real, mono - now_mono);
        if (now_mono - mono > now_real)
                return 0;
        return now_real - (now_mono - mono);
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
