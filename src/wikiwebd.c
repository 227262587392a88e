/* SPDX-License-Identifier: MIT */
/* wikiwebd: configuration, event loop wiring, signals; nothing else. */

#include <arpa/inet.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "admission/admission-timers.h"
#include "admission/admission.h"
#include "admission/wait-tracker.h"
#include "bus/queue-bus.h"
#include "config-version.h"
#include "http/api.h"
#include "http/httpd.h"
#include "http/metrics-server.h"
#include "metrics/metrics.h"
#include "query/destination.h"
#include "query/executor.h"
#include "sandbox/sandbox.h"
#include "shared/config.h"
#include "shared/fault.h"
#include "shared/log.h"
#include "shared/macro.h"
#include "shared/parse-util.h"
#include "shared/random-util.h"
#include "store/history.h"

typedef struct Manager {
        Config config;
        sd_event *event;
        Admission *admission;
        AdmissionTimer *admission_timer;
        QueryExecutor *executor;
        History *history;
        WaitTracker *wait_tracker; /* the recent durations, for the wait range */
        Api *api;
        HttpServer *http;
        MetricsServer *metrics; /* only with wikiwebd-metrics.socket */
        QueueBus *bus;
        Sandbox *sandbox;
        SandboxState sandbox_state; /* as last logged */
        bool stopping;
        usec_t drain_deadline; /* 0 until no query runs while stopping */
        usec_t exit_wake;      /* when exit_timer fires, while stopping */
        sd_event_source *exit_timer;
} Manager;

static const char *arg_listen = NULL;
static bool arg_check_config = false;

static void help(void) {
        printf("%s [OPTIONS...]\n\n"
               "Answers questions about a MediaWiki with a language model, one query at a time.\n\n"
               "  -h --help            Show this help\n"
               "     --version         Show the version\n"
               "     --check-config    Print the effective configuration (secrets masked) and exit;\n"
               "                       exits non-zero if a setting is invalid\n"
               "     --listen ADDR:PORT\n"
               "                       Listen on this address when not socket-activated\n"
               "                       (e.g. 127.0.0.1:8080 or [::1]:8080)\n\n"
               "Settings are WIKI_WEB_* environment variables; see wikiweb.conf(5) or\n"
               "--check-config for the full list and their effective values.\n",
               program_invocation_short_name);
}

static int parse_argv(int argc, char *argv[]) {
        enum { ARG_VERSION = 0x100, ARG_CHECK_CONFIG, ARG_LISTEN };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                { "check-config", no_argument, NULL, ARG_CHECK_CONFIG },
                { "listen", required_argument, NULL, ARG_LISTEN },
                { 0 },
        };
        int c;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("wikiwebd %s (contract revision %d)\n", PACKAGE_VERSION, CONTRACT_REVISION);
                        return 0;
                case ARG_CHECK_CONFIG:
                        arg_check_config = true;
                        break;
                case ARG_LISTEN:
                        arg_listen = optarg;
                        break;
                default:
                        return -EINVAL;
                }
        if (optind < argc) {
                log_error("%s takes no positional arguments.", program_invocation_short_name);
                return -EINVAL;
        }
        return 1;
}

/* "127.0.0.1:8080", "[::1]:8080", "localhost:8080": a listening TCP socket. */
static int listen_on(const char *spec) {
        _cleanup_free_ char *host = NULL;
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
        struct addrinfo *res = NULL;
        const char *colon = strrchr(spec, ':');
        const char *port;
        int fd, r, one = 1;

        if (!colon || colon == spec || !colon[1])
                return -EINVAL;
        port = colon + 1;
        if (spec[0] == '[' && colon[-1] == ']')
                host = strndup(spec + 1, (size_t) (colon - spec - 2));
        else
                host = strndup(spec, (size_t) (colon - spec));
        if (!host)
                return -ENOMEM;

        r = getaddrinfo(host, port, &hints, &res);
        if (r != 0)
                return -EADDRNOTAVAIL;
        fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
                r = negative_errno();
                freeaddrinfo(res);
                return r;
        }
        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, SOMAXCONN) < 0) {
                r = negative_errno();
                freeaddrinfo(res);
                (void) close(fd);
                return r;
        }
        freeaddrinfo(res);
        return fd;
}

