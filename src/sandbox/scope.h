/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "shared/macro.h"

/* Transient scopes in the service user's own systemd user manager, over
 * its own sd-bus connection to the user bus (/run/user/UID/bus). Not the
 * system manager: on systemd 252 a polkit grant for StartTransientUnit is
 * as good as root. The user manager moves a pid of the
 * same user into its scope (asking the system manager), no polkit involved.
 *
 * Asynchronous only. Subscribe() and one JobRemoved match are installed
 * when the connection is made, before any call; JobRemoved is matched to
 * the operation by unit name (and job path once known), so a JobRemoved
 * that overtakes the method reply is not lost. Every operation has a time
 * limit. An operation is owned by the manager until its callback has run;
 * scope_op_cancel() before that frees it without calling back. */

typedef struct ScopeManager ScopeManager;
typedef struct ScopeOp ScopeOp;

/* op: the operation, freed by the manager when the callback returns (do
 * not cancel it from the callback). error: 0 on success, else a negative
 * errno (-ETIMEDOUT, -EIO for a job that did not end "done", -EBUSY for a
 * unit that is still there, ...). Called from the event loop, never from
 * inside the call that started the operation. */
typedef void (*ScopeDone)(ScopeOp *op, int error, void *userdata);
/* For scope_list(): names is borrowed for the duration of the call. */
typedef void (*ScopeListDone)(ScopeOp *op, int error, char **names, void *userdata);
/* Readiness changes: ready, or not with a reason (static or borrowed);
 * also called when scope_manager_is_expected() changes. */
typedef void (*ScopeReadyHandler)(bool ready, const char *reason, void *userdata);

/* address: an sd-bus address; NULL: $RUNTIME_DIRECTORY/user/<our uid>/bus
 * if it exists (the unit binds /run/user there), else
 * unix:path=/run/user/<our uid>/bus, chosen again at each connection.
 * Connects at once and keeps reconnecting every 2 s while the bus is not
 * there (the user manager may start after us). Borrows event. */
int scope_manager_new(sd_event *event, const char *address, ScopeManager **ret);
ScopeManager *scope_manager_free(ScopeManager *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(ScopeManager *, scope_manager_free);

void scope_manager_set_ready_handler(ScopeManager *m, ScopeReadyHandler handler, void *userdata);
/* Whether the user manager answered Subscribe() on the current connection. */
bool scope_manager_is_ready(const ScopeManager *m);
/* Why not ready ("" when ready). Borrowed. */
const char *scope_manager_reason(const ScopeManager *m);
/* Whether a user manager is to be expected, as found at the last
 * connection attempt: the address was given, its bus socket is there, or
 * the service user lingers (/var/lib/systemd/linger/USER: logind starts
 * that user's manager at boot). False: none will come by itself (it is
 * still looked for at each reconnection). */
bool scope_manager_is_expected(const ScopeManager *m);

#if ENABLE_TEST_FAULTS
/* Test-only fault switch (shared/fault.h): the next n confirmations of
 * scope_stop() find the unit still there (-EBUSY), as a stuck unit would. */
void scope_manager_set_test_unconfirmable(ScopeManager *m, unsigned n);
#endif

typedef struct ScopeLimits {
        uint64_t memory_max_bytes; /* MemoryMax= */
        uint64_t tasks_max;        /* TasksMax= */
        uint64_t cpu_quota_usec;   /* CPUQuotaPerSecUSec=; 0: none */
} ScopeLimits;

/* StartTransientUnit(name, "fail") with PIDs=[pid], Delegate=yes,
 * CollectMode=inactive-or-failed, KillSignal=SIGKILL (Python as PID 1
 * ignores SIGTERM) and the limits (which the manager ignores where no
 * controller is delegated to it); done when its job is removed. */
int scope_start(
        ScopeManager *m,
        const char *name,
        pid_t pid,
        const ScopeLimits *limits,
        ScopeDone done,
        void *userdata,
        ScopeOp **ret);

/* KillUnit(name, "all", SIGKILL): every process of the scope, at once.
 * -ENOENT (NoSuchUnit) when the unit is gone already. */
int scope_kill(ScopeManager *m, const char *name, ScopeDone done, void *userdata, ScopeOp **ret);

/* StopUnit(name, "fail"), wait for its job, then GetUnit(name) until it
 * answers NoSuchUnit: done with error 0 means the removal is confirmed. A unit
 * that is gone already is confirmed the same way. */
int scope_stop(ScopeManager *m, const char *name, ScopeDone done, void *userdata, ScopeOp **ret);

/* The names of the loaded units matching pattern (ListUnitsByPatterns). */
int scope_list(ScopeManager *m, const char *pattern, ScopeListDone done, void *userdata, ScopeOp **ret);

void scope_op_cancel(ScopeOp *op);

/* "wikiweb-q-<query id>-<n>.scope" (also the runtime's container id without
 * ".scope"). The query id must be [A-Za-z0-9_]+, at most 64 bytes.
 * Returns 0 and a new string, -EINVAL, -ENOMEM. */
int scope_name(const char *query_id, unsigned n, char **ret);
#define SCOPE_PREFIX "wikiweb-q-"
