/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "metrics/metrics.h"
#include "sandbox/files.h"
#include "sandbox/sandbox-internal.h"
#include "shared/fault.h"
#include "shared/log.h"
#include "shared/macro.h"
#include "shared/parse-util.h"
#include "shared/strv.h"

/* After the wall-clock limit (or a cancel) the container's init is told
 * (SIGUSR1) to kill the code and keep /out; if the runtime has not ended
 * this much later (an init that does not answer, or a copy of /out that
 * takes too long), KillUnit kills the scope. */
#define SANDBOX_STOP_GRACE_USEC (5 * USEC_PER_SEC)
/* After KillUnit, if the runtime has still not ended this much later,
 * clean up regardless (the stop kills whatever is left). */
#define SANDBOX_KILL_GRACE_USEC (5 * USEC_PER_SEC)
/* After the runtime exited, how long its pipes may stay open. */
#define SANDBOX_PIPE_GRACE_USEC (1 * USEC_PER_SEC)
/* Names of /out files in a run's result. */
#define SANDBOX_RESULT_FILES_MAX 100
/* The run's timers (0 would be sd-event's default of 250 ms). */
#define SANDBOX_TIMER_ACCURACY_USEC (10 * USEC_PER_MSEC)

/* ---- results ---- */

static int cmp_files(const void *a, const void *b) {
        return strcmp(((const Artifact *) a)->name, ((const Artifact *) b)->name);
}