/* The sockets from systemd: the API's (named "http", or the only one
 * passed that is not "metrics"), else --listen; and the metrics socket
 * (named "metrics", from wikiwebd-metrics.socket, API.md 12.3) in
 * *ret_metrics_fd, -1 when there is none. Any other is closed. */
static int acquire_listen_fd(int *ret_metrics_fd) {
        char **names = NULL;
        int n, fd = -1, metrics_fd = -1;

        *ret_metrics_fd = -1;
        n = sd_listen_fds_with_names(true, &names);
        if (n < 0)
                return log_error_errno(n, "Failed to read the sockets passed by systemd");
        for (int i = 0; i < n; i++) {
                if (metrics_fd < 0 && streq(names[i], "metrics"))
                        metrics_fd = SD_LISTEN_FDS_START + i;
                else if (fd < 0 && (n == 1 || streq(names[i], "http")))
                        fd = SD_LISTEN_FDS_START + i;
                else
                        (void) close(SD_LISTEN_FDS_START + i);
        }
        if (metrics_fd >= 0 && sd_is_socket(metrics_fd, AF_UNSPEC, SOCK_STREAM, 1) <= 0) {
                log_warning(
                        "The metrics socket passed by systemd is not a listening stream socket; no metrics.");
                (void) close(metrics_fd);
                metrics_fd = -1;
        }
        *ret_metrics_fd = metrics_fd;
        for (int i = 0; names && i < n; i++)
                free(names[i]);
        free(names);

        if (fd >= 0) {
                if (sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1) <= 0)
                        return log_error_errno(
                                EINVAL, "The socket passed by systemd is not a listening stream socket.");
                log_info("Using the listening socket passed by systemd.");
                return fd;
        }
        if (!arg_listen)
                return log_error_errno(EINVAL, "No socket was passed by systemd and --listen was not given.");
        fd = listen_on(arg_listen);
        if (fd < 0)
                return log_error_errno(fd, "Failed to listen on %s", arg_listen);
        log_info("Listening on %s.", arg_listen);
        return fd;
}

static void update_status(Manager *m) {
        const char *id = admission_running_query_id(m->admission);
        usec_t avg = admission_average_usec(m->admission);
        char avg_buf[32];

        if (avg > 0)
                snprintf(avg_buf, sizeof avg_buf, "%.1fs", (double) avg / USEC_PER_SEC);
        else
                snprintf(avg_buf, sizeof avg_buf, "n/a");

        (void) sd_notifyf(
                false,
                "STATUS=%s%s; waiting: %" PRIu64 "; running: %s; average query: %s%s",
                m->stopping ? "Stopping; " : "",
                admission_state_to_string(admission_get_state(m->admission)),
                admission_waiting_count(m->admission),
                id && *id ? id : "none",
                avg_buf,
                api_is_degraded(m->api) ? "; health: degraded" : "");
}

static void on_admission_event(const AdmissionEvent *ev, void *userdata) {
        Manager *m = userdata;
        char f_event[64], f_ticket[64];
        const char *fields[] = { f_event, f_ticket, NULL };
        const char *event = NULL, *what = NULL;

        switch (ev->type) {
        case ADMISSION_EVENT_TICKET_ADDED:
                event = "ticket_added";
                what = "joined the queue";
                break;
        case ADMISSION_EVENT_TICKET_PROMOTED:
                event = "ticket_promoted";
                what = "was promoted to reserved";
                break;
        case ADMISSION_EVENT_TICKET_REMOVED:
                event = "ticket_removed";
                what = "was removed";
                break;
        case ADMISSION_EVENT_STATE_CHANGED:
                log_debug("Admission state is now %s.", admission_state_to_string(ev->state));
                break;
        default:
                break;
        }

        if (event) {
                snprintf(f_event, sizeof f_event, "WIKIWEB_EVENT=%s", event);
                snprintf(f_ticket, sizeof f_ticket, "TICKET_ID=%s", ev->ticket_id);
                if (ev->type == ADMISSION_EVENT_TICKET_REMOVED)
                        log_fields(
                                LOG_INFO,
                                fields,
                                "Ticket %s %s (%s).",
                                ev->ticket_id,
                                what,
                                remove_reason_to_string(ev->reason));
                else
                        log_fields(LOG_INFO, fields, "Ticket %s %s.", ev->ticket_id, what);
        }

        if (ev->type == ADMISSION_EVENT_TICKET_REMOVED)
                metrics_count_ticket_removed(remove_reason_to_string(ev->reason));
        if (m->bus)
                queue_bus_admission_event(m->bus, ev);
        api_admission_event(m->api, ev);
        update_status(m);
}

