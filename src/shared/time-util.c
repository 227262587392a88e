/* SPDX-License-Identifier: MIT */
#include <string.h>
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

/* Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's
 * civil_from_days, for days >= 0). */
static void civil_from_days(uint64_t days, unsigned *ret_year, unsigned *ret_month, unsigned *ret_day) {
        uint64_t z = days + 719468, era = z / 146097, doe = z - era * 146097;
        uint64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
        uint64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
        unsigned month = (unsigned) (mp < 10 ? mp + 3 : mp - 9);

        *ret_year = (unsigned) (yoe + era * 400 + (month <= 2));
        *ret_month = month;
        *ret_day = (unsigned) (doy - (153 * mp + 2) / 5 + 1);
}

static char *put_digits(char *p, unsigned v, unsigned n) {
        for (unsigned i = n; i > 0; i--) {
                p[i - 1] = (char) ('0' + v % 10);
                v /= 10;
        }
        return p + n;
}

/* Written by hand: a status object has two of these, and gmtime_r() with
 * snprintf() would cost some 3,700 instructions each
 * (tests/bench/bench-http-instructions.sh). */
char *format_rfc3339_ms(char buf[static RFC3339_MS_MAX], usec_t realtime) {
        uint64_t sec = realtime / USEC_PER_SEC, days = sec / 86400, rest = sec % 86400;
        unsigned year, month, day;
        char *p = buf;

        civil_from_days(days, &year, &month, &day);
        if (year > 9999) { /* beyond what four digits say: the latest they do */
                memcpy(buf, "9999-12-31T23:59:59.999Z", sizeof "9999-12-31T23:59:59.999Z");
                return buf;
        }
        p = put_digits(p, year, 4);
        *p++ = '-';
        p = put_digits(p, month, 2);
        *p++ = '-';
        p = put_digits(p, day, 2);
        *p++ = 'T';
        p = put_digits(p, (unsigned) (rest / 3600), 2);
        *p++ = ':';
        p = put_digits(p, (unsigned) (rest / 60 % 60), 2);
        *p++ = ':';
        p = put_digits(p, (unsigned) (rest % 60), 2);
        *p++ = '.';
        p = put_digits(p, (unsigned) (realtime % USEC_PER_SEC / USEC_PER_MSEC), 3);
        *p++ = 'Z';
        *p = 0;
        return buf;
}
