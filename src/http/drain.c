/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "http/drain.h"

struct HttpDrain {
        sd_event *event;
        HttpServer *server;
        usec_t deadline;
        HttpDrainDone done;
        void *userdata;
        bool finished;

        sd_event_source *defer; /* the first look, from the loop */
        sd_event_source *post;  /* another look after every loop iteration */
        sd_event_source *timer; /* a look at the next moment that matters */
        usec_t timer_at;
};

static int http_drain_on_timer(sd_event_source *s, uint64_t usec, void *userdata);

static void http_drain_finish(HttpDrain *d, int error) {
        if (d->finished)
                return;
        d->finished = true;
        (void) sd_event_source_set_enabled(d->post, SD_EVENT_OFF);
        (void) sd_event_source_set_enabled(d->timer, SD_EVENT_OFF);
        d->done(d, error, d->userdata);
}

/* Whether anything is left to wait for, and until when; done otherwise. */
static void http_drain_check(HttpDrain *d) {
        usec_t t = now(CLOCK_MONOTONIC), wake;
        int r;

        if (d->finished)
                return;
        if (t >= d->deadline) {
                http_drain_finish(d, -ETIMEDOUT);
                return;
        }

        if (http_server_active_count(d->server) > 0)
                /* Requests in flight: until they end, or the deadline. */
                wake = d->deadline;
        else {
                usec_t fresh = http_server_fresh_until(d->server);

                if (fresh <= t) {
                        http_drain_finish(d, 0);
                        return;
                }
                wake = MIN(fresh, d->deadline);
        }

        /* Wake up then even if nothing else happens. */
        if (d->timer && d->timer_at == wake)
                return;
        d->timer = sd_event_source_disable_unref(d->timer);
        r = sd_event_add_time(d->event, &d->timer, CLOCK_MONOTONIC, wake, 0, http_drain_on_timer, d);
        if (r < 0) {
                http_drain_finish(d, r);
                return;
        }
        (void) sd_event_source_set_description(d->timer, "http-drain");
        d->timer_at = wake;
}

static int http_drain_on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        http_drain_check(userdata);
        return 0;
}

static int http_drain_on_post(sd_event_source *s, void *userdata) {
        HttpDrain *d = userdata;

        if (sd_event_get_state(d->event) == SD_EVENT_FINISHED)
                return 0;
        http_drain_check(d);
        return 0;
}

static int http_drain_on_defer(sd_event_source *s, void *userdata) {
        (void) sd_event_source_set_enabled(s, SD_EVENT_OFF);
        http_drain_check(userdata);
        return 0;
}

int http_drain_start(
        sd_event *event,
        HttpServer *server,
        usec_t timeout_usec,
        HttpDrainDone done,
        void *userdata,
        HttpDrain **ret) {
        _cleanup_(http_drain_freep) HttpDrain *d = NULL;
        int r;

        assert(event);
        assert(done);
        assert(ret);

        d = calloc(1, sizeof *d);
        if (!d)
                return -ENOMEM;
        d->event = sd_event_ref(event);
        d->server = server;
        d->deadline = usec_add(now(CLOCK_MONOTONIC), timeout_usec);
        d->done = done;
        d->userdata = userdata;

        r = sd_event_add_defer(event, &d->defer, http_drain_on_defer, d);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(d->defer, "http-drain-start");
        r = sd_event_add_post(event, &d->post, http_drain_on_post, d);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(d->post, "http-drain-check");
        *ret = TAKE_PTR(d);
        return 0;
}

HttpDrain *http_drain_free(HttpDrain *d) {
        if (!d)
                return NULL;
        d->defer = sd_event_source_disable_unref(d->defer);
        d->post = sd_event_source_disable_unref(d->post);
        d->timer = sd_event_source_disable_unref(d->timer);
        sd_event_unref(d->event);
        free(d);
        return NULL;
}