/* A scrape of wikiwebd-metrics.socket: the gauges read now, in O(1), the
 * counters as they were counted. */
static int render_metrics(MetricsFormat format, char **ret, size_t *ret_size, void *userdata) {
        const char *states[_ADMISSION_STATE_MAX];
        Manager *m = userdata;
        MetricsProcess process;
        MetricsGauges g = {
                .states = states,
                .n_states = ELEMENTSOF(states),
                .state = (size_t) admission_get_state(m->admission),
                .admission_open = !admission_is_draining(m->admission),
                .queue_length = admission_queue_length(m->admission),
                .queue_max_length = admission_get_settings(m->admission)->max_length,
        };

        for (int i = 0; i < _ADMISSION_STATE_MAX; i++)
                states[i] = admission_state_to_string((AdmissionState) i);
        if (metrics_read_process(&process) >= 0)
                g.process = &process;
        return metrics_render(format, &g, ret, ret_size);
}

static void on_query_finished(
        const char *query_id, const char *status, usec_t duration_usec, bool cleanup_confirmed, void *userdata) {
        Manager *m = userdata;

        if (m->bus) {
                queue_bus_query_finished(m->bus, query_id, status, duration_usec);
                if (!cleanup_confirmed)
                        queue_bus_set_health(m->bus, true);
        }
        update_status(m);
}

/* The running query's phase, for RunningQueryPhase (API.md 11.4). */
static void on_query_phase(const char *phase, void *userdata) {
        Manager *m = userdata;

        queue_bus_set_running_phase(m->bus, phase);
}

/* The Sandbox confirmed the cleanup of a query late: the API frees its
 * slot if it ended unconfirmed (API.md 8.4), and health follows. */
static void on_cleanup_confirmed(Sandbox *s, const char *query_id, void *userdata) {
        Manager *m = userdata;

        if (m->api)
                api_cleanup_confirmed(m->api, query_id);
        if (m->bus)
                queue_bus_set_health(
                        m->bus,
                        (m->sandbox && sandbox_cleanup_pending(m->sandbox)) || api_is_degraded(m->api));
        update_status(m);
}

/* One journal line for the sandbox's state. */
static void log_sandbox_state(SandboxState state, const char *reason) {
        if (state == SANDBOX_AVAILABLE)
                log_info("Sandbox available: run_python can be offered.");
        else if (state == SANDBOX_STARTING)
                log_info(
                        "Sandbox starting, a query waits for it (at most %" PRIu64 " s): %s.",
                        (uint64_t) (QUERY_SANDBOX_WAIT_MAX_USEC / USEC_PER_SEC),
                        reason);
        else
                log_warning("Sandbox unavailable, run_python is not offered: %s.", reason);
}

/* The Sandbox's announcement (from the loop): availability for
 * /api/v1/health and the journal, and for a query that waits for the
 * sandbox to start; D-Bus Health is degraded while a sandbox cleanup is
 * not confirmed (API.md 8.4). */
static void on_sandbox_state(Sandbox *s, void *userdata) {
        Manager *m = userdata;
        SandboxState state = sandbox_get_state(s);
        bool available = state == SANDBOX_AVAILABLE, pending = sandbox_cleanup_pending(s);

        if (state != m->sandbox_state) {
                m->sandbox_state = state;
                log_sandbox_state(state, sandbox_unavailable_reason(s));
        }
        if (m->executor)
                query_executor_sandbox_changed(m->executor);
        if (m->api)
                api_set_sandbox_state(m->api, available, pending);
        if (m->bus)
                queue_bus_set_health(m->bus, pending || (m->api && api_is_degraded(m->api)));
        update_status(m);
}

