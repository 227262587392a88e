/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <dirent.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "metrics/metrics.h"
#include "sandbox/output.h"
#include "sandbox/reaper.h"
#include "sandbox/runtime.h"
#include "sandbox/sandbox.h"
#include "sandbox/scope.h"
#include "shared/log.h"
#include "shared/json-util.h"
#include "shared/macro.h"
#include "shared/strv.h"
#include "shared/parse-util.h"
#include "store/history.h"


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
#define SANDBOX_RETRY_FIRST_USEC (1 * USEC_PER_SEC)
#define SANDBOX_RETRY_MAX_USEC (30 * USEC_PER_SEC)
/* Names of /out files in a run's result. */
#define SANDBOX_RESULT_FILES_MAX 100
/* The run's timers (0 would be sd-event's default of 250 ms). */
#define SANDBOX_TIMER_ACCURACY_USEC (10 * USEC_PER_MSEC)
/* The query's out directory, and the one a run's init copies /out into. */
#define SANDBOX_OUT_DIR "out"
#define SANDBOX_OUT_NEXT_DIR "out-next"
/* Where the out directory waits during the swap, without renameat2(). */
#define SANDBOX_OUT_OLD_DIR "out-old"

typedef struct Cleanup Cleanup;
typedef void (*CleanupDone)(Cleanup *c, int error);

typedef enum CleanupStep {
        CLEANUP_DELETE, /* runtime delete -f ID */
        CLEANUP_STATE,  /* runtime state ID: must fail */
        CLEANUP_SCOPE,  /* StopUnit, job, GetUnit -> NoSuchUnit */
        CLEANUP_IDLE,   /* waiting for the next attempt, or done */
} CleanupStep;

/* Removing one container and its scope, retried until confirmed. */
struct Cleanup {
        Sandbox *sandbox;
        Cleanup *next;
        SandboxQuery *query; /* NULL for the sweep, or after the query is freed */
        char *id, *scope;
        CleanupStep step;
        pid_t pid;
        ReaperWatch *watch;
        ScopeOp *op;
        unsigned attempts;
        usec_t backoff;
        sd_event_source *retry;
        bool pending;     /* an attempt failed: counted in sandbox->n_pending */
        CleanupDone done; /* the first attempt's outcome (the run or the sweep) */
        void *userdata;
};

typedef enum RunState {
        RUN_STARTING, /* the runtime is held, the scope is being made */
        RUN_RUNNING,
        RUN_CLEANING,
        RUN_REPORTING,
} RunState;

struct SandboxRun {
        Sandbox *sandbox;
        SandboxQuery *query;
        RunState state;
        char *id, *scope, *bundle;
        pid_t pid;
        ReaperWatch *watch;
        bool exited;
        int status;
        int hold_fd, out_fd, err_fd;
        int status_fd;       /* the container init's report of the code's end */
        char status_buf[32]; /* what it said so far: "<code>\n" and then "copied\n" */
        size_t status_len;
        sd_event_source *out_src, *err_src;
        OutputBuffer out, err;
        ScopeOp *op;
        sd_event_source *timer;
        sd_event_source *report;
        bool timed_out, cancelled, stop_sent, kill_sent;
        int error; /* the first error: nothing could run */
        usec_t t_start, t_end, t_cleanup;
        Cleanup *cleanup;
        SandboxResult result;
        SandboxRunDone done;
        void *userdata;
};

struct SandboxQuery {
        Sandbox *sandbox;
        SandboxQuery *next;
        char *id;
        char *dir; /* <work_dir>/<id> */
        int dir_fd, data_fd, out_fd;
        unsigned runs;
        SandboxRun *run;
        unsigned unconfirmed; /* this query's cleanups not confirmed yet */
        SandboxPage *pages;
        size_t n_pages;
        SandboxQueryConfirmedHandler confirmed_handler;
        void *confirmed_userdata;
};

struct Sandbox {
        sd_event *event;
        const Config *config;
        Reaper *reaper;
        ScopeManager *scopes;
        char *runtime;
        RuntimeKind kind;
        char *work_dir, *state_root, *rootfs;
        bool default_rootfs;
        char static_reason[384]; /* runtime or rootfs missing: never available */
        char reason[512];
        bool sweep_started, sweep_done;
        unsigned sweep_outstanding;
        Cleanup *cleanups;
        unsigned n_pending;
        SandboxQuery *queries;
        SandboxStateHandler state_handler;
        void *state_userdata;
        bool last_available, last_pending;
        bool test_deaf_init;
};

/* ---- state changes ---- */

static void sandbox_notify(Sandbox *s) {
        bool a = sandbox_is_available(s), p = sandbox_cleanup_pending(s);

        if (a == s->last_available && p == s->last_pending)
                return;
        s->last_available = a;
        s->last_pending = p;
        if (s->state_handler)
                s->state_handler(s, s->state_userdata);
}

bool sandbox_is_available(const Sandbox *s) {
        assert(s);
        return !s->static_reason[0] && scope_manager_is_ready(s->scopes) && s->sweep_done;
}

const char *sandbox_unavailable_reason(const Sandbox *s) {
        assert(s);

        if (s->static_reason[0])
                return s->static_reason;
        if (!scope_manager_is_ready(s->scopes))
                return scope_manager_reason(s->scopes);
        if (!s->sweep_done)
                return "the start-up sweep of leftover containers is not done yet";
        return "";
}

bool sandbox_cleanup_pending(const Sandbox *s) {
        assert(s);
        return s->n_pending > 0;
}

void sandbox_set_state_handler(Sandbox *s, SandboxStateHandler handler, void *userdata) {
        assert(s);

        s->state_handler = handler;
        s->state_userdata = userdata;
}

void sandbox_set_test_unconfirmable(Sandbox *s, unsigned n) {
        assert(s);
        scope_manager_set_test_unconfirmable(s->scopes, n);
}

