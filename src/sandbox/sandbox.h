/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "sandbox/files.h"
#include "sandbox/result.h"
#include "shared/config.h"
#include "shared/macro.h"
#include "shared/time-util.h"

/* run_python (API.md 8.3, 8.4, 8.6, 8.7): one run = a rootless OCI
 * container (runtime.h) whose runtime process is put into a transient scope
 * of the service user's manager (scope.h) before it executes, then
 * confirmed cleanup: the runtime deletes the container by id, its "state"
 * fails, the scope is stopped and GetUnit answers NoSuchUnit.
 *
 * Who owns what:
 * - The daemon owns the Sandbox (sandbox_new() at start-up, on its
 *   sd-event loop, sandbox_free() at exit). The Sandbox owns the SIGCHLD
 *   reaper (reaper.h: the one owner of SIGCHLD; wikiwebd is a subreaper),
 *   the connection to the user manager, and every cleanup that is not
 *   confirmed yet (retried with backoff, 1 s doubling to 30 s, until it is).
 * - The pipeline owns a SandboxQuery per query (sandbox_query_new() when
 *   the query starts, sandbox_query_free() at its end). It owns the query's
 *   directory <state directory>/sandbox/<query id>/ with data/ (/data, read
 *   only in the container), out/ (what the query's runs left in /out,
 *   shared by them), out-next/ while a run runs, and one bundle per run;
 *   sandbox_query_free() removes it all. The state directory, not the
 *   runtime directory: out/ may hold up to WIKI_WEB_ARTIFACT_MAX_BYTES, and
 *   /run is memory. In the container /out is a tmpfs of exactly that size:
 *   its init copies out/ into it before the code, and after the code (also
 *   after a timeout or cancel) copies it into out-next/, which then
 *   replaces out/ (runtime.c's RUNTIME_INIT_PY). A container that had to be
 *   killed leaves out/ as it was before the run.
 * - A SandboxRun belongs to the Sandbox from sandbox_run_start() until its
 *   done callback has returned; the pointer is invalid after that. At most
 *   one run per query at a time. A SandboxQuery must not be freed while a
 *   run of it is in flight: cancel it and wait for the callback.
 *
 * Callbacks are always called from the event loop (a defer), never from
 * inside the call that started the work.
 *
 * For the pipeline: offer run_python only while sandbox_is_available();
 * a query that starts while the Sandbox is SANDBOX_STARTING may wait for
 * it (bounded), and learns of the change through the state handler;
 * map a done callback's error < 0 to execution_failed, anything else is a
 * tool result (result.h); on the query deadline call
 * sandbox_run_cancel() and wait for the callback; at the end of the query
 * call sandbox_query_collect() (also when it failed; the outcome hands
 * the artifacts to the store), report
 * cleanup_confirmed = sandbox_query_cleanup_confirmed(), and if false,
 * keep the slot until the Sandbox announces the query's cleanup confirmed
 * (sandbox_set_cleanup_confirmed_handler(): the query's context may be
 * long gone by then; the Sandbox owns the fact). */

typedef struct Sandbox Sandbox;
typedef struct SandboxQuery SandboxQuery;
typedef struct SandboxRun SandboxRun;

typedef struct SandboxOptions {
        const char *bus_address; /* NULL: $RUNTIME_DIRECTORY/user/UID/bus if there, else /run/user/UID/bus */
        const char *work_dir;    /* NULL: <state directory>/sandbox */
        const char *state_root; /* the runtime's --root; NULL: $RUNTIME_DIRECTORY/runtime, else <work_dir>/runtime */
} SandboxOptions;

/* Set up the sandbox from config (borrowed, must outlive it) and start the
 * availability check: the runtime (WIKI_WEB_SANDBOX_RUNTIME) is found, the
 * rootfs is usable (WIKI_WEB_SANDBOX_ROOTFS with usr/bin/python3 and the
 * mount points, or the generated skeleton with the host's /usr and
 * /usr/bin/python3), and the user manager answers on its bus. Once the user
 * manager answers the first time, the start-up sweep runs: every loaded
 * "wikiweb-q-*" scope is stopped, every container in the runtime's state
 * root is deleted, every leftover query directory is removed. Returns 0
 * (even when the sandbox is unavailable: that is a state, see below),
 * -ENOMEM, or an error creating the reaper. */
int sandbox_new(sd_event *event, const Config *config, const SandboxOptions *options, Sandbox **ret);
/* Frees everything, calls no callback, and stops no container: one still
 * running stays in its scope until the next start-up sweep. Cancel the
 * runs and wait for their callbacks first. */