/* D-Bus CancelQuery (API.md 12.1), once polkit allowed it: the running
 * query stops as at its deadline, through the same cleanup, and is
 * recorded failed with execution_failed. A query that has ended (its
 * record being made durable, or its cleanup awaiting confirmation) is no
 * longer running: -ESRCH. */
#define CANCELLED_BY_ADMIN "Cancelled by an administrator"

static int on_cancel_query(const char *query_id, void *userdata) {
        Manager *m = userdata;
        int r;

        if (!query_executor_busy(m->executor) || !streq(admission_running_query_id(m->admission), query_id))
                return -ESRCH;
        r = query_executor_abort(m->executor, CANCELLED_BY_ADMIN);
        if (r < 0)
                return r;
        log_notice("Query %s: cancelled by an administrator.", query_id);
        return 0;
}

static void random_ticket_id(char buf[static TICKET_ID_MAX], void *userdata) {
        static uint64_t fallback = 0;

        if (random_id("tk_", buf, TICKET_ID_MAX) < 0)
                /* getrandom() does not fail once the pool is ready; be total anyway. */
                snprintf(buf, TICKET_ID_MAX, "tk_%032" PRIx64, ++fallback);
}

/* How long a stop may wait for requests in flight (a body still arriving,
 * a response still being sent) once no query runs. */
#define STOP_DRAIN_USEC (10 * USEC_PER_SEC)

static int on_exit_timer(sd_event_source *s, uint64_t usec, void *userdata);

/* Exit once nothing is in flight: no query running and no request begun
 * but not completed, or when the drain time (counted from the end of the
 * query) is over. Called after every loop iteration while stopping. */
static void maybe_exit(Manager *m) {
        usec_t t = now(CLOCK_MONOTONIC), wake;

        if (!m->stopping || query_executor_busy(m->executor) || api_is_completing(m->api))
                return;
        if (m->drain_deadline == 0)
                m->drain_deadline = usec_add(t, STOP_DRAIN_USEC);
        if (t >= m->drain_deadline) {
                (void) sd_event_exit(m->event, 0);
                return;
        }

        if (http_server_active_count(m->http) > 0)
                /* Requests in flight: until they end, or the deadline. */
                wake = m->drain_deadline;
        else {
                /* A connection accepted just before the stop whose request
                 * has not arrived yet: wait a moment for it (seen under
                 * load: a polling client's request closed unanswered by a
                 * restart). */
                usec_t fresh = http_server_fresh_until(m->http);

                if (fresh <= t) {
                        (void) sd_event_exit(m->event, 0);
                        return;
                }
                wake = MIN(fresh, m->drain_deadline);
        }

        /* Wake up then even if nothing else happens. */
        if (m->exit_timer && m->exit_wake == wake)
                return;
        m->exit_timer = sd_event_source_disable_unref(m->exit_timer);
        if (sd_event_add_time(m->event, &m->exit_timer, CLOCK_MONOTONIC, wake, 0, on_exit_timer, m) < 0) {
                (void) sd_event_exit(m->event, 0);
                return;
        }
        (void) sd_event_source_set_description(m->exit_timer, "stop-drain");
        m->exit_wake = wake;
}

/* The exit timer: the drain deadline, or, while a query still runs, the end
 * of the stop grace, when the query is aborted. */
static int on_exit_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        int r;

        if (query_executor_busy(m->executor)) {
                log_warning(
                        "The running query %s did not end within %" PRIu64
                        " s of the stop request: aborting it.",
                        admission_running_query_id(m->admission),
                        m->config.stop_grace_seconds);
                r = query_executor_abort(m->executor, "query aborted: the service is stopping");
                if (r < 0)
                        (void) sd_event_exit(m->event, 0);
                return 0;
        }
        maybe_exit(m);
        return 0;
}