void sandbox_set_test_deaf_init(Sandbox *s, bool deaf) {
        assert(s);
        s->test_deaf_init = deaf;
}

/* ---- cleanup: delete, state, scope ---- */

static void cleanup_step(Cleanup *c);

static Cleanup *cleanup_free(Cleanup *c) {
        if (!c)
                return NULL;
        for (Cleanup **p = &c->sandbox->cleanups; *p; p = &(*p)->next)
                if (*p == c) {
                        *p = c->next;
                        break;
                }
        reaper_unwatch(c->watch);
        scope_op_cancel(c->op);
        sd_event_source_disable_unref(c->retry);
        free(c->id);
        free(c->scope);
        free(c);
        return NULL;
}

static int sandbox_cleanup_on_retry(sd_event_source *src, uint64_t usec, void *userdata) {
        Cleanup *c = userdata;

        c->retry = sd_event_source_disable_unref(c->retry);
        c->step = CLEANUP_DELETE;
        cleanup_step(c);
        return 0;
}

/* The outcome of one attempt. */
static void cleanup_attempt_done(Cleanup *c, int error) {
        Sandbox *s = c->sandbox;
        CleanupDone done = TAKE_PTR(c->done);

        c->step = CLEANUP_IDLE;
        c->attempts++;
        if (error >= 0) {
                if (c->pending) {
                        SandboxQuery *q = c->query;

                        log_notice("Cleanup of %s confirmed after %u attempts.", c->scope, c->attempts);
                        s->n_pending--;
                        if (q && --q->unconfirmed == 0 && q->confirmed_handler)
                                q->confirmed_handler(q, q->confirmed_userdata);
                }
                if (done)
                        done(c, 0);
                cleanup_free(c);
                sandbox_notify(s);
                return;
        }

        if (!c->pending) {
                c->pending = true;
                s->n_pending++;
                if (c->query)
                        c->query->unconfirmed++;
                c->backoff = SANDBOX_RETRY_FIRST_USEC;
        } else
                c->backoff = MIN(c->backoff * 2, SANDBOX_RETRY_MAX_USEC);
        log_error_errno(
                error,
                "Cleanup of %s not confirmed (attempt %u); retrying in %" PRIu64 " s",
                c->scope,
                c->attempts,
                c->backoff / USEC_PER_SEC);
        if (sd_event_add_time_relative(
                    s->event, &c->retry, CLOCK_MONOTONIC, c->backoff, 0, sandbox_cleanup_on_retry, c) < 0)
                log_error("Cannot schedule the next cleanup attempt of %s.", c->scope);
        else
                (void) sd_event_source_set_description(c->retry, "sandbox-cleanup-retry");
        if (done)
                done(c, error);
        sandbox_notify(s);
}

static void sandbox_cleanup_on_scope_stopped(int error, void *userdata) {
        Cleanup *c = userdata;

        c->op = NULL;
        if (error < 0)
                log_warning_errno(error, "The scope %s is not confirmed gone", c->scope);
        cleanup_attempt_done(c, error);
}

static void sandbox_cleanup_on_exit(pid_t pid, int status, void *userdata) {
        Cleanup *c = userdata;
        bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        int r;

        c->watch = NULL;
        c->pid = 0;
        switch (c->step) {
        case CLEANUP_DELETE:
                /* delete -f exits 0 for a missing id too: the state check
                 * below is the confirmation, not this. */
                if (!ok)
                        log_warning("%s delete -f %s failed (status %d).", c->sandbox->runtime, c->id, status);
                c->step = CLEANUP_STATE;
                cleanup_step(c);
                return;
        case CLEANUP_STATE:
                if (ok) {
                        log_warning("The container %s still exists after delete -f.", c->id);
                        cleanup_attempt_done(c, -EBUSY);
                        return;
                }
                c->step = CLEANUP_SCOPE;
                r = scope_stop(c->sandbox->scopes, c->scope, sandbox_cleanup_on_scope_stopped, c, &c->op);
                if (r < 0)
                        cleanup_attempt_done(c, r);
                return;
        default:
                return;
        }
}

static void cleanup_step(Cleanup *c) {
        Sandbox *s = c->sandbox;
        char **argv = NULL;
        int r;

        r = runtime_argv(
                s->kind,
                s->runtime,
                s->state_root,
                c->step == CLEANUP_DELETE ? RUNTIME_DELETE : RUNTIME_STATE,
                c->id,
                NULL,
                &argv);
        if (r >= 0)
                r = runtime_spawn(argv, NULL, &c->pid);
        strv_free(argv);
        if (r >= 0)
                r = reaper_watch(s->reaper, c->pid, sandbox_cleanup_on_exit, c, &c->watch);
        if (r < 0)
                cleanup_attempt_done(c, r);
}

/* Start cleaning container id and its scope (id + ".scope"). */
static int cleanup_start(
        Sandbox *s, const char *id, SandboxQuery *q, CleanupDone done, void *userdata, Cleanup **ret) {
        Cleanup *c = calloc(1, sizeof *c);

        if (!c)
                return -ENOMEM;
        *c = (Cleanup){ .sandbox = s, .query = q, .done = done, .userdata = userdata, .next = s->cleanups };
        s->cleanups = c;
        c->id = strdup(id);
        if (!c->id || asprintf(&c->scope, "%s.scope", id) < 0) {
                c->scope = NULL;
                cleanup_free(c);
                return -ENOMEM;
        }
        c->step = CLEANUP_DELETE;
        if (ret)
                *ret = c;
        cleanup_step(c);
        return 0;
}

/* ---- the start-up sweep ---- */

static void sweep_check_done(Sandbox *s) {
        if (s->sweep_outstanding > 0 || s->sweep_done)
                return;
        s->sweep_done = true;
        log_info("Sandbox start-up sweep done.");
        sandbox_notify(s);
}

