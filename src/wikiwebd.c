/* SPDX-License-Identifier: MIT */
/* wikiwebd: configuration, event loop wiring, signals; nothing else. */

#include <getopt.h>
#include <signal.h>
#include <sys/prctl.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "bus/queue-bus.h"
#include "config-version.h"
#include "api/api.h"
#include "mcp/mcp.h"
#include "http/drain.h"
#include "http/httpd.h"
#include "http/listen.h"
#include "http/metrics-server.h"
#include "http/session.h"
#include "manager/manager.h"
#include "manager/status-line.h"
#include "metrics/metrics.h"
#include "query/destination.h"
#include "shared/config.h"
#include "shared/fault.h"
#include "shared/log.h"
#include "shared/macro.h"
#include "shared/parse-util.h"
#include "shared/time-util.h"

typedef struct Daemon {
        Config config;
        sd_event *event;
        Manager *manager;
        StatusLine *status_line; /* STATUS= */
        Api *api;
        Mcp *mcp;
        HttpServer *http;
        MetricsServer *metrics; /* only with wikiwebd-metrics.socket */
        QueueBus *bus;
        HttpDrain *drain; /* once no query runs while stopping */
} Daemon;

static const char *arg_listen = NULL;
static bool arg_check_config = false;

static void help(void) {
        printf("%s [OPTIONS...]\n\n"
               "Answers questions about a MediaWiki with a language model, one query per admission slot.\n\n"
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

/* How long a stop may wait for requests in flight (a body still arriving,
 * a response still being sent) once no query runs. */
#define STOP_DRAIN_USEC (10 * USEC_PER_SEC)

static void on_drained(HttpDrain *drain, int error, void *userdata) {
        Daemon *d = userdata;

        (void) sd_event_exit(d->event, 0);
}

/* No query runs any more: answer the requests in flight, then exit. */
static void on_manager_stopped(Manager *m, void *userdata) {
        Daemon *d = userdata;
        int r;

        r = http_drain_start(d->event, d->http, STOP_DRAIN_USEC, on_drained, d, &d->drain);
        if (r < 0) {
                log_warning_errno(r, "Failed to wait for the requests in flight; exiting now");
                (void) sd_event_exit(d->event, 0);
        }
}

/* SIGTERM, SIGINT: no new connections and no new query; the running ones
 * may finish within the stop grace (the Manager aborts them then). */
static int on_stop_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Daemon *d = userdata;
        bool busy = manager_busy(d->manager);

        if (manager_is_stopping(d->manager))
                return 0;
        log_info(
                "Received %s, stopping: no new connections%s.",
                strsignal((int) si->ssi_signo),
                busy ? ", waiting for the running queries" : "");
        (void) sd_notify(false, "STOPPING=1");
        http_server_quiesce(d->http);
        manager_stop(
                d->manager,
                d->config.stop_grace_seconds * USEC_PER_SEC,
                "query aborted: the service is stopping");
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

static void daemon_done(Daemon *d) {
        d->drain = http_drain_free(d->drain);
        d->metrics = metrics_server_free(d->metrics);
        d->http = http_server_free(d->http);
        d->mcp = mcp_free(d->mcp);
        d->api = api_free(d->api);
        d->bus = queue_bus_free(d->bus);
        d->status_line = status_line_free(d->status_line);
        d->manager = manager_free(d->manager);
        d->event = sd_event_unref(d->event);
        config_done(&d->config);
}

/* Every slot may run a sandbox at its memory limit at once: they must fit
 * in the machine's memory. */
static int check_memory(const Config *c) {
        _cleanup_free_ char *error = NULL;
        long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
        int r;

        r = config_check_memory(
                c, pages > 0 && page_size > 0 ? (uint64_t) pages * (uint64_t) page_size : 0, &error);
        if (r < 0)
                return log_error_errno(r, "Invalid configuration: %s", error ? error : "see above");
        return 0;
}

/* The upstream URLs and hosts as the destination policy reads them
 * (API.md 8): one it would refuse fails here, not at every query. */
static int check_destinations(const Config *c) {
        DestinationPolicy *policy = NULL;
        int r;

        r = destination_policy_new(c->wiki_api_url, c->llm_url, c->allowed_destinations, &policy);
        destination_policy_free(policy);
        if (r == -ENOMEM)
                return log_oom();
        if (r < 0)
                return log_error_errno(
                        r,
                        "Invalid configuration: WIKI_WEB_WIKI_API_URL, WIKI_WEB_LLM_URL or "
                        "WIKI_WEB_ALLOWED_DESTINATIONS is not a plain http(s) URL or host "
                        "(no user info; a numeric host must be a dotted quad)");
        return 0;
}

/* sd_event_loop(), with the time each iteration keeps the loop from
 * waiting measured (wikiweb_event_loop_busy_seconds): from the wake-up
 * through the dispatch of what woke it, and the next iteration's prepare
 * callbacks; in wall-clock and in the loop thread's CPU time, whose
 * difference is time the thread waited for a CPU or in a system call. */
static int event_loop_run(sd_event *e) {
        int r, code = 0;

        while (sd_event_get_state(e) != SD_EVENT_FINISHED) {
                usec_t t0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_THREAD_CPUTIME_ID), busy, cpu;

                r = sd_event_prepare(e);
                busy = now(CLOCK_MONOTONIC) - t0;
                cpu = now(CLOCK_THREAD_CPUTIME_ID) - c0;
                if (r == 0)
                        r = sd_event_wait(e, UINT64_MAX);
                if (r > 0) {
                        t0 = now(CLOCK_MONOTONIC);
                        c0 = now(CLOCK_THREAD_CPUTIME_ID);
                        r = sd_event_dispatch(e);
                        busy += now(CLOCK_MONOTONIC) - t0;
                        cpu += now(CLOCK_THREAD_CPUTIME_ID) - c0;
                }
                if (r < 0)
                        return r;
                metrics_observe_loop_busy(busy, cpu);
        }
        r = sd_event_get_exit_code(e, &code);
        return r < 0 ? r : code;
}

/* SIGTERM and SIGINT stop; with the test faults SIGUSR2 hangs. */
static int setup_signals(Daemon *d) {
        sigset_t mask;
        int r;

        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        if (fault_enabled())
                sigaddset(&mask, SIGUSR2);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return log_error_errno(errno, "Failed to block signals");
        r = sd_event_add_signal(d->event, NULL, SIGTERM, on_stop_signal, d);
        if (r < 0)
                return log_error_errno(r, "Failed to watch SIGTERM");
        r = sd_event_add_signal(d->event, NULL, SIGINT, on_stop_signal, d);
        if (r < 0)
                return log_error_errno(r, "Failed to watch SIGINT");
        if (TEST_FAULT(sigismember(&mask, SIGUSR2))) {
                r = sd_event_add_signal(d->event, NULL, SIGUSR2, on_fault_signal, d);
                if (r < 0)
                        return log_error_errno(r, "Failed to watch SIGUSR2");
        }
        return 0;
}

/* The HTTP faces on one server: /mcp is the MCP face's, the rest the
 * API's. */
static HttpHandlerResult daemon_handle(HttpRequest *req, void *userdata) {
        Daemon *d = userdata;

        if (http_request_route(req)->route == ROUTE_MCP)
                return mcp_handle(req, d->mcp);
        return api_handle(req, d->api);
}

/* The faces: the HTTP API on its socket, the metrics on theirs (an extra:
 * without them the API still serves), the queue on the system bus
 * (without one, a developer's machine, the daemon still serves HTTP). */
static int setup_faces(Daemon *d) {
        int r, fd, metrics_fd;

        /* In any order: QueryFinished (an announcement) goes out before
         * the answer to the query's request (a waiter of the query). */
        r = queue_bus_new(d->event, d->manager, NULL, &d->bus);
        if (r < 0)
                log_warning_errno(r, "Not publishing the queue on D-Bus");

        r = api_new(d->event, d->manager, &d->api);
        if (r < 0)
                return log_oom();
        r = mcp_new(d->event, d->manager, &d->mcp);
        if (r < 0)
                return log_oom();

        fd = http_listen_acquire(arg_listen, &metrics_fd);
        if (fd < 0) {
                if (metrics_fd >= 0)
                        (void) close(metrics_fd);
                return fd;
        }
        r = http_server_new(d->event, fd, &d->config, daemon_handle, d, &d->http);
        if (r < 0) {
                if (metrics_fd >= 0)
                        (void) close(metrics_fd);
                return log_error_errno(r, "Failed to start the HTTP server");
        }
        /* Before the loop: no request is keyed without it. */
        http_server_set_user_secret(d->http, manager_get_user_secret(d->manager));
        /* Access tokens: checked by the Manager for the transport, on the
         * API's paths and /mcp. */
        http_server_set_token_verifier(d->http, api_verify_token, d->api);
        if (metrics_fd >= 0) {
                r = metrics_server_new(d->event, metrics_fd, d->manager, &d->metrics);
                if (r < 0)
                        log_warning_errno(r, "Failed to serve metrics on the metrics socket");
                else
                        log_info("Serving metrics on the socket passed by systemd (wikiwebd-metrics.socket).");
        }
        return 0;
}

static int run(int argc, char *argv[]) {
        _cleanup_(daemon_done) Daemon d = { 0 };
        _cleanup_free_ char *error = NULL;
        int r;

        log_open();

        r = parse_argv(argc, argv);
        if (r <= 0)
                return r;

        r = config_load(&d.config, config_getenv_process, NULL, &error);
        if (r < 0)
                return log_error_errno(r, "Invalid configuration: %s", error ? error : "see above");
        log_set_max_level(d.config.log_level);
        r = check_destinations(&d.config);
        if (r < 0)
                return r;
        r = check_memory(&d.config);
        if (r < 0)
                return r;
        /* Behind a proxy people use a name, and only a listed name passes
         * the Host check (API.md 4): said at start and by --check-config. */
        if (config_identity_enabled(&d.config) && !d.config.allowed_hosts[0])
                log_warning(
                        "WIKI_WEB_TRUSTED_PROXIES is set but WIKI_WEB_ALLOWED_HOSTS is empty: only requests "
                        "naming localhost or one of this machine's addresses in Host are answered. List the "
                        "names people reach the proxy by, and let the proxy forward Host.");
        if (arg_check_config) {
                config_dump(&d.config, stdout);
                return 0;
        }
        /* People are told apart, but the setting that decides whose wiki
         * permissions count was left to its default (API.md "Whose
         * permissions"). */
        if (config_identity_enabled(&d.config) && !d.config.wiki_read_as_set)
                log_warning(
                        "WIKI_WEB_TRUSTED_PROXIES is set but WIKI_WEB_WIKI_READ_AS is not: every signed-in "
                        "person gets answers from every page the service account may read. Set "
                        "WIKI_WEB_WIKI_READ_AS=person to answer each from what they may read, or =service "
                        "to keep this.");
        if (d.config.wiki_read_as == CONFIG_READ_AS_PERSON)
                log_info("Wiki pages are used as the asking person may read them (WIKI_WEB_WIKI_READ_AS=person).");

        /* The sandbox spawns container runtimes whose children may be
         * orphaned; reap them ourselves rather than leaving zombies. */
        (void) prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        /* Every known series at 0 before the first event is counted. */
        metrics_reset();

        r = sd_event_default(&d.event);
        if (r < 0)
                return log_error_errno(r, "Failed to allocate the event loop");
        r = setup_signals(&d);
        if (r < 0)
                return r;
        /* WATCHDOG=1 is sent from the loop itself, at half WatchdogSec=. */
        r = sd_event_set_watchdog(d.event, true);
        if (r < 0)
                log_warning_errno(r, "Failed to enable the watchdog");

        r = manager_new(d.event, &d.config, &d.manager);
        if (r < 0)
                return r;
        /* A person's records, and their tokens, are kept under the key the
         * transport gives their name. */
        manager_set_user_key_function(d.manager, session_key_from_user);
        /* STATUS= hears the Manager first, the D-Bus object second (its
         * QueryFinished goes out before the answer to the query's request),
         * the HTTP API last. */
        r = status_line_new(d.manager, &d.status_line);
        if (r < 0)
                return log_oom();
        r = setup_faces(&d);
        if (r < 0)
                return r;
        manager_set_stopped_handler(d.manager, on_manager_stopped, &d);

        log_info("wikiwebd %s started (contract revision %d).", PACKAGE_VERSION, CONTRACT_REVISION);
        (void) sd_notify(false, "READY=1");

        r = event_loop_run(d.event);
        if (r < 0)
                return log_error_errno(r, "Event loop failed");
        log_info("wikiwebd stopped.");
        return 0;
}

int main(int argc, char *argv[]) {
        int r = run(argc, argv);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