static int on_post(sd_event_source *s, void *userdata) {
        maybe_exit(userdata);
        return 0;
}

static int on_stop_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Manager *m = userdata;
        bool busy = query_executor_busy(m->executor);

        if (m->stopping)
                return 0;
        m->stopping = true;
        log_info(
                "Received %s, stopping: no new connections%s.",
                strsignal((int) si->ssi_signo),
                busy ? ", waiting for the running query" : "");
        (void) sd_notify(false, "STOPPING=1");
        http_server_quiesce(m->http);
        if (busy)
                /* Let the query finish, but not past the stop grace: systemd
                 * kills us at TimeoutStopSec=, and the outcome must be
                 * recorded before that. */
                (void) sd_event_add_time_relative(
                        m->event,
                        &m->exit_timer,
                        CLOCK_MONOTONIC,
                        m->config.stop_grace_seconds * USEC_PER_SEC,
                        0,
                        on_exit_timer,
                        m);
        update_status(m);
        maybe_exit(m);
        return 0;
}

/* Test-only fault switch (shared/fault.h): SIGUSR2 hangs the event
 * loop, so the watchdog test can see systemd restart a hung daemon. */
static int on_fault_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        log_warning("Test fault: hanging the event loop on purpose.");
        for (;;)
                pause();
        return 0;
}

static void manager_free(Manager *m) {
        m->exit_timer = sd_event_source_disable_unref(m->exit_timer);
        m->metrics = metrics_server_free(m->metrics);
        m->http = http_server_free(m->http);
        m->api = api_free(m->api);
        m->wait_tracker = wait_tracker_free(m->wait_tracker);
        m->history = history_free(m->history);
        m->executor = query_executor_free(m->executor);
        m->bus = queue_bus_free(m->bus);
        m->sandbox = sandbox_free(m->sandbox);
        m->admission_timer = admission_timer_free(m->admission_timer);
        m->admission = admission_free(m->admission);
        m->event = sd_event_unref(m->event);
        config_done(&m->config);
}

/* The wait range's durations, seeded from the history: the most recent
 * WAIT_DURATIONS_MAX, oldest first, so that a restart forgets nothing. A
 * history that cannot be read leaves it empty ("no estimate yet"). */
static int make_wait_tracker(History *h, WaitTracker **ret) {
        _cleanup_(wait_tracker_freep) WaitTracker *t = NULL;
        double seconds[WAIT_DURATIONS_MAX];
        size_t n = 0;
        int r;

        r = wait_tracker_new(&t);
        if (r < 0)
                return r;
        r = history_recent_durations(h, ELEMENTSOF(seconds), seconds, &n);
        if (r < 0)
                log_warning_errno(
                        r, "The recent query durations could not be read: the wait range starts empty");
        for (size_t i = n; i-- > 0;)
                (void) wait_tracker_add(t, seconds[i]);
        log_debug("Wait range: %zu recent durations from the history.", n);
        *ret = TAKE_PTR(t);
        return 0;
}

/* The state directory holds the history, which is authoritative: without
 * one the daemon does not start. */
static int open_history(const char *path, History **ret) {
        unsigned recovered = 0;
        int r;

        if (!path) {
                log_error("No state directory: set WIKI_WEB_STATE_DIRECTORY, or run under systemd with StateDirectory=.");
                return -EINVAL;
        }
        if (mkdir(path, 0750) < 0 && errno != EEXIST)
                return log_error_errno(errno, "Failed to create the state directory %s", path);

        r = history_open(path, ret, &recovered);
        if (r < 0)
                return log_error_errno(r, "Failed to open the history in %s", path);
        if (recovered > 0)
                log_warning(
                        "%u %s still running when the service last stopped; recorded %s as failed.",
                        recovered,
                        recovered == 1 ? "query was" : "queries were",
                        recovered == 1 ? "it" : "them");
        return 0;
}

