/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <pwd.h>
#include <signal.h>
#include <systemd/sd-bus.h>

#include "sandbox/scope.h"
#include "shared/fault.h"
#include "shared/log.h"
#include "shared/macro.h"
#include "shared/strv.h"
#include "shared/time-util.h"

#define SD_DEST "org.freedesktop.systemd1"
#define SD_PATH "/org/freedesktop/systemd1"
#define SD_MANAGER "org.freedesktop.systemd1.Manager"

/* One operation, from the call to the last JobRemoved/GetUnit. */
#define SCOPE_OP_TIMEOUT_USEC (10 * USEC_PER_SEC)
/* After the stop job: GetUnit until NoSuchUnit, this often, this long. */
#define SCOPE_CONFIRM_INTERVAL_USEC (10 * USEC_PER_MSEC)
#define SCOPE_CONFIRM_ATTEMPTS 50
#define SCOPE_RECONNECT_USEC (2 * USEC_PER_SEC)

typedef enum ScopeOpKind {
        SCOPE_OP_START,
        SCOPE_OP_KILL,
        SCOPE_OP_STOP,
        SCOPE_OP_LIST,
} ScopeOpKind;

typedef enum ScopeOpState {
        SCOPE_OP_AWAIT_REPLY,
        SCOPE_OP_AWAIT_JOB,
        SCOPE_OP_CONFIRMING, /* GetUnit in flight or waiting to be retried */
        SCOPE_OP_DONE,
} ScopeOpState;

struct ScopeOp {
        ScopeManager *manager;
        ScopeOp *next;
        ScopeOpKind kind;
        ScopeOpState state;
        char *name;
        char *job;         /* the job's object path, once the reply came */
        char *job_result;  /* a JobRemoved that came before the reply */
        unsigned attempts; /* GetUnit calls */
        sd_bus_slot *slot;
        sd_event_source *timer; /* the operation's time limit */
        sd_event_source *retry; /* the next GetUnit */
        sd_event_source *defer; /* reports the result */
        int error;
        char **names; /* SCOPE_OP_LIST result */
        ScopeDone done;
        ScopeListDone list_done;
        void *userdata;
};

struct ScopeManager {
        sd_event *event;
        char *address;
        bool address_auto;
        sd_bus *bus;
        bool ready;
        char reason[256];
        bool expected;           /* scope_manager_is_expected() */
        bool announced_expected; /* as ready_cb last heard it */
        sd_event_source *reconnect;
        ScopeOp *ops;
        unsigned test_unconfirmable;
        ScopeReadyCallback ready_cb;
        void *ready_userdata;
};

static void scope_manager_connect(ScopeManager *m);

static void scope_manager_set_ready(ScopeManager *m, bool ready, const char *reason) {
        bool changed = m->ready != ready || !streq(m->reason, reason) || m->expected != m->announced_expected;

        m->ready = ready;
        m->announced_expected = m->expected;
        snprintf(m->reason, sizeof m->reason, "%s", reason);
        if (changed && m->ready_cb)
                m->ready_cb(ready, m->reason, m->ready_userdata);
}

static int scope_on_reconnect(sd_event_source *s, uint64_t usec, void *userdata) {
        ScopeManager *m = userdata;

        m->reconnect = sd_event_source_disable_unref(m->reconnect);
        m->bus = sd_bus_flush_close_unref(m->bus);
        scope_manager_connect(m);
        return 0;
}

/* Fail every operation and try again later (the connection itself is
 * dropped then: this may run inside one of its callbacks). */
static void scope_manager_lose(ScopeManager *m, const char *reason) {
        scope_manager_set_ready(m, false, reason);
        for (ScopeOp *op = m->ops; op; op = op->next)
                if (op->state != SCOPE_OP_DONE) {
                        op->slot = sd_bus_slot_unref(op->slot);
                        op->error = -ECONNRESET;
                        op->state = SCOPE_OP_DONE;
                        (void) sd_event_source_set_enabled(op->defer, SD_EVENT_ONESHOT);
                }
        if (!m->reconnect &&
            sd_event_add_time_relative(
                    m->event, &m->reconnect, CLOCK_MONOTONIC, SCOPE_RECONNECT_USEC, 0, scope_on_reconnect, m) >=
                    0)
                (void) sd_event_source_set_description(m->reconnect, "scope-reconnect");
}

