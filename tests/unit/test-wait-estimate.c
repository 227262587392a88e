/* SPDX-License-Identifier: MIT */
#include <math.h>

#include "admission/wait-estimate.h"
#include "shared/macro.h"
#include "tests.h"

/* The wait estimate and the average of API.md 5 as pure functions, without
 * an admission machine (test-admission.c checks them as the Manager
 * composes them with one, against its reference model). */

#define SEC(s) ((usec_t) (s) *USEC_PER_SEC)
#define T0 SEC(1000)

static void assert_near(double a, double b) {
        ASSERT_TRUE(fabs(a - b) < 1e-9);
}

TEST(average) {
        WaitAverage avg = { .known = false };

        ASSERT_TRUE(wait_average_usec(&avg) == 0);
        wait_average_add(&avg, SEC(10));
        ASSERT_TRUE(avg.known);
        ASSERT_TRUE(wait_average_usec(&avg) == SEC(10));
        /* 0.2 * 20 + 0.8 * 10 */
        wait_average_add(&avg, SEC(20));
        ASSERT_TRUE(wait_average_usec(&avg) == SEC(12));
        /* Sub-second durations are kept exactly. */
        wait_average_add(&avg, 500 * USEC_PER_MSEC);
        assert_near(avg.seconds, 0.2 * 0.5 + 0.8 * 12.0);
        /* A sub-microsecond average still reads as known. */
        avg = (WaitAverage){ .known = false };
        wait_average_add(&avg, 0);
        ASSERT_TRUE(wait_average_usec(&avg) == 1);
}

static AdmissionStatus
        status(unsigned total, unsigned idle, unsigned reserved, unsigned running, uint64_t queue_length) {
        return (AdmissionStatus){
                .queue_length = queue_length,
                .slots = { .total = total, .idle = idle, .reserved = reserved, .running = running },
        };
}

static AdmissionStatus waiting(AdmissionStatus st, uint64_t position) {
        st.has_ticket = true;
        st.ticket.status = TICKET_WAITING;
        st.ticket.position = position;
        return st;
}

static void
        expect(AdmissionStatus st,
               const WaitAverage *avg,
               const usec_t *since,
               size_t n,
               usec_t now,
               bool known,
               double value) {
        wait_estimate_status(&st, avg, since, n, now);
        ASSERT_EQ_INT(st.estimate_known, known);
        if (known)
                assert_near(st.estimated_wait_seconds, value);
        ASSERT_EQ_INT(st.average_known, avg->known);
        if (avg->known)
                assert_near(st.average_query_seconds, avg->seconds);
}

TEST(one_slot) {
        WaitAverage unknown = { .known = false }, avg = { .known = true, .seconds = 10 };
        AdmissionStatus reserved = status(1, 0, 1, 0, 3), st;
        usec_t since = T0 + SEC(20);

        /* Idle, no ticket: 0 even when the average is unknown. */
        expect(status(1, 1, 0, 0, 0), &unknown, NULL, 0, T0, true, 0);
        /* The reserved ticket: 0 even when unknown; others null. */
        st = reserved;
        st.has_ticket = true;
        st.ticket.status = TICKET_RESERVED;
        expect(st, &unknown, NULL, 0, T0, true, 0);
        expect(waiting(reserved, 1), &unknown, NULL, 0, T0, false, 0);
        expect(reserved, &unknown, NULL, 0, T0, false, 0);

        /* Reserved for someone else: base = avg. */
        expect(waiting(reserved, 1), &avg, NULL, 0, T0, true, 10);
        expect(waiting(reserved, 2), &avg, NULL, 0, T0, true, 20);
        expect(reserved, &avg, NULL, 0, T0, true, 30); /* p = waiting + 1 = 3 */

        /* Running for 4 s: base = max(0, 10 - 4) = 6. */
        st = status(1, 0, 0, 1, 2);
        expect(waiting(st, 1), &avg, &since, 1, since + SEC(4), true, 6);
        expect(waiting(st, 2), &avg, &since, 1, since + SEC(4), true, 16);
        expect(st, &avg, &since, 1, since + SEC(4), true, 26);
        /* Running longer than the average: base 0. */
        expect(waiting(st, 1), &avg, &since, 1, since + SEC(15), true, 0);
        expect(waiting(st, 2), &avg, &since, 1, since + SEC(15), true, 10);
        expect(st, &avg, &since, 1, since + SEC(15), true, 20);

        /* Back to idle with a known average: a caller without a ticket 0. */
        expect(status(1, 1, 0, 0, 0), &avg, NULL, 0, since + SEC(20), true, 0);
}

TEST(slots) {
        /* avg = 20 s. Slot 0 ran 30 s (0 left), slot 2 ran 10 s (10 s
         * left), slot 1 is reserved (20 s): the next waiting ticket gets
         * slot 0 at once, the one after it slot 2 in 10 s. */
        WaitAverage avg = { .known = true, .seconds = 20 };
        const usec_t since[] = { T0, T0 + SEC(20) };
        AdmissionStatus st = status(3, 0, 1, 2, 3);
        usec_t now = T0 + SEC(30);

        expect(waiting(st, 1), &avg, since, 2, now, true, 0);
        expect(waiting(st, 2), &avg, since, 2, now, true, 10);
        expect(st, &avg, since, 2, now, true, 20); /* the reserved slot */
        /* One round later, each slot once more. */
        expect(waiting(st, 4), &avg, since, 2, now, true, 20);
        expect(waiting(st, 5), &avg, since, 2, now, true, 30);

        /* An idle slot: a caller without a ticket starts at once. */
        expect(status(3, 1, 0, 2, 0), &avg, since, 2, now, true, 0);
        /* Without the average, a wait behind busy slots is unknown. */
        expect(status(3, 0, 1, 2, 1), &(WaitAverage){ .known = false }, since, 2, now, false, 0);
        /* A running slot whose claim time is missing counts as just claimed. */
        expect(waiting(st, 1), &avg, since, 1, now, true, 0);
        expect(waiting(st, 2), &avg, since, 1, now, true, 20);
}

DEFINE_TEST_MAIN()