static int run(int argc, char *argv[]) {
        _cleanup_(manager_free) Manager m = { 0 };
        _cleanup_free_ char *error = NULL;
        uint64_t n;
        sigset_t mask;
        int r, fd, metrics_fd;

        log_open();

        r = parse_argv(argc, argv);
        if (r <= 0)
                return r;

        r = config_load(&m.config, config_getenv_process, NULL, &error);
        if (r < 0) {
                return log_error_errno(r, "Invalid configuration: %s", error ? error : "see above");
        }
        log_set_max_level(m.config.log_level);

        /* The upstream URLs and hosts as the destination policy reads them
         * (API.md 8): one it would refuse fails here, not at every query. */
        {
                DestinationPolicy *policy = NULL;

                r = destination_policy_new(
                        m.config.wiki_api_url, m.config.llm_url, m.config.allowed_destinations, &policy);
                destination_policy_free(policy);
                if (r == -ENOMEM)
                        return log_oom();
                if (r < 0)
                        return log_error_errno(
                                r,
                                "Invalid configuration: WIKI_WEB_WIKI_API_URL, WIKI_WEB_LLM_URL or "
                                "WIKI_WEB_ALLOWED_DESTINATIONS is not a plain http(s) URL or host "
                                "(no user info; a numeric host must be a dotted quad)");
        }

        if (arg_check_config) {
                config_dump(&m.config, stdout);
                return 0;
        }

        /* The sandbox spawns container runtimes whose children may be
         * orphaned; reap them ourselves rather than leaving zombies. */
        (void) prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);

        r = open_history(m.config.state_directory, &m.history);
        if (r < 0)
                return r;

        /* Every known series at 0 before the first event is counted. */
        metrics_reset();

        r = sd_event_default(&m.event);
        if (r < 0)
                return log_error_errno(r, "Failed to allocate the event loop");

        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        if (fault_enabled())
                sigaddset(&mask, SIGUSR2);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return log_error_errno(errno, "Failed to block signals");
        r = sd_event_add_signal(m.event, NULL, SIGTERM, on_stop_signal, &m);
        if (r < 0)
                return log_error_errno(r, "Failed to watch SIGTERM");
        r = sd_event_add_signal(m.event, NULL, SIGINT, on_stop_signal, &m);
        if (r < 0)
                return log_error_errno(r, "Failed to watch SIGINT");
        if (sigismember(&mask, SIGUSR2)) {
                r = sd_event_add_signal(m.event, NULL, SIGUSR2, on_fault_signal, &m);
                if (r < 0)
                        return log_error_errno(r, "Failed to watch SIGUSR2");
        }

        /* WATCHDOG=1 is sent from the loop itself, at half WatchdogSec=. */
        r = sd_event_set_watchdog(m.event, true);
        if (r < 0)
                log_warning_errno(r, "Failed to enable the watchdog");

        r = admission_new(
                &(AdmissionSettings){
                        .reservation_usec = m.config.queue_reservation_seconds * USEC_PER_SEC,
                        .heartbeat_usec = m.config.queue_heartbeat_seconds * USEC_PER_SEC,
                        .max_length = m.config.queue_max_length,
                },
                &m.admission);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the admission controller");
        admission_set_id_generator(m.admission, random_ticket_id, NULL);
        admission_set_event_handler(m.admission, on_admission_event, &m);

        r = admission_timer_new(m.event, m.admission, &m.admission_timer);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the admission timers");

        r = query_executor_new(m.event, &m.config, &m.executor);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the query executor");
        r = fault_uint64("WIKI_WEB_TEST_QUERY_DELAY_MS", 3600000, &n);
        if (r < 0)
                return r;
        if (r > 0) {
                log_warning("Test fault: every query takes %" PRIu64 " ms.", n);
                query_executor_set_test_delay(m.executor, n * USEC_PER_MSEC);
        }
        if (!query_executor_is_configured(m.executor))
                log_warning("Query execution is not configured: every query will fail with execution_failed.");

        r = api_new(m.event, &m.config, m.admission, m.executor, m.history, &m.api);
        if (r < 0)
                return log_oom();
        api_set_query_finished_hook(m.api, on_query_finished, &m);
        api_set_phase_hook(m.api, on_query_phase, &m);
        r = make_wait_tracker(m.history, &m.wait_tracker);
        if (r < 0)
                return log_oom();
        api_set_wait_tracker(m.api, m.wait_tracker);

        /* Admins read the queue on the system bus; without one (a developer's
         * machine) the daemon still serves HTTP. */
        r = queue_bus_new(m.event, m.admission, NULL, &m.bus);
        if (r < 0)
                log_warning_errno(r, "Not publishing the queue on D-Bus");
        queue_bus_set_cancel_handler(m.bus, on_cancel_query, &m);

        /* The sandbox owns SIGCHLD (we are a subreaper, see above), checks
         * runtime, rootfs and the user manager, and sweeps what a previous
         * run left behind. Unavailable is a state, not an error: queries
         * still answer from the wiki. */
        r = sandbox_new(m.event, &m.config, NULL, &m.sandbox);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the sandbox");
        sandbox_set_state_handler(m.sandbox, on_sandbox_state, &m);
        sandbox_set_cleanup_confirmed_handler(m.sandbox, on_cleanup_confirmed, &m);
        /* Queries offer run_python whenever the sandbox is available. */
        query_executor_set_sandbox(m.executor, m.sandbox);
        r = fault_uint64("WIKI_WEB_TEST_SANDBOX_UNCONFIRMABLE", 100, &n);
        if (r < 0)
                return r;
        if (r > 0) {
                log_warning("Test fault: the next %" PRIu64 " sandbox scope confirmations fail.", n);
                sandbox_set_test_unconfirmable(m.sandbox, (unsigned) n);
        }
        if (fault_bool("WIKI_WEB_TEST_SANDBOX_DEAF_INIT")) {
                log_warning("Test fault: the containers' init is never told to stop.");
                sandbox_set_test_deaf_init(m.sandbox, true);
        }
        r = fault_uint64("WIKI_WEB_TEST_SANDBOX_STARTING_MS", 3600000, &n);
        if (r < 0)
                return r;
        if (r > 0) {
                log_warning("Test fault: the sandbox is starting for %" PRIu64 " ms.", n);
                sandbox_set_test_starting(m.sandbox, n * USEC_PER_MSEC);
        }
        /* Unavailable from the start was logged by the sandbox already. */
        m.sandbox_state = sandbox_get_state(m.sandbox);
        if (m.sandbox_state == SANDBOX_STARTING)
                log_sandbox_state(m.sandbox_state, sandbox_unavailable_reason(m.sandbox));
        api_set_sandbox_state(m.api, sandbox_is_available(m.sandbox), sandbox_cleanup_pending(m.sandbox));

        fd = acquire_listen_fd(&metrics_fd);
        if (fd < 0) {
                if (metrics_fd >= 0)
                        (void) close(metrics_fd);
                return fd;
        }
        r = http_server_new(m.event, fd, &m.config, api_handle, m.api, &m.http);
        if (r < 0) {
                if (metrics_fd >= 0)
                        (void) close(metrics_fd);
                return log_error_errno(r, "Failed to start the HTTP server");
        }
        if (metrics_fd >= 0) {
                /* Metrics are an extra: without them the API still serves. */
                r = metrics_server_new(m.event, metrics_fd, render_metrics, &m, &m.metrics);
                if (r < 0)
                        log_warning_errno(r, "Failed to serve metrics on the metrics socket");
                else
                        log_info("Serving metrics on the socket passed by systemd (wikiwebd-metrics.socket).");
        }

        r = sd_event_add_post(m.event, NULL, on_post, &m);
        if (r < 0)
                return log_error_errno(r, "Failed to add the post source");

        log_info("wikiwebd %s started (contract revision %d).", PACKAGE_VERSION, CONTRACT_REVISION);
        (void) sd_notify(false, "READY=1");
        update_status(&m);

        r = sd_event_loop(m.event);
        if (r < 0)
                return log_error_errno(r, "Event loop failed");
        log_info("wikiwebd stopped.");
        return 0;
}

int main(int argc, char *argv[]) {
        int r = run(argc, argv);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
