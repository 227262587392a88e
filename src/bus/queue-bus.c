/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <pwd.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "bus/bus-polkit.h"
#include "bus/queue-bus.h"
#include "manager/manager-ops.h"
#include "manager/manager.h"
#include "shared/list.h"
#include "shared/log.h"
#include "shared/macro.h"
#include "shared/user-key.h"
#include "store/report.h"

#define QUEUE_BUS_NAME "org.wikiweb.Queue1"
#define QUEUE_BUS_PATH "/org/wikiweb/Queue1"
#define QUEUE_BUS_INTERFACE "org.wikiweb.Queue1"
/* The polkit action of every method that acts (API.md 12.1). */
#define QUEUE_BUS_POLKIT_ACTION "org.wikiweb.queue.manage"
/* EraseUser's own: erasing a person is not managing the queue. */
#define QUEUE_BUS_POLKIT_ERASE_ACTION "org.wikiweb.queue1.erase-user"

typedef struct BusErasure BusErasure;

struct QueueBus {
        sd_event *event;  /* borrowed */
        Manager *manager; /* borrowed */

        sd_bus *bus;
        sd_bus_slot *object_slot;
        sd_bus_slot *disconnected_slot;
        sd_event_source *flush_source; /* one-shot defer: PropertiesChanged */
        bool disconnected;
        bool subscribed;

        /* Of each property that emits PropertiesChanged, the key of the
         * value last emitted (queue_bus_changing[]). */
        uint64_t last[15];

        PolkitRegistry *polkit;
        BusErasure *erasures; /* EraseUser calls under way */
};

static const Admission *queue_bus_admission(const QueueBus *b) {
        return manager_get_admission(b->manager);
}

/* RunningQueries and ListRunningQueries: each query that holds a slot,
 * oldest claim first, from the Manager's record. */
typedef void (*RunningQueryVisitor)(const char *id, const char *phase, const char *user, void *userdata);

typedef struct RunningWalk {
        RunningQueryVisitor f;
        void *userdata;
} RunningWalk;

static void running_walk_query(ManagerQuery *q, void *userdata) {
        RunningWalk *w = userdata;

        w->f(manager_query_id(q), manager_query_phase(q), manager_query_user(q), w->userdata);
}

static void foreach_running_query(const QueueBus *b, RunningQueryVisitor f, void *userdata) {
        manager_foreach_query(b->manager, running_walk_query, &(RunningWalk){ .f = f, .userdata = userdata });
}

/* RunningQueryId and RunningQueryPhase: the oldest running query's. */
static const char *running_query_id(const QueueBus *b) {
        ManagerQuery *q = manager_oldest_query(b->manager);
        return q ? manager_query_id(q) : "";
}

static const char *running_query_phase(const QueueBus *b) {
        ManagerQuery *q = manager_oldest_query(b->manager);
        return q ? manager_query_phase(q) : "";
}

static bool queue_bus_degraded(const QueueBus *b) {
        ManagerHealth h;

        manager_get_health(b->manager, &h);
        return h.degraded;
}

/* Storage and StorageCause: health's "storage" and "storage_cause" ("" when ok). */
static const char *queue_bus_storage(const QueueBus *b) {
        ManagerHealth h;

        manager_get_health(b->manager, &h);
        return history_storage_state_to_string(h.storage);
}

static const char *queue_bus_storage_cause(const QueueBus *b) {
        ManagerHealth h;

        manager_get_health(b->manager, &h);
        return h.storage_cause ? h.storage_cause : "";
}

