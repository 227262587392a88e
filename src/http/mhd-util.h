/* SPDX-License-Identifier: MIT */
#pragma once

#include <microhttpd.h>
#include <systemd/sd-event.h>

/* The part of running libmicrohttpd inside sd-event that every MHD daemon
 * of ours shares (journal-remote's microhttpd-util.c): MHD_USE_EPOLL with
 * no threads, its epoll fd an I/O source and its timeout a time source,
 * both calling back into the owner, which runs MHD_run() and then
 * mhd_arm_timer(). */

/* The owner's callbacks: both run MHD_run() and then mhd_arm_timer(). */
typedef struct MhdEventHandlers {
        sd_event_io_handler_t on_io;
        sd_event_time_handler_t on_timer;
        void *userdata;
        const char *description; /* the sources are "DESCRIPTION-io" and "DESCRIPTION-timer" */
} MhdEventHandlers;

/* The I/O source on the daemon's epoll fd and the time source (off until
 * armed). The caller owns both (also after an error: those made so far). */
typedef struct MhdEventSources {
        sd_event_source *io;
        sd_event_source *timer;
} MhdEventSources;

/* Add both sources. Returns 0 or a negative errno. */
int mhd_attach_event(sd_event *event, struct MHD_Daemon *daemon, const MhdEventHandlers *h, MhdEventSources *ret);

/* Arm the time source at MHD's next timeout (MHD_get_timeout() is relative,
 * in milliseconds), or turn it off when MHD has none. */
int mhd_arm_timer(struct MHD_Daemon *daemon, sd_event_source *timer);
