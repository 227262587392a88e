/* SPDX-License-Identifier: MIT */
/* wikiweb-sandbox-tool: drives src/sandbox/ through a real sd-event loop,
 * as the daemon's pipeline will, for the system suite and the benchmark.
 * It reads the daemon's WIKI_WEB_* settings from the environment, so it
 * runs under the production unit's hardening (test-system.py starts it as a
 * transient service with wikiwebd.service's [Service] settings).
 *
 *   check                      wait for availability, print it
 *   run [OPTIONS] CODE-FILE... one query, one run per file (in order);
 *                              prints one JSON result line per run and one
 *                              "artifacts" line
 *   bench N                    N runs of print(1), then N bare scope
 *                              start/stop cycles; prints milliseconds
 *
 * run options: --query-id ID, --page TITLE=FILE (added to /data first),
 * --cancel-after-ms MS (cancel the first run), --unconfirmable N (the test
 * fault switch; refused in a build without the test faults),
 * --wait-confirmed-s S (wait that long for a late
 * confirmation and report it). Any command: --wait-s S (how long to wait
 * for availability, default 15). */

#include <fcntl.h>
#include <getopt.h>
#include <json-c/json.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <systemd/sd-event.h>

#include "sandbox/files.h"
#include "sandbox/reaper.h"
#include "sandbox/runtime.h"
#include "sandbox/sandbox.h"
#include "sandbox/scope.h"
#include "shared/config.h"
#include "shared/json-util.h"
#include "shared/log.h"
#include "shared/macro.h"
#include "shared/strv.h"
#include "shared/time-util.h"

typedef struct Tool {
        sd_event *event;
        Config config;
        Sandbox *sandbox;
        SandboxQuery *query;
        char **files;
        size_t n_files, next;
        uint64_t cancel_after_ms;
        sd_event_source *cancel_timer;
        SandboxRun *run;
        bool confirmed_late;
        usec_t unconfirmed_at;
        int exit_code;
        bool finished;
        /* bench */
        unsigned bench_n, bench_i;
        usec_t bench_t0;
        double *bench_ms;
        bool scope_done;
        int scope_error;
} Tool;

static const char *arg_query_id = "test_query";
static char **arg_pages = NULL;
static size_t arg_n_pages = 0;
static unsigned arg_unconfirmable = 0;
static uint64_t arg_wait_confirmed_s = 0;
static uint64_t arg_wait_s = 15;

static int read_file(const char *path, char **ret, size_t *ret_len) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat st;
        char *b;
        ssize_t k;

        if (fd < 0 || fstat(fd, &st) < 0)
                return negative_errno();
        if (st.st_size > 16 << 20)
                return -EFBIG;
        b = malloc((size_t) st.st_size + 1);
        if (!b)
                return -ENOMEM;
        k = read(fd, b, (size_t) st.st_size);
        if (k < 0) {
                free(b);
                return negative_errno();
        }
        b[k] = 0;
        *ret = b;
        *ret_len = (size_t) k;
        return 0;
}

static void tool_on_state(Sandbox *s, void *userdata) {
        Tool *t = userdata;

        log_info(
                "sandbox: available=%d pending=%d reason=%s",
                sandbox_is_available(s),
                sandbox_cleanup_pending(s),
                sandbox_unavailable_reason(s));
        (void) t;
}

/* Wait (running the loop) until pred() or the timeout. */
static bool tool_wait(Tool *t, bool (*pred)(Tool *), usec_t timeout) {
        usec_t end = usec_add(now(CLOCK_MONOTONIC), timeout);

        while (!pred(t) && now(CLOCK_MONOTONIC) < end)
                if (sd_event_run(t->event, 100 * USEC_PER_MSEC) < 0)
                        return false;
        return pred(t);
}

static bool tool_finished(Tool *t) {
        return t->finished;
}

static bool tool_available(Tool *t) {
        return sandbox_is_available(t->sandbox);
}

static bool tool_not_pending(Tool *t) {
        return !sandbox_cleanup_pending(t->sandbox);
}