/* The top-level regular files of /out, by name, not following links. */
static int list_out(int out_fd, SandboxResult *r) {
        int fd = fcntl(out_fd, F_DUPFD_CLOEXEC, 3);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;

        if (!d) {
                if (fd >= 0)
                        (void) close(fd);
                return -errno;
        }
        rewinddir(d);
        while ((de = readdir(d)) && r->n_files < SANDBOX_RESULT_FILES_MAX) {
                struct stat st;
                Artifact *n;

                if (fstatat(out_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                        continue;
                n = reallocarray(r->files, r->n_files + 1, sizeof *n);
                if (!n)
                        break;
                r->files = n;
                n[r->n_files] = (Artifact){ .size_bytes = (uint64_t) st.st_size, .fd = -1 };
                if (sandbox_artifact_name(de->d_name, &n[r->n_files].name) < 0)
                        break;
                r->n_files++;
        }
        closedir(d);
        if (r->n_files > 1)
                qsort(r->files, r->n_files, sizeof *r->files, cmp_files);
        return 0;
}

static const char *signal_name(int sig) {
        switch (sig) {
        case SIGKILL:
                return "SIGKILL";
        case SIGTERM:
                return "SIGTERM";
        case SIGSEGV:
                return "SIGSEGV";
        case SIGABRT:
                return "SIGABRT";
        case SIGXCPU:
                return "SIGXCPU";
        case SIGXFSZ:
                return "SIGXFSZ";
        case SIGBUS:
                return "SIGBUS";
        case SIGFPE:
                return "SIGFPE";
        case SIGILL:
                return "SIGILL";
        case SIGSYS:
                return "SIGSYS";
        case SIGINT:
                return "SIGINT";
        case SIGPIPE:
                return "SIGPIPE";
        case SIGHUP:
                return "SIGHUP";
        default:
                return "SIGNAL";
        }
}

/* ---- a run ---- */

static void run_advance(SandboxRun *run);

void sandbox_run_free(SandboxRun *run) {
        if (!run)
                return;
        if (run->query && run->query->run == run)
                run->query->run = NULL;
        reaper_unwatch(run->watch);
        scope_op_cancel(run->op);
        if (run->cleanup) {
                run->cleanup->done = NULL;
                run->cleanup = NULL;
        }
        sd_event_source_disable_unref(run->out_src);
        sd_event_source_disable_unref(run->err_src);
        sd_event_source_disable_unref(run->timer);
        sd_event_source_disable_unref(run->defer);
        if (run->hold_fd >= 0)
                (void) close(run->hold_fd);
        if (run->out_fd >= 0)
                (void) close(run->out_fd);
        if (run->err_fd >= 0)
                (void) close(run->err_fd);
        if (run->status_fd >= 0)
                (void) close(run->status_fd);
        output_buffer_done(&run->out);
        output_buffer_done(&run->err);
        sandbox_result_done(&run->result);
        free(run->id);
        free(run->scope);
        free(run->bundle);
        free(run);
}

/* wikiweb_sandbox_runs_total{outcome} (API.md 12.3), as the run is
 * reported: its cleanup unconfirmed, or no container could run, or it
 * timed out, or it exited (by itself, by a signal or cancelled). */
static const char *sandbox_run_outcome(const SandboxRun *run) {
        if (!run->result.cleanup_confirmed)
                return "cleanup_failed";
        if (run->error < 0)
                return "failed";
        if (run->result.timed_out)
                return "timeout";
        return "exited";
}

static int sandbox_run_on_defer(sd_event_source *src, void *userdata) {
        SandboxRun *run = userdata;
        SandboxRunDone done = run->done;
        void *ud = run->userdata;

        metrics_count_sandbox_run(sandbox_run_outcome(run));
        if (run->query)
                run->query->run = NULL;
        done(run, run->error, &run->result, ud);
        sandbox_run_free(run);
        return 0;
}

/* Report from a defer; when even that cannot be made (OOM), now rather
 * than never. */
static void sandbox_run_report_later(SandboxRun *run) {
        if (sd_event_add_defer(run->sandbox->event, &run->defer, sandbox_run_on_defer, run) < 0)
                sandbox_run_on_defer(NULL, run);
        else
                (void) sd_event_source_set_description(run->defer, "sandbox-run-defer");
}

static void sandbox_run_on_cleanup(Cleanup *c, int error, void *userdata) {
        SandboxRun *run = userdata;

        run->cleanup = NULL;
        run->result.cleanup_confirmed = error >= 0;
        run->result.cleanup_usec = now(CLOCK_MONOTONIC) - run->t_cleanup;
        run->state = SANDBOX_RUN_REPORTING;
        sandbox_run_report_later(run);
}

static bool pid_file_exists(const SandboxRun *run) {
        _cleanup_free_ char *p = NULL;

        return asprintf(&p, "%s/" RUNTIME_PID_FILE, run->bundle) >= 0 && access(p, F_OK) == 0;
}

/* Read what the container's init said on the status pipe so far (it is
 * non-blocking): "<exit code>\n" or "-<signal>\n" when the code ended, then
 * "copied\n" once /out is copied out. Returns the end of its first line,
 * NULL while the code has not ended. */
static const char *run_read_init_pipe(SandboxRun *run) {
        while (run->status_fd >= 0 && run->status_len < sizeof run->status_buf - 1) {
                ssize_t k = read(
                        run->status_fd,
                        run->status_buf + run->status_len,
                        sizeof run->status_buf - 1 - run->status_len);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                run->status_len += (size_t) k;
        }
        run->status_buf[run->status_len] = 0;
        return memchr(run->status_buf, '\n', run->status_len);
}

/* Whether the init reported the code's end (it may still be copying /out). */
static bool run_code_ended(SandboxRun *run) {
        return run_read_init_pipe(run);
}

/* The code's end as the init reported it: the exit code, or minus the
 * signal. */
static bool read_init_status(SandboxRun *run, int *ret) {
        char buf[16];
        const char *nl;
        uint64_t v;
        size_t n;
        bool neg;

        nl = run_read_init_pipe(run);
        if (!nl)
                return false;
        n = (size_t) (nl - run->status_buf);
        if (n == 0 || n >= sizeof buf)
                return false;
        memcpy(buf, run->status_buf, n);
        buf[n] = 0;
        neg = buf[0] == '-';
        if (parse_uint64_range(buf + neg, neg ? 1 : 0, neg ? 64 : 255, &v) < 0)
                return false;
        *ret = neg ? -(int) v : (int) v;
        return true;
}

/* Whether the init copied /out out whole (into out-next). */
static bool run_init_copied_out(SandboxRun *run) {
        const char *nl = run_read_init_pipe(run);
        return nl && streq(nl + 1, "copied\n");
}

/* The runtime and its pipes are done (or given up on): fill the result and
 * clean up. */
static void run_finish(SandboxRun *run) {
        SandboxResult *res = &run->result;
        bool killed = run->state == SANDBOX_RUN_STOP_KILL;
        int init_status, r;
        bool copied, out_lost;

        if (run->state >= SANDBOX_RUN_CLEANING)
                return;
        run->state = SANDBOX_RUN_CLEANING;
        run->t_end = now(CLOCK_MONOTONIC);
        run->timer = sd_event_source_disable_unref(run->timer);
        run->out_src = sd_event_source_disable_unref(run->out_src);
        run->err_src = sd_event_source_disable_unref(run->err_src);

        res->timed_out = run->timed_out;
        res->cancelled = run->cancelled;
        res->run_usec = run->t_end - run->t_start;
        if (run->error >= 0 && run->exited) {
                if (WIFSIGNALED(run->status)) {
                        res->signal = signal_name(WTERMSIG(run->status));
                } else if (WIFEXITED(run->status)) {
                        int code = WEXITSTATUS(run->status);
                        if (!pid_file_exists(run)) {
                                /* The container was never created: the
                                 * runtime failed, not the code. */
                                _cleanup_free_ char *msg = NULL;
                                log_error(
                                        "%s could not start the container %s (exit %d).",
                                        run->sandbox->runtime,
                                        run->id,
                                        code);
                                if (output_buffer_render(&run->err, &msg, NULL) >= 0)
                                        log_error("Runtime said: %.400s", msg);
                                run->error = -EIO;
                        } else if (read_init_status(run, &init_status)) {
                                /* The code's own end, from the container's
                                 * init: exit code, or minus the signal. */
                                if (init_status >= 0) {
                                        res->has_exit_code = true;
                                        res->exit_code = init_status;
                                } else
                                        res->signal = signal_name(-init_status);
                        } else if (code > 128 && code < 128 + 65) {
                                /* No report (the init itself was killed):
                                 * the runtime's 128 + signal. */
                                res->signal = signal_name(code - 128);
                        } else {
                                res->has_exit_code = true;
                                res->exit_code = code;
                        }
                }
        } else if (run->error >= 0 && (run->timed_out || run->cancelled))
                res->signal = "SIGKILL";
        if (run->timed_out && !res->signal && !res->has_exit_code)
                res->signal = "SIGKILL";

        copied = run->query && run_init_copied_out(run);
        out_lost = run->query && !copied && run->error >= 0 && pid_file_exists(run);
        if (out_lost) {
                /* Said to the code's reader too, after what it wrote. */
                static const char note[] =
                        "[sandbox: the container was killed; what this run wrote to /out is lost]\n";
                output_buffer_append(&run->err, note, strlen(note));
        }
        res->stdout_bytes = run->out.total;
        res->stderr_bytes = run->err.total;
        if (output_buffer_render(&run->out, &res->stdout_text, &res->stdout_size) < 0 ||
            output_buffer_render(&run->err, &res->stderr_text, &res->stderr_size) < 0)
                log_oom();
        if (run->query) {
                /* What the run left in /out is the query's only if its init
                 * copied all of it; otherwise /out stays as before the run. */
                if (copied) {
                        r = sandbox_workdir_take_out_next(run->query);
                        if (r < 0)
                                log_error_errno(r, "Run %s: cannot keep the files it left in /out", run->id);
                } else if (out_lost)
                        log_warning(
                                "Run %s: its /out was not copied out (the container was killed%s); the query's "
                                "/out stays as it was before the run.",
                                run->id,
                                killed ? " after it did not stop in time" : "");
                (void) sandbox_rm_rf(run->query->dir_fd, SANDBOX_OUT_NEXT_DIR);
                (void) list_out(run->query->out_fd, res);
        }

        run->t_cleanup = now(CLOCK_MONOTONIC);
        r = sandbox_cleanup_start(
                run->sandbox,
                run->id,
                run->query ? run->query->id : NULL,
                sandbox_run_on_cleanup,
                run,
                &run->cleanup);
        if (r < 0) {
                /* Not even started: treat as unconfirmed, report. */
                res->cleanup_confirmed = false;
                run->state = SANDBOX_RUN_REPORTING;
                sandbox_run_report_later(run);
        }
}

static void run_advance(SandboxRun *run) {
        if (run->state == SANDBOX_RUN_STARTING || run->state >= SANDBOX_RUN_CLEANING)
                return;
        if (run->exited && run->out_fd < 0 && run->err_fd < 0)
                run_finish(run);
}

static int sandbox_run_on_output(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        SandboxRun *run = userdata;
        bool is_out = fd == run->out_fd;
        uint8_t buf[65536];

        for (int i = 0; i < 16; i++) {
                ssize_t k = read(fd, buf, sizeof buf);

                if (k > 0) {
                        output_buffer_append(is_out ? &run->out : &run->err, buf, (size_t) k);
                        continue;
                }
                if (k < 0 && (errno == EAGAIN || errno == EINTR))
                        return 0;
                /* EOF or an error: this stream is done. */
                if (is_out) {
                        run->out_src = sd_event_source_disable_unref(run->out_src);
                        (void) close(run->out_fd);
                        run->out_fd = -1;
                } else {
                        run->err_src = sd_event_source_disable_unref(run->err_src);
                        (void) close(run->err_fd);
                        run->err_fd = -1;
                }
                run_advance(run);
                return 0;
        }
        return 0;
}

static int sandbox_run_on_timer(sd_event_source *src, uint64_t usec, void *userdata);

/* (Re)arm the run's one timer, usec from now. */
static void sandbox_run_set_timer(SandboxRun *run, uint64_t usec) {
        run->timer = sd_event_source_disable_unref(run->timer);
        if (sd_event_add_time_relative(
                    run->sandbox->event,
                    &run->timer,
                    CLOCK_MONOTONIC,
                    usec,
                    SANDBOX_TIMER_ACCURACY_USEC,
                    sandbox_run_on_timer,
                    run) >= 0)
                (void) sd_event_source_set_description(run->timer, "sandbox-timer");
}

static void sandbox_run_on_killed(ScopeOp *op, int error, void *userdata) {
        SandboxRun *run = userdata;

        assert(op == run->op);
        run->op = NULL;
        if (error < 0 && error != -ENOENT)
                log_warning_errno(error, "KillUnit(%s) failed", run->scope);
}

/* RUNNING or STOP_INIT -> STOP_KILL: kill every process of the scope (the
 * runtime and the container): SIGKILL, as Python as PID 1 ignores SIGTERM.
 * If the runtime still has not ended after the grace, go on to cleanup,
 * whose stop kills what is left. */
static void run_kill(SandboxRun *run) {
        int r;

        if (!IN_SET(run->state, SANDBOX_RUN_RUNNING, SANDBOX_RUN_STOP_INIT))
                return;
        run->state = SANDBOX_RUN_STOP_KILL;
        scope_op_cancel(run->op);
        run->op = NULL;
        r = scope_kill(run->sandbox->scopes, run->scope, sandbox_run_on_killed, run, &run->op);
        if (r < 0) {
                log_warning_errno(r, "Cannot kill %s through its scope; killing the runtime", run->scope);
                if (run->pid > 0 && !run->exited)
                        (void) kill(run->pid, SIGKILL);
        }
        sandbox_run_set_timer(run, SANDBOX_KILL_GRACE_USEC);
}

static int run_read_init_pid(SandboxRun *run, pid_t *ret) {
        _cleanup_free_ char *p = NULL;
        _cleanup_close_ int fd = -1;
        char buf[32];
        uint64_t v;
        ssize_t k;
        int r;

        if (asprintf(&p, "%s/" RUNTIME_PID_FILE, run->bundle) < 0)
                return -ENOMEM;
        fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return negative_errno();
        k = read(fd, buf, sizeof buf - 1);
        if (k <= 0)
                return k < 0 ? negative_errno() : -ENODATA;
        buf[k] = 0;
        buf[strcspn(buf, "\n")] = 0;
        r = parse_uint64_range(buf, 2, INT32_MAX, &v);
        if (r < 0)
                return r;
        *ret = (pid_t) v;
        return 0;
}

/* RUNNING -> STOP_INIT: stop the code but keep /out: SIGUSR1 to the
 * container's init (its host pid from the runtime's --pid-file), which
 * kills every other process of the container, reports, copies /out out and
 * exits. If the init cannot be signalled, or has not ended after the
 * grace, run_kill(). Only while RUNNING: an exited runtime's init is gone
 * (its pid may be another's), and it is told once. */
static void run_stop(SandboxRun *run) {
        pid_t pid;
        int r;

        if (run->state != SANDBOX_RUN_RUNNING)
                return;
        run->state = SANDBOX_RUN_STOP_INIT;
        r = run_read_init_pid(run, &pid);
        if (r >= 0 && TEST_FAULT(run->sandbox->test_deaf_init))
                log_warning("Test fault: run %s: the container's init is not told to stop.", run->id);
        else if (r >= 0 && kill(pid, SIGUSR1) < 0)
                r = negative_errno();
        if (r < 0) {
                log_info_errno(r, "Run %s: cannot signal the container's init, killing its scope", run->id);
                run_kill(run);
                return;
        }
        sandbox_run_set_timer(run, SANDBOX_STOP_GRACE_USEC);
}

static int sandbox_run_on_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        SandboxRun *run = userdata;

        run->timer = sd_event_source_disable_unref(run->timer);
        switch (run->state) {
        case SANDBOX_RUN_RUNNING:
                if (run_code_ended(run)) {
                        /* Not a timeout of the code: its init is copying
                         * /out. It gets the grace, then the kill. */
                        log_info(
                                "Run %s: the code has ended, /out is still being copied at the time limit.",
                                run->id);
                        run->state = SANDBOX_RUN_STOP_INIT;
                        sandbox_run_set_timer(run, SANDBOX_STOP_GRACE_USEC);
                        return 0;
                }
                log_info("Run %s reached the time limit: stopping it.", run->id);
                run->timed_out = true;
                run_stop(run);
                return 0;
        case SANDBOX_RUN_STOP_INIT:
                log_warning(
                        "Run %s: the container did not end %" PRIu64
                        " s after it was told to stop; killing its scope.",
                        run->id,
                        SANDBOX_STOP_GRACE_USEC / USEC_PER_SEC);
                run_kill(run);
                return 0;
        case SANDBOX_RUN_STOP_KILL:
        case SANDBOX_RUN_DRAIN:
                /* The grace after the kill, or after the runtime's exit, is over. */
                log_warning("Run %s: output still open after the runtime ended; closing it.", run->id);
                run_finish(run);
                return 0;
        default:
                return 0;
        }
}

static void sandbox_run_on_exit(pid_t pid, int status, void *userdata) {
        SandboxRun *run = userdata;

        run->watch = NULL;
        run->exited = true;
        run->status = status;
        if (run->state == SANDBOX_RUN_STARTING) {
                /* The held child gave up (the hold pipe was closed): the
                 * scope callback takes it from here. */
                return;
        }
        if ((run->out_fd >= 0 || run->err_fd >= 0) &&
            IN_SET(run->state, SANDBOX_RUN_RUNNING, SANDBOX_RUN_STOP_INIT)) {
                /* Give the pipes a moment to drain to EOF (after a kill,
                 * the kill's grace stays the limit). */
                run->state = SANDBOX_RUN_DRAIN;
                sandbox_run_set_timer(run, SANDBOX_PIPE_GRACE_USEC);
        }
        run_advance(run);
}

/* STARTING -> cleanup: the held runtime was not let go (no scope, or it
 * could not be released), so no code ran; error is the run's. Closing the
 * hold pipe makes the child exit without executing anything (one that is
 * gone already is not killed). */
static void run_start_failed(SandboxRun *run, int error) {
        run->error = error;
        (void) close(TAKE_FD(run->hold_fd));
        run->state = SANDBOX_RUN_RUNNING;
        if (run->pid > 0 && !run->exited)
                (void) kill(run->pid, SIGKILL);
        run_finish(run);
}

static void sandbox_run_on_scope_started(ScopeOp *op, int error, void *userdata) {
        SandboxRun *run = userdata;
        const Config *c = run->sandbox->config;

        assert(op == run->op);
        run->op = NULL;
        if (error < 0) {
                log_error_errno(error, "Cannot put the runtime of %s into its scope", run->id);
                run_start_failed(run, error);
                return;
        }
        /* In the scope: let it execute. (A child that is gone already
         * cannot be released: no write to a pipe without a reader.) */
        if (run->exited || write(run->hold_fd, "x", 1) != 1) {
                run_start_failed(run, -EIO);
                return;
        }
        (void) close(TAKE_FD(run->hold_fd));
        run->state = SANDBOX_RUN_RUNNING;
        run->t_start = now(CLOCK_MONOTONIC);
        sandbox_run_set_timer(run, c->sandbox_timeout_seconds * USEC_PER_SEC);
        if (run->cancelled)
                run_stop(run);
        run_advance(run);
}

void sandbox_run_cancel(SandboxRun *run) {
        if (run->cancelled || run->state >= SANDBOX_RUN_CLEANING)
                return;
        run->cancelled = true;
        /* STARTING: stopped as soon as the scope is there; STOP_*, DRAIN:
         * ending already. */
        run_stop(run);
}

/* A pipe whose read end is ours (non-blocking, close-on-exec) and whose
 * write end goes to the child. */
static int make_pipe(int *ret_ours, int *ret_theirs, bool ours_is_read) {
        int p[2];

        if (pipe2(p, O_CLOEXEC) < 0)
                return negative_errno();
        if (ours_is_read) {
                (void) fcntl(p[0], F_SETFL, O_NONBLOCK);
                *ret_ours = p[0];
                *ret_theirs = p[1];
        } else {
                *ret_ours = p[1];
                *ret_theirs = p[0];
        }
        return 0;
}

/* The program on a pipe, written whole before the child starts: a pipe
 * holds 64 KiB by default, raised to fit when needed. */
static int make_code_pipe(const char *code, size_t len, int *ret_read) {
        _cleanup_close_ int r_end = -1, w_end = -1;
        size_t done = 0;
        int p[2];

        if (pipe2(p, O_CLOEXEC) < 0)
                return negative_errno();
        r_end = p[0];
        w_end = p[1];
        if (len >= 65536)
                (void) fcntl(w_end, F_SETPIPE_SZ, 131072);
        (void) fcntl(w_end, F_SETFL, O_NONBLOCK);
        while (done < len) {
                ssize_t k = write(w_end, code + done, len - done);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return errno == EAGAIN ? -E2BIG : negative_errno();
                }
                done += (size_t) k;
        }
        *ret_read = TAKE_FD(r_end);
        return 0;
}