static void scope_op_finish(ScopeOp *op, int error) {
        if (op->state == SCOPE_OP_DONE)
                return;
        op->state = SCOPE_OP_DONE;
        op->error = error;
        op->slot = sd_bus_slot_unref(op->slot);
        op->retry = sd_event_source_disable_unref(op->retry);
        /* Report from a defer: never inside an sd-bus callback. */
        (void) sd_event_source_set_enabled(op->defer, SD_EVENT_ONESHOT);
}

/* Take op out of its manager's list: the manager no longer fails or frees
 * it (its callback is running, and may free the manager). */
static void scope_op_detach(ScopeOp *op) {
        if (!op->manager)
                return;
        for (ScopeOp **p = &op->manager->ops; *p; p = &(*p)->next)
                if (*p == op) {
                        *p = op->next;
                        break;
                }
        op->manager = NULL;
}

static ScopeOp *scope_op_free(ScopeOp *op) {
        if (!op)
                return NULL;
        scope_op_detach(op);
        sd_bus_slot_unref(op->slot);
        sd_event_source_disable_unref(op->timer);
        sd_event_source_disable_unref(op->retry);
        sd_event_source_disable_unref(op->defer);
        strv_free(op->names);
        free(op->name);
        free(op->job);
        free(op->job_result);
        free(op);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(ScopeOp *, scope_op_free);

void scope_op_cancel(ScopeOp *op) {
        scope_op_free(op);
}

/* The operation is done: its callback, then it is freed. */
static int scope_op_on_defer(sd_event_source *s, void *userdata) {
        ScopeOp *op = userdata;

        scope_op_detach(op);
        if (op->kind == SCOPE_OP_LIST)
                op->list_done(op, op->error, op->names, op->userdata);
        else
                op->done(op, op->error, op->userdata);
        scope_op_free(op);
        return 0;
}

static int scope_op_on_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        ScopeOp *op = userdata;

        log_warning(
                "The user manager did not finish %s of %s in time.",
                op->kind == SCOPE_OP_STOP ? "the stop" : "an operation",
                op->name ? op->name : "units");
        scope_op_finish(op, -ETIMEDOUT);
        return 0;
}

static int scope_op_new(ScopeManager *m, ScopeOpKind kind, const char *name, void *userdata, ScopeOp **ret) {
        _cleanup_(scope_op_freep) ScopeOp *op = NULL;
        int r;

        if (!m->bus || !m->ready)
                return -ENOTCONN;
        op = calloc(1, sizeof *op);
        if (!op)
                return -ENOMEM;
        op->manager = m;
        op->kind = kind;
        op->userdata = userdata;
        op->next = m->ops;
        m->ops = op;
        if (name && !(op->name = strdup(name)))
                return -ENOMEM;
        r = sd_event_add_defer(m->event, &op->defer, scope_op_on_defer, op);
        if (r < 0)
                return r;
        r = sd_event_source_set_enabled(op->defer, SD_EVENT_OFF);
        if (r < 0)
                return r;
        r = sd_event_add_time_relative(
                m->event, &op->timer, CLOCK_MONOTONIC, SCOPE_OP_TIMEOUT_USEC, 0, scope_op_on_timeout, op);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(op->defer, "scope-op-defer");
        (void) sd_event_source_set_description(op->timer, "scope-op-timeout");
        *ret = TAKE_PTR(op);
        return 0;
}

/* The op is under way (the manager's list holds it): *ret borrows it. */
static int scope_op_started(ScopeOp *op, ScopeOp **ret) {
        if (ret)
                *ret = op;
        return 0;
}