static uint64_t queue_bus_counter(const QueueBus *b, const char *property) {
        ManagerCounters c;

        manager_get_counters(b->manager, &c);
        if (streq(property, "QueriesStarted"))
                return c.queries_started;
        if (streq(property, "TicketsExpired"))
                return c.tickets_expired;
        assert(streq(property, "QueriesFailed"));
        return c.queries_failed;
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

DEFINE_PROPERTY_GETTER(
        state, "s", const char *, admission_state_to_string(admission_get_state(queue_bus_admission(b))));
DEFINE_PROPERTY_GETTER(
        admission, "s", const char *, admission_is_draining(queue_bus_admission(b)) ? "draining" : "open");
DEFINE_PROPERTY_GETTER(queue_length, "u", uint32_t, clamp_u32(admission_queue_length(queue_bus_admission(b))));
DEFINE_PROPERTY_GETTER(
        max_length, "u", uint32_t, clamp_u32(admission_get_settings(queue_bus_admission(b))->max_length));
DEFINE_PROPERTY_GETTER(
        reservation, "t", uint64_t, admission_get_settings(queue_bus_admission(b))->reservation_usec);
DEFINE_PROPERTY_GETTER(heartbeat, "t", uint64_t, admission_get_settings(queue_bus_admission(b))->heartbeat_usec);
DEFINE_PROPERTY_GETTER(average, "t", uint64_t, manager_average_usec(b->manager));
DEFINE_PROPERTY_GETTER(running_query_id, "s", const char *, running_query_id(b));
DEFINE_PROPERTY_GETTER(running_phase, "s", const char *, running_query_phase(b));
DEFINE_PROPERTY_GETTER(health, "s", const char *, queue_bus_degraded(b) ? "degraded" : "ok");
DEFINE_PROPERTY_GETTER(storage, "s", const char *, queue_bus_storage(b));
DEFINE_PROPERTY_GETTER(storage_cause, "s", const char *, queue_bus_storage_cause(b));
DEFINE_PROPERTY_GETTER(counter, "t", uint64_t, queue_bus_counter(b, property));

static uint32_t slot_count(const QueueBus *b, AdmissionState state) {
        AdmissionSlotCounts c;

        admission_get_slot_counts(queue_bus_admission(b), &c);
        return state == ADMISSION_RUNNING ? c.running : state == ADMISSION_RESERVED ? c.reserved : c.total;
}

DEFINE_PROPERTY_GETTER(slots, "u", uint32_t, slot_count(b, _ADMISSION_STATE_INVALID));
DEFINE_PROPERTY_GETTER(slots_running, "u", uint32_t, slot_count(b, ADMISSION_RUNNING));
DEFINE_PROPERTY_GETTER(slots_reserved, "u", uint32_t, slot_count(b, ADMISSION_RESERVED));

/* The running queries as an array: RunningQueries, a(ss) (id, phase), or
 * with users, ListRunningQueries' a(sss) (API.md "Identity"). */
typedef struct AppendContext {
        sd_bus_message *reply;
        bool with_user;
        int r; /* first error */
} AppendContext;

static void running_append_one(const char *id, const char *phase, const char *user, void *userdata) {
        AppendContext *c = userdata;
        int r;

        if (c->r < 0)
                return;
        if (c->with_user)
                r = sd_bus_message_append(c->reply, "(sss)", id, phase, user ? user : "");
        else
                r = sd_bus_message_append(c->reply, "(ss)", id, phase);
        if (r < 0)
                c->r = r;
}

static int append_running_queries(const QueueBus *b, sd_bus_message *reply, bool with_user) {
        AppendContext c = { .reply = reply, .with_user = with_user };
        int r;

        r = sd_bus_message_open_container(reply, 'a', with_user ? "(sss)" : "(ss)");
        if (r < 0)
                return r;
        foreach_running_query(b, running_append_one, &c);
        if (c.r < 0)
                return c.r;
        return sd_bus_message_close_container(reply);
}

static int property_get_running_queries(
        sd_bus *bus,
        const char *path,
        const char *interface,
        const char *property,
        sd_bus_message *reply,
        void *userdata,
        sd_bus_error *error) {
        return append_running_queries(userdata, reply, /* with_user= */ false);
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
        ListContext c;
        int r;

        r = check_caller_is_root(m, error);
        if (r < 0)
                return r;

        c = (ListContext){ .now_mono = now(CLOCK_MONOTONIC) };
        /* Apply the expiries due now first (without heartbeating anybody),
         * so a late timer never shows an expired ticket. */
        manager_heartbeat(b->manager, NULL, c.now_mono);

        r = sd_bus_message_new_method_return(m, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, 'a', "(ssuttts)");
        if (r < 0)
                return r;
        c.reply = reply;
        admission_foreach_ticket(queue_bus_admission(b), list_one, &c);
        if (c.r < 0)
                return c.r;
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

/* ListRunningQueries: RunningQueries with each query's user (API.md
 * "Identity"), root only like the tickets. */
static int method_list_running_queries(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r;

        r = check_caller_is_root(m, error);
        if (r < 0)
                return r;
        r = sd_bus_message_new_method_return(m, &reply);
        if (r < 0)
                return r;
        r = append_running_queries(userdata, reply, /* with_user= */ true);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

/* ListUnanswered(u days): the unanswered report of API.md 9.2 (the same
 * groups as GET /api/v1/reports/unanswered), root only: it holds what
 * people asked, though it names nobody. days 0 is the default. */
static int method_list_unanswered(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(report_freep) Report *report = NULL;
        QueueBus *b = userdata;
        usec_t t, span;
        uint32_t days;
        int r;

        r = check_caller_is_root(m, error);
        if (r < 0)
                return r;
        r = sd_bus_message_read(m, "u", &days);
        if (r < 0)
                return r;
        if (days == 0)
                days = REPORT_DAYS_DEFAULT;
        if (days < REPORT_DAYS_MIN || days > REPORT_DAYS_MAX)
                return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, "days must be 0 (30) or 1 to 365.");

        t = now(CLOCK_REALTIME);
        span = (usec_t) days * 24 * 3600 * USEC_PER_SEC;
        r = report_unanswered(manager_get_history(b->manager), t > span ? t - span : 0, &report);
        if (r < 0)
                return sd_bus_error_set(error, SD_BUS_ERROR_FAILED, "The report could not be made.");

        r = sd_bus_message_new_method_return(m, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, 'a', "(stttttttas)");
        if (r < 0)
                return r;
        for (size_t i = 0; i < report->n_groups; i++) {
                const ReportGroup *g = &report->groups[i];

                r = sd_bus_message_open_container(reply, 'r', "stttttttas");
                if (r < 0)
                        return r;
                r = sd_bus_message_append(
                        reply,
                        "sttttttt",
                        g->question,
                        g->count,
                        (uint64_t) g->first_asked,
                        (uint64_t) g->last_asked,
                        g->no_sources,
                        g->unverified,
                        g->negative_feedback,
                        g->failed);
                if (r < 0)
                        return r;
                r = sd_bus_message_open_container(reply, 'a', "s");
                if (r < 0)
                        return r;
                for (size_t k = 0; k < g->n_wordings; k++) {
                        r = sd_bus_message_append(reply, "s", g->wordings[k].text);
                        if (r < 0)
                                return r;
                }
                r = sd_bus_message_close_container(reply);
                if (r < 0)
                        return r;
                r = sd_bus_message_close_container(reply);
                if (r < 0)
                        return r;
        }
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

/* The user of the running query (API.md "Identity"), root only like the
 * tickets: "" when none runs or it is anonymous. */
static int method_get_running_query_user(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        QueueBus *b = userdata;
        ManagerQuery *q = manager_oldest_query(b->manager);
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
static int authorize_action(
        QueueBus *b, sd_bus_message *m, const char *action, const char **ret_id, sd_bus_error *error) {
        int r;

        if (ret_id) {
                r = sd_bus_message_read(m, "s", ret_id);
                if (r < 0)
                        return r;
        }
        r = bus_verify_polkit_async(m, action, &b->polkit, error);
        return r < 0 ? r : r > 0 ? 1 : 0;
}

static int authorize(QueueBus *b, sd_bus_message *m, const char **ret_id, sd_bus_error *error) {
        return authorize_action(b, m, QUEUE_BUS_POLKIT_ACTION, ret_id, error);
}

/* The person a method names (EraseUser, ListUserTokens, RevokeUserTokens):
 * an identity name as the trusted proxy gives it (API.md "Identity"), 1 to
 * 256 bytes of UTF-8 without control characters. Their key is the
 * Manager's to derive. */
static int check_user_argument(const char *user, sd_bus_error *error) {
        if (!user || !user_name_is_valid(user, strlen(user)))
                return sd_bus_error_set(
                        error,
                        SD_BUS_ERROR_INVALID_ARGS,
                        "Not a valid identity name: 1 to 256 bytes of UTF-8 without control characters.");
        return 0;
}

/* authorize_action() for a method whose one argument names a person: 1
 * once polkit allowed it and the name is valid, as authorize_action()
 * otherwise. */
static int authorize_person(
        QueueBus *b, sd_bus_message *m, const char *action, const char **ret_name, sd_bus_error *error) {
        int r;

        assert(ret_name);

        r = authorize_action(b, m, action, ret_name, error);
        if (r <= 0)
                return r;
        r = check_user_argument(*ret_name, error);
        if (r < 0)
                return r;
        return 1;
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

        if (admission_is_draining(queue_bus_admission(b)) != draining) {
                manager_set_draining(b->manager, draining);
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

/* D-Bus CancelQuery (API.md 12.1), once polkit allowed it: the running
 * query stops as at its deadline, through the same cleanup, and is
 * recorded failed with execution_failed. */
#define CANCELLED_BY_ADMIN "Cancelled by an administrator"

static int method_cancel_query(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        QueueBus *b = userdata;
        const char *id = NULL;
        int r;

        r = authorize(b, m, &id, error);
        AUTHORIZED_OR_RETURN(r);

        r = manager_cancel_query(b->manager, id, CANCELLED_BY_ADMIN);
        if (r >= 0)
                log_notice("Query %s: cancelled by an administrator.", id);
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
        r = manager_remove_ticket(b->manager, id, now(CLOCK_MONOTONIC));
        if (r == -ENOENT)
                return sd_bus_error_setf(error, QUEUE_BUS_ERROR_NO_SUCH_TICKET, "No ticket with id '%s'.", id);
        if (r < 0)
                return r;
        return sd_bus_reply_method_return(m, NULL);
}

/* D-Bus EraseUser (API.md 12.1), once polkit allowed it
 * (org.wikiweb.queue1.erase-user): the Manager erases the person, and the
 * call is answered when it is done, with how many records went. */
struct BusErasure {
        QueueBus *bus;
        sd_bus_message *call;
        ManagerErasure *erasure;
        BusErasure *erasures_prev, *erasures_next;
};

static BusErasure *bus_erasure_free(BusErasure *e) {
        if (!e)
                return NULL;
        if (e->bus)
                LIST_REMOVE(erasures, e->bus->erasures, e);
        manager_erasure_free(e->erasure);
        sd_bus_message_unref(e->call);
        free(e);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(BusErasure *, bus_erasure_free);

static void queue_bus_on_erased(
        ManagerErasure *erasure, const ManagerError *error, const ManagerErased *result, void *userdata) {
        BusErasure *e = userdata;
        int r;

        if (error)
                r = sd_bus_reply_method_errorf(
                        e->call,
                        error->api_error == API_ERROR_BUSY ? QUEUE_BUS_ERROR_BUSY : SD_BUS_ERROR_FAILED,
                        "%s",
                        error->message ? error->message :
                                         "The history could not be erased; the journal says why.");
        else
                r = sd_bus_reply_method_return(e->call, "t", result->records);
        if (r < 0)
                log_warning_errno(r, "D-Bus: cannot answer EraseUser");
        bus_erasure_free(e);
}

/* "uid 1000 (alice)": who called, for the journal line of the erasure. */
static char *bus_caller_name(sd_bus_message *m) {
        struct passwd pw, *found = NULL;
        char buf[1024], *s = NULL;
        uid_t uid;

        if (bus_sender_euid(m, &uid) < 0)
                return strdup("an unknown caller");
        if (getpwuid_r(uid, &pw, buf, sizeof buf, &found) != 0 || !found)
                found = NULL;
        if (asprintf(&s, "uid %u (%s)", (unsigned) uid, found ? found->pw_name : "no name") < 0)
                return NULL;
        return s;
}

static int method_erase_user(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        _cleanup_(bus_erasure_freep) BusErasure *e = NULL;
        _cleanup_free_ char *by = NULL;
        QueueBus *b = userdata;
        const char *name = NULL;
        ManagerError me;
        int r;

        r = authorize_person(b, m, QUEUE_BUS_POLKIT_ERASE_ACTION, &name, error);
        AUTHORIZED_OR_RETURN(r);
        by = bus_caller_name(m);
        e = calloc(1, sizeof *e);
        if (!by || !e)
                return -ENOMEM;
        e->call = sd_bus_message_ref(m);
        r = manager_erase_user(b->manager, name, by, queue_bus_on_erased, e, &e->erasure, &me);
        if (r < 0)
                return sd_bus_error_set(
                        error,
                        r == -EINVAL ? SD_BUS_ERROR_INVALID_ARGS : SD_BUS_ERROR_NO_MEMORY,
                        me.message ? me.message : "The erasure could not be started.");
        e->bus = b;
        LIST_PREPEND(erasures, b->erasures, e);
        TAKE_PTR(e);
        return 1;
}

/* ListUserTokens(s user): the person's access tokens, once polkit allowed
 * it: id, name, created, expires and last used (0: never), CLOCK_REALTIME
 * microseconds. No secret, no digest. */
static int method_list_user_tokens(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        QueueBus *b = userdata;
        HistoryToken *tokens = NULL;
        const char *user = NULL;
        ManagerError e;
        size_t n = 0;
        int r;

        r = authorize_person(b, m, QUEUE_BUS_POLKIT_ACTION, &user, error);
        AUTHORIZED_OR_RETURN(r);
        if (manager_tokens_list(b->manager, user, &tokens, &n, &e) < 0)
                return sd_bus_error_set(error, SD_BUS_ERROR_FAILED, "The tokens could not be read.");

        r = sd_bus_message_new_method_return(m, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "(ssttt)");
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = sd_bus_message_append(
                        reply,
                        "(ssttt)",
                        tokens[i].id,
                        tokens[i].name,
                        (uint64_t) tokens[i].created_at,
                        (uint64_t) tokens[i].expires_at,
                        (uint64_t) (tokens[i].last_used_at == USEC_INFINITY ? 0 : tokens[i].last_used_at));
        history_tokens_free(tokens, n);
        if (r < 0)
                return r;
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

/* RevokeUserTokens(s user): every access token of the person, once polkit
 * allowed it; how many were revoked. */
static int method_revoke_user_tokens(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        QueueBus *b = userdata;
        const char *user = NULL;
        ManagerError e;
        int r;

        r = authorize_person(b, m, QUEUE_BUS_POLKIT_ACTION, &user, error);
        AUTHORIZED_OR_RETURN(r);
        r = manager_tokens_revoke_user(b->manager, user, &e);
        if (r < 0)
                return sd_bus_error_set(error, SD_BUS_ERROR_FAILED, "The tokens could not be revoked.");
        log_notice("An administrator revoked %i access token(s) of a person.", r);
        return sd_bus_reply_method_return(m, "u", (uint32_t) r);
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
        SD_BUS_PROPERTY("Storage", "s", property_get_storage, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("StorageCause", "s", property_get_storage_cause, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
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
                "ListUnanswered",
                SD_BUS_ARGS("u", days),
                SD_BUS_RESULT("a(stttttttas)", groups),
                method_list_unanswered,
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
        SD_BUS_METHOD_WITH_ARGS(
                "EraseUser",
                SD_BUS_ARGS("s", name),
                SD_BUS_RESULT("t", records),
                method_erase_user,
                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS(
                "ListUserTokens",
                SD_BUS_ARGS("s", user),
                SD_BUS_RESULT("a(ssttt)", tokens),
                method_list_user_tokens,
                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS(
                "RevokeUserTokens",
                SD_BUS_ARGS("s", user),
                SD_BUS_RESULT("u", revoked),
                method_revoke_user_tokens,
                SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_SIGNAL_WITH_ARGS("TicketPromoted", SD_BUS_ARGS("s", id), 0),
        SD_BUS_SIGNAL_WITH_ARGS("TicketRemoved", SD_BUS_ARGS("s", id, "s", reason), 0),
        SD_BUS_SIGNAL_WITH_ARGS("QueryFinished", SD_BUS_ARGS("s", query_id, "s", status, "t", duration_usec), 0),
        SD_BUS_VTABLE_END,
};

/* FNV-1a over the bytes of s and its NUL, continuing from h. */
static uint64_t hash_string(uint64_t h, const char *s) {
        for (;; s++) {
                h = (h ^ (uint8_t) *s) * UINT64_C(0x100000001b3);
                if (!*s)
                        return h;
        }
}

#define HASH_START UINT64_C(0xcbf29ce484222325)

static void running_hash_one(const char *id, const char *phase, const char *user, void *userdata) {
        uint64_t *h = userdata;

        *h = hash_string(hash_string(*h, id), phase);
}

static uint64_t key_state(const QueueBus *b) {
        return (uint64_t) admission_get_state(queue_bus_admission(b));
}
static uint64_t key_admission(const QueueBus *b) {
        return admission_is_draining(queue_bus_admission(b));
}
static uint64_t key_queue_length(const QueueBus *b) {
        return admission_queue_length(queue_bus_admission(b));
}
static uint64_t key_average(const QueueBus *b) {
        return manager_average_usec(b->manager);
}
static uint64_t key_running_query_id(const QueueBus *b) {
        return hash_string(HASH_START, running_query_id(b));
}
static uint64_t key_running_phase(const QueueBus *b) {
        return hash_string(HASH_START, running_query_phase(b));
}
static uint64_t key_slots_running(const QueueBus *b) {
        return slot_count(b, ADMISSION_RUNNING);
}
static uint64_t key_slots_reserved(const QueueBus *b) {
        return slot_count(b, ADMISSION_RESERVED);
}
static uint64_t key_running_queries(const QueueBus *b) {
        uint64_t h = HASH_START;

        foreach_running_query(b, running_hash_one, &h);
        return h;
}
static uint64_t key_health(const QueueBus *b) {
        return queue_bus_degraded(b);
}
static uint64_t key_storage(const QueueBus *b) {
        return hash_string(HASH_START, queue_bus_storage(b));
}
static uint64_t key_storage_cause(const QueueBus *b) {
        return hash_string(HASH_START, queue_bus_storage_cause(b));
}
static uint64_t key_queries_started(const QueueBus *b) {
        return queue_bus_counter(b, "QueriesStarted");
}
static uint64_t key_queries_failed(const QueueBus *b) {
        return queue_bus_counter(b, "QueriesFailed");
}
static uint64_t key_tickets_expired(const QueueBus *b) {
        return queue_bus_counter(b, "TicketsExpired");
}

/* Every property that emits PropertiesChanged, in the order of the
 * interface, with a key of its value read from the Manager: a number as
 * it is, a string or a list by its hash (FNV-1a, 64 bits). */
static const struct {
        const char *name;
        uint64_t (*key)(const QueueBus *b);
} queue_bus_changing[] = {
        { "State", key_state },
        { "Admission", key_admission },
        { "QueueLength", key_queue_length },
        { "AverageQueryUSec", key_average },
        { "RunningQueryId", key_running_query_id },
        { "RunningQueryPhase", key_running_phase },
        { "SlotsRunning", key_slots_running },
        { "SlotsReserved", key_slots_reserved },
        { "RunningQueries", key_running_queries },
        { "Health", key_health },
        { "Storage", key_storage },
        { "StorageCause", key_storage_cause },
        { "QueriesStarted", key_queries_started },
        { "QueriesFailed", key_queries_failed },
        { "TicketsExpired", key_tickets_expired },
};

_Static_assert(ELEMENTSOF(queue_bus_changing) == ELEMENTSOF(((QueueBus *) NULL)->last), "one key per property");

static void queue_bus_keys(const QueueBus *b, uint64_t ret[static ELEMENTSOF(queue_bus_changing)]) {
        for (size_t i = 0; i < ELEMENTSOF(queue_bus_changing); i++)
                ret[i] = queue_bus_changing[i].key(b);
}

int queue_bus_flush_properties(QueueBus *b) {
        const char *changed[ELEMENTSOF(queue_bus_changing) + 1];
        uint64_t keys[ELEMENTSOF(queue_bus_changing)];
        size_t n = 0;
        int r;

        if (!b || b->disconnected)
                return 0;

        queue_bus_keys(b, keys);
        for (size_t i = 0; i < ELEMENTSOF(queue_bus_changing); i++)
                if (keys[i] != b->last[i])
                        changed[n++] = queue_bus_changing[i].name;
        changed[n] = NULL;
        if (n == 0)
                return 0;

        /* The getters read the same live values the keys were taken from:
         * nothing runs in between. */
        r = sd_bus_emit_properties_changed_strv(b->bus, QUEUE_BUS_PATH, QUEUE_BUS_INTERFACE, (char **) changed);
        if (r < 0)
                return log_warning_errno(r, "D-Bus: cannot emit PropertiesChanged");
        memcpy(b->last, keys, sizeof keys);
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

static void queue_bus_on_manager_event(Manager *m, const ManagerEvent *ev, void *userdata);

int queue_bus_new(sd_event *event, Manager *manager, const char *address, QueueBus **ret) {
        _cleanup_(queue_bus_freep) QueueBus *b = NULL;
        int r;

        assert(event);
        assert(manager);
        assert(ret);

        b = calloc(1, sizeof *b);
        if (!b)
                return -ENOMEM;
        b->event = event;
        b->manager = manager;

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
        queue_bus_keys(b, b->last);

        /* Synchronous on purpose: the object is added first, so nobody sees
         * the name without it, and a daemon that cannot own the name (a
         * second instance, a missing policy) learns it here. */
        r = sd_bus_request_name(b->bus, QUEUE_BUS_NAME, 0);
        if (r < 0)
                return log_error_errno(r, "D-Bus: cannot own the name %s", QUEUE_BUS_NAME);

        /* Last: nothing above can fail once the Manager announces to us. */
        r = manager_subscribe(manager, queue_bus_on_manager_event, b);
        if (r < 0)
                return r;
        b->subscribed = true;

        log_debug("D-Bus: %s ready at %s.", QUEUE_BUS_NAME, QUEUE_BUS_PATH);
        *ret = TAKE_PTR(b);
        return 0;
}

QueueBus *queue_bus_free(QueueBus *b) {
        if (!b)
                return NULL;

        if (b->subscribed)
                manager_unsubscribe(b->manager, queue_bus_on_manager_event, b);
        /* A change made just before the loop exited still goes out. */
        if (b->flush_source && sd_event_source_get_enabled(b->flush_source, NULL) > 0)
                (void) queue_bus_flush_properties(b);
        sd_event_source_disable_unref(b->flush_source);
        /* Checks still waiting for polkit are dropped, unanswered, and so
         * are erasures under way (nothing erased yet, or all of it). */
        polkit_registry_free(b->polkit);
        while (b->erasures)
                bus_erasure_free(b->erasures);
        sd_bus_slot_unref(b->object_slot);
        sd_bus_slot_unref(b->disconnected_slot);
        /* Queued signals (a last QueryFinished on shutdown) go out first;
         * closing releases the name. */
        sd_bus_flush_close_unref(b->bus);
        free(b);
        return NULL;
}

/* TicketPromoted and TicketRemoved, from the admission's events (as the
 * Manager forwards them). TICKET_ADDED, STATE_CHANGED and QUERY_FINISHED
 * show only in the properties. */
static void queue_bus_admission_event(QueueBus *b, const AdmissionEvent *event) {
        int r = 0;

        if (event->type == ADMISSION_EVENT_TICKET_PROMOTED)
                r = sd_bus_emit_signal(
                        b->bus, QUEUE_BUS_PATH, QUEUE_BUS_INTERFACE, "TicketPromoted", "s", event->ticket_id);
        else if (event->type == ADMISSION_EVENT_TICKET_REMOVED)
                r = sd_bus_emit_signal(
                        b->bus,
                        QUEUE_BUS_PATH,
                        QUEUE_BUS_INTERFACE,
                        "TicketRemoved",
                        "ss",
                        event->ticket_id,
                        remove_reason_to_string(event->reason));
        if (r < 0)
                log_warning_errno(r, "D-Bus: cannot emit a signal");
}

static void queue_bus_query_finished(QueueBus *b, ManagerQuery *q, const ManagerOutcome *o) {
        int r;

        r = sd_bus_emit_signal(
                b->bus,
                QUEUE_BUS_PATH,
                QUEUE_BUS_INTERFACE,
                "QueryFinished",
                "sst",
                manager_query_id(q),
                o->succeeded ? "succeeded" : "failed",
                (uint64_t) o->duration);
        if (r < 0)
                log_warning_errno(r, "D-Bus: cannot emit QueryFinished");
}

/* The Manager's announcements: the signals at once, and every change of
 * a property (the queue's, a query's start, phase and end, health) in one
 * PropertiesChanged after the transition (schedule_flush()). A query's
 * pipeline events change no property. */
static void queue_bus_on_manager_event(Manager *m, const ManagerEvent *ev, void *userdata) {
        QueueBus *b = userdata;

        if (ev->type == MANAGER_QUERY_EVENT || b->disconnected)
                return;
        if (ev->type == MANAGER_ADMISSION)
                queue_bus_admission_event(b, ev->admission);
        else if (ev->type == MANAGER_QUERY_DURABLE)
                queue_bus_query_finished(b, ev->query, ev->outcome);
        schedule_flush(b);
}

sd_bus *queue_bus_get_bus(QueueBus *b) {
        return b ? b->bus : NULL;
}
