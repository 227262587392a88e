/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <time.h>

#include "shared/macro.h"
#include "shared/time-util.h"
#include "tests.h"

TEST(rfc3339) {
        char buf[RFC3339_MS_MAX];

        ASSERT_EQ_STR(format_rfc3339_ms(buf, 0), "1970-01-01T00:00:00.000Z");
        /* 2026-11-22T10:00:00.123Z */
        ASSERT_EQ_STR(
                format_rfc3339_ms(buf, 1795341600ULL * USEC_PER_SEC + 123999), "2026-11-22T10:00:00.123Z");
        ASSERT_EQ_STR(format_rfc3339_ms(buf, 951782400ULL * USEC_PER_SEC), "2000-02-29T00:00:00.000Z");
        ASSERT_EQ_STR(
                format_rfc3339_ms(buf, 253402300799ULL * USEC_PER_SEC + 999999), "9999-12-31T23:59:59.999Z");
        ASSERT_EQ_STR(format_rfc3339_ms(buf, 253402300800ULL * USEC_PER_SEC), "9999-12-31T23:59:59.999Z");
        ASSERT_EQ_STR(format_rfc3339_ms(buf, UINT64_MAX), "9999-12-31T23:59:59.999Z");
}

/* The hand-written date agrees with gmtime_r() and strftime() over every
 * day from 1970 to 9999 (at a time of day that moves with the day) and at
 * random points in between. */
TEST(rfc3339_agrees_with_gmtime) {
        char buf[RFC3339_MS_MAX], want[RFC3339_MS_MAX], head[32];
        uint64_t x = 0x9e3779b97f4a7c15ULL;

        for (uint64_t i = 0; i < 2932897 + 20000; i++) {
                uint64_t sec, ms;
                time_t t;
                struct tm tm;

                if (i < 2932897) /* each day to 9999-12-31 */
                        sec = i * 86400 + (i * 7919) % 86400, ms = i % 1000;
                else {
                        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                        sec = x % 253402300800ULL, ms = (x >> 40) % 1000;
                }
                t = (time_t) sec;
                ASSERT_TRUE(gmtime_r(&t, &tm));
                ASSERT_TRUE(strftime(head, sizeof head, "%Y-%m-%dT%H:%M:%S", &tm) == 19);
                snprintf(want, sizeof want, "%s.%03uZ", head, (unsigned) ms);
                ASSERT_EQ_STR(format_rfc3339_ms(buf, sec * USEC_PER_SEC + ms * USEC_PER_MSEC + 999), want);
        }
}

TEST(wallclock_is_stable) {
        usec_t mono = now(CLOCK_MONOTONIC), first, real;

        /* The same monotonic point shows the same wall-clock time every time
         * (a ticket's joined_at must not jitter between two status calls). */
        first = monotonic_to_wallclock(mono);
        for (int i = 0; i < 100000; i++)
                ASSERT_TRUE(monotonic_to_wallclock(mono) == first);

        /* ... and it is the wall clock. */
        real = now(CLOCK_REALTIME);
        mono = now(CLOCK_MONOTONIC);
        ASSERT_TRUE(monotonic_to_wallclock(mono) + 50 * USEC_PER_MSEC > real);
        ASSERT_TRUE(monotonic_to_wallclock(mono) < real + 50 * USEC_PER_MSEC);
        ASSERT_TRUE(monotonic_to_wallclock(USEC_INFINITY) == USEC_INFINITY);
}

DEFINE_TEST_MAIN()