static void sweep_on_cleanup(Cleanup *c, int error) {
        Sandbox *s = c->sandbox;

        if (error >= 0)
                log_info("Removed the leftover container %s and its scope.", c->id);
        s->sweep_outstanding--;
        sweep_check_done(s);
}

static void sweep_id(Sandbox *s, const char *id) {
        /* One cleanup per id, even if listed by both the manager and the
         * runtime. */
        for (Cleanup *c = s->cleanups; c; c = c->next)
                if (streq(c->id, id))
                        return;
        s->sweep_outstanding++;
        if (cleanup_start(s, id, NULL, sweep_on_cleanup, NULL, NULL) < 0)
                s->sweep_outstanding--;
}

static void sandbox_sweep_on_scopes(int error, char **names, void *userdata) {
        Sandbox *s = userdata;

        if (error < 0)
                log_warning_errno(error, "Cannot list leftover sandbox scopes");
        for (char **n = names; n && *n; n++) {
                size_t len = strlen(*n);
                _cleanup_free_ char *id = NULL;

                if (len <= STRLEN(".scope") || !streq(*n + len - STRLEN(".scope"), ".scope"))
                        continue;
                id = strndup(*n, len - STRLEN(".scope"));
                if (id)
                        sweep_id(s, id);
        }
        s->sweep_outstanding--;
        sweep_check_done(s);
}

typedef struct SweepList {
        Sandbox *sandbox;
        int fd; /* a memfd with the runtime's stdout */
} SweepList;

static void sandbox_sweep_on_list_exit(pid_t pid, int status, void *userdata) {
        SweepList *l = userdata;
        Sandbox *s = l->sandbox;
        char buf[65536];
        ssize_t k = pread(l->fd, buf, sizeof buf - 1, 0);

        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                log_warning("Listing the runtime's leftover containers failed (status %d).", status);
        if (k > 0) {
                char *save = NULL;
                buf[k] = 0;
                for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
                        if (strneq(line, SCOPE_PREFIX, STRLEN(SCOPE_PREFIX)))
                                sweep_id(s, line);
        }
        (void) close(l->fd);
        free(l);
        s->sweep_outstanding--;
        sweep_check_done(s);
}

/* Remove every leftover query directory (not the rootfs or the runtime's
 * state). */
static void sweep_work_dir(Sandbox *s) {
        _cleanup_close_ int fd = open(s->work_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d;
        struct dirent *de;

        if (fd < 0)
                return;
        d = fdopendir(fcntl(fd, F_DUPFD_CLOEXEC, 3));
        if (!d)
                return;
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, "..") && !streq(de->d_name, "rootfs") &&
                    !streq(de->d_name, "runtime")) {
                        int r = sandbox_rm_rf(fd, de->d_name);
                        if (r < 0)
                                log_warning_errno(
                                        r, "Cannot remove the leftover directory %s/%s", s->work_dir, de->d_name);
                        else
                                log_info("Removed the leftover query directory %s.", de->d_name);
                }
        closedir(d);
}

static void sweep_start(Sandbox *s) {
        SweepList *l;
        char **argv = NULL;
        RuntimeFds fds = RUNTIME_FDS_NONE;
        pid_t pid;
        int r;

        s->sweep_started = true;
        sweep_work_dir(s);
        s->sweep_outstanding = 1; /* held until both listings are in */

        s->sweep_outstanding++;
        r = scope_list(s->scopes, SCOPE_PREFIX "*", sandbox_sweep_on_scopes, s, NULL);
        if (r < 0) {
                log_warning_errno(r, "Cannot list leftover sandbox scopes");
                s->sweep_outstanding--;
        }

        l = calloc(1, sizeof *l);
        if (l) {
                l->sandbox = s;
                l->fd = memfd_create("runtime-list", MFD_CLOEXEC);
        }
        if (l)
                fds.stdout_fd = l->fd;
        if (l && l->fd >= 0 &&
            runtime_argv(s->kind, s->runtime, s->state_root, RUNTIME_LIST, NULL, NULL, &argv) >= 0 &&
            runtime_spawn(argv, &fds, &pid) >= 0 &&
            reaper_watch(s->reaper, pid, sandbox_sweep_on_list_exit, l, NULL) >= 0) {
                s->sweep_outstanding++;
                l = NULL;
        } else
                log_warning("Cannot list the runtime's leftover containers.");
        strv_free(argv);
        if (l) {
                if (l->fd >= 0)
                        (void) close(l->fd);
                free(l);
        }
        s->sweep_outstanding--;
        sweep_check_done(s);
}

/* Say once which limits hold here (README: cgroup v1 versus v2): the
 * scope's MemoryMax= and TasksMax= only where the user manager has the
 * controllers delegated; otherwise only the rlimits. */
static void sandbox_log_limits(void) {
        _cleanup_free_ char *path = NULL;
        _cleanup_fclose_ FILE *f = NULL;
        char line[512] = "";
        unsigned uid = (unsigned) getuid();

        if (asprintf(
                    &path,
                    "/sys/fs/cgroup/user.slice/user-%u.slice/user@%u.service/cgroup.subtree_control",
                    uid,
                    uid) < 0)
                return;
        f = fopen(path, "re");
        if (f && !fgets(line, sizeof line, f))
                line[0] = 0;
        if (strstr(line, "memory") && strstr(line, "pids"))
                log_info(
                        "Sandbox limits: MemoryMax= and TasksMax= hold for each run's scope (cgroup v2 controllers "
                        "delegated: %.*s), besides the rlimits.",
                        (int) strcspn(line, "\n"),
                        line);
        else
                log_notice(
                        "Sandbox limits: no memory and pids controllers are delegated to the user manager (cgroup "
                        "v1 or hybrid, or none delegated): memory is limited per process (RLIMIT_DATA), tasks by "
                        "RLIMIT_NPROC, not per run.");
}