static bool error_is(const sd_bus_error *e, const char *name) {
        return sd_bus_error_is_set(e) && streq(e->name, name);
}

static void scope_op_confirm(ScopeOp *op);

static int scope_on_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        ScopeOp *op = userdata;

        op->retry = sd_event_source_disable_unref(op->retry);
        scope_op_confirm(op);
        return 0;
}

static int scope_on_get_unit(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        ScopeOp *op = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        ScopeManager *m = op->manager;

        op->slot = sd_bus_slot_unref(op->slot);
        if (error_is(e, "org.freedesktop.systemd1.NoSuchUnit")) {
                if (TEST_FAULT(m->test_unconfirmable > 0)) {
                        m->test_unconfirmable--;
                        log_warning("Test fault: pretending %s is still loaded.", op->name);
                        scope_op_finish(op, -EBUSY);
                        return 0;
                }
                scope_op_finish(op, 0);
                return 0;
        }
        if (e && sd_bus_error_is_set(e)) {
                log_warning("GetUnit(%s) failed: %s", op->name, e->message ? e->message : e->name);
                scope_op_finish(op, -EIO);
                return 0;
        }
        /* Still loaded: the manager collects it shortly after the job. */
        if (++op->attempts >= SCOPE_CONFIRM_ATTEMPTS) {
                scope_op_finish(op, -EBUSY);
                return 0;
        }
        if (sd_event_add_time_relative(
                    m->event, &op->retry, CLOCK_MONOTONIC, SCOPE_CONFIRM_INTERVAL_USEC, 0, scope_on_retry, op) <
            0)
                scope_op_finish(op, -ENOMEM);
        else
                (void) sd_event_source_set_description(op->retry, "scope-confirm-retry");
        return 0;
}

static void scope_op_confirm(ScopeOp *op) {
        int r;

        op->state = SCOPE_OP_CONFIRMING;
        r = sd_bus_call_method_async(
                op->manager->bus,
                &op->slot,
                SD_DEST,
                SD_PATH,
                SD_MANAGER,
                "GetUnit",
                scope_on_get_unit,
                op,
                "s",
                op->name);
        if (r < 0)
                scope_op_finish(op, r);
}

/* The job of op ended with result. */
static void scope_op_job_done(ScopeOp *op, const char *result) {
        if (op->kind == SCOPE_OP_START) {
                if (!streq(result, "done")) {
                        log_warning("Starting %s ended with \"%s\".", op->name, result);
                        scope_op_finish(op, -EIO);
                } else
                        scope_op_finish(op, 0);
        } else
                scope_op_confirm(op);
}

static int scope_on_job_removed(sd_bus_message *msg, void *userdata, sd_bus_error *ret_error) {
        ScopeManager *m = userdata;
        const char *job, *unit, *result;
        uint32_t id;

        if (sd_bus_message_read(msg, "uoss", &id, &job, &unit, &result) < 0)
                return 0;
        for (ScopeOp *op = m->ops; op; op = op->next) {
                if (!op->name || !streq(op->name, unit))
                        continue;
                if (op->state == SCOPE_OP_AWAIT_JOB && op->job && streq(op->job, job)) {
                        scope_op_job_done(op, result);
                        return 0;
                }
                if (op->state == SCOPE_OP_AWAIT_REPLY &&
                    (op->kind == SCOPE_OP_START || op->kind == SCOPE_OP_STOP) && !op->job_result) {
                        /* It overtook the reply: keep it for then. */
                        op->job_result = strdup(result);
                        free(op->job);
                        op->job = strdup(job);
                        return 0;
                }
        }
        return 0;
}