/* A start that fails after the spawn: the child waits on the hold pipe and
 * never executes; closing it ends the child. Returns error. */
static int sandbox_run_start_abandon(SandboxRun *run, int error) {
        (void) close(TAKE_FD(run->hold_fd));
        return error;
}

/* A new run of query q, its output buffers and its names (the scope, the
 * runtime's id, the bundle's directory); counts the query's run. */
static int sandbox_run_new(SandboxQuery *q, SandboxRunDone done, void *userdata, SandboxRun **ret) {
        Sandbox *s = q->sandbox;
        const Config *c = s->config;
        _cleanup_(sandbox_run_freep) SandboxRun *run = NULL;
        size_t cap;
        int r;

        run = calloc(1, sizeof *run);
        if (!run)
                return -ENOMEM;
        *run = (SandboxRun){
                .sandbox = s,
                .query = q,
                .hold_fd = -1,
                .status_fd = -1,
                .out_fd = -1,
                .err_fd = -1,
                .done = done,
                .userdata = userdata,
        };
        cap = (size_t) c->sandbox_output_max_bytes;
        r = output_buffer_init(&run->out, cap);
        if (r < 0)
                return log_warning_errno(
                        r, "Sandbox run of query %s: the stdout buffer could not be made", q->id);
        r = output_buffer_init(&run->err, cap);
        if (r < 0)
                return log_warning_errno(
                        r, "Sandbox run of query %s: the stderr buffer could not be made", q->id);
        r = scope_name(q->id, q->runs + 1, &run->scope);
        if (r < 0)
                return log_warning_errno(r, "Sandbox run of query %s: no scope name", q->id);
        run->id = strndup(run->scope, strlen(run->scope) - STRLEN(".scope"));
        if (!run->id || asprintf(&run->bundle, "%s/bundle-%u", q->dir, q->runs + 1) < 0) {
                run->bundle = NULL;
                return -ENOMEM;
        }
        q->runs++;
        *ret = TAKE_PTR(run);
        return 0;
}