static void sandbox_on_ready(bool ready, const char *reason, void *userdata) {
        Sandbox *s = userdata;

        if (ready) {
                log_info("The user manager answers: sandbox scopes can be made.");
                if (!s->sweep_started && !s->static_reason[0]) {
                        sandbox_log_limits();
                        sweep_start(s);
                }
        } else if (reason && *reason)
                log_warning("Sandbox unavailable: %s.", reason);
        sandbox_notify(s);
}

/* ---- set-up ---- */

static int write_small_file(int dir_fd, const char *name, const char *content) {
        _cleanup_close_ int fd = openat(
                dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        size_t len = strlen(content);

        if (fd < 0)
                return negative_errno();
        return write(fd, content, len) == (ssize_t) len ? 0 : -EIO;
}

/* The default rootfs: a 56 KB skeleton whose /usr is the host's, bound read
 * only (test-environment.md). */
static int make_skeleton(const char *dir) {
        static const char *const dirs[] = { "etc", "usr", "tmp", "data", "out", "proc",
                                            "dev", "sys", "run", "var",  NULL };
        static const char *const links[][2] = {
                { "bin", "usr/bin" },
                { "sbin", "usr/sbin" },
                { "lib", "usr/lib" },
                { "lib64", "usr/lib64" },
        };
        _cleanup_close_ int fd = -1, etc = -1;
        int r;

        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                return negative_errno();
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        for (const char *const *d = dirs; *d; d++)
                if (mkdirat(fd, *d, 0755) < 0 && errno != EEXIST)
                        return negative_errno();
        for (size_t i = 0; i < ELEMENTSOF(links); i++)
                if (symlinkat(links[i][1], fd, links[i][0]) < 0 && errno != EEXIST)
                        return negative_errno();
        etc = openat(fd, "etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (etc < 0)
                return negative_errno();
        r = write_small_file(
                etc,
                "passwd",
                "root:x:0:0:root:/tmp:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n");
        if (r >= 0)
                r = write_small_file(etc, "group", "root:x:0:\nnogroup:x:65534:\n");
        if (r >= 0)
                r = write_small_file(etc, "hosts", "127.0.0.1 localhost sandbox\n::1 localhost\n");
        if (r >= 0)
                r = write_small_file(etc, "hostname", "sandbox\n");
        if (r >= 0)
                r = write_small_file(etc, "resolv.conf", "");
        return r;
}

static int mkdir_p(const char *path, mode_t mode) {
        _cleanup_free_ char *p = strdup(path);

        if (!p)
                return -ENOMEM;
        for (char *c = p + 1; *c; c++)
                if (*c == '/') {
                        *c = 0;
                        if (mkdir(p, mode) < 0 && errno != EEXIST)
                                return negative_errno();
                        *c = '/';
                }
        if (mkdir(p, mode) < 0 && errno != EEXIST)
                return negative_errno();
        return 0;
}

static void sandbox_check_static(Sandbox *s) {
        const Config *c = s->config;
        _cleanup_free_ char *python = NULL;
        int r;

        r = runtime_find(c->sandbox_runtime ? c->sandbox_runtime : "crun", &s->runtime);
        if (r < 0) {
                snprintf(
                        s->static_reason,
                        sizeof s->static_reason,
                        "the OCI runtime \"%s\" was not found",
                        c->sandbox_runtime ? c->sandbox_runtime : "crun");
                return;
        }
        s->kind = runtime_kind_from_path(s->runtime);

        r = mkdir_p(s->work_dir, 0700);
        if (r >= 0)
                r = mkdir_p(s->state_root, 0700);
        if (r < 0) {
                snprintf(
                        s->static_reason,
                        sizeof s->static_reason,
                        "cannot create %s or %s: %s",
                        s->work_dir,
                        s->state_root,
                        strerror(-r));
                return;
        }

        if (c->sandbox_rootfs && *c->sandbox_rootfs) {
                s->rootfs = strdup(c->sandbox_rootfs);
                if (!s->rootfs || asprintf(&python, "%s/usr/bin/python3", c->sandbox_rootfs) < 0) {
                        python = NULL;
                        snprintf(s->static_reason, sizeof s->static_reason, "out of memory");
                        return;
                }
                for (const char *const *m = (const char *const[]){ "proc", "dev", "tmp", "data", "out", NULL };
                     *m;
                     m++) {
                        _cleanup_free_ char *p = NULL;
                        struct stat st;
                        if (asprintf(&p, "%s/%s", c->sandbox_rootfs, *m) < 0 || stat(p, &st) < 0 ||
                            !S_ISDIR(st.st_mode)) {
                                snprintf(
                                        s->static_reason,
                                        sizeof s->static_reason,
                                        "the rootfs %s has no /%s directory",
                                        c->sandbox_rootfs,
                                        *m);
                                return;
                        }
                }
        } else {
                s->default_rootfs = true;
                if (asprintf(&s->rootfs, "%s/rootfs", s->work_dir) < 0) {
                        s->rootfs = NULL;
                        snprintf(s->static_reason, sizeof s->static_reason, "out of memory");
                        return;
                }
                r = make_skeleton(s->rootfs);
                if (r < 0) {
                        snprintf(
                                s->static_reason,
                                sizeof s->static_reason,
                                "cannot create the rootfs skeleton %s: %s",
                                s->rootfs,
                                strerror(-r));
                        return;
                }
                python = strdup("/usr/bin/python3");
        }
        if (!python || access(python, X_OK) < 0)
                snprintf(
                        s->static_reason,
                        sizeof s->static_reason,
                        "the rootfs has no python3 (%s)",
                        python ? python : "?");
}

int sandbox_new(sd_event *event, const Config *config, const SandboxOptions *options, Sandbox **ret) {
        _cleanup_(sandbox_freep) Sandbox *s = calloc(1, sizeof *s);
        const SandboxOptions none = { 0 };
        const char *rd = getenv("RUNTIME_DIRECTORY");
        int r;

        assert(event);
        assert(config);
        assert(ret);

        if (!s)
                return -ENOMEM;
        if (!options)
                options = &none;
        s->event = sd_event_ref(event);
        s->config = config;

        r = reaper_new(event, &s->reaper);
        if (r < 0)
                return r;

        if (options->work_dir)
                s->work_dir = strdup(options->work_dir);
        else if (config->state_directory && asprintf(&s->work_dir, "%s/sandbox", config->state_directory) < 0)
                s->work_dir = NULL;
        if (options->state_root)
                s->state_root = strdup(options->state_root);
        else if (rd && *rd && !strchr(rd, ':')) {
                if (asprintf(&s->state_root, "%s/runtime", rd) < 0)
                        s->state_root = NULL;
        } else if (s->work_dir && asprintf(&s->state_root, "%s/runtime", s->work_dir) < 0)
                s->state_root = NULL;

        if (!s->work_dir || !s->state_root)
                snprintf(s->static_reason, sizeof s->static_reason, "no state directory for the sandbox");
        else
                sandbox_check_static(s);

        r = scope_manager_new(event, options->bus_address, &s->scopes);
        if (r < 0)
                return r;
        scope_manager_set_ready_callback(s->scopes, sandbox_on_ready, s);
        if (s->static_reason[0])
                log_warning("Sandbox unavailable: %s.", s->static_reason);
        else if (
                !scope_manager_is_ready(s->scopes) && scope_manager_reason(s->scopes)[0] &&
                !strstr(scope_manager_reason(s->scopes), "waiting"))
                log_warning("Sandbox unavailable: %s.", scope_manager_reason(s->scopes));
        *ret = TAKE_PTR(s);
        return 0;
}

static void sandbox_run_free(SandboxRun *run);

Sandbox *sandbox_free(Sandbox *s) {
        if (!s)
                return NULL;
        while (s->queries) {
                SandboxQuery *q = s->queries;
                if (q->run)
                        sandbox_run_free(q->run);
                sandbox_query_free(q);
        }
        while (s->cleanups)
                cleanup_free(s->cleanups);
        s->scopes = scope_manager_free(s->scopes);
        s->reaper = reaper_free(s->reaper);
        sd_event_unref(s->event);
        free(s->runtime);
        free(s->work_dir);
        free(s->state_root);
        free(s->rootfs);
        free(s);
        return NULL;
}

/* ---- queries ---- */

static bool query_id_valid(const char *id) {
        size_t n = strlen(id);

        if (n == 0 || n > 64)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') ||
                      (id[i] >= '0' && id[i] <= '9') || id[i] == '_'))
                        return false;
        return true;
}

