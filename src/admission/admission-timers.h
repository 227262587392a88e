/* SPDX-License-Identifier: MIT */
#pragma once

#include <systemd/sd-event.h>

#include "admission/admission.h"

/* The sd-event glue that drives the admission machine's expiries: one
 * CLOCK_MONOTONIC time source armed at admission_next_deadline(), re-armed
 * by a post source after every event-loop iteration that dispatched
 * anything (so every transition, whoever caused it, re-arms it) and after
 * each expiry. No periodic polling: with no deadline pending the time
 * source is disabled.
 *
 * The AdmissionTimer borrows the sd_event and the Admission; both must
 * outlive it. */
typedef struct AdmissionTimer AdmissionTimer;

/* Called after the timer applied expiries (for STATUS updates etc.). */
typedef void (*AdmissionTimerHandler)(void *userdata);

int admission_timer_new(sd_event *event, Admission *a, AdmissionTimer **ret);
AdmissionTimer *admission_timer_free(AdmissionTimer *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(AdmissionTimer *, admission_timer_free);
/* Re-arm at once (the post source does this too; call it when a transition
 * happened outside the event loop, e.g. at start-up). */
int admission_timer_rearm(AdmissionTimer *t);
/* Install a handler called after each expiry pass of the timer (NULL to
 * remove). userdata is borrowed. */
void admission_timer_set_handler(AdmissionTimer *t, AdmissionTimerHandler handler, void *userdata);
