/* SPDX-License-Identifier: MIT */
#include <systemd/sd-event.h>

#include "admission/admission-timers.h"
#include "shared/macro.h"
#include "tests.h"

/* The sd-event glue: with nothing else happening in the loop, expiries must
 * come from the timer (so D-Bus signals go out on time), the post source
 * must re-arm it after transitions made by other handlers, and the loop must
 * sleep rather than spin. Real time, about 2.5 s in all. */

typedef struct Observed {
        Admission *a;
        unsigned removed_heartbeat;
        unsigned removed_reservation;
        usec_t removed_at;
        unsigned promoted;
        unsigned hook_calls;
} Observed;

static void on_event(const AdmissionEvent *ev, void *userdata) {
        Observed *o = userdata;

        if (ev->type == ADMISSION_EVENT_TICKET_REMOVED) {
                if (ev->reason == REMOVE_HEARTBEAT)
                        o->removed_heartbeat++;
                else if (ev->reason == REMOVE_RESERVATION)
                        o->removed_reservation++;
                o->removed_at = now(CLOCK_MONOTONIC);
        } else if (ev->type == ADMISSION_EVENT_TICKET_PROMOTED)
                o->promoted++;
}

static void on_hook(void *userdata) {
        Observed *o = userdata;
        o->hook_calls++;
}

static int on_exit_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        return sd_event_exit(sd_event_source_get_event(s), 0);
}

static SessionKey key(uint8_t n) {
        SessionKey k = { .bytes = { n } };
        return k;
}

/* A transition made by some other handler in the loop (as the HTTP module
 * would): only the post source can re-arm the timer after it. */
static int on_join_later(sd_event_source *s, uint64_t usec, void *userdata) {
        Observed *o = userdata;
        SessionKey k = key(2);

        ASSERT_EQ_INT(admission_join(o->a, &k, now(CLOCK_MONOTONIC)), 1);
        return 0;
}

static void run_for(sd_event *e, usec_t duration) {
        sd_event_source *exit_source = NULL;

        ASSERT_OK(sd_event_add_time_relative(
                e, &exit_source, CLOCK_MONOTONIC, duration, 1, on_exit_timer, NULL));
        ASSERT_OK(sd_event_loop(e));
        sd_event_source_unref(exit_source);
}

int main(void) {
        AdmissionSettings settings = {
                .reservation_usec = 2 * USEC_PER_SEC,
                .heartbeat_usec = 1 * USEC_PER_SEC,
                .max_length = 10,
        };
        sd_event *e = NULL;
        Admission *a = NULL;
        AdmissionTimer *t = NULL;
        Observed o = { .a = NULL };
        SessionKey k1 = key(1);
        uint64_t iterations;
        usec_t start;
        int r;

        r = sd_event_new(&e);
        if (r < 0)
                return test_skip("cannot create an sd-event loop");
        ASSERT_OK(admission_new(&settings, &a));
        o.a = a;
        admission_set_event_handler(a, on_event, &o);

        /* 1. A ticket joined before the loop runs: the heartbeat expiry at
         * +1 s comes from the timer alone. */
        start = now(CLOCK_MONOTONIC);
        ASSERT_EQ_INT(admission_join(a, &k1, start), 1);
        ASSERT_OK(admission_timer_new(e, a, &t));
        admission_timer_set_hook(t, on_hook, &o);

        ASSERT_OK(sd_event_get_iteration(e, &iterations));
        run_for(e, 1200 * USEC_PER_MSEC);

        ASSERT_EQ_INT(o.removed_heartbeat, 1);
        ASSERT_TRUE(o.removed_at >= start + USEC_PER_SEC);
        ASSERT_TRUE(o.removed_at < start + 1200 * USEC_PER_MSEC);
        ASSERT_EQ_INT(admission_queue_length(a), 0);
        ASSERT_EQ_INT(admission_get_state(a), ADMISSION_IDLE);
        ASSERT_TRUE(o.hook_calls >= 1);
        ASSERT_TRUE(admission_next_deadline(a) == USEC_INFINITY);

        /* A handful of wake-ups, not a busy loop. */
        uint64_t after;
        ASSERT_OK(sd_event_get_iteration(e, &after));
        fprintf(stderr, "loop iterations in 1.2 s: %" PRIu64 "\n", after - iterations);
        ASSERT_TRUE(after - iterations < 20);

        /* 2. A join from inside the loop at +0.1 s, by another handler,
         * while the timer is disabled: the post source must arm it, so the
         * heartbeat expiry at +1.1 s fires on its own. */
        /* An sd-event loop cannot run again once it exited: a new one. */
        admission_timer_free(t);
        e = sd_event_unref(e);
        ASSERT_OK(sd_event_new(&e));
        ASSERT_OK(admission_timer_new(e, a, &t));
        admission_timer_set_hook(t, on_hook, &o);

        sd_event_source *join_source = NULL;
        o.removed_heartbeat = 0;
        o.hook_calls = 0;
        start = now(CLOCK_MONOTONIC);
        ASSERT_OK(sd_event_add_time_relative(
                e, &join_source, CLOCK_MONOTONIC, 100 * USEC_PER_MSEC, 1, on_join_later, &o));
        ASSERT_OK(sd_event_get_iteration(e, &iterations));
        run_for(e, 1300 * USEC_PER_MSEC);

        ASSERT_EQ_INT(o.removed_heartbeat, 1);
        ASSERT_TRUE(o.removed_at >= start + 1100 * USEC_PER_MSEC);
        ASSERT_TRUE(o.removed_at < start + 1300 * USEC_PER_MSEC);
        ASSERT_EQ_INT(admission_queue_length(a), 0);
        ASSERT_EQ_INT(admission_get_state(a), ADMISSION_IDLE);
        ASSERT_TRUE(o.hook_calls >= 1);
        ASSERT_OK(sd_event_get_iteration(e, &after));
        ASSERT_TRUE(after - iterations < 20);

        sd_event_source_unref(join_source);
        admission_timer_free(t);
        admission_free(a);
        sd_event_unref(e);
        return 0;
}
