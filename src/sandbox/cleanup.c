/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "sandbox/sandbox-internal.h"
#include "shared/log.h"
#include "shared/macro.h"
#include "shared/strv.h"

/* A cleanup that failed an attempt is retried with backoff: 1 s doubling
 * to 30 s, until it is confirmed. */
#define SANDBOX_RETRY_FIRST_USEC (1 * USEC_PER_SEC)
#define SANDBOX_RETRY_MAX_USEC (30 * USEC_PER_SEC)

/* ---- one cleanup: delete, state, scope ---- */

static void sandbox_cleanup_step(Cleanup *c);

Cleanup *sandbox_cleanup_free(Cleanup *c) {
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
        free(c->query_id);
        free(c);
        return NULL;
}

/* Whether a cleanup of a run of query_id failed an attempt and is not
 * confirmed yet. */
bool sandbox_cleanup_pending_for(const Sandbox *s, const char *query_id) {
        for (const Cleanup *c = s->cleanups; c; c = c->next)
                if (c->pending && c->query_id && streq(c->query_id, query_id))
                        return true;
        return false;
}

static int sandbox_cleanup_on_retry(sd_event_source *src, uint64_t usec, void *userdata) {
        Cleanup *c = userdata;

        c->retry = sd_event_source_disable_unref(c->retry);
        c->step = CLEANUP_DELETE;
        sandbox_cleanup_step(c);
        return 0;
}

/* The outcome of one attempt. */
static void sandbox_cleanup_attempt_done(Cleanup *c, int error) {
        Sandbox *s = c->sandbox;
        CleanupDone done = TAKE_PTR(c->done);

        c->step = CLEANUP_IDLE;
        c->attempts++;
        if (error >= 0) {
                if (c->pending) {
                        log_notice("Cleanup of %s confirmed after %u attempts.", c->scope, c->attempts);
                        c->pending = false;
                        s->n_pending--;
                        if (c->query_id && !sandbox_cleanup_pending_for(s, c->query_id) && s->confirmed_handler)
                                s->confirmed_handler(s, c->query_id, s->confirmed_userdata);
                }
                if (done)
                        done(c, 0, c->userdata);
                sandbox_cleanup_free(c);
                sandbox_notify(s);
                return;
        }

        if (!c->pending) {
                c->pending = true;
                s->n_pending++;
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
                done(c, error, c->userdata);
        sandbox_notify(s);
}

static void sandbox_cleanup_on_scope_stopped(ScopeOp *op, int error, void *userdata) {
        Cleanup *c = userdata;

        assert(op == c->op);
        c->op = NULL;
        if (error < 0)
                log_warning_errno(error, "The scope %s is not confirmed gone", c->scope);
        sandbox_cleanup_attempt_done(c, error);
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
                sandbox_cleanup_step(c);
                return;
        case CLEANUP_STATE:
                if (ok) {
                        log_warning("The container %s still exists after delete -f.", c->id);
                        sandbox_cleanup_attempt_done(c, -EBUSY);
                        return;
                }
                c->step = CLEANUP_SCOPE;
                r = scope_stop(c->sandbox->scopes, c->scope, sandbox_cleanup_on_scope_stopped, c, &c->op);
                if (r < 0)
                        sandbox_cleanup_attempt_done(c, r);
                return;
        default:
                return;
        }
}

/* Spawn the runtime for the current step and watch it. */
static int sandbox_cleanup_spawn(Cleanup *c) {
        Sandbox *s = c->sandbox;
        _cleanup_(strv_freep) char **argv = NULL;
        int r;

        r = runtime_argv(
                s->kind,
                s->runtime,
                s->state_root,
                c->step == CLEANUP_DELETE ? RUNTIME_DELETE : RUNTIME_STATE,
                c->id,
                NULL,
                &argv);
        if (r < 0)
                return r;
        r = runtime_spawn(argv, NULL, &c->pid);
        if (r < 0)
                return r;
        return reaper_watch(s->reaper, c->pid, sandbox_cleanup_on_exit, c, &c->watch);
}

static void sandbox_cleanup_step(Cleanup *c) {
        int r;

        r = sandbox_cleanup_spawn(c);
        if (r < 0)
                sandbox_cleanup_attempt_done(c, r);
}

/* Start cleaning container id and its scope (id + ".scope"), of a run of
 * query_id (NULL: the sweep's). */
int sandbox_cleanup_start(
        Sandbox *s, const char *id, const char *query_id, CleanupDone done, void *userdata, Cleanup **ret) {
        Cleanup *c = calloc(1, sizeof *c);

        if (!c)
                return -ENOMEM;
        *c = (Cleanup){ .sandbox = s, .done = done, .userdata = userdata, .next = s->cleanups };
        s->cleanups = c;
        c->id = strdup(id);
        if (query_id && !(c->query_id = strdup(query_id))) {
                sandbox_cleanup_free(c);
                return -ENOMEM;
        }
        if (!c->id || asprintf(&c->scope, "%s.scope", id) < 0) {
                c->scope = NULL;
                sandbox_cleanup_free(c);
                return -ENOMEM;
        }
        c->step = CLEANUP_DELETE;
        if (ret)
                *ret = c;
        sandbox_cleanup_step(c);
        return 0;
}

/* ---- the start-up sweep ---- */

static void sandbox_sweep_check_done(Sandbox *s) {
        if (s->sweep_outstanding > 0 || s->sweep_done)
                return;
        s->sweep_done = true;
        log_info("Sandbox start-up sweep done.");
        sandbox_notify(s);
}

static void sandbox_sweep_on_cleanup(Cleanup *c, int error, void *userdata) {
        Sandbox *s = c->sandbox;

        if (error >= 0)
                log_info("Removed the leftover container %s and its scope.", c->id);
        s->sweep_outstanding--;
        sandbox_sweep_check_done(s);
}

static void sandbox_sweep_id(Sandbox *s, const char *id) {
        /* One cleanup per id, even if listed by both the manager and the
         * runtime. */
        for (Cleanup *c = s->cleanups; c; c = c->next)
                if (streq(c->id, id))
                        return;
        s->sweep_outstanding++;
        if (sandbox_cleanup_start(s, id, NULL, sandbox_sweep_on_cleanup, NULL, NULL) < 0)
                s->sweep_outstanding--;
}

static void sandbox_sweep_on_scopes(ScopeOp *op, int error, char **names, void *userdata) {
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
                        sandbox_sweep_id(s, id);
        }
        s->sweep_outstanding--;
        sandbox_sweep_check_done(s);
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
                                sandbox_sweep_id(s, line);
        }
        (void) close(l->fd);
        free(l);
        s->sweep_outstanding--;
        sandbox_sweep_check_done(s);
}

void sandbox_sweep_start(Sandbox *s) {
        SweepList *l;
        char **argv = NULL;
        RuntimeFds fds = RUNTIME_FDS_NONE;
        pid_t pid;
        int r;

        s->sweep_started = true;
        sandbox_workdir_sweep(s->work_dir);
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
        sandbox_sweep_check_done(s);
}
