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

/* A fresh fixture per case: an admission machine observed by on_event()
 * and on_hook(), a loop, and the timer on both. */
typedef struct Fixture {
        sd_event *e;
        Admission *a;
        AdmissionTimer *t;
        Observed o;
} Fixture;

static void fixture_init(Fixture *f) {
        AdmissionSettings settings = {
                .reservation_usec = 2 * USEC_PER_SEC,
                .heartbeat_usec = 1 * USEC_PER_SEC,
                .max_length = 10,
                .slots = 1,
        };

        *f = (Fixture){ .e = NULL };
        ASSERT_OK(sd_event_new(&f->e));
        ASSERT_OK(admission_new(&settings, &f->a));
        f->o.a = f->a;
        admission_set_event_handler(f->a, on_event, &f->o);
}

static void fixture_start_timer(Fixture *f) {
        ASSERT_OK(admission_timer_new(f->e, f->a, &f->t));
        admission_timer_set_hook(f->t, on_hook, &f->o);
}

static void fixture_done(Fixture *f) {
        f->t = admission_timer_free(f->t);
        f->a = admission_free(f->a);
        f->e = sd_event_unref(f->e);
}

TEST(expiry_from_the_timer_alone) {
        Fixture f;
        SessionKey k1 = key(1);
        uint64_t iterations, after;
        usec_t start;

        fixture_init(&f);

        /* 1. A ticket joined before the loop runs: the heartbeat expiry at
         * +1 s comes from the timer alone. */
        start = now(CLOCK_MONOTONIC);
        ASSERT_EQ_INT(admission_join(f.a, &k1, start), 1);
        fixture_start_timer(&f);

        ASSERT_OK(sd_event_get_iteration(f.e, &iterations));
        run_for(f.e, 1200 * USEC_PER_MSEC);

        ASSERT_EQ_INT(f.o.removed_heartbeat, 1);
        ASSERT_TRUE(f.o.removed_at >= start + USEC_PER_SEC);
        ASSERT_TRUE(f.o.removed_at < start + 1200 * USEC_PER_MSEC);
        ASSERT_EQ_INT(admission_queue_length(f.a), 0);
        ASSERT_EQ_INT(admission_get_state(f.a), ADMISSION_IDLE);
        ASSERT_TRUE(f.o.hook_calls >= 1);
        ASSERT_TRUE(admission_next_deadline(f.a) == USEC_INFINITY);

        /* A handful of wake-ups, not a busy loop. */
        ASSERT_OK(sd_event_get_iteration(f.e, &after));
        fprintf(stderr, "loop iterations in 1.2 s: %" PRIu64 "\n", after - iterations);
        ASSERT_TRUE(after - iterations < 20);

        fixture_done(&f);
}

TEST(post_source_rearms) {
        Fixture f;
        sd_event_source *join_source = NULL;
        uint64_t iterations, after;
        usec_t start;

        fixture_init(&f);
        fixture_start_timer(&f);

        /* 2. A join from inside the loop at +0.1 s, by another handler,
         * while the timer is disabled: the post source must arm it, so the
         * heartbeat expiry at +1.1 s fires on its own. */
        start = now(CLOCK_MONOTONIC);
        ASSERT_OK(sd_event_add_time_relative(
                f.e, &join_source, CLOCK_MONOTONIC, 100 * USEC_PER_MSEC, 1, on_join_later, &f.o));
        ASSERT_OK(sd_event_get_iteration(f.e, &iterations));
        run_for(f.e, 1300 * USEC_PER_MSEC);

        ASSERT_EQ_INT(f.o.removed_heartbeat, 1);
        ASSERT_TRUE(f.o.removed_at >= start + 1100 * USEC_PER_MSEC);
        ASSERT_TRUE(f.o.removed_at < start + 1300 * USEC_PER_MSEC);
        ASSERT_EQ_INT(admission_queue_length(f.a), 0);
        ASSERT_EQ_INT(admission_get_state(f.a), ADMISSION_IDLE);
        ASSERT_TRUE(f.o.hook_calls >= 1);
        ASSERT_OK(sd_event_get_iteration(f.e, &after));
        ASSERT_TRUE(after - iterations < 20);

        sd_event_source_unref(join_source);
        fixture_done(&f);
}

static int intro(void) {
        sd_event *e = NULL;

        if (sd_event_new(&e) < 0)
                return test_skip("cannot create an sd-event loop");
        sd_event_unref(e);
        return 0;
}

DEFINE_TEST_MAIN_WITH_INTRO(intro)