Sandbox *sandbox_free(Sandbox *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(Sandbox *, sandbox_free);

/* Whether run_python can be offered, and if not, whether it will be soon.
 * Starting is bounded: the start-up sweep ends (its operations have time
 * limits), and a user manager that has not answered for
 * SANDBOX_STARTING_MAX_USEC (sandbox-internal.h) after the start or after
 * the connection was lost makes the sandbox unavailable. Unavailable may
 * still end (the Sandbox keeps reconnecting, and a user manager that
 * answers later makes it available), but nothing is known to be on its
 * way: a query does not wait for it. */
typedef enum SandboxState {
        SANDBOX_STARTING,    /* the user manager's bus is not connected yet (or is being reconnected)
                              * while a user manager is to be expected, or the start-up sweep runs */
        SANDBOX_AVAILABLE,   /* run_python can be offered */
        SANDBOX_UNAVAILABLE, /* no runtime, rootfs, python3 or state directory (for good), or no user
                              * manager: none is configured (the service user does not linger, no bus),
                              * or it did not answer within SANDBOX_STARTING_MAX_USEC */
        _SANDBOX_STATE_MAX,
        _SANDBOX_STATE_INVALID = -EINVAL,
} SandboxState;

SandboxState sandbox_get_state(const Sandbox *s);
/* sandbox_get_state() == SANDBOX_AVAILABLE: runtime, rootfs and user
 * manager are there and the start-up sweep is done. */
bool sandbox_is_available(const Sandbox *s);
/* Why not (a sentence for the journal), or "" when available. Borrowed. */
const char *sandbox_unavailable_reason(const Sandbox *s);
/* Whether a cleanup is not confirmed yet (D-Bus Health "degraded"). */
bool sandbox_cleanup_pending(const Sandbox *s);

/* Called after sandbox_get_state() or sandbox_cleanup_pending() changed,
 * from the event loop (a defer), never from inside a call into the
 * Sandbox; several changes within one loop iteration are one call, and a
 * change undone before it runs is none. The state the Sandbox starts in is
 * not announced: read it after sandbox_new(). */
typedef void (*SandboxStateHandler)(Sandbox *s, void *userdata);
void sandbox_set_state_handler(Sandbox *s, SandboxStateHandler handler, void *userdata);

/* Called once each time the last unconfirmed cleanup of a query (one that
 * failed an attempt and was retried) is confirmed, with the query's id
 * (borrowed for the call), from the event loop. Whether the query's
 * context still exists does not matter: the Sandbox keeps the id with the
 * cleanup. The sweep's cleanups belong to no query and are not announced. */
typedef void (*SandboxCleanupConfirmedHandler)(Sandbox *s, const char *query_id, void *userdata);
void sandbox_set_cleanup_confirmed_handler(Sandbox *s, SandboxCleanupConfirmedHandler handler, void *userdata);

#if ENABLE_TEST_FAULTS
/* Test-only fault switch (shared/fault.h): the next n scope confirmations
 * find the unit still there, as a stuck unit would (API.md 8.4). */
void sandbox_set_test_unconfirmable(Sandbox *s, unsigned n);
/* Test-only fault switch: at a timeout or a cancel the container's init is
 * not signalled, as an init that does not answer (the grace, then KillUnit). */
void sandbox_set_test_deaf_init(Sandbox *s, bool deaf);
/* Test-only fault switch: the Sandbox is SANDBOX_STARTING for duration
 * from now, whatever its real state, which it then announces, as a start
 * that takes that long would. */
void sandbox_set_test_starting(Sandbox *s, usec_t duration);
#endif

/* A query's sandbox context. query_id: [A-Za-z0-9_]+, at most 64 bytes.
 * Creates the directories (an existing one is emptied first: /out is empty
 * at the start of a query). Returns 0, -EINVAL, -EEXIST (a context for
 * this id exists), -ENOMEM, or a file system error. */
int sandbox_query_new(Sandbox *s, const char *query_id, SandboxQuery **ret);
/* Remove the query's directory; returns NULL. The query must have no run
 * in flight (asserted). Unconfirmed cleanups of its runs go on without it, and are
 * still announced by the query's id. */
SandboxQuery *sandbox_query_free(SandboxQuery *q);
DEFINE_TRIVIAL_CLEANUP_FUNC(SandboxQuery *, sandbox_query_free);

/* Add a page that wiki_read returned to /data (API.md 8.7): its .wiki file
 * and pages.json with every page so far, in first-read order. A title
 * read again replaces its entry. Strings are copied. */
int sandbox_query_add_page(SandboxQuery *q, const WikiPage *page);

/* Whether every run of this query has its cleanup confirmed (the slot may
 * be promoted). If not, the Sandbox's cleanup confirmed handler is called
 * with the query's id once it is. */
bool sandbox_query_cleanup_confirmed(const SandboxQuery *q);

/* The artifacts of the query's /out (files.h: regular top-level files,
 * WIKI_WEB_ARTIFACT_MAX_FILES and _MAX_BYTES). Call at the end of the
 * query, also when it failed, before sandbox_query_free(). */
int sandbox_query_collect(SandboxQuery *q, SandboxArtifacts *ret);

/* error < 0: no container could run (the runtime failed to start one, the
 * scope could not be made: execution_failed; result still says whether the
 * cleanup was confirmed); else result is the run's outcome (result.h),
 * borrowed for the duration of the call. */
typedef void (*SandboxRunDone)(SandboxRun *run, int error, const SandboxResult *result, void *userdata);

/* Run code (at most 65536 bytes, any bytes; Python reads it from stdin) in
 * a fresh container of query q. Returns 0, -EAGAIN (unavailable), -EBUSY
 * (a run of q is in flight), -E2BIG, or an error setting it up (nothing
 * runs then, and done is not called). */
int sandbox_run_start(
        SandboxQuery *q, const char *code, size_t len, SandboxRunDone done, void *userdata, SandboxRun **ret);

/* Stop the run now (the query's deadline): its code is killed, what it
 * left in /out is kept (as at the timeout); done is still called, after the
 * cleanup, with result->cancelled. */
void sandbox_run_cancel(SandboxRun *run);

#define SANDBOX_CODE_MAX_BYTES 65536