int sandbox_query_new(Sandbox *s, const char *query_id, SandboxQuery **ret) {
        _cleanup_(sandbox_query_freep) SandboxQuery *q = NULL;
        int r;

        assert(s);
        assert(ret);

        if (!query_id_valid(query_id))
                return -EINVAL;
        if (!s->work_dir)
                return -ENOENT;
        for (SandboxQuery *i = s->queries; i; i = i->next)
                if (streq(i->id, query_id))
                        return -EEXIST;
        q = calloc(1, sizeof *q);
        if (!q)
                return -ENOMEM;
        *q = (SandboxQuery){ .sandbox = s, .dir_fd = -1, .data_fd = -1, .out_fd = -1, .next = s->queries };
        s->queries = q;
        q->id = strdup(query_id);
        if (!q->id || asprintf(&q->dir, "%s/%s", s->work_dir, query_id) < 0) {
                q->dir = NULL;
                return -ENOMEM;
        }
        r = sandbox_rm_rf(AT_FDCWD, q->dir);
        if (r >= 0 && mkdir(q->dir, 0700) < 0)
                r = negative_errno();
        if (r >= 0 && (q->dir_fd = open(q->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) < 0)
                r = negative_errno();
        if (r >= 0 && (mkdirat(q->dir_fd, "data", 0700) < 0 || mkdirat(q->dir_fd, "out", 0700) < 0))
                r = negative_errno();
        if (r >= 0 &&
            (q->data_fd = openat(q->dir_fd, "data", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) < 0)
                r = negative_errno();
        if (r >= 0 &&
            (q->out_fd = openat(q->dir_fd, "out", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) < 0)
                r = negative_errno();
        if (r < 0)
                return r;
        *ret = TAKE_PTR(q);
        return 0;
}

static void free_page(SandboxPage *p) {
        free((char *) p->title);
        free((char *) p->url);
        p->title = p->url = NULL;
}

SandboxQuery *sandbox_query_free(SandboxQuery *q) {
        if (!q)
                return NULL;
        assert(!q->run);
        for (SandboxQuery **p = &q->sandbox->queries; *p; p = &(*p)->next)
                if (*p == q) {
                        *p = q->next;
                        break;
                }
        for (Cleanup *c = q->sandbox->cleanups; c; c = c->next)
                if (c->query == q)
                        c->query = NULL;
        if (q->data_fd >= 0)
                (void) close(q->data_fd);
        if (q->out_fd >= 0)
                (void) close(q->out_fd);
        if (q->dir_fd >= 0)
                (void) close(q->dir_fd);
        if (q->dir) {
                int r = sandbox_rm_rf(AT_FDCWD, q->dir);
                if (r < 0)
                        log_warning_errno(r, "Cannot remove %s", q->dir);
        }
        for (size_t i = 0; i < q->n_pages; i++)
                free_page(&q->pages[i]);
        free(q->pages);
        free(q->id);
        free(q->dir);
        free(q);
        return NULL;
}

int sandbox_query_add_page(SandboxQuery *q, const SandboxPage *page) {
        size_t i;

        assert(q);
        assert(page);

        for (i = 0; i < q->n_pages; i++)
                if (streq(q->pages[i].title, page->title))
                        break;
        if (i == q->n_pages) {
                SandboxPage *n = reallocarray(q->pages, q->n_pages + 1, sizeof *n);
                if (!n)
                        return -ENOMEM;
                q->pages = n;
                q->pages[i] = (SandboxPage){ 0 };
                q->n_pages++;
        } else
                free_page(&q->pages[i]);
        q->pages[i].title = strdup(page->title);
        q->pages[i].url = strdup(page->url ? page->url : "");
        q->pages[i].revision_id = page->revision_id;
        if (!q->pages[i].title || !q->pages[i].url) {
                free_page(&q->pages[i]);
                q->n_pages--;
                return -ENOMEM;
        }
        return sandbox_data_write_page(q->data_fd, page, q->pages, q->n_pages);
}

bool sandbox_query_cleanup_confirmed(const SandboxQuery *q) {
        assert(q);
        return q->unconfirmed == 0 && (!q->run || q->run->state == RUN_REPORTING);
}

void sandbox_query_set_confirmed_handler(SandboxQuery *q, SandboxQueryConfirmedHandler handler, void *userdata) {
        assert(q);

        q->confirmed_handler = handler;
        q->confirmed_userdata = userdata;
}

int sandbox_query_collect(SandboxQuery *q, SandboxArtifacts *ret) {
        const Config *c = q->sandbox->config;

        assert(q);
        assert(ret);

        return sandbox_collect_artifacts(q->out_fd, c->artifact_max_files, c->artifact_max_bytes, ret);
}

int sandbox_query_store_artifacts(SandboxQuery *q, History *history) {
        SandboxArtifacts a = { 0 };
        int r, kept = 0;

        assert(q);

        r = sandbox_query_collect(q, &a);
        if (r < 0)
                return r;
        for (size_t i = 0; i < a.n; i++) {
                char id[HISTORY_ARTIFACT_ID_MAX];
                SandboxArtifact *x = &a.items[i];

                r = history_add_artifact(history, q->id, x->name, x->media_type, x->sha256, x->fd, x->size, id);
                if (r == -ENOENT) {
                        sandbox_artifacts_done(&a);
                        return r;
                }
                if (r < 0) {
                        log_warning_errno(r, "Query %s: not keeping the artifact %s", q->id, x->name);
                        continue;
                }
                log_info(
                        "Query %s: kept /out/%s as artifact %s (%" PRIu64 " bytes, %s).",
                        q->id,
                        x->name,
                        id,
                        x->size,
                        x->media_type);
                kept++;
        }
        sandbox_artifacts_done(&a);
        return kept;
}

/* ---- results ---- */

static void sandbox_result_done(SandboxResult *r) {
        free(r->stdout_text);
        free(r->stderr_text);
        for (size_t i = 0; i < r->n_files; i++)
                free(r->files[i].name);
        free(r->files);
        *r = (SandboxResult){ 0 };
}

int sandbox_result_to_json(const SandboxResult *r, char **ret) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        json_object *files = json_object_new_array();

        assert(r);
        assert(ret);

        if (!o || !files || json_object_object_add(o, "files", files) < 0) {
                json_object_put(files);
                return -ENOMEM;
        }
        json_object_object_add(o, "exit_code", r->has_exit_code ? json_object_new_int(r->exit_code) : NULL);
        json_object_object_add(o, "signal", r->signal ? json_object_new_string(r->signal) : NULL);
        json_object_object_add(o, "timed_out", json_object_new_boolean(r->timed_out));
        json_object_object_add(o, "stdout", json_object_new_string(r->stdout_text ? r->stdout_text : ""));
        json_object_object_add(o, "stderr", json_object_new_string(r->stderr_text ? r->stderr_text : ""));
        for (size_t i = 0; i < r->n_files; i++) {
                json_object *f = json_object_new_object();
                if (!f || json_object_array_add(files, f) < 0) {
                        json_object_put(f);
                        return -ENOMEM;
                }
                json_object_object_add(f, "name", json_object_new_string(r->files[i].name));
                json_object_object_add(f, "size_bytes", json_object_new_uint64(r->files[i].size_bytes));
        }
        *ret = strdup(
                json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        return *ret ? 0 : -ENOMEM;
}

static int cmp_files(const void *a, const void *b) {
        return strcmp(((const SandboxFile *) a)->name, ((const SandboxFile *) b)->name);
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
                SandboxFile *n;

                if (fstatat(out_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                        continue;
                n = reallocarray(r->files, r->n_files + 1, sizeof *n);
                if (!n)
                        break;
                r->files = n;
                if (sandbox_artifact_name(de->d_name, &n[r->n_files].name) < 0)
                        break;
                n[r->n_files++].size_bytes = (uint64_t) st.st_size;
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

static void sandbox_run_free(SandboxRun *run) {
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
        sd_event_source_disable_unref(run->report);
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
 * reported: its cleanup unconfirmed, or it timed out, or no container
 * could run, or it exited (by itself, by a signal or cancelled). */
static const char *sandbox_run_outcome(const SandboxRun *run) {
        if (!run->result.cleanup_confirmed)
                return "cleanup_failed";
        if (run->error < 0)
                return "failed";
        if (run->result.timed_out)
                return "timeout";
        return "exited";
}

static int sandbox_run_on_report(sd_event_source *src, void *userdata) {
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
        if (sd_event_add_defer(run->sandbox->event, &run->report, sandbox_run_on_report, run) < 0)
                sandbox_run_on_report(NULL, run);
        else
                (void) sd_event_source_set_description(run->report, "sandbox-report");
}

static void sandbox_run_on_cleanup(Cleanup *c, int error) {
        SandboxRun *run = c->userdata;

        run->cleanup = NULL;
        run->result.cleanup_confirmed = error >= 0;
        run->result.cleanup_usec = now(CLOCK_MONOTONIC) - run->t_cleanup;
        run->state = RUN_REPORTING;
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

/* The run's /out, copied out by its init into out-next, becomes the
 * query's out directory; the previous one is removed. */
static int query_take_out_next(SandboxQuery *q) {
        int fd;

        if (renameat2(q->dir_fd, SANDBOX_OUT_NEXT_DIR, q->dir_fd, SANDBOX_OUT_DIR, RENAME_EXCHANGE) < 0) {
                if (errno != EINVAL && errno != ENOSYS)
                        return negative_errno();
                /* A file system without the exchange: two renames. */
                (void) sandbox_rm_rf(q->dir_fd, SANDBOX_OUT_OLD_DIR);
                if (renameat(q->dir_fd, SANDBOX_OUT_DIR, q->dir_fd, SANDBOX_OUT_OLD_DIR) < 0)
                        return negative_errno();
                if (renameat(q->dir_fd, SANDBOX_OUT_NEXT_DIR, q->dir_fd, SANDBOX_OUT_DIR) < 0) {
                        int r = negative_errno();
                        (void) renameat(q->dir_fd, SANDBOX_OUT_OLD_DIR, q->dir_fd, SANDBOX_OUT_DIR);
                        return r;
                }
                (void) renameat(q->dir_fd, SANDBOX_OUT_OLD_DIR, q->dir_fd, SANDBOX_OUT_NEXT_DIR);
        }
        fd = openat(q->dir_fd, SANDBOX_OUT_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return negative_errno();
        (void) close(q->out_fd);
        q->out_fd = fd;
        return 0;
}

/* The runtime and its pipes are done (or given up on): fill the result and
 * clean up. */
static void run_finish(SandboxRun *run) {
        SandboxResult *res = &run->result;
        int init_status, r;
        bool copied, out_lost;

        if (run->state >= RUN_CLEANING)
                return;
        run->state = RUN_CLEANING;
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
        if (output_buffer_render(&run->out, &res->stdout_text, NULL) < 0 ||
            output_buffer_render(&run->err, &res->stderr_text, NULL) < 0)
                log_oom();
        if (run->query) {
                /* What the run left in /out is the query's only if its init
                 * copied all of it; otherwise /out stays as before the run. */
                if (copied) {
                        r = query_take_out_next(run->query);
                        if (r < 0)
                                log_error_errno(r, "Run %s: cannot keep the files it left in /out", run->id);
                } else if (out_lost)
                        log_warning(
                                "Run %s: its /out was not copied out (the container was killed%s); the query's "
                                "/out stays as it was before the run.",
                                run->id,
                                run->kill_sent ? " after it did not stop in time" : "");
                (void) sandbox_rm_rf(run->query->dir_fd, SANDBOX_OUT_NEXT_DIR);
                (void) list_out(run->query->out_fd, res);
        }

        run->t_cleanup = now(CLOCK_MONOTONIC);
        r = cleanup_start(run->sandbox, run->id, run->query, sandbox_run_on_cleanup, run, &run->cleanup);
        if (r < 0) {
                /* Not even started: treat as unconfirmed, report. */
                res->cleanup_confirmed = false;
                run->state = RUN_REPORTING;
                sandbox_run_report_later(run);
        }
}

static void run_advance(SandboxRun *run) {
        if (run->state == RUN_STARTING || run->state >= RUN_CLEANING)
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

static void sandbox_run_on_killed(int error, void *userdata) {
        SandboxRun *run = userdata;

        run->op = NULL;
        if (error < 0 && error != -ENOENT)
                log_warning_errno(error, "KillUnit(%s) failed", run->scope);
}

/* Kill every process of the scope (the runtime and the container): SIGKILL,
 * as Python as PID 1 ignores SIGTERM. If the runtime still has not ended
 * after the grace, go on to cleanup, whose stop kills what is left. */
static void run_kill(SandboxRun *run) {
        int r;

        if (run->kill_sent || run->state != RUN_RUNNING)
                return;
        run->kill_sent = true;
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

/* Stop the code but keep /out: SIGUSR1 to the container's init (its host
 * pid from the runtime's --pid-file), which kills every other process of
 * the container, reports, copies /out out and exits. If the init cannot be
 * signalled, or has not ended after the grace, run_kill(). */
static void run_stop(SandboxRun *run) {
        pid_t pid;
        int r;

        /* An exited runtime's init is gone: its pid may be another's. */
        if (run->stop_sent || run->kill_sent || run->exited || run->state != RUN_RUNNING)
                return;
        run->stop_sent = true;
        r = run_read_init_pid(run, &pid);
        if (r >= 0 && run->sandbox->test_deaf_init)
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
        if (run->state != RUN_RUNNING)
                return 0;
        if (!run->stop_sent && !run->kill_sent && !run->exited) {
                if (run_code_ended(run)) {
                        /* Not a timeout of the code: its init is copying
                         * /out. It gets the grace, then the kill. */
                        log_info(
                                "Run %s: the code has ended, /out is still being copied at the time limit.",
                                run->id);
                        run->stop_sent = true;
                        sandbox_run_set_timer(run, SANDBOX_STOP_GRACE_USEC);
                        return 0;
                }
                log_info("Run %s reached the time limit: stopping it.", run->id);
                run->timed_out = true;
                run_stop(run);
                return 0;
        }
        if (!run->kill_sent && !run->exited) {
                log_warning(
                        "Run %s: the container did not end %" PRIu64
                        " s after it was told to stop; killing its scope.",
                        run->id,
                        SANDBOX_STOP_GRACE_USEC / USEC_PER_SEC);
                run_kill(run);
                return 0;
        }
        /* The grace after the kill, or after the runtime's exit, is over. */
        log_warning("Run %s: output still open after the runtime ended; closing it.", run->id);
        run_finish(run);
        return 0;
}

static void sandbox_run_on_exit(pid_t pid, int status, void *userdata) {
        SandboxRun *run = userdata;

        run->watch = NULL;
        run->exited = true;
        run->status = status;
        if (run->state == RUN_STARTING) {
                /* The held child gave up (the hold pipe was closed): the
                 * scope callback takes it from here. */
                return;
        }
        if (run->out_fd >= 0 || run->err_fd >= 0) {
                /* Give the pipes a moment to drain to EOF. */
                if (!run->kill_sent) {
                        sandbox_run_set_timer(run, SANDBOX_PIPE_GRACE_USEC);
                }
        }
        run_advance(run);
}

static void sandbox_run_on_scope_started(int error, void *userdata) {
        SandboxRun *run = userdata;
        const Config *c = run->sandbox->config;

        run->op = NULL;
        if (error < 0) {
                log_error_errno(error, "Cannot put the runtime of %s into its scope", run->id);
                run->error = error;
                /* Closing the hold pipe makes the child exit without
                 * executing anything. */
                (void) close(TAKE_FD(run->hold_fd));
                run->state = RUN_RUNNING;
                if (run->pid > 0 && !run->exited)
                        (void) kill(run->pid, SIGKILL);
                run_finish(run);
                return;
        }
        /* In the scope: let it execute. (A child that is gone already
         * cannot be released: no write to a pipe without a reader.) */
        if (run->exited || write(run->hold_fd, "x", 1) != 1) {
                run->error = -EIO;
                run->state = RUN_RUNNING;
                run_finish(run);
                return;
        }
        (void) close(TAKE_FD(run->hold_fd));
        run->state = RUN_RUNNING;
        run->t_start = now(CLOCK_MONOTONIC);
        sandbox_run_set_timer(run, c->sandbox_timeout_seconds * USEC_PER_SEC);
        if (run->cancelled)
                run_stop(run);
        run_advance(run);
}

void sandbox_run_cancel(SandboxRun *run) {
        if (run->cancelled || run->state >= RUN_CLEANING)
                return;
        run->cancelled = true;
        if (run->state == RUN_RUNNING)
                run_stop(run);
        /* RUN_STARTING: killed as soon as the scope is there. */
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

int sandbox_run_start(
        SandboxQuery *q, const char *code, size_t len, SandboxRunDone done, void *userdata, SandboxRun **ret) {
        Sandbox *s = q->sandbox;
        const Config *c = s->config;
        _cleanup_close_ int code_fd = -1, out_w = -1, err_w = -1, hold_r = -1, status_w = -1, bundle_fd = -1,
                            next_fd = -1, src_fd = -1;
        SandboxRun *run;
        char **argv = NULL;
        size_t cap;
        int r;

        assert(q);

        if (!sandbox_is_available(s))
                return -EAGAIN;
        if (q->run)
                return -EBUSY;
        if (len > SANDBOX_CODE_MAX_BYTES)
                return -E2BIG;

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
        if (r >= 0)
                r = output_buffer_init(&run->err, cap);
        if (r >= 0)
                r = scope_name(q->id, q->runs + 1, &run->scope);
        if (r < 0)
                goto fail;
        run->id = strndup(run->scope, strlen(run->scope) - STRLEN(".scope"));
        if (!run->id || asprintf(&run->bundle, "%s/bundle-%u", q->dir, q->runs + 1) < 0) {
                run->bundle = NULL;
                r = -ENOMEM;
                goto fail;
        }
        q->runs++;

        (void) sandbox_rm_rf(AT_FDCWD, run->bundle);
        if (mkdir(run->bundle, 0700) < 0 ||
            (bundle_fd = open(run->bundle, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
                r = negative_errno();
                goto fail;
        }
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

                if (asprintf(&data, "%s/data", q->dir) < 0) {
                        r = -ENOMEM;
                        goto fail;
                }
                spec.data_dir = data;
                r = runtime_write_bundle(bundle_fd, &spec);
                if (r < 0)
                        goto fail;
        }
        /* The query's out directory, copied into /out before the code (an
         * open file description of its own: the init's reading moves its
         * offset), and the empty directory /out is copied into after it. */
        src_fd = openat(q->dir_fd, SANDBOX_OUT_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (src_fd < 0) {
                r = negative_errno();
                goto fail;
        }
        r = sandbox_rm_rf(q->dir_fd, SANDBOX_OUT_NEXT_DIR);
        if (r >= 0 && mkdirat(q->dir_fd, SANDBOX_OUT_NEXT_DIR, 0700) < 0)
                r = negative_errno();
        if (r >= 0 &&
            (next_fd = openat(
                     q->dir_fd, SANDBOX_OUT_NEXT_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)) < 0)
                r = negative_errno();
        if (r < 0)
                goto fail;

        r = make_code_pipe(code, len, &code_fd);
        if (r >= 0)
                r = make_pipe(&run->out_fd, &out_w, true);
        if (r >= 0)
                r = make_pipe(&run->err_fd, &err_w, true);
        if (r >= 0)
                r = make_pipe(&run->hold_fd, &hold_r, false);
        if (r >= 0)
                r = make_pipe(&run->status_fd, &status_w, true);
        if (r >= 0)
                r = runtime_argv(s->kind, s->runtime, s->state_root, RUNTIME_RUN, run->id, run->bundle, &argv);
        if (r >= 0)
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
                goto fail;
        r = reaper_watch(s->reaper, run->pid, sandbox_run_on_exit, run, &run->watch);
        if (r >= 0)
                r = sd_event_add_io(s->event, &run->out_src, run->out_fd, EPOLLIN, sandbox_run_on_output, run);
        if (r >= 0)
                r = sd_event_add_io(s->event, &run->err_src, run->err_fd, EPOLLIN, sandbox_run_on_output, run);
        if (r >= 0) {
                (void) sd_event_source_set_description(run->out_src, "sandbox-stdout");
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
        }
        if (r < 0) {
                /* The child never executes: closing the hold pipe ends it. */
                (void) close(TAKE_FD(run->hold_fd));
                goto fail;
        }
        run->state = RUN_STARTING;
        run->t_start = now(CLOCK_MONOTONIC);
        q->run = run;
        if (ret)
                *ret = run;
        return 0;

fail:
        run->query = NULL;
        sandbox_run_free(run);
        return r;
}
