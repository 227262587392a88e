/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "bus/bus-polkit.h"
#include "bus/queue-bus.h"
#include "manager/manager.h"
#include "shared/log.h"
#include "shared/macro.h"

#define QUEUE_BUS_NAME "org.wikiweb.Queue1"
#define QUEUE_BUS_PATH "/org/wikiweb/Queue1"
#define QUEUE_BUS_INTERFACE "org.wikiweb.Queue1"
/* The polkit action of every method that acts (API.md 12.1). */
#define QUEUE_BUS_POLKIT_ACTION "org.wikiweb.queue.manage"

/* The values of every property that emits PropertiesChanged, as last
 * emitted (or as read at start-up). */
typedef struct QueueBusSnapshot {
        AdmissionState state;
        bool draining;
        uint64_t queue_length;
        usec_t average_usec;
        char running_query_id[QUERY_ID_MAX];
        char running_phase[QUEUE_BUS_PHASE_MAX];
        uint32_t slots_running;
        uint32_t slots_reserved;
        uint64_t running_queries_hash; /* of RunningQueries' value */
        bool degraded;
        uint64_t queries_started;
        uint64_t queries_failed;
        uint64_t tickets_expired;
} QueueBusSnapshot;

struct QueueBus {
        sd_event *event;      /* borrowed */
        Admission *admission; /* borrowed */
        Manager *manager;     /* borrowed, NULL: none (queue_bus_set_manager()) */

        sd_bus *bus;
        sd_bus_slot *object_slot;
        sd_bus_slot *disconnected_slot;
        sd_event_source *flush_source; /* one-shot defer: PropertiesChanged */

        bool degraded;
        bool disconnected;
        uint64_t queries_failed;
        char running_phase[QUEUE_BUS_PHASE_MAX]; /* API.md 11.4 */

        QueueBusSnapshot last;

        PolkitRegistry *polkit;
        QueueBusCancelHandler cancel_handler;
        void *cancel_userdata;
};

/* RunningQueries: each query that holds a slot, oldest claim first, with
 * its phase and user: the Manager's queries, or without one the
 * controller's running queries, the phase known for the oldest only
 * (queue_bus_set_running_phase()), no user. */
typedef void (*RunningQueryVisitor)(const char *id, const char *phase, const char *user, void *userdata);

typedef struct RunningWalk {
        const QueueBus *b;
        RunningQueryVisitor f;
        void *userdata;
        bool first;
} RunningWalk;

static void running_walk_one(const char *query_id, unsigned slot, usec_t since, void *userdata) {
        RunningWalk *w = userdata;

        w->f(query_id, w->first ? w->b->running_phase : "", NULL, w->userdata);
        w->first = false;
}

static void running_walk_query(ManagerQuery *q, void *userdata) {
        RunningWalk *w = userdata;

        w->f(manager_query_id(q), manager_query_phase(q), manager_query_user(q), w->userdata);
}

static void foreach_running_query(const QueueBus *b, RunningQueryVisitor f, void *userdata) {
        RunningWalk w = { .b = b, .f = f, .userdata = userdata, .first = true };

        if (b->manager)
                manager_foreach_query(b->manager, running_walk_query, &w);
        else
                admission_foreach_running(b->admission, running_walk_one, &w);
}

/* RunningQueryId: the oldest running query's id, "" when none runs. */
static void running_first_id(const char *id, const char *phase, const char *user, void *userdata) {
        const char **first = userdata;

        if (!*first)
                *first = id;
}

static const char *running_query_id(const QueueBus *b) {
        const char *id = NULL;

        foreach_running_query(b, running_first_id, &id);
        return id ? id : "";
}

/* FNV-1a over "id\0phase\0" of each: a change of the value changes it. */
static void running_hash_one(const char *id, const char *phase, const char *user, void *userdata) {
        uint64_t *h = userdata;

        for (const char *s = id;; s++) {
                *h = (*h ^ (uint8_t) *s) * UINT64_C(0x100000001b3);
                if (!*s)
                        break;
        }
        for (const char *s = phase;; s++) {
                *h = (*h ^ (uint8_t) *s) * UINT64_C(0x100000001b3);
                if (!*s)
                        break;
        }
}