static int scope_on_job_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        ScopeOp *op = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        const char *job;

        op->slot = sd_bus_slot_unref(op->slot);
        if (e && sd_bus_error_is_set(e)) {
                if (op->kind == SCOPE_OP_STOP && error_is(e, "org.freedesktop.systemd1.NoSuchUnit")) {
                        scope_op_confirm(op); /* gone already: confirm it */
                        return 0;
                }
                log_warning(
                        "%s of %s failed: %s",
                        op->kind == SCOPE_OP_START ? "StartTransientUnit" : "StopUnit",
                        op->name,
                        e->message ? e->message : e->name);
                scope_op_finish(op, error_is(e, "org.freedesktop.systemd1.UnitExists") ? -EEXIST : -EIO);
                return 0;
        }
        if (sd_bus_message_read(reply, "o", &job) < 0) {
                scope_op_finish(op, -EBADMSG);
                return 0;
        }
        if (op->job_result && op->job && streq(op->job, job)) {
                _cleanup_free_ char *result = TAKE_PTR(op->job_result);
                scope_op_job_done(op, result);
                return 0;
        }
        free(op->job);
        free(op->job_result);
        op->job_result = NULL;
        op->job = strdup(job);
        if (!op->job) {
                scope_op_finish(op, -ENOMEM);
                return 0;
        }
        op->state = SCOPE_OP_AWAIT_JOB;
        return 0;
}

/* A message could not be built (out of memory, as systemd's
 * bus_log_create_error()). */
static int scope_log_create_error(int r) {
        return log_error_errno(r, "Failed to create a bus message");
}

int scope_start(
        ScopeManager *m,
        const char *name,
        pid_t pid,
        const ScopeLimits *limits,
        ScopeDone done,
        void *userdata,
        ScopeOp **ret) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *msg = NULL;
        _cleanup_(scope_op_freep) ScopeOp *op = NULL;
        int r;

        assert(m);
        assert(name);

        r = scope_op_new(m, SCOPE_OP_START, name, userdata, &op);
        if (r < 0)
                return r;
        op->done = done;

        /* As systemd-run's start_transient_scope() and machined's
         * manager_start_scope() build it. */
        r = sd_bus_message_new_method_call(m->bus, &msg, SD_DEST, SD_PATH, SD_MANAGER, "StartTransientUnit");
        if (r < 0)
                return scope_log_create_error(r);
        r = sd_bus_message_append(msg, "ss", name, "fail");
        if (r < 0)
                return scope_log_create_error(r);
        r = sd_bus_message_open_container(msg, 'a', "(sv)");
        if (r < 0)
                return scope_log_create_error(r);
        r = sd_bus_message_append(
                msg,
                "(sv)(sv)(sv)(sv)(sv)(sv)",
                "Description",
                "s",
                "wikiweb run_python",
                "PIDs",
                "au",
                1,
                (uint32_t) pid,
                "Delegate",
                "b",
                1,
                "CollectMode",
                "s",
                "inactive-or-failed",
                "KillSignal",
                "i",
                SIGKILL,
                "SendSIGKILL",
                "b",
                1);
        if (r < 0)
                return scope_log_create_error(r);
        if (limits && limits->memory_max_bytes > 0) {
                r = sd_bus_message_append(msg, "(sv)", "MemoryMax", "t", limits->memory_max_bytes);
                if (r < 0)
                        return scope_log_create_error(r);
        }
        if (limits && limits->tasks_max > 0) {
                r = sd_bus_message_append(msg, "(sv)", "TasksMax", "t", limits->tasks_max);
                if (r < 0)
                        return scope_log_create_error(r);
        }
        if (limits && limits->cpu_quota_usec > 0) {
                r = sd_bus_message_append(msg, "(sv)", "CPUQuotaPerSecUSec", "t", limits->cpu_quota_usec);
                if (r < 0)
                        return scope_log_create_error(r);
        }
        r = sd_bus_message_close_container(msg);
        if (r < 0)
                return scope_log_create_error(r);
        r = sd_bus_message_append(msg, "a(sa(sv))", 0);
        if (r < 0)
                return scope_log_create_error(r);
        r = sd_bus_call_async(m->bus, &op->slot, msg, scope_on_job_reply, op, SCOPE_OP_TIMEOUT_USEC);
        if (r < 0)
                return log_debug_errno(r, "Failed to call StartTransientUnit(%s)", name);
        return scope_op_started(TAKE_PTR(op), ret);
}