static void print_availability(Tool *t) {
        json_object *reason = json_object_new_string(sandbox_unavailable_reason(t->sandbox));

        printf("{\"event\": \"availability\", \"available\": %s, \"reason\": %s, \"cleanup_pending\": %s}\n",
               sandbox_is_available(t->sandbox) ? "true" : "false",
               json_object_to_json_string(reason),
               sandbox_cleanup_pending(t->sandbox) ? "true" : "false");
        json_object_put(reason);
        fflush(stdout);
}

static void tool_start_next(Tool *t);

static void tool_on_confirmed(Sandbox *s, const char *query_id, void *userdata) {
        Tool *t = userdata;

        t->confirmed_late = true;
        printf("{\"event\": \"confirmed\", \"after_ms\": %.1f}\n",
               (double) (now(CLOCK_MONOTONIC) - t->unconfirmed_at) / 1000.0);
        fflush(stdout);
}

static void tool_on_done(SandboxRun *run, int error, const SandboxResult *r, void *userdata) {
        Tool *t = userdata;
        _cleanup_(json_object_putp) json_object *result = NULL;
        const char *json = NULL;

        t->run = NULL;
        t->cancel_timer = sd_event_source_disable_unref(t->cancel_timer);
        if (sandbox_result_to_json(r, SANDBOX_RESULT_TOOL, &result) >= 0)
                json = json_object_to_json_string_ext(
                        result, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        printf("{\"event\": \"result\", \"error\": %d, \"result\": %s, \"cleanup_confirmed\": %s, \"cancelled\": %s, "
               "\"stdout_bytes\": %" PRIu64 ", \"stderr_bytes\": %" PRIu64
               ", \"run_ms\": %.1f, \"cleanup_ms\": %.1f, "
               "\"health_degraded\": %s}\n",
               error,
               json ? json : "null",
               r->cleanup_confirmed ? "true" : "false",
               r->cancelled ? "true" : "false",
               r->stdout_bytes,
               r->stderr_bytes,
               (double) r->run_usec / 1000.0,
               (double) r->cleanup_usec / 1000.0,
               sandbox_cleanup_pending(t->sandbox) ? "true" : "false");
        fflush(stdout);
        if (!r->cleanup_confirmed && t->unconfirmed_at == 0)
                t->unconfirmed_at = now(CLOCK_MONOTONIC);
        tool_start_next(t);
}

static int tool_on_cancel(sd_event_source *s, uint64_t usec, void *userdata) {
        Tool *t = userdata;

        t->cancel_timer = sd_event_source_disable_unref(t->cancel_timer);
        if (t->run)
                sandbox_run_cancel(t->run);
        return 0;
}

static void tool_start_next(Tool *t) {
        _cleanup_free_ char *code = NULL;
        size_t len;
        int r;

        if (t->next >= t->n_files) {
                t->finished = true;
                return;
        }
        r = read_file(t->files[t->next++], &code, &len);
        if (r < 0) {
                log_error_errno(r, "Cannot read %s", t->files[t->next - 1]);
                t->exit_code = 1;
                t->finished = true;
                return;
        }
        r = sandbox_run_start(t->query, code, len, tool_on_done, t, &t->run);
        if (r < 0) {
                printf("{\"event\": \"start_failed\", \"error\": %d}\n", r);
                fflush(stdout);
                t->exit_code = 1;
                t->finished = true;
                return;
        }
        if (t->cancel_after_ms > 0 && t->next == 1 &&
            sd_event_add_time_relative(
                    t->event,
                    &t->cancel_timer,
                    CLOCK_MONOTONIC,
                    t->cancel_after_ms * USEC_PER_MSEC,
                    0,
                    tool_on_cancel,
                    t) >= 0)
                (void) sd_event_source_set_description(t->cancel_timer, "sandbox-tool-cancel");
}

static int add_pages(Tool *t) {
        for (size_t i = 0; i < arg_n_pages; i++) {
                _cleanup_free_ char *title = strdup(arg_pages[i]), *content = NULL;
                char *eq = title ? strchr(title, '=') : NULL;
                size_t len;
                int r;

                if (!eq)
                        return -EINVAL;
                *eq = 0;
                r = read_file(eq + 1, &content, &len);
                if (r < 0)
                        return r;
                r = sandbox_query_add_page(
                        t->query,
                        &(WikiPage){ .title = title,
                                     .revision_id = 100 + i,
                                     .url = (char *) "http://127.0.0.1/wiki/x",
                                     .content = content,
                                     .content_size = len });
                if (r < 0)
                        return r;
        }
        return 0;
}

static int cmd_run(Tool *t) {
        SandboxArtifacts a = { 0 };
        int r;

        r = sandbox_query_new(t->sandbox, arg_query_id, &t->query);
        if (r < 0)
                return log_error_errno(r, "sandbox_query_new");
        sandbox_set_cleanup_confirmed_handler(t->sandbox, tool_on_confirmed, t);
        r = add_pages(t);
        if (r < 0)
                return log_error_errno(r, "Cannot add the pages");
#if ENABLE_TEST_FAULTS
        if (arg_unconfirmable > 0)
                sandbox_set_test_unconfirmable(t->sandbox, arg_unconfirmable);
#else
        if (arg_unconfirmable > 0)
                return log_error_errno(
                        EOPNOTSUPP, "--unconfirmable: built without the test faults (-Dtest-faults=false)");
#endif
        tool_start_next(t);
        if (!tool_wait(t, tool_finished, USEC_INFINITY))
                return -EIO;
        if (arg_wait_confirmed_s > 0 && sandbox_cleanup_pending(t->sandbox)) {
                (void) tool_wait(t, tool_not_pending, arg_wait_confirmed_s * USEC_PER_SEC);
                print_availability(t);
        }

        r = sandbox_query_collect(t->query, &a);
        if (r < 0)
                return log_error_errno(r, "Cannot collect the artifacts");
        printf("{\"event\": \"artifacts\", \"skipped_not_regular\": %zu, \"skipped_too_large\": %zu, "
               "\"skipped_too_many\": %zu, \"skipped_unreadable\": %zu, \"items\": [",
               a.skipped_not_regular,
               a.skipped_too_large,
               a.skipped_too_many,
               a.skipped_unreadable);
        for (size_t i = 0; i < a.n; i++) {
                json_object *name = json_object_new_string(a.items[i].name);
                printf("%s{\"name\": %s, \"media_type\": \"%s\", \"size_bytes\": %" PRIu64
                       ", \"sha256\": \"%s\"}",
                       i ? ", " : "",
                       json_object_to_json_string(name),
                       a.items[i].media_type,
                       a.items[i].size_bytes,
                       a.items[i].sha256);
                json_object_put(name);
        }
        printf("]}\n");
        fflush(stdout);
        sandbox_artifacts_done(&a);
        t->query = sandbox_query_free(t->query);
        return t->exit_code ? -EIO : 0;
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

static double median(double *v, unsigned n) {
        qsort(v, n, sizeof *v, cmp_double);
        return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void bench_next(Tool *t);

static void tool_bench_on_done(SandboxRun *run, int error, const SandboxResult *r, void *userdata) {
        Tool *t = userdata;

        if (error < 0 || !r->cleanup_confirmed || !r->has_exit_code || r->exit_code != 0) {
                log_error("bench run %u failed: error %d, exit %d", t->bench_i, error, r->exit_code);
                t->exit_code = 1;
                t->finished = true;
                return;
        }
        t->bench_ms[t->bench_i++] = (double) (now(CLOCK_MONOTONIC) - t->bench_t0) / 1000.0;
        bench_next(t);
}

static void bench_next(Tool *t) {
        static const char code[] = "print(1)\n";
        int r;

        if (t->bench_i >= t->bench_n) {
                t->finished = true;
                return;
        }
        t->bench_t0 = now(CLOCK_MONOTONIC);
        r = sandbox_run_start(t->query, code, sizeof code - 1, tool_bench_on_done, t, NULL);
        if (r < 0) {
                log_error_errno(r, "bench: cannot start a run");
                t->exit_code = 1;
                t->finished = true;
        }
}

/* A bare "run" + "delete -f" + "state" (which must fail) of one bundle, as
 * docs/SANDBOX.md measured it: no scope, no event loop, waitpid(). */
static int wait_pid(pid_t pid) {
        int status;

        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return negative_errno();
        return status;
}

/* out_fd: the bundle's out directory, given as both of the init's /out
 * directories (print(1) leaves nothing to copy). */
static int bare_once(
        RuntimeKind kind, const char *runtime, const char *root, const char *bundle, int out_fd, double *ret_ms) {
        static const char code[] = "print(1)\n";
        usec_t t0 = now(CLOCK_MONOTONIC);
        char **argv = NULL;
        int p[2], status, r;
        pid_t pid;

        if (pipe2(p, O_CLOEXEC) < 0)
                return negative_errno();
        if (write(p[1], code, sizeof code - 1) != (ssize_t) (sizeof code - 1))
                return -EIO;
        (void) close(p[1]);
        r = runtime_argv(kind, runtime, root, RUNTIME_RUN, "wikiweb-q-bench_bare-1", bundle, &argv);
        if (r >= 0)
                r = runtime_spawn(
                        argv,
                        &(RuntimeFds){ .stdin_fd = p[0],
                                       .stdout_fd = -1,
                                       .stderr_fd = -1,
                                       .status_fd = -1,
                                       .out_src_fd = out_fd,
                                       .out_dst_fd = out_fd,
                                       .hold_fd = -1 },
                        &pid);
        strv_free(argv);
        (void) close(p[0]);
        if (r < 0)
                return r;
        status = wait_pid(pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return -EIO;
        for (RuntimeVerb v = RUNTIME_DELETE; v <= RUNTIME_STATE; v++) {
                r = runtime_argv(kind, runtime, root, v, "wikiweb-q-bench_bare-1", NULL, &argv);
                if (r >= 0)
                        r = runtime_spawn(argv, NULL, &pid);
                strv_free(argv);
                if (r < 0)
                        return r;
                status = wait_pid(pid);
                if (v == RUNTIME_STATE && WIFEXITED(status) && WEXITSTATUS(status) == 0)
                        return -EBUSY; /* not gone */
        }
        *ret_ms = (double) (now(CLOCK_MONOTONIC) - t0) / 1000.0;
        return 0;
}

static int bench_bare(Tool *t, unsigned n, double *ret_median) {
        const Config *c = &t->config;
        _cleanup_free_ char *runtime = NULL, *dir = NULL, *bundle = NULL, *data = NULL, *out = NULL,
                            *rootfs = NULL, *root = NULL;
        _cleanup_free_ double *ms = calloc(n, sizeof(double));
        const char *rd = getenv("RUNTIME_DIRECTORY");
        _cleanup_close_ int fd = -1, out_fd = -1;
        int r;

        if (!ms || !c->state_directory)
                return -ENOMEM;
        r = runtime_find(c->sandbox_runtime ? c->sandbox_runtime : "crun", &runtime);
        if (r < 0)
                return r;
        if (asprintf(&dir, "%s/sandbox/bench_bare", c->state_directory) < 0 ||
            asprintf(&bundle, "%s/bundle", dir) < 0 || asprintf(&data, "%s/data", dir) < 0 ||
            asprintf(&out, "%s/out", dir) < 0 ||
            asprintf(&rootfs, "%s/sandbox/rootfs", c->state_directory) < 0 ||
            asprintf(&root, "%s/runtime", rd ? rd : dir) < 0)
                return -ENOMEM;
        (void) sandbox_rm_rf(AT_FDCWD, dir);
        if (mkdir(dir, 0700) < 0 || mkdir(bundle, 0700) < 0 || mkdir(data, 0700) < 0 || mkdir(out, 0700) < 0)
                return negative_errno();
        (void) mkdir(root, 0700);
        fd = open(bundle, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        r = runtime_write_bundle(
                fd,
                &(RuntimeSpec){
                        .rootfs = c->sandbox_rootfs ? c->sandbox_rootfs : rootfs,
                        .usr = c->sandbox_rootfs ? NULL : "/usr",
                        .data_dir = data,
                        .uid = getuid(),
                        .gid = getgid(),
                        .memory_max_bytes = c->sandbox_memory_max_bytes,
                        .tasks_max = c->sandbox_tasks_max,
                        .cpu_seconds = c->sandbox_timeout_seconds,
                        .file_max_bytes = c->artifact_max_bytes,
                        .tmp_max_bytes = RUNTIME_TMP_MAX_BYTES,
                        .out_max_bytes = c->artifact_max_bytes,
                        .seccomp = true,
                });
        if (r >= 0 && (out_fd = open(out, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
                r = negative_errno();
        for (unsigned i = 0; r >= 0 && i < n; i++)
                r = bare_once(runtime_kind_from_path(runtime), runtime, root, bundle, out_fd, &ms[i]);
        (void) sandbox_rm_rf(AT_FDCWD, dir);
        if (r < 0)
                return r;
        *ret_median = median(ms, n);
        return 0;
}

/* Scope start and stop alone: a child that waits, its scope started, then
 * stopped and confirmed gone. */
static void tool_scope_bench_on_done(ScopeOp *op, int error, void *userdata) {
        Tool *t = userdata;

        t->scope_done = true;
        t->scope_error = error;
}

static bool scope_bench_done(Tool *t) {
        return t->scope_done;
}

static int bench_scope(Tool *t, unsigned n, double *ret_start, double *ret_stop) {
        _cleanup_(scope_manager_freep) ScopeManager *m = NULL;
        _cleanup_free_ double *start_ms = calloc(n, sizeof(double)), *stop_ms = calloc(n, sizeof(double));
        int r = 0;

        if (!start_ms || !stop_ms)
                return -ENOMEM;
        r = scope_manager_new(t->event, NULL, &m);
        if (r < 0)
                return r;
        for (unsigned i = 0; i < n && r >= 0; i++) {
                _cleanup_free_ char *name = NULL;
                usec_t t0, t1;
                pid_t pid;

                while (!scope_manager_is_ready(m))
                        if (sd_event_run(t->event, 100 * USEC_PER_MSEC) < 0)
                                break;
                pid = fork();
                if (pid < 0) {
                        r = negative_errno();
                        break;
                }
                if (pid == 0) {
                        sigset_t none;
                        sigemptyset(&none);
                        (void) sigprocmask(SIG_SETMASK, &none, NULL);
                        for (;;)
                                pause();
                }
                if (asprintf(&name, "wikiweb-q-bench_scope-%u.scope", i + 1) < 0) {
                        r = -ENOMEM;
                        break;
                }
                t->scope_done = false;
                t0 = now(CLOCK_MONOTONIC);
                r = scope_start(m, name, pid, NULL, tool_scope_bench_on_done, t, NULL);
                if (r >= 0)
                        r = tool_wait(t, scope_bench_done, 10 * USEC_PER_SEC) ? t->scope_error : -ETIMEDOUT;
                t1 = now(CLOCK_MONOTONIC);
                if (r >= 0) {
                        t->scope_done = false;
                        r = scope_stop(m, name, tool_scope_bench_on_done, t, NULL);
                        if (r >= 0)
                                r = tool_wait(t, scope_bench_done, 10 * USEC_PER_SEC) ? t->scope_error :
                                                                                        -ETIMEDOUT;
                }
                (void) kill(pid, SIGKILL);
                start_ms[i] = (double) (t1 - t0) / 1000.0;
                stop_ms[i] = (double) (now(CLOCK_MONOTONIC) - t1) / 1000.0;
        }
        if (r < 0)
                return r;
        *ret_start = median(start_ms, n);
        *ret_stop = median(stop_ms, n);
        return 0;
}

static int cmd_bench(Tool *t, unsigned n) {
        int r;

        t->bench_n = n;
        t->bench_ms = calloc(n, sizeof(double));
        if (!t->bench_ms)
                return -ENOMEM;
        r = sandbox_query_new(t->sandbox, arg_query_id, &t->query);
        if (r < 0)
                return r;
        bench_next(t);
        if (!tool_wait(t, tool_finished, USEC_INFINITY) || t->exit_code)
                return -EIO;
        {
                double sandbox_ms = median(t->bench_ms, n), min = t->bench_ms[0], max = t->bench_ms[n - 1];
                double bare_ms = 0, scope_start_ms = 0, scope_stop_ms = 0;

                t->query = sandbox_query_free(t->query);
                free(TAKE_PTR(t->bench_ms));
                r = bench_bare(t, n, &bare_ms);
                if (r < 0)
                        return log_error_errno(r, "bench: bare runtime runs failed");
                r = bench_scope(t, n, &scope_start_ms, &scope_stop_ms);
                if (r < 0)
                        return log_error_errno(r, "bench: scope start/stop failed");
                printf("{\"event\": \"bench\", \"runs\": %u, \"sandbox_median_ms\": %.2f, \"sandbox_min_ms\": %.2f, "
                       "\"sandbox_max_ms\": %.2f, \"bare_median_ms\": %.2f, \"ratio\": %.3f, "
                       "\"scope_start_median_ms\": %.2f, \"scope_stop_confirm_median_ms\": %.2f}\n",
                       n,
                       sandbox_ms,
                       min,
                       max,
                       bare_ms,
                       bare_ms > 0 ? sandbox_ms / bare_ms : 0,
                       scope_start_ms,
                       scope_stop_ms);
        }
        return 0;
}

int main(int argc, char *argv[]) {
        enum { ARG_QUERY_ID = 0x100, ARG_PAGE, ARG_CANCEL, ARG_UNCONFIRMABLE, ARG_WAIT_CONFIRMED, ARG_WAIT };
        static const struct option options[] = {
                { "query-id", required_argument, NULL, ARG_QUERY_ID },
                { "page", required_argument, NULL, ARG_PAGE },
                { "cancel-after-ms", required_argument, NULL, ARG_CANCEL },
                { "unconfirmable", required_argument, NULL, ARG_UNCONFIRMABLE },
                { "wait-confirmed-s", required_argument, NULL, ARG_WAIT_CONFIRMED },
                { "wait-s", required_argument, NULL, ARG_WAIT },
                { 0 },
        };
        Tool t = { 0 };
        _cleanup_free_ char *error = NULL;
        const char *cmd;
        int c, r;

        log_open();
        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (c) {
                case ARG_QUERY_ID:
                        arg_query_id = optarg;
                        break;
                case ARG_PAGE: {
                        char **n = reallocarray(arg_pages, arg_n_pages + 1, sizeof *n);
                        if (!n)
                                return EXIT_FAILURE;
                        arg_pages = n;
                        arg_pages[arg_n_pages++] = optarg;
                        break;
                }
                case ARG_CANCEL:
                        t.cancel_after_ms = strtoull(optarg, NULL, 10);
                        break;
                case ARG_UNCONFIRMABLE:
                        arg_unconfirmable = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                case ARG_WAIT:
                        arg_wait_s = strtoull(optarg, NULL, 10);
                        break;
                case ARG_WAIT_CONFIRMED:
                        arg_wait_confirmed_s = strtoull(optarg, NULL, 10);
                        break;
                default:
                        return EXIT_FAILURE;
                }
        if (optind >= argc) {
                fprintf(stderr, "usage: %s check|run FILE...|bench N\n", program_invocation_short_name);
                return EXIT_FAILURE;
        }
        cmd = argv[optind];

        r = config_load(&t.config, config_getenv_process, NULL, &error);
        if (r < 0) {
                fprintf(stderr, "configuration: %s\n", error ? error : "invalid");
                return EXIT_FAILURE;
        }
        log_set_max_level(t.config.log_level);
        /* As wikiwebd does. */
        (void) prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        if (sd_event_default(&t.event) < 0)
                return EXIT_FAILURE;
        r = sandbox_new(t.event, &t.config, NULL, &t.sandbox);
        if (r < 0) {
                log_error_errno(r, "sandbox_new");
                return EXIT_FAILURE;
        }
        sandbox_set_state_handler(t.sandbox, tool_on_state, &t);

        (void) tool_wait(&t, tool_available, arg_wait_s * USEC_PER_SEC);
        print_availability(&t);
        if (streq(cmd, "check"))
                r = 0;
        else if (!sandbox_is_available(t.sandbox))
                r = -EAGAIN;
        else if (streq(cmd, "run")) {
                t.files = argv + optind + 1;
                t.n_files = (size_t) (argc - optind - 1);
                r = cmd_run(&t);
        } else if (streq(cmd, "bench") && optind + 1 < argc)
                r = cmd_bench(&t, (unsigned) MAX(1UL, strtoul(argv[optind + 1], NULL, 10)));
        else {
                fprintf(stderr, "unknown command %s\n", cmd);
                r = -EINVAL;
        }

        t.query = sandbox_query_free(t.query);
        t.sandbox = sandbox_free(t.sandbox);
        t.event = sd_event_unref(t.event);
        config_done(&t.config);
        free(arg_pages);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