static void snapshot_take(const QueueBus *b, QueueBusSnapshot *ret) {
        AdmissionSlotCounts slots;
        AdmissionCounters counters;
        const char *running = running_query_id(b);

        admission_get_counters(b->admission, &counters);
        admission_get_slot_counts(b->admission, &slots);
        *ret = (QueueBusSnapshot){
                .slots_running = slots.running,
                .slots_reserved = slots.reserved,
                .running_queries_hash = UINT64_C(0xcbf29ce484222325),
                .state = admission_get_state(b->admission),
                .draining = admission_is_draining(b->admission),
                .queue_length = admission_queue_length(b->admission),
                .average_usec = admission_average_usec(b->admission),
                .degraded = b->degraded,
                .queries_started = counters.queries_started,
                .queries_failed = b->queries_failed,
                .tickets_expired = counters.tickets_expired,
        };
        (void) snprintf(ret->running_query_id, sizeof ret->running_query_id, "%s", running ? running : "");
        memcpy(ret->running_phase, b->running_phase, sizeof ret->running_phase);
        foreach_running_query(b, running_hash_one, &ret->running_queries_hash);
}

/* D-Bus "u" properties: the machine counts in uint64_t, its caps (1000000
 * tickets) fit, but never wrap silently. */
static uint32_t clamp_u32(uint64_t v) {
        return v > UINT32_MAX ? UINT32_MAX : (uint32_t) v;
}

/* One sd-bus property getter per property: expr computes the value from b,
 * the QueueBus, and it is appended with the D-Bus signature sig. */
#define DEFINE_PROPERTY_GETTER(name, sig, type, expr)                    \
        static int property_get_##name(                                  \
                sd_bus *bus,                                             \
                const char *path,                                        \
                const char *interface,                                   \
                const char *property,                                    \
                sd_bus_message *reply,                                   \
                void *userdata,                                          \
                sd_bus_error *error) {                                   \
                QueueBus *b = userdata;                                  \
                return sd_bus_message_append(reply, sig, (type) (expr)); \
        }                                                                \
        struct __useless_struct_to_allow_trailing_semicolon__

DEFINE_PROPERTY_GETTER(state, "s", const char *, admission_state_to_string(admission_get_state(b->admission)));
DEFINE_PROPERTY_GETTER(admission, "s", const char *, admission_is_draining(b->admission) ? "draining" : "open");
DEFINE_PROPERTY_GETTER(queue_length, "u", uint32_t, clamp_u32(admission_queue_length(b->admission)));
DEFINE_PROPERTY_GETTER(max_length, "u", uint32_t, clamp_u32(admission_get_settings(b->admission)->max_length));
DEFINE_PROPERTY_GETTER(reservation, "t", uint64_t, admission_get_settings(b->admission)->reservation_usec);
DEFINE_PROPERTY_GETTER(heartbeat, "t", uint64_t, admission_get_settings(b->admission)->heartbeat_usec);
DEFINE_PROPERTY_GETTER(average, "t", uint64_t, admission_average_usec(b->admission));
DEFINE_PROPERTY_GETTER(running_query_id, "s", const char *, running_query_id(b));
DEFINE_PROPERTY_GETTER(running_phase, "s", const char *, b->running_phase);
DEFINE_PROPERTY_GETTER(health, "s", const char *, b->degraded ? "degraded" : "ok");

static uint32_t slot_count(const QueueBus *b, AdmissionState state) {
        AdmissionSlotCounts c;

        admission_get_slot_counts(b->admission, &c);
        return state == ADMISSION_RUNNING ? c.running : state == ADMISSION_RESERVED ? c.reserved : c.total;
}