static int scope_on_kill_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        ScopeOp *op = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);

        op->slot = sd_bus_slot_unref(op->slot);
        if (error_is(e, "org.freedesktop.systemd1.NoSuchUnit"))
                scope_op_finish(op, -ENOENT);
        else if (e && sd_bus_error_is_set(e))
                scope_op_finish(op, -EIO);
        else
                scope_op_finish(op, 0);
        return 0;
}

int scope_kill(ScopeManager *m, const char *name, ScopeDone done, void *userdata, ScopeOp **ret) {
        _cleanup_(scope_op_freep) ScopeOp *op = NULL;
        int r;

        assert(m);
        assert(name);

        r = scope_op_new(m, SCOPE_OP_KILL, name, userdata, &op);
        if (r < 0)
                return r;
        op->done = done;
        r = sd_bus_call_method_async(
                m->bus,
                &op->slot,
                SD_DEST,
                SD_PATH,
                SD_MANAGER,
                "KillUnit",
                scope_on_kill_reply,
                op,
                "ssi",
                name,
                "all",
                SIGKILL);
        if (r < 0)
                return r;
        return scope_op_started(TAKE_PTR(op), ret);
}

int scope_stop(ScopeManager *m, const char *name, ScopeDone done, void *userdata, ScopeOp **ret) {
        _cleanup_(scope_op_freep) ScopeOp *op = NULL;
        int r;

        assert(m);
        assert(name);

        r = scope_op_new(m, SCOPE_OP_STOP, name, userdata, &op);
        if (r < 0)
                return r;
        op->done = done;
        r = sd_bus_call_method_async(
                m->bus, &op->slot, SD_DEST, SD_PATH, SD_MANAGER, "StopUnit", scope_on_job_reply, op, "ss", name, "fail");
        if (r < 0)
                return r;
        return scope_op_started(TAKE_PTR(op), ret);
}

static int scope_on_list_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        ScopeOp *op = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        size_t n = 0, cap = 0;
        const char *name;
        int r;

        op->slot = sd_bus_slot_unref(op->slot);
        if (e && sd_bus_error_is_set(e)) {
                scope_op_finish(op, -EIO);
                return 0;
        }
        r = sd_bus_message_enter_container(reply, 'a', "(ssssssouso)");
        while (r >= 0 &&
               (r = sd_bus_message_read(
                        reply, "(ssssssouso)", &name, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)) >
                       0) {
                if (n + 2 > cap) {
                        size_t nc = cap ? cap * 2 : 8;
                        char **nn = reallocarray(op->names, nc, sizeof *nn);
                        if (!nn) {
                                r = -ENOMEM;
                                break;
                        }
                        op->names = nn;
                        cap = nc;
                }
                op->names[n] = strdup(name);
                if (!op->names[n]) {
                        r = -ENOMEM;
                        break;
                }
                op->names[++n] = NULL;
        }
        scope_op_finish(op, r < 0 ? r : 0);
        return 0;
}

int scope_list(ScopeManager *m, const char *pattern, ScopeListDone done, void *userdata, ScopeOp **ret) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *msg = NULL;
        _cleanup_(scope_op_freep) ScopeOp *op = NULL;
        int r;

        assert(m);
        assert(pattern);

        r = scope_op_new(m, SCOPE_OP_LIST, NULL, userdata, &op);
        if (r < 0)
                return r;
        op->list_done = done;
        r = sd_bus_message_new_method_call(m->bus, &msg, SD_DEST, SD_PATH, SD_MANAGER, "ListUnitsByPatterns");
        if (r < 0)
                return scope_log_create_error(r);
        r = sd_bus_message_append(msg, "asas", 0, 1, pattern);
        if (r < 0)
                return scope_log_create_error(r);
        r = sd_bus_call_async(m->bus, &op->slot, msg, scope_on_list_reply, op, SCOPE_OP_TIMEOUT_USEC);
        if (r < 0)
                return log_debug_errno(r, "Failed to call ListUnitsByPatterns(%s)", pattern);
        return scope_op_started(TAKE_PTR(op), ret);
}

