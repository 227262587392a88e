/* SPDX-License-Identifier: MIT */
#include <microhttpd.h>
#include <assert.h>

#include "http/metrics-server.h"
#include "http/mhd-util.h"
#include "metrics/metrics.h"
#include "shared/log.h"
#include "shared/macro.h"

/* A scraper or two, and curl by hand: a few connections are plenty, and
 * their number is bounded apart from the API's. */
#define METRICS_CONNECTION_LIMIT 16u
#define METRICS_CONNECTION_TIMEOUT_SEC 10u

struct MetricsServer {
        struct MHD_Daemon *daemon;
        MhdEventSources sources;
        Manager *manager; /* borrowed */
};

/* A scrape: the gauges read now, in O(1), the counters as they were
 * counted. */
static int metrics_server_render(MetricsServer *s, MetricsFormat format, char **ret, size_t *ret_size) {
        const char *states[_ADMISSION_STATE_MAX];
        const Admission *a = manager_get_admission(s->manager);
        MetricsProcess process;
        HistoryStorage storage;
        uint64_t slots[_ADMISSION_STATE_MAX];
        AdmissionSlotCounts c;
        MetricsGauges g = {
                .states = states,
                .n_states = ELEMENTSOF(states),
                .slots = slots,
                .state = (size_t) admission_get_state(a),
                .admission_open = !admission_is_draining(a),
                .queue_length = admission_queue_length(a),
                .queue_max_length = admission_get_settings(a)->max_length,
        };

        for (int i = 0; i < _ADMISSION_STATE_MAX; i++)
                states[i] = admission_state_to_string((AdmissionState) i);
        admission_get_slot_counts(a, &c);
        slots[ADMISSION_IDLE] = c.idle;
        slots[ADMISSION_RESERVED] = c.reserved;
        slots[ADMISSION_RUNNING] = c.running;
        if (metrics_read_process(&process) >= 0)
                g.process = &process;
        manager_get_storage(s->manager, &storage);
        g.storage = &(MetricsStorage){
                .free_bytes = storage.free_bytes,
                .writes_failed = storage.writes_failed,
                .outcomes_waiting = storage.n_pending,
                .state = (unsigned) storage.state,
        };
        return metrics_render(format, &g, ret, ret_size);
}

static enum MHD_Result
        reply(struct MHD_Connection *c, unsigned status, const char *content_type, char *body, size_t size) {
        struct MHD_Response *r;
        enum MHD_Result k;

        /* MHD takes the body (MHD_RESPMEM_MUST_FREE) even for HEAD, where
         * it sends only the Content-Length. */
        r = MHD_create_response_from_buffer(size, body, body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
        if (!r) {
                free(body);
                return MHD_NO;
        }
        if (content_type)
                (void) MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
        (void) MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        k = MHD_queue_response(c, status, r);
        MHD_destroy_response(r);
        return k;
}

static enum MHD_Result metrics_server_on_request(
        void *cls,
        struct MHD_Connection *connection,
        const char *url,
        const char *method,
        const char *version,
        const char *upload_data,
        size_t *upload_data_size,
        void **con_cls) {
        MetricsServer *s = cls;
        MetricsFormat format;
        char *body = NULL;
        size_t size = 0;
        int r;

        /* First call: headers only. A body is not wanted: drop it. */
        if (!*con_cls) {
                *con_cls = s;
                return MHD_YES;
        }
        if (*upload_data_size > 0) {
                *upload_data_size = 0;
                return MHD_YES;
        }

        if (!streq(url, "/metrics"))
                return reply(connection, MHD_HTTP_NOT_FOUND, NULL, NULL, 0);
        if (!streq(method, MHD_HTTP_METHOD_GET) && !streq(method, MHD_HTTP_METHOD_HEAD))
                return reply(connection, MHD_HTTP_METHOD_NOT_ALLOWED, NULL, NULL, 0);

        format = metrics_format_from_accept(
                MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT));
        r = metrics_server_render(s, format, &body, &size);
        if (r < 0) {
                log_warning_errno(r, "Metrics: cannot render the exposition");
                return reply(connection, MHD_HTTP_INTERNAL_SERVER_ERROR, NULL, NULL, 0);
        }
        return reply(connection, MHD_HTTP_OK, metrics_format_content_type(format), body, size);
}

static int metrics_server_run(MetricsServer *s) {
        int r;

        if (MHD_run(s->daemon) != MHD_YES)
                log_warning("Metrics: MHD_run() failed.");
        r = mhd_arm_timer(s->daemon, s->sources.timer);
        if (r < 0)
                log_warning_errno(r, "Metrics: cannot arm the timer");
        return 0;
}

static int metrics_server_on_io(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        return metrics_server_run(userdata);
}

static int metrics_server_on_timer(sd_event_source *es, uint64_t usec, void *userdata) {
        return metrics_server_run(userdata);
}

_printf_(2, 0) static void metrics_server_on_mhd_log(void *arg, const char *fmt, va_list ap) {
        char buf[512];

        (void) vsnprintf(buf, sizeof buf, fmt, ap);
        log_debug("microhttpd (metrics): %s", buf);
}

int metrics_server_new(sd_event *event, int listen_fd, Manager *manager, MetricsServer **ret) {
        _cleanup_(metrics_server_freep) MetricsServer *s = malloc(sizeof *s);
        _cleanup_close_ int fd = listen_fd;
        int r;

        assert(event && manager && ret);
        if (!s)
                return -ENOMEM;
        *s = (MetricsServer){ .manager = manager };

        s->daemon = MHD_start_daemon(
                MHD_USE_EPOLL | MHD_USE_ERROR_LOG,
                0,
                NULL,
                NULL,
                metrics_server_on_request,
                s,
                MHD_OPTION_EXTERNAL_LOGGER,
                metrics_server_on_mhd_log,
                s,
                MHD_OPTION_LISTEN_SOCKET,
                fd,
                MHD_OPTION_CONNECTION_LIMIT,
                METRICS_CONNECTION_LIMIT,
                MHD_OPTION_CONNECTION_TIMEOUT,
                METRICS_CONNECTION_TIMEOUT_SEC,
                MHD_OPTION_END);
        if (!s->daemon)
                return -EINVAL;
        fd = -1; /* MHD owns it now */

        r = mhd_attach_event(
                event,
                s->daemon,
                &(const MhdEventHandlers){ metrics_server_on_io, metrics_server_on_timer, s, "metrics" },
                &s->sources);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(s);
        return 0;
}

MetricsServer *metrics_server_free(MetricsServer *s) {
        if (!s)
                return NULL;
        if (s->daemon)
                MHD_stop_daemon(s->daemon);
        sd_event_source_disable_unref(s->sources.io);
        sd_event_source_disable_unref(s->sources.timer);
        free(s);
        return NULL;
}