DEFINE_PROPERTY_GETTER(slots, "u", uint32_t, slot_count(b, _ADMISSION_STATE_INVALID));
DEFINE_PROPERTY_GETTER(slots_running, "u", uint32_t, slot_count(b, ADMISSION_RUNNING));
DEFINE_PROPERTY_GETTER(slots_reserved, "u", uint32_t, slot_count(b, ADMISSION_RESERVED));

typedef struct AppendContext {
        sd_bus_message *reply;
        int r; /* first error */
} AppendContext;

static void running_append_one(const char *id, const char *phase, const char *user, void *userdata) {
        AppendContext *c = userdata;
        int r;

        if (c->r < 0)
                return;
        r = sd_bus_message_append(c->reply, "(ss)", id, phase);
        if (r < 0)
                c->r = r;
}

static int property_get_running_queries(
        sd_bus *bus,
        const char *path,
        const char *interface,
        const char *property,
        sd_bus_message *reply,
        void *userdata,
        sd_bus_error *error) {
        AppendContext c = { .reply = reply };
        int r;

        r = sd_bus_message_open_container(reply, 'a', "(ss)");
        if (r < 0)
                return r;
        foreach_running_query(userdata, running_append_one, &c);
        if (c.r < 0)
                return c.r;
        return sd_bus_message_close_container(reply);
}

static int property_get_counter(
        sd_bus *bus,
        const char *path,
        const char *interface,
        const char *property,
        sd_bus_message *reply,
        void *userdata,
        sd_bus_error *error) {
        QueueBus *b = userdata;
        AdmissionCounters counters;
        uint64_t v;

        admission_get_counters(b->admission, &counters);
        if (streq(property, "QueriesStarted"))
                v = counters.queries_started;
        else if (streq(property, "TicketsExpired"))
                v = counters.tickets_expired;
        else if (streq(property, "QueriesFailed"))
                v = b->queries_failed;
        else
                return -EINVAL;
        return sd_bus_message_append(reply, "t", v);
}

typedef struct ListContext {
        sd_bus_message *reply;
        usec_t now_mono;
        int r; /* first error */
} ListContext;

static void list_one(const TicketView *t, void *userdata) {
        ListContext *c = userdata;
        usec_t reservation = 0;
        int r;

        if (c->r < 0)
                return;
        if (t->reservation_deadline != USEC_INFINITY)
                reservation = monotonic_to_wallclock(t->reservation_deadline);
        r = sd_bus_message_append(
                c->reply,
                "(ssuttts)",
                t->id,
                ticket_status_to_string(t->status),
                clamp_u32(t->position),
                (uint64_t) monotonic_to_wallclock(t->joined),
                (uint64_t) monotonic_to_wallclock(t->heartbeat_deadline),
                (uint64_t) reservation,
                t->user ? t->user : "");
        if (r < 0)
                c->r = r;
}

/* Only root may see the tickets. The bus policy says so too; this check
 * holds even on a bus without our policy (a private test bus, or a
 * misinstalled policy file). */
static int check_caller_is_root(sd_bus_message *m, sd_bus_error *error) {
        int r = bus_sender_is_root(m);

        if (r < 0)
                return sd_bus_error_set(
                        error, SD_BUS_ERROR_ACCESS_DENIED, "Cannot determine the caller's user; access denied.");
        if (r == 0)
                return sd_bus_error_set(
                        error,
                        SD_BUS_ERROR_ACCESS_DENIED,
                        "Only root may list tickets, running queries and their users.");
        return 0;
}

