/* SPDX-License-Identifier: MIT */
#include <assert.h>

#include "query/curl-glue.h"
#include "shared/macro.h"
#include "shared/log.h"
#include "shared/time-util.h"

struct CurlGlue {
        sd_event *event;
        CURLM *multi;
        sd_event_source *timer;
        sd_event_source *defer; /* collects finished transfers */
        CurlGlueDone done;
        void *userdata;
        /* The IO sources alive, so that curl_glue_free() can release those
         * curl_multi_cleanup() does not announce. */
        sd_event_source **ios;
        size_t n_ios;
};

/* True once the loop has finished: libcurl still calls the socket and timer
 * callbacks while curl_glue_free() cleans up, and a finished loop refuses
 * new or re-armed sources (-ESTALE); nothing would run them anyway. */
static bool curl_glue_finished(const CurlGlue *g) {
        return sd_event_get_state(g->event) == SD_EVENT_FINISHED;
}

static int curl_glue_track(CurlGlue *g, sd_event_source *io) {
        sd_event_source **l = realloc(g->ios, (g->n_ios + 1) * sizeof *l);
        if (!l)
                return -ENOMEM;
        g->ios = l;
        g->ios[g->n_ios++] = io;
        return 0;
}

static void curl_glue_untrack(CurlGlue *g, sd_event_source *io) {
        for (size_t i = 0; i < g->n_ios; i++)
                if (g->ios[i] == io) {
                        g->ios[i] = g->ios[--g->n_ios];
                        return;
                }
}

static int curl_glue_on_defer(sd_event_source *s, void *userdata) {
        CurlGlue *g = userdata;
        CURLMsg *msg;
        int left;

        (void) sd_event_source_set_enabled(g->defer, SD_EVENT_OFF);
        /* The callee may remove handles: read one message at a time. */
        while ((msg = curl_multi_info_read(g->multi, &left))) {
                if (msg->msg != CURLMSG_DONE)
                        continue;
                g->done(msg->easy_handle, msg->data.result == CURLE_OK ? 0 : -EIO, msg->data.result, g->userdata);
        }
        return 0;
}

static void curl_glue_schedule_check(CurlGlue *g) {
        int r;

        if (curl_glue_finished(g))
                return;
        r = sd_event_source_set_enabled(g->defer, SD_EVENT_ONESHOT);
        if (r < 0)
                log_warning_errno(r, "curl-glue: cannot enable the defer source");
}

static int curl_glue_on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        CurlGlue *g = userdata;
        int action, running = 0;

        if ((revents & (EPOLLIN | EPOLLOUT)) == (EPOLLIN | EPOLLOUT))
                action = CURL_POLL_INOUT;
        else if (revents & EPOLLIN)
                action = CURL_POLL_IN;
        else if (revents & EPOLLOUT)
                action = CURL_POLL_OUT;
        else
                action = 0;
        if (revents & (EPOLLERR | EPOLLHUP))
                action |= CURL_CSELECT_ERR;

        if (curl_multi_socket_action(g->multi, fd, action, &running) != CURLM_OK)
                log_warning("curl-glue: curl_multi_socket_action() failed");
        curl_glue_schedule_check(g);
        return 0;
}

static int curl_glue_socket_callback(CURL *easy, curl_socket_t fd, int action, void *userdata, void *socketp) {
        CurlGlue *g = userdata;
        sd_event_source *io = socketp;
        uint32_t events = 0;
        int r;

        if (action == CURL_POLL_REMOVE) {
                if (io) {
                        curl_glue_untrack(g, io);
                        sd_event_source_disable_unref(io);
                        (void) curl_multi_assign(g->multi, fd, NULL);
                }
                return 0;
        }
        if (curl_glue_finished(g))
                return 0;

        if (action == CURL_POLL_IN)
                events = EPOLLIN;
        else if (action == CURL_POLL_OUT)
                events = EPOLLOUT;
        else if (action == CURL_POLL_INOUT)
                events = EPOLLIN | EPOLLOUT;

        if (io) {
                r = sd_event_source_set_io_events(io, events);
                if (r < 0)
                        return -1;
                r = sd_event_source_set_enabled(io, SD_EVENT_ON);
                if (r < 0)
                        return -1;
                return 0;
        }

        r = sd_event_add_io(g->event, &io, fd, events, curl_glue_on_io, g);
        if (r < 0)
                return -1;
        (void) sd_event_source_set_description(io, "curl-glue-io");
        if (curl_glue_track(g, io) < 0) {
                sd_event_source_disable_unref(io);
                return -1;
        }
        if (curl_multi_assign(g->multi, fd, io) != CURLM_OK) {
                curl_glue_untrack(g, io);
                sd_event_source_disable_unref(io);
                return -1;
        }
        return 0;
}

