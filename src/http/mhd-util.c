/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <sys/epoll.h>

#include "http/mhd-util.h"
#include "shared/time-util.h"

int mhd_attach_event(sd_event *event, struct MHD_Daemon *daemon, const MhdEventHandlers *h, MhdEventSources *ret) {
        const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_EPOLL_FD);
        char name[64];
        int r;

        if (!info)
                return -EINVAL;
        r = sd_event_add_io(event, &ret->io, info->epoll_fd, EPOLLIN, h->on_io, h->userdata);
        if (r < 0)
                return r;
        snprintf(name, sizeof name, "%s-io", h->description);
        (void) sd_event_source_set_description(ret->io, name);
        r = sd_event_add_time(event, &ret->timer, CLOCK_MONOTONIC, USEC_INFINITY, 0, h->on_timer, h->userdata);
        if (r < 0)
                return r;
        snprintf(name, sizeof name, "%s-timer", h->description);
        (void) sd_event_source_set_description(ret->timer, name);
        return 0;
}

int mhd_arm_timer(struct MHD_Daemon *daemon, sd_event_source *timer) {
        MHD_UNSIGNED_LONG_LONG timeout_ms;
        int r;

        if (MHD_get_timeout(daemon, &timeout_ms) != MHD_YES)
                return sd_event_source_set_enabled(timer, SD_EVENT_OFF);

        r = sd_event_source_set_time(
                timer, usec_add(now(CLOCK_MONOTONIC), (usec_t) timeout_ms * USEC_PER_MSEC));
        if (r < 0)
                return r;
        return sd_event_source_set_enabled(timer, SD_EVENT_ONESHOT);
}