static int scope_on_disconnected(sd_bus_message *msg, void *userdata, sd_bus_error *ret_error) {
        ScopeManager *m = userdata;

        log_warning("Lost the connection to the user manager's bus; reconnecting.");
        scope_manager_lose(m, "lost the connection to the user manager's bus");
        return 0;
}

static int scope_on_subscribe(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        ScopeManager *m = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        char reason[256];

        if (e && sd_bus_error_is_set(e)) {
                snprintf(
                        reason,
                        sizeof reason,
                        "the user manager did not answer on %s: %s",
                        m->address,
                        e->message ? e->message : e->name);
                scope_manager_lose(m, reason);
                return 0;
        }
        scope_manager_set_ready(m, true, "");
        return 0;
}

/* Where the user bus is: under the runtime directory when the unit binds
 * /run/user there (ProtectHome= hides the real one), else /run/user. */
static int scope_manager_pick_address(ScopeManager *m) {
        const char *rd = getenv("RUNTIME_DIRECTORY");
        _cleanup_free_ char *p = NULL;
        char *a = NULL;

        if (rd && *rd && !strchr(rd, ':') && asprintf(&p, "%s/user/%u/bus", rd, (unsigned) getuid()) >= 0 &&
            access(p, F_OK) == 0) {
                if (asprintf(&a, "unix:path=%s", p) < 0)
                        return -ENOMEM;
        } else if (asprintf(&a, "unix:path=/run/user/%u/bus", (unsigned) getuid()) < 0)
                return -ENOMEM;
        free(m->address);
        m->address = a;
        return 0;
}

/* A connection to m->address on m's event loop, with the JobRemoved and
 * Disconnected matches and Subscribe() sent. Each failing step is logged
 * (debug: the caller says why the sandbox is unavailable). */
static int scope_manager_open_bus(ScopeManager *m, sd_bus **ret) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        int r;

        r = sd_bus_new(&bus);
        if (r < 0)
                return log_debug_errno(r, "Failed to allocate a bus");
        r = sd_bus_set_address(bus, m->address);
        if (r < 0)
                return log_debug_errno(r, "Failed to set the bus address %s", m->address);
        r = sd_bus_set_bus_client(bus, true);
        if (r < 0)
                return log_debug_errno(r, "Failed to make the bus a client");
        r = sd_bus_start(bus);
        if (r < 0)
                return log_debug_errno(r, "Failed to connect to %s", m->address);
        r = sd_bus_attach_event(bus, m->event, SD_EVENT_PRIORITY_NORMAL);
        if (r < 0)
                return log_debug_errno(r, "Failed to attach the bus to the event loop");
        /* The match before any call (bus_wait_for_jobs_new()). */
        r = sd_bus_match_signal(bus, NULL, SD_DEST, SD_PATH, SD_MANAGER, "JobRemoved", scope_on_job_removed, m);
        if (r < 0)
                return log_debug_errno(r, "Failed to match JobRemoved");
        r = sd_bus_match_signal(
                bus,
                NULL,
                NULL,
                "/org/freedesktop/DBus/Local",
                "org.freedesktop.DBus.Local",
                "Disconnected",
                scope_on_disconnected,
                m);
        if (r < 0)
                return log_debug_errno(r, "Failed to match Disconnected");
        /* Without Subscribe() the manager sends no JobRemoved. */
        r = sd_bus_call_method_async(
                bus, NULL, SD_DEST, SD_PATH, SD_MANAGER, "Subscribe", scope_on_subscribe, m, NULL);
        if (r < 0)
                return log_debug_errno(r, "Failed to call Subscribe()");
        *ret = TAKE_PTR(bus);
        return 0;
}

