/* SPDX-License-Identifier: MIT */
#include "shared/macro.h"
#include "shared/time-util.h"
#include "tests.h"

TEST(rfc3339) {
        char buf[RFC3339_MS_MAX];

        ASSERT_EQ_STR(format_rfc3339_ms(buf, 0), "1970-01-01T00:00:00.000Z");
        /* 2026-11-22T10:00:00.123Z */
        ASSERT_EQ_STR(
                format_rfc3339_ms(buf, 1795341600ULL * USEC_PER_SEC + 123999), "2026-11-22T10:00:00.123Z");
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
