/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "sandbox/output.h"
#include "sandbox/reaper.h"
#include "sandbox/runtime.h"
#include "sandbox/sandbox.h"
#include "sandbox/scope.h"

/* The objects behind sandbox.h, for the files of src/sandbox/ only, one
 * object a file:
 *
 *   sandbox.c   the Sandbox (availability, set-up) and the SandboxQuery
 *   run.c       a SandboxRun: its states, its stop, its result
 *   cleanup.c   a Cleanup (delete, state, scope; retried until confirmed)
 *               and the start-up sweep, which is a set of them
 *   workdir.c   the directories: the rootfs skeleton, a query's directory
 *               and its out/ swap, the sweep of leftover ones
 *
 * Ownership as in sandbox.h: the Sandbox owns its Cleanups and (through
 * the pipeline) is told about every SandboxQuery; a SandboxRun belongs to
 * the Sandbox until its done callback has returned. */

/* The query's out directory, and the one a run's init copies /out into. */
#define SANDBOX_OUT_DIR "out"
#define SANDBOX_OUT_NEXT_DIR "out-next"
/* Where the out directory waits during the swap, without renameat2(). */
#define SANDBOX_OUT_OLD_DIR "out-old"

typedef struct Cleanup Cleanup;
/* The outcome of a cleanup's first attempt: 0 confirmed, or a negative
 * errno (it is then retried, and counted as pending, until confirmed). */
typedef void (*CleanupDone)(Cleanup *c, int error, void *userdata);

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
        char *query_id; /* whose run this was: announced when confirmed late; NULL for the sweep */
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

/* A run's phases. Its one timer means what the state says: the wall-clock
 * limit in RUNNING, the init's grace in STOP_INIT, the kill's in STOP_KILL,
 * the pipes' in DRAIN (service.c's STOP_SIGTERM, STOP_SIGKILL). */
typedef enum SandboxRunState {
        SANDBOX_RUN_STARTING,  /* the runtime is held, the scope is being made */
        SANDBOX_RUN_RUNNING,   /* the code runs, until the wall-clock limit */
        SANDBOX_RUN_STOP_INIT, /* the init was told (SIGUSR1) to kill the code and keep /out, or is
                                * copying /out after the code ended at the limit */
        SANDBOX_RUN_STOP_KILL, /* KillUnit was sent: every process of the scope is killed */
        SANDBOX_RUN_DRAIN,     /* the runtime exited; its pipes get a moment to reach EOF */
        SANDBOX_RUN_CLEANING,  /* the result is made; the container's cleanup runs */
        SANDBOX_RUN_REPORTING, /* the done callback is due, from a defer */
        _SANDBOX_RUN_STATE_MAX,
        _SANDBOX_RUN_STATE_INVALID = -EINVAL,
} SandboxRunState;

struct SandboxRun {
        Sandbox *sandbox;
        SandboxQuery *query;
        SandboxRunState state;
        char *id, *scope, *bundle;
        pid_t pid;
        ReaperWatch *watch;
        bool exited; /* the runtime's exit status is in status */
        int status;
        int hold_fd, out_fd, err_fd;
        int status_fd;       /* the container init's report of the code's end */
        char status_buf[32]; /* what it said so far: "<code>\n" and then "copied\n" */
        size_t status_len;
        sd_event_source *out_src, *err_src;
        OutputBuffer out, err;
        ScopeOp *op;
        sd_event_source *timer;
        sd_event_source *defer;    /* reports the run */
        bool timed_out, cancelled; /* why it was stopped, for the result */
        int error;                 /* the first error: nothing could run */
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
        WikiPage *pages;
        size_t n_pages;
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
        char reason[512];        /* sandbox_unavailable_reason()'s, when it is made up */
        bool sweep_started, sweep_done;
        unsigned sweep_outstanding;
        Cleanup *cleanups;
        unsigned n_pending;
        SandboxQuery *queries;
        SandboxStateHandler state_handler;
        void *state_userdata;
        SandboxCleanupConfirmedHandler confirmed_handler;
        void *confirmed_userdata;
        bool manager_answered;        /* the user manager answers (as last heard) */
        usec_t manager_lost;          /* when it last stopped answering, or the set-up */
        sd_event_source *state_timer; /* when the state next changes by time alone */
        sd_event_source *announce;    /* defer: the state handler, after a change */
        SandboxState last_state;      /* as last announced (or as set up) */
        bool last_pending;
        usec_t test_starting_until; /* the fault switch holds SANDBOX_STARTING until then */
        bool test_deaf_init;
};

/* How long a user manager that is to be expected may take to answer, from
 * the start or from a lost connection, before the sandbox is unavailable
 * instead of starting: logind starts a lingering user's manager at boot,
 * and a restarted one answers again within a reconnection (2 s); this
 * leaves room for a slow boot, and a broken manager costs only the
 * queries of the first half-minute a wait. */
#define SANDBOX_STARTING_MAX_USEC (30 * USEC_PER_SEC)

/* What the Sandbox's state follows from, at one moment. */
typedef struct SandboxConditions {
        bool static_unavailable; /* runtime, rootfs, python3 or state directory missing */
        bool test_starting;      /* the fault switch holds it starting */
        bool manager_ready;      /* the user manager answered Subscribe() */
        bool manager_expected;   /* scope_manager_is_expected() */
        bool manager_overdue;    /* not ready for SANDBOX_STARTING_MAX_USEC */
        bool sweep_done;
} SandboxConditions;

/* The state those conditions make (pure). */
SandboxState sandbox_state_of(const SandboxConditions *c);

/* sandbox.c: compute the state now; if it or pending changed since the
 * last announcement, schedule the state handler (a defer). Callable from
 * anywhere, also from inside sd-bus callbacks. */
void sandbox_notify(Sandbox *s);

/* cleanup.c */
/* Start cleaning container id and its scope (id + ".scope"), of a run of
 * query_id (NULL: the sweep's). done is called once, with the first
 * attempt's outcome; *ret (may be NULL) is owned by the Sandbox. */
int sandbox_cleanup_start(
        Sandbox *s, const char *id, const char *query_id, CleanupDone done, void *userdata, Cleanup **ret);
Cleanup *sandbox_cleanup_free(Cleanup *c);
/* Whether a cleanup of a run of query_id failed an attempt and is not
 * confirmed yet. */
bool sandbox_cleanup_pending_for(const Sandbox *s, const char *query_id);
/* The start-up sweep: every leftover "wikiweb-q-*" scope and container,
 * and every leftover query directory; sweep_done once all are cleaned. */
void sandbox_sweep_start(Sandbox *s);

/* run.c: free a run that is not reported (done is not called). */
void sandbox_run_free(SandboxRun *run);
DEFINE_TRIVIAL_CLEANUP_FUNC(SandboxRun *, sandbox_run_free);

/* workdir.c */
int sandbox_workdir_mkdir_p(const char *path, mode_t mode);
/* The default rootfs: a 56 KB skeleton whose /usr is the host's. */
int sandbox_workdir_make_skeleton(const char *dir);
/* Remove every leftover query directory of the work directory (not the
 * rootfs or the runtime's state). */
void sandbox_workdir_sweep(const char *work_dir);
/* Create (emptied first) q->dir with data/ and out/, and open them. */
int sandbox_workdir_make_query(SandboxQuery *q);
/* Close q's directories and remove q->dir. */
void sandbox_workdir_remove_query(SandboxQuery *q);
/* The run's /out, copied out by its init into out-next, becomes the
 * query's out directory; the previous one is removed. */
int sandbox_workdir_take_out_next(SandboxQuery *q);