/* The run's OCI bundle: a fresh directory and its config.json. */
static int sandbox_run_write_bundle(SandboxRun *run) {
        SandboxQuery *q = run->query;
        Sandbox *s = run->sandbox;
        const Config *c = s->config;
        _cleanup_close_ int bundle_fd = -1;
        int r;

        (void) sandbox_rm_rf(AT_FDCWD, run->bundle);
        if (mkdir(run->bundle, 0700) < 0)
                return log_warning_errno(
                        errno, "Sandbox run %s: its bundle directory could not be made", run->id);
        bundle_fd = open(run->bundle, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (bundle_fd < 0)
                return log_warning_errno(
                        errno, "Sandbox run %s: its bundle directory could not be opened", run->id);
        {
                _cleanup_free_ char *data = NULL;
                RuntimeSpec spec = {
                        .rootfs = s->rootfs,
                        .usr = s->default_rootfs ? "/usr" : NULL,
                        .uid = getuid(),
                        .gid = getgid(),
                        .memory_max_bytes = c->sandbox_memory_max_bytes,
                        .tasks_max = c->sandbox_tasks_max,
                        /* A second over the wall-clock limit: a backstop
                         * that does not beat the timeout (whose stop keeps
                         * /out) to a single busy thread. */
                        .cpu_seconds = c->sandbox_timeout_seconds + 1,
                        .file_max_bytes = MAX(c->artifact_max_bytes, RUNTIME_TMP_MAX_BYTES),
                        .tmp_max_bytes = RUNTIME_TMP_MAX_BYTES,
                        .out_max_bytes = c->artifact_max_bytes,
                        .seccomp = true,
                };

                if (asprintf(&data, "%s/data", q->dir) < 0)
                        return -ENOMEM;
                spec.data_dir = data;
                r = runtime_write_bundle(bundle_fd, &spec);
                if (r < 0)
                        return log_warning_errno(r, "Sandbox run %s: its bundle could not be written", run->id);
        }
        return 0;
}

/* The query's out directory, copied into /out before the code (an open
 * file description of its own: the init's reading moves its offset), and
 * the empty directory /out is copied into after it. */
static int sandbox_run_open_out(SandboxRun *run, int *ret_src_fd, int *ret_next_fd) {
        SandboxQuery *q = run->query;
        _cleanup_close_ int src_fd = -1, next_fd = -1;
        int r;

        src_fd = openat(q->dir_fd, SANDBOX_OUT_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (src_fd < 0)
                return log_warning_errno(
                        errno, "Sandbox run %s: %s could not be opened", run->id, SANDBOX_OUT_DIR);
        r = sandbox_rm_rf(q->dir_fd, SANDBOX_OUT_NEXT_DIR);
        if (r < 0)
                return log_warning_errno(
                        r, "Sandbox run %s: the previous %s could not be removed", run->id, SANDBOX_OUT_NEXT_DIR);
        if (mkdirat(q->dir_fd, SANDBOX_OUT_NEXT_DIR, 0700) < 0)
                return log_warning_errno(
                        errno, "Sandbox run %s: %s could not be made", run->id, SANDBOX_OUT_NEXT_DIR);
        next_fd = openat(q->dir_fd, SANDBOX_OUT_NEXT_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (next_fd < 0)
                return log_warning_errno(
                        errno, "Sandbox run %s: %s could not be opened", run->id, SANDBOX_OUT_NEXT_DIR);
        *ret_src_fd = TAKE_FD(src_fd);
        *ret_next_fd = TAKE_FD(next_fd);
        return 0;
}

/* The runtime, forked with the code on stdin and its pipes; it waits on
 * the hold pipe before it executes. */
static int sandbox_run_spawn(SandboxRun *run, const char *code, size_t len, int src_fd, int next_fd) {
        Sandbox *s = run->sandbox;
        _cleanup_close_ int code_fd = -1, out_w = -1, err_w = -1, hold_r = -1, status_w = -1;
        char **argv = NULL;
        int r;

        r = make_code_pipe(code, len, &code_fd);
        if (r < 0)
                return log_warning_errno(r, "Sandbox run %s: the code's pipe could not be made", run->id);
        r = make_pipe(&run->out_fd, &out_w, true);
        if (r < 0)
                return log_warning_errno(r, "Sandbox run %s: the stdout pipe could not be made", run->id);
        r = make_pipe(&run->err_fd, &err_w, true);
        if (r < 0)
                return log_warning_errno(r, "Sandbox run %s: the stderr pipe could not be made", run->id);
        r = make_pipe(&run->hold_fd, &hold_r, false);
        if (r < 0)
                return log_warning_errno(r, "Sandbox run %s: the hold pipe could not be made", run->id);
        r = make_pipe(&run->status_fd, &status_w, true);
        if (r < 0)
                return log_warning_errno(r, "Sandbox run %s: the status pipe could not be made", run->id);
        r = runtime_argv(s->kind, s->runtime, s->state_root, RUNTIME_RUN, run->id, run->bundle, &argv);
        if (r < 0)
                return log_warning_errno(
                        r, "Sandbox run %s: the runtime's command line could not be made", run->id);
        r = runtime_spawn(
                argv,
                &(RuntimeFds){
                        .stdin_fd = code_fd,
                        .stdout_fd = out_w,
                        .stderr_fd = err_w,
                        .status_fd = status_w,
                        .out_src_fd = src_fd,
                        .out_dst_fd = next_fd,
                        .hold_fd = hold_r,
                },
                &run->pid);
        strv_free(argv);
        if (r < 0)
                return log_warning_errno(r, "Sandbox run %s: the runtime could not be spawned", run->id);
        return 0;
}

/* The runtime's pid, its output and its scope watched. A failure closes
 * the hold pipe: the child, which never executes, then ends. */
static int sandbox_run_watch(SandboxRun *run) {
        Sandbox *s = run->sandbox;
        const Config *c = s->config;
        int r;

        r = reaper_watch(s->reaper, run->pid, sandbox_run_on_exit, run, &run->watch);
        if (r < 0)
                return sandbox_run_start_abandon(
                        run,
                        log_warning_errno(
                                r, "Sandbox run %s: the runtime's pid could not be watched", run->id));
        r = sd_event_add_io(s->event, &run->out_src, run->out_fd, EPOLLIN, sandbox_run_on_output, run);
        if (r < 0)
                return sandbox_run_start_abandon(
                        run, log_warning_errno(r, "Sandbox run %s: stdout could not be watched", run->id));
        (void) sd_event_source_set_description(run->out_src, "sandbox-stdout");
        r = sd_event_add_io(s->event, &run->err_src, run->err_fd, EPOLLIN, sandbox_run_on_output, run);
        if (r < 0)
                return sandbox_run_start_abandon(
                        run, log_warning_errno(r, "Sandbox run %s: stderr could not be watched", run->id));
        (void) sd_event_source_set_description(run->err_src, "sandbox-stderr");
        r = scope_start(
                s->scopes,
                run->scope,
                run->pid,
                &(ScopeLimits){
                        .memory_max_bytes = c->sandbox_memory_max_bytes,
                        /* the runtime itself, besides the code */
                        .tasks_max = c->sandbox_tasks_max + 4,
                        .cpu_quota_usec = USEC_PER_SEC,
                },
                sandbox_run_on_scope_started,
                run,
                &run->op);
        if (r < 0)
                return sandbox_run_start_abandon(
                        run, log_warning_errno(r, "Sandbox run %s: its scope could not be started", run->id));
        return 0;
}

int sandbox_run_start(
        SandboxQuery *q, const char *code, size_t len, SandboxRunDone done, void *userdata, SandboxRun **ret) {
        Sandbox *s = q->sandbox;
        _cleanup_close_ int src_fd = -1, next_fd = -1;
        _cleanup_(sandbox_run_freep) SandboxRun *run = NULL;
        int r;

        assert(q);

        if (!sandbox_is_available(s))
                return -EAGAIN;
        if (q->run)
                return -EBUSY;
        if (len > SANDBOX_CODE_MAX_BYTES)
                return -E2BIG;

        r = sandbox_run_new(q, done, userdata, &run);
        if (r < 0)
                return r;
        r = sandbox_run_write_bundle(run);
        if (r < 0)
                return r;
        r = sandbox_run_open_out(run, &src_fd, &next_fd);
        if (r < 0)
                return r;
        r = sandbox_run_spawn(run, code, len, src_fd, next_fd);
        if (r < 0)
                return r;
        r = sandbox_run_watch(run);
        if (r < 0)
                return r;
        run->state = SANDBOX_RUN_STARTING;
        run->t_start = now(CLOCK_MONOTONIC);
        q->run = TAKE_PTR(run);
        if (ret)
                *ret = q->run;
        return 0;
}