static int method_list_tickets(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        QueueBus *b = userdata;
        AdmissionStatus status;
        ListContext c;
        int r;

        r = check_caller_is_root(m, error);
        if (r < 0)
                return r;

        c = (ListContext){ .now_mono = now(CLOCK_MONOTONIC) };
        /* Apply the expiries due now first (without heartbeating anybody),
         * so a late timer never shows an expired ticket. */
        admission_peek(b->admission, NULL, c.now_mono, &status);

        r = sd_bus_message_new_method_return(m, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, 'a', "(ssuttts)");
        if (r < 0)
                return r;
        c.reply = reply;
        admission_foreach_ticket(b->admission, list_one, &c);
        if (c.r < 0)
                return c.r;
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

/* ListRunningQueries: RunningQueries with each query's user (API.md
 * "Identity"), root only like the tickets. */
typedef struct RunningListContext {
        sd_bus_message *reply;
        int r; /* first error */
} RunningListContext;

static void running_list_one(const char *id, const char *phase, const char *user, void *userdata) {
        RunningListContext *c = userdata;
        int r;

        if (c->r < 0)
                return;
        r = sd_bus_message_append(c->reply, "(sss)", id, phase, user ? user : "");
        if (r < 0)
                c->r = r;
}

static int method_list_running_queries(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        QueueBus *b = userdata;
        RunningListContext c = { 0 };
        int r;

        r = check_caller_is_root(m, error);
        if (r < 0)
                return r;
        r = sd_bus_message_new_method_return(m, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, 'a', "(sss)");
        if (r < 0)
                return r;
        c.reply = reply;
        foreach_running_query(b, running_list_one, &c);
        if (c.r < 0)
                return c.r;
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

/* The user of the running query (API.md "Identity"), root only like the
 * tickets: "" when none runs or it is anonymous. */
static int method_get_running_query_user(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        QueueBus *b = userdata;
        ManagerQuery *q = b->manager ? manager_oldest_query(b->manager) : NULL;
        const char *user = q ? manager_query_user(q) : NULL;
        int r;

        r = check_caller_is_root(m, error);
        if (r < 0)
                return r;
        return sd_bus_reply_method_return(m, "s", user ? user : "");
}

static void schedule_flush(QueueBus *b);

/* The methods that act (API.md 12.1) ask polkit first. authorize() reads
 * the method's one "s" argument (ret_id NULL: none) and returns 1 when the
 * call may go on; otherwise the handler returns what it returns mapped by
 * AUTHORIZED_OR_RETURN: an error, or 1 without a reply, as the handler
 * runs again with the same message once polkit has answered. */
static int authorize(QueueBus *b, sd_bus_message *m, const char **ret_id, sd_bus_error *error) {
        int r;

        if (ret_id) {
                r = sd_bus_message_read(m, "s", ret_id);
                if (r < 0)
                        return r;
        }
        r = bus_verify_polkit_async(m, QUEUE_BUS_POLKIT_ACTION, &b->polkit, error);
        return r < 0 ? r : r > 0 ? 1 : 0;
}

#define AUTHORIZED_OR_RETURN(r)                   \
        do {                                      \
                if ((r) <= 0)                     \
                        return (r) < 0 ? (r) : 1; \
        } while (0)

/* Drain (draining true) and Resume: idempotent. */
static int set_admission(QueueBus *b, sd_bus_message *m, bool draining, sd_bus_error *error) {
        int r;

        r = authorize(b, m, NULL, error);
        AUTHORIZED_OR_RETURN(r);

        if (admission_is_draining(b->admission) != draining) {
                if (b->manager)
                        manager_set_draining(b->manager, draining);
                else
                        admission_set_draining(b->admission, draining);
                if (draining)
                        log_notice("Admission is draining: new tickets and claims are refused until Resume().");
                else
                        log_notice("Admission is open again.");
                schedule_flush(b);
        }
        return sd_bus_reply_method_return(m, NULL);
}

static int method_drain(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return set_admission(userdata, m, true, error);
}

static int method_resume(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return set_admission(userdata, m, false, error);
}

static int method_cancel_query(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        QueueBus *b = userdata;
        const char *id = NULL;
        int r;

        r = authorize(b, m, &id, error);
        AUTHORIZED_OR_RETURN(r);

        r = b->cancel_handler ? b->cancel_handler(id, b->cancel_userdata) : -ESRCH;
        if (r == -ESRCH)
                return sd_bus_error_setf(
                        error, QUEUE_BUS_ERROR_NO_SUCH_QUERY, "No running query with id '%s'.", id);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Cannot cancel query %s.", id);
        return sd_bus_reply_method_return(m, NULL);
}

static int method_remove_ticket(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        QueueBus *b = userdata;
        const char *id = NULL;
        int r;

        r = authorize(b, m, &id, error);
        AUTHORIZED_OR_RETURN(r);

        /* TicketRemoved(id, "admin") goes out from the admission event. */
        r = b->manager ? manager_remove_ticket(b->manager, id, now(CLOCK_MONOTONIC)) :
                         admission_remove_ticket(b->admission, id, now(CLOCK_MONOTONIC));
        if (r == -ENOENT)
                return sd_bus_error_setf(error, QUEUE_BUS_ERROR_NO_SUCH_TICKET, "No ticket with id '%s'.", id);
        if (r < 0)
                return r;
        return sd_bus_reply_method_return(m, NULL);
}

/* The order here is the order of dbus/org.wikiweb.Queue1.xml. Methods are
 * marked UNPRIVILEGED so sd-bus does not apply its own CAP_SYS_ADMIN check
 * (which needs /proc of the caller; ProtectProc=invisible hides it): the
 * root check is ours, plus the bus policy. */
static const sd_bus_vtable queue_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("State", "s", property_get_state, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Admission", "s", property_get_admission, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("QueueLength", "u", property_get_queue_length, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("MaxLength", "u", property_get_max_length, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("ReservationUSec", "t", property_get_reservation, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("HeartbeatUSec", "t", property_get_heartbeat, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("AverageQueryUSec", "t", property_get_average, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY(
                "RunningQueryId", "s", property_get_running_query_id, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY(
                "RunningQueryPhase", "s", property_get_running_phase, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Slots", "u", property_get_slots, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("SlotsRunning", "u", property_get_slots_running, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY(
                "SlotsReserved", "u", property_get_slots_reserved, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY(
                "RunningQueries", "a(ss)", property_get_running_queries, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Health", "s", property_get_health, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("QueriesStarted", "t", property_get_counter, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("QueriesFailed", "t", property_get_counter, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("TicketsExpired", "t", property_get_counter, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_METHOD_WITH_ARGS(
                "ListTickets",
                SD_BUS_NO_ARGS,
                SD_BUS_RESULT("a(ssuttts)", tickets),
                method_list_tickets,
                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS(
                "GetRunningQueryUser",
                SD_BUS_NO_ARGS,
                SD_BUS_RESULT("s", user),
                method_get_running_query_user,
                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS(
                "ListRunningQueries",
                SD_BUS_NO_ARGS,
                SD_BUS_RESULT("a(sss)", queries),
                method_list_running_queries,
                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS(
                "Drain", SD_BUS_NO_ARGS, SD_BUS_NO_RESULT, method_drain, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS(
                "Resume", SD_BUS_NO_ARGS, SD_BUS_NO_RESULT, method_resume, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS(
                "CancelQuery",
                SD_BUS_ARGS("s", id),
                SD_BUS_NO_RESULT,
                method_cancel_query,
                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS(
                "RemoveTicket",
                SD_BUS_ARGS("s", id),
                SD_BUS_NO_RESULT,
                method_remove_ticket,
                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_SIGNAL_WITH_ARGS("TicketPromoted", SD_BUS_ARGS("s", id), 0),
        SD_BUS_SIGNAL_WITH_ARGS("TicketRemoved", SD_BUS_ARGS("s", id, "s", reason), 0),
        SD_BUS_SIGNAL_WITH_ARGS("QueryFinished", SD_BUS_ARGS("s", query_id, "s", status, "t", duration_usec), 0),
        SD_BUS_VTABLE_END,
};

int queue_bus_flush_properties(QueueBus *b) {
        const char *changed[16];
        QueueBusSnapshot s;
        size_t n = 0;
        int r;

        if (!b || b->disconnected)
                return 0;

        snapshot_take(b, &s);
        if (s.state != b->last.state)
                changed[n++] = "State";
        if (s.draining != b->last.draining)
                changed[n++] = "Admission";
        if (s.queue_length != b->last.queue_length)
                changed[n++] = "QueueLength";
        if (s.average_usec != b->last.average_usec)
                changed[n++] = "AverageQueryUSec";
        if (!streq(s.running_query_id, b->last.running_query_id))
                changed[n++] = "RunningQueryId";
        if (!streq(s.running_phase, b->last.running_phase))
                changed[n++] = "RunningQueryPhase";
        if (s.slots_running != b->last.slots_running)
                changed[n++] = "SlotsRunning";
        if (s.slots_reserved != b->last.slots_reserved)
                changed[n++] = "SlotsReserved";
        if (s.running_queries_hash != b->last.running_queries_hash)
                changed[n++] = "RunningQueries";
        if (s.degraded != b->last.degraded)
                changed[n++] = "Health";
        if (s.queries_started != b->last.queries_started)
                changed[n++] = "QueriesStarted";
        if (s.queries_failed != b->last.queries_failed)
                changed[n++] = "QueriesFailed";
        if (s.tickets_expired != b->last.tickets_expired)
                changed[n++] = "TicketsExpired";
        changed[n] = NULL;

        if (n == 0)
                return 0;

        /* The getters read the same live values the snapshot was taken from:
         * nothing runs in between. */
        r = sd_bus_emit_properties_changed_strv(b->bus, QUEUE_BUS_PATH, QUEUE_BUS_INTERFACE, (char **) changed);
        if (r < 0)
                return log_warning_errno(r, "D-Bus: cannot emit PropertiesChanged");
        b->last = s;
        return 0;
}

static int on_flush(sd_event_source *s, void *userdata) {
        (void) queue_bus_flush_properties(userdata);
        return 0;
}

static void schedule_flush(QueueBus *b) {
        int r;

        r = sd_event_source_set_enabled(b->flush_source, SD_EVENT_ONESHOT);
        if (r < 0) {
                /* Cannot defer: compare now rather than lose the change. */
                log_warning_errno(r, "D-Bus: cannot schedule the property update");
                (void) queue_bus_flush_properties(b);
        }
}

static int on_disconnected(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        /* The HTTP service goes on without its admin view; dbus-daemon is
         * not restartable on a running system anyway. */
        QueueBus *b = userdata;

        log_warning("D-Bus: disconnected from the bus; the %s object is gone.", QUEUE_BUS_NAME);
        b->disconnected = true;
        return 0;
}

int queue_bus_new(sd_event *event, Admission *admission, const char *address, QueueBus **ret) {
        _cleanup_(queue_bus_freep) QueueBus *b = NULL;
        int r;

        if (!event || !admission || !ret)
                return -EINVAL;

        b = calloc(1, sizeof *b);
        if (!b)
                return -ENOMEM;
        b->event = event;
        b->admission = admission;

        if (address) {
                r = sd_bus_new(&b->bus);
                if (r < 0)
                        return r;
                r = sd_bus_set_address(b->bus, address);
                if (r < 0)
                        return r;
                r = sd_bus_set_bus_client(b->bus, true);
                if (r < 0)
                        return r;
                r = sd_bus_start(b->bus);
        } else
                r = sd_bus_open_system(&b->bus);
        if (r < 0)
                return log_error_errno(r, "D-Bus: cannot connect to the %s bus", address ? address : "system");

        (void) sd_bus_set_description(b->bus, "queue-bus");

        r = sd_bus_attach_event(b->bus, event, SD_EVENT_PRIORITY_NORMAL);
        if (r < 0)
                return r;

        r = sd_bus_add_object_vtable(
                b->bus, &b->object_slot, QUEUE_BUS_PATH, QUEUE_BUS_INTERFACE, queue_vtable, b);
        if (r < 0)
                return log_error_errno(r, "D-Bus: cannot add the object %s", QUEUE_BUS_PATH);

        r = sd_bus_match_signal(
                b->bus,
                &b->disconnected_slot,
                "org.freedesktop.DBus.Local",
                "/org/freedesktop/DBus/Local",
                "org.freedesktop.DBus.Local",
                "Disconnected",
                on_disconnected,
                b);
        if (r < 0)
                return r;

        r = sd_event_add_defer(event, &b->flush_source, on_flush, b);
        if (r < 0)
                return r;
        r = sd_event_source_set_enabled(b->flush_source, SD_EVENT_OFF);
        if (r < 0)
                return r;
        /* sd-event dispatches one source per iteration, highest priority
         * first: at this priority the comparison runs right after the source
         * that caused the change (an HTTP request, an expiry timer, the end
         * of a query), before anything else can change the machine again.
         * So a transition is never lost to coalescing (a query that fails at
         * once still shows State "running"), while the several events of one
         * transition still give one PropertiesChanged. */
        r = sd_event_source_set_priority(b->flush_source, SD_EVENT_PRIORITY_IMPORTANT);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(b->flush_source, "queue-bus-flush");

        /* What the object shows now is the baseline for PropertiesChanged. */
        snapshot_take(b, &b->last);

        /* Synchronous on purpose: the object is added first, so nobody sees
         * the name without it, and a daemon that cannot own the name (a
         * second instance, a missing policy) learns it here. */
        r = sd_bus_request_name(b->bus, QUEUE_BUS_NAME, 0);
        if (r < 0)
                return log_error_errno(r, "D-Bus: cannot own the name %s", QUEUE_BUS_NAME);

        log_debug("D-Bus: %s ready at %s.", QUEUE_BUS_NAME, QUEUE_BUS_PATH);
        *ret = TAKE_PTR(b);
        return 0;
}

QueueBus *queue_bus_free(QueueBus *b) {
        if (!b)
                return NULL;

        /* A change made just before the loop exited still goes out. */
        if (b->flush_source && sd_event_source_get_enabled(b->flush_source, NULL) > 0)
                (void) queue_bus_flush_properties(b);
        sd_event_source_disable_unref(b->flush_source);
        /* Checks still waiting for polkit are dropped, unanswered. */
        polkit_registry_free(b->polkit);
        sd_bus_slot_unref(b->object_slot);
        sd_bus_slot_unref(b->disconnected_slot);
        /* Queued signals (a last QueryFinished on shutdown) go out first;
         * closing releases the name. */
        sd_bus_flush_close_unref(b->bus);
        free(b);
        return NULL;
}

void queue_bus_admission_event(QueueBus *b, const AdmissionEvent *event) {
        int r = 0;

        if (!b || !event || b->disconnected)
                return;

        switch (event->type) {
        case ADMISSION_EVENT_TICKET_PROMOTED:
                r = sd_bus_emit_signal(
                        b->bus, QUEUE_BUS_PATH, QUEUE_BUS_INTERFACE, "TicketPromoted", "s", event->ticket_id);
                break;
        case ADMISSION_EVENT_TICKET_REMOVED:
                r = sd_bus_emit_signal(
                        b->bus,
                        QUEUE_BUS_PATH,
                        QUEUE_BUS_INTERFACE,
                        "TicketRemoved",
                        "ss",
                        event->ticket_id,
                        remove_reason_to_string(event->reason));
                break;
        default:
                /* TICKET_ADDED, STATE_CHANGED and QUERY_FINISHED show only in
                 * the properties (QueryFinished, the signal, comes from
                 * queue_bus_query_finished() with the query's status). */
                break;
        }
        if (r < 0)
                log_warning_errno(r, "D-Bus: cannot emit a signal");

        schedule_flush(b);
}

void queue_bus_query_finished(QueueBus *b, const char *query_id, const char *status, usec_t duration_usec) {
        int r;

        if (!b || !query_id || !status)
                return;

        if (streq(status, "failed"))
                b->queries_failed++;
        if (b->disconnected)
                return;
        r = sd_bus_emit_signal(
                b->bus,
                QUEUE_BUS_PATH,
                QUEUE_BUS_INTERFACE,
                "QueryFinished",
                "sst",
                query_id,
                status,
                (uint64_t) duration_usec);
        if (r < 0)
                log_warning_errno(r, "D-Bus: cannot emit QueryFinished");
        schedule_flush(b);
}

void queue_bus_set_health(QueueBus *b, bool degraded) {
        if (!b || b->degraded == degraded)
                return;
        b->degraded = degraded;
        schedule_flush(b);
}

void queue_bus_set_running_phase(QueueBus *b, const char *phase) {
        if (!b || streq(b->running_phase, phase ? phase : ""))
                return;
        (void) snprintf(b->running_phase, sizeof b->running_phase, "%s", phase ? phase : "");
        schedule_flush(b);
}

void queue_bus_set_cancel_handler(QueueBus *b, QueueBusCancelHandler handler, void *userdata) {
        if (!b)
                return;
        b->cancel_handler = handler;
        b->cancel_userdata = userdata;
}

sd_bus *queue_bus_get_bus(QueueBus *b) {
        return b ? b->bus : NULL;
}

/* D-Bus CancelQuery (API.md 12.1), once polkit allowed it: the running
 * query stops as at its deadline, through the same cleanup, and is
 * recorded failed with execution_failed. */
#define CANCELLED_BY_ADMIN "Cancelled by an administrator"

static int queue_bus_cancel_query(const char *query_id, void *userdata) {
        QueueBus *b = userdata;
        int r;

        r = manager_cancel_query(b->manager, query_id, CANCELLED_BY_ADMIN);
        if (r < 0)
                return r;
        log_notice("Query %s: cancelled by an administrator.", query_id);
        return 0;
}

/* The Manager's announcements: the admission events, QueryFinished,
 * RunningQueryId/RunningQueryPhase (the oldest query's) and Health. */
static void queue_bus_on_manager_event(Manager *m, const ManagerEvent *ev, void *userdata) {
        QueueBus *b = userdata;
        ManagerHealth h;
        ManagerQuery *oldest;

        switch (ev->type) {
        case MANAGER_ADMISSION:
                queue_bus_admission_event(b, ev->admission);
                return;
        case MANAGER_HEALTH_CHANGED:
                manager_get_health(m, &h);
                queue_bus_set_health(b, h.degraded);
                return;
        case MANAGER_QUERY_DURABLE:
                queue_bus_query_finished(
                        b,
                        manager_query_id(ev->query),
                        ev->outcome->succeeded ? "succeeded" : "failed",
                        ev->outcome->duration);
                break;
        case MANAGER_QUERY_EVENT:
                return;
        default:
                break;
        }
        /* After MANAGER_QUERY_CLEANUP_CONFIRMED the query is still listed. */
        oldest = manager_oldest_query(m);
        if (oldest && ev->type == MANAGER_QUERY_CLEANUP_CONFIRMED && oldest == ev->query)
                oldest = NULL;
        queue_bus_set_running_phase(b, oldest ? manager_query_phase(oldest) : "");
        /* RunningQueries and the slot counts follow every query's start,
         * phase and end, the oldest's or not. */
        schedule_flush(b);
}

int queue_bus_set_manager(QueueBus *b, Manager *m) {
        ManagerHealth h;
        int r;

        if (!b)
                return 0;
        assert(m);
        r = manager_subscribe(m, queue_bus_on_manager_event, b);
        if (r < 0)
                return r;
        b->manager = m;
        queue_bus_set_cancel_handler(b, queue_bus_cancel_query, b);
        manager_get_health(m, &h);
        queue_bus_set_health(b, h.degraded);
        return 0;
}
