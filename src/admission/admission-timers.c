/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <systemd/sd-event.h>

#include "admission/admission-timers.h"
#include "shared/log.h"
#include "shared/macro.h"

/* How late the expiry timer may fire, so sd-event can coalesce wake-ups.
 * Correctness does not depend on it (every call applies due expiries and
 * promotes at the deadline itself); it bounds how stale the D-Bus view and
 * the signals can get. sd-event's default of 250 ms is a bit coarse for
 * that. */
#define ADMISSION_TIMER_ACCURACY_USEC (10 * USEC_PER_MSEC)

struct AdmissionTimer {
        sd_event *event;      /* borrowed */
        Admission *admission; /* borrowed */
        sd_event_source *time_source;
        sd_event_source *post_source;
        usec_t armed; /* the deadline the time source is set to, USEC_INFINITY when off */
        AdmissionTimerHandler handler;
        void *handler_userdata;
};

int admission_timer_rearm(AdmissionTimer *t) {
        usec_t deadline;
        int r;

        assert(t);
        deadline = admission_next_deadline(t->admission);
        if (deadline == t->armed)
                return 0;

        if (deadline == USEC_INFINITY) {
                r = sd_event_source_set_enabled(t->time_source, SD_EVENT_OFF);
                if (r < 0)
                        return r;
        } else {
                r = sd_event_source_set_time(t->time_source, deadline);
                if (r < 0)
                        return r;
                r = sd_event_source_set_enabled(t->time_source, SD_EVENT_ONESHOT);
                if (r < 0)
                        return r;
        }

        t->armed = deadline;
        return 0;
}

/* True once the loop has finished: nothing is expired or re-armed while
 * the daemon tears down (the Admission may already be going away). */
static bool admission_timer_finished(const AdmissionTimer *t) {
        return sd_event_get_state(t->event) == SD_EVENT_FINISHED;
}

static int admission_timer_on_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        AdmissionTimer *t = userdata;
        int r;

        if (admission_timer_finished(t))
                return 0;

        /* A oneshot source is off once dispatched; remember that, so the
         * re-arm below really sets it again even for the same deadline. */
        t->armed = USEC_INFINITY;

        /* The actual clock, not "usec" (the deadline that was armed): with
         * coalescing we may be a little late, and anything else due by now
         * should go in the same pass. */
        (void) admission_expire(t->admission, now(CLOCK_MONOTONIC));

        r = admission_timer_rearm(t);
        if (r < 0)
                log_warning_errno(r, "Failed to re-arm the admission timer, ignoring");

        if (t->handler)
                t->handler(t->handler_userdata);
        return 0;
}

/* sd-event runs post sources once after every loop iteration in which some
 * other (non-post) source was dispatched, and a post source dispatching does
 * not mark the post sources pending again, so this cannot spin. Whatever
 * handler changed the admission machine in that iteration, the timer follows
 * its new earliest deadline. */
static int admission_timer_on_post(sd_event_source *s, void *userdata) {
        AdmissionTimer *t = userdata;
        int r;

        if (admission_timer_finished(t))
                return 0;
        r = admission_timer_rearm(t);
        if (r < 0)
                /* Returning an error would disable the post source for good;
                 * the next iteration retries instead. */
                log_warning_errno(r, "Failed to re-arm the admission timer, ignoring");
        return 0;
}

AdmissionTimer *admission_timer_free(AdmissionTimer *t) {
        if (!t)
                return NULL;

        t->time_source = sd_event_source_disable_unref(t->time_source);
        t->post_source = sd_event_source_disable_unref(t->post_source);
        free(t);
        return NULL;
}

int admission_timer_new(sd_event *event, Admission *a, AdmissionTimer **ret) {
        _cleanup_(admission_timer_freep) AdmissionTimer *t = NULL;
        int r;

        assert(event);
        assert(a);
        assert(ret);

        t = calloc(1, sizeof(AdmissionTimer));
        if (!t)
                return -ENOMEM;
        t->event = event;
        t->admission = a;
        t->armed = USEC_INFINITY;

        /* Created disabled; admission_timer_rearm() below sets the time. */
        r = sd_event_add_time(
                event,
                &t->time_source,
                CLOCK_MONOTONIC,
                USEC_INFINITY,
                ADMISSION_TIMER_ACCURACY_USEC,
                admission_timer_on_deadline,
                t);
        if (r < 0)
                return r;
        r = sd_event_source_set_enabled(t->time_source, SD_EVENT_OFF);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(t->time_source, "admission-deadline");

        r = sd_event_add_post(event, &t->post_source, admission_timer_on_post, t);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(t->post_source, "admission-rearm");

        r = admission_timer_rearm(t);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(t);
        return 0;
}

void admission_timer_set_handler(AdmissionTimer *t, AdmissionTimerHandler handler, void *userdata) {
        t->handler = handler;
        t->handler_userdata = userdata;
}