/* Whether the service user lingers: logind starts its manager at boot
 * (and at "loginctl enable-linger"). */
static bool scope_user_lingers(void) {
        _cleanup_free_ char *path = NULL;
        struct passwd pw, *found = NULL;
        char buf[4096];

        if (getpwuid_r(getuid(), &pw, buf, sizeof buf, &found) != 0 || !found)
                return false;
        if (asprintf(&path, "/var/lib/systemd/linger/%s", found->pw_name) < 0)
                return false;
        return access(path, F_OK) == 0;
}

/* scope_manager_is_expected(), for the address just picked. */
static bool scope_manager_find_expected(ScopeManager *m) {
        const char *path;

        if (!m->address_auto)
                return true;
        path = strneq(m->address, "unix:path=", STRLEN("unix:path=")) ? m->address + STRLEN("unix:path=") :
                                                                        NULL;
        if (path && access(path, F_OK) == 0)
                return true;
        return scope_user_lingers();
}

static void scope_manager_connect(ScopeManager *m) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        char reason[256];
        int r;

        if (m->address_auto && scope_manager_pick_address(m) < 0) {
                scope_manager_lose(m, "out of memory");
                return;
        }
        m->expected = scope_manager_find_expected(m);

        r = scope_manager_open_bus(m, &bus);
        if (r < 0) {
                snprintf(
                        reason,
                        sizeof reason,
                        "cannot connect to the user manager's bus %s: %s",
                        m->address,
                        strerror(-r));
                m->bus = NULL;
                scope_manager_lose(m, reason);
                return;
        }
        m->bus = TAKE_PTR(bus);
        snprintf(reason, sizeof reason, "waiting for the user manager on %s", m->address);
        scope_manager_set_ready(m, false, reason);
}

int scope_manager_new(sd_event *event, const char *address, ScopeManager **ret) {
        _cleanup_(scope_manager_freep) ScopeManager *m = calloc(1, sizeof *m);

        assert(event);
        assert(ret);

        if (!m)
                return -ENOMEM;
        m->event = sd_event_ref(event);
        if (address) {
                m->address = strdup(address);
                if (!m->address)
                        return -ENOMEM;
        } else
                m->address_auto = true;
        scope_manager_connect(m);
        *ret = TAKE_PTR(m);
        return 0;
}

ScopeManager *scope_manager_free(ScopeManager *m) {
        if (!m)
                return NULL;
        while (m->ops)
                scope_op_free(m->ops);
        m->reconnect = sd_event_source_disable_unref(m->reconnect);
        m->bus = sd_bus_flush_close_unref(m->bus);
        sd_event_unref(m->event);
        free(m->address);
        free(m);
        return NULL;
}

void scope_manager_set_ready_callback(ScopeManager *m, ScopeReadyCallback cb, void *userdata) {
        assert(m);

        m->ready_cb = cb;
        m->ready_userdata = userdata;
}

bool scope_manager_is_ready(const ScopeManager *m) {
        assert(m);
        return m->ready;
}

const char *scope_manager_reason(const ScopeManager *m) {
        assert(m);
        return m->reason;
}

bool scope_manager_is_expected(const ScopeManager *m) {
        assert(m);
        return m->ready || m->expected;
}

#if ENABLE_TEST_FAULTS
void scope_manager_set_test_unconfirmable(ScopeManager *m, unsigned n) {
        assert(m);
        m->test_unconfirmable = n;
}
#endif

int scope_name(const char *query_id, unsigned n, char **ret) {
        size_t len = strlen(query_id);

        if (len == 0 || len > 64)
                return -EINVAL;
        for (size_t i = 0; i < len; i++) {
                char c = query_id[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
                        return -EINVAL;
        }
        return asprintf(ret, SCOPE_PREFIX "%s-%u.scope", query_id, n) < 0 ? -ENOMEM : 0;
}