static int curl_glue_on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        CurlGlue *g = userdata;
        int running = 0;

        if (curl_multi_socket_action(g->multi, CURL_SOCKET_TIMEOUT, 0, &running) != CURLM_OK)
                log_warning("curl-glue: curl_multi_socket_action(timeout) failed");
        curl_glue_schedule_check(g);
        return 0;
}

static int curl_glue_timer_callback(CURLM *multi, long timeout_ms, void *userdata) {
        CurlGlue *g = userdata;
        usec_t now;
        int r;

        if (timeout_ms < 0) {
                if (g->timer)
                        (void) sd_event_source_set_enabled(g->timer, SD_EVENT_OFF);
                return 0;
        }
        if (curl_glue_finished(g))
                return 0;

        r = sd_event_now(g->event, CLOCK_MONOTONIC, &now);
        if (r < 0)
                return -1;
        now += (usec_t) timeout_ms * 1000;

        if (g->timer) {
                if (sd_event_source_set_time(g->timer, now) < 0 ||
                    sd_event_source_set_enabled(g->timer, SD_EVENT_ONESHOT) < 0)
                        return -1;
                return 0;
        }
        r = sd_event_add_time(g->event, &g->timer, CLOCK_MONOTONIC, now, 1, curl_glue_on_timer, g);
        if (r < 0)
                return -1;
        (void) sd_event_source_set_description(g->timer, "curl-glue-timer");
        return 0;
}

int curl_glue_new(sd_event *event, CurlGlueDone done, void *userdata, CurlGlue **ret) {
        _cleanup_(curl_glue_freep) CurlGlue *g = NULL;
        int r;

        assert(event);
        assert(done);
        assert(ret);

        g = calloc(1, sizeof *g);
        if (!g)
                return -ENOMEM;
        g->event = sd_event_ref(event);
        g->done = done;
        g->userdata = userdata;

        g->multi = curl_multi_init();
        if (!g->multi)
                return -ENOMEM;
        if (curl_multi_setopt(g->multi, CURLMOPT_SOCKETDATA, g) != CURLM_OK ||
            curl_multi_setopt(g->multi, CURLMOPT_SOCKETFUNCTION, curl_glue_socket_callback) != CURLM_OK ||
            curl_multi_setopt(g->multi, CURLMOPT_TIMERDATA, g) != CURLM_OK ||
            curl_multi_setopt(g->multi, CURLMOPT_TIMERFUNCTION, curl_glue_timer_callback) != CURLM_OK)
                return -EINVAL;

        r = sd_event_add_defer(event, &g->defer, curl_glue_on_defer, g);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(g->defer, SD_EVENT_OFF);
        (void) sd_event_source_set_description(g->defer, "curl-glue-defer");

        *ret = TAKE_PTR(g);
        return 0;
}

CurlGlue *curl_glue_free(CurlGlue *g) {
        if (!g)
                return NULL;
        /* Cleaning up the multi handle removes its sockets through the socket
         * callback while the sources still exist. */
        if (g->multi)
                curl_multi_cleanup(g->multi);
        for (size_t i = 0; i < g->n_ios; i++)
                sd_event_source_disable_unref(g->ios[i]);
        free(g->ios);
        sd_event_source_disable_unref(g->timer);
        sd_event_source_disable_unref(g->defer);
        sd_event_unref(g->event);
        free(g);
        return NULL;
}

int curl_glue_add(CurlGlue *g, CURL *easy) {
        assert(g);
        assert(easy);

        if (curl_multi_add_handle(g->multi, easy) != CURLM_OK)
                return -EIO;
        return 0;
}

void curl_glue_remove(CurlGlue *g, CURL *easy) {
        if (!g || !easy)
                return;
        (void) curl_multi_remove_handle(g->multi, easy);
}
