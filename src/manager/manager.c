/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "admission/admission-timers.h"
#include "admission/wait-estimate.h"
#include "admission/wait-tracker.h"
#include "manager/manager-ops.h"
#include "manager/manager.h"
#include "metrics/metrics.h"
#include "sandbox/sandbox.h"
#include "shared/fault.h"
#include "shared/hashmap.h"
#include "shared/list.h"
#include "shared/log.h"
#include "shared/random-util.h"
#include "shared/sanitize.h"
#include "shared/sha256.h"
#include "shared/strv.h"
#include "query/mediawiki.h"
#include "query/wiki-client.h"
#include "store/storage-watch.h"
#include "store/sync-worker.h"

struct ManagerQuery {
        Manager *manager;
        char id[QUERY_ID_MAX];
        SessionKey session;
        char *user; /* API.md "Identity", NULL: anonymous */
        unsigned slot;
        QueryPhase phase;
        unsigned step;
        usec_t since;   /* monotonic, the claim */
        usec_t created; /* realtime, the record's created_at */
        usec_t queued;  /* how long its ticket waited before the claim */

        ManagerQueryState state;   /* changed by manager_query_set_state() only */
        QueryExecution *execution; /* the executor's run: EXECUTING, until its report is recorded */
        bool sync_in_flight;       /* COMPLETING: the worker's sync in flight covers its record */

        /* Who waits for its end (manager_query_wait()), in the order they
         * subscribed: answered by manager_query_finalize(). Borrowed. */
        ManagerQueryWaiter *waiters, *waiters_tail;

        /* The outcome, between the executor's report and the durable record. */
        bool succeeded, cleanup_confirmed;
        ApiError api_error; /* when !succeeded */
        char *message;      /* when !succeeded: sanitized */
        usec_t ended;       /* monotonic */
        usec_t duration;

        ManagerQuery *queries_prev, *queries_next;
};

typedef struct ManagerSubscriber {
        ManagerEventHandler handler;
        void *userdata;
} ManagerSubscriber;

struct Manager {
        sd_event *event;      /* borrowed */
        const Config *config; /* borrowed */

        Admission *admission;
        AdmissionTimer *admission_timer;
        WaitTracker *wait_tracker; /* the recent durations: the wait range (API.md 5) */
        WaitAverage average;       /* the average query time: the wait estimate (API.md 5) */
        QueryExecutor *executor;
        History *history;
        UserKeySecret user_secret; /* keys the history's owner column (shared/user-key.h) */
        SyncWorker *sync;          /* NULL: the syncs run on the loop */
        HistoryWorker *worker;     /* the store's jobs off the loop (store/history-worker.h) */
        StorageWatch *storage;     /* the retries of what could not be written, quick_check */
        Sandbox *sandbox;
        SandboxState sandbox_state; /* as last logged */

        ManagerQuery *queries;      /* oldest claim first */
        ManagerQuery *queries_tail; /* the newest claim */
        StringHashmap *queries_by_id;
        unsigned n_queries;

        ManagerSubscriber *subscribers;
        size_t n_subscribers;
        ManagerHealth health; /* as last announced */
        uint64_t queries_failed;

        bool stopping;
        const char *stop_reason;
        usec_t stop_grace;
        sd_event_source *stop_timer;
        ManagerRetention *retention; /* NULL: records are kept until deleted */
        sd_event_source *stop_post;  /* looks for the end of the queries' lives */
        ManagerStoppedHandler stopped_handler;
        void *stopped_userdata;
        ManagerUserKeyFunction user_key; /* NULL: not set */

        uint64_t test_artifact_bytes; /* WIKI_WEB_TEST_ARTIFACT_BYTES: a file added to every outcome */
};

static const char *const manager_sandbox_health_table[_MANAGER_SANDBOX_HEALTH_MAX] = {
        [MANAGER_SANDBOX_OK] = "ok",
        [MANAGER_SANDBOX_STARTING] = "starting",
        [MANAGER_SANDBOX_UNAVAILABLE] = "unavailable",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(manager_sandbox_health, ManagerSandboxHealth)

static const char *const manager_query_state_table[_MANAGER_QUERY_STATE_MAX] = {
        [MANAGER_QUERY_STATE_CLAIMED] = "claimed",
        [MANAGER_QUERY_STATE_EXECUTING] = "executing",
        [MANAGER_QUERY_STATE_COMPLETING] = "completing",
        [MANAGER_QUERY_STATE_AWAITING_CLEANUP] = "awaiting_cleanup",
        [MANAGER_QUERY_STATE_FINISHED] = "finished",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(manager_query_state, ManagerQueryState)

static void manager_announce(Manager *m, const ManagerEvent *ev) {
        for (size_t i = 0; i < m->n_subscribers; i++)
                m->subscribers[i].handler(m, ev, m->subscribers[i].userdata);
}

static void manager_announce_query(Manager *m, ManagerEventType type, ManagerQuery *q) {
        manager_announce(m, &(ManagerEvent){ .type = type, .query = q });
}

static bool health_equal(const ManagerHealth *a, const ManagerHealth *b) {
        if (a->degraded != b->degraded || a->storage != b->storage || a->sandbox != b->sandbox ||
            a->draining != b->draining || a->state != b->state ||
            a->execution_configured != b->execution_configured)
                return false;
        for (size_t i = 0; i < ELEMENTSOF(a->missing_settings); i++)
                if (a->missing_settings[i] != b->missing_settings[i])
                        return false;
        return true;
}

/* Announce MANAGER_HEALTH_CHANGED if health differs from what was last
 * announced. */
static void manager_check_health(Manager *m) {
        ManagerHealth h;

        manager_get_health(m, &h);
        if (health_equal(&h, &m->health))
                return;
        m->health = h;
        manager_announce(m, &(ManagerEvent){ .type = MANAGER_HEALTH_CHANGED });
}

int manager_subscribe(Manager *m, ManagerEventHandler handler, void *userdata) {
        ManagerSubscriber *s;

        assert(m);
        assert(handler);

        s = reallocarray(m->subscribers, m->n_subscribers + 1, sizeof *s);
        if (!s)
                return -ENOMEM;
        m->subscribers = s;
        m->subscribers[m->n_subscribers++] = (ManagerSubscriber){ handler, userdata };
        return 0;
}

void manager_unsubscribe(Manager *m, ManagerEventHandler handler, void *userdata) {
        assert(m);

        for (size_t i = 0; i < m->n_subscribers; i++)
                if (m->subscribers[i].handler == handler && m->subscribers[i].userdata == userdata) {
                        memmove(&m->subscribers[i],
                                &m->subscribers[i + 1],
                                (m->n_subscribers - i - 1) * sizeof m->subscribers[0]);
                        m->n_subscribers--;
                        return;
                }
}

const Admission *manager_get_admission(const Manager *m) {
        assert(m);
        return m->admission;
}

HistoryWorker *manager_get_history_worker(Manager *m) {
        assert(m);
        return m->worker;
}

History *manager_get_history(Manager *m) {
        assert(m);
        return m->history;
}

const UserKeySecret *manager_get_user_secret(const Manager *m) {
        assert(m);
        return &m->user_secret;
}

void manager_set_user_key_function(Manager *m, ManagerUserKeyFunction f) {
        assert(m);
        m->user_key = f;
}

int manager_user_key(Manager *m, const char *user, SessionKey *ret) {
        int r;

        assert(m);
        assert(user);
        assert(ret);

        /* The key the HTTP transport gives the person's requests: the
         * name's (main's function), sealed. */
        if (!m->user_key)
                return -EOPNOTSUPP;
        r = m->user_key(user, ret);
        if (r < 0)
                return r;
        return user_key_seal(&m->user_secret, ret, ret);
}

const Config *manager_get_config(Manager *m) {
        assert(m);
        return m->config;
}

sd_event *manager_get_event(Manager *m) {
        assert(m);
        return m->event;
}

QueryExecutor *manager_get_executor(Manager *m) {
        assert(m);
        return m->executor;
}

bool manager_reads_as_person(const Manager *m) {
        assert(m);
        return query_executor_reads_as_person(m->executor);
}

const char *manager_read_check_health(Manager *m) {
        assert(m);
        return query_executor_read_check_health(m->executor);
}

/* ---- the store ---- */

/* Whether the store can take a new record: 0, or
 * MANAGER_STORAGE_UNAVAILABLE (manager_storage_cause() says why). */
static int manager_check_storage(Manager *m) {
        return history_check_writable(m->history, NULL) < 0 ? MANAGER_STORAGE_UNAVAILABLE : 0;
}

const char *manager_storage_cause(Manager *m) {
        HistoryStorage st;

        assert(m);
        manager_get_storage(m, &st);
        return st.cause ? st.cause : history_fault_to_string(-ENOBUFS);
}

void manager_get_storage(Manager *m, HistoryStorage *ret) {
        assert(m);
        assert(ret);
        if (m->storage)
                storage_watch_get(m->storage, ret);
        else
                history_get_storage(m->history, m->config->state_min_free_bytes, ret);
}

bool manager_storage_refusal(Manager *m, ManagerError *ret_error) {
        HistoryStorage st;

        assert(m);
        assert(ret_error);
        manager_get_storage(m, &st);
        if (st.fault == 0)
                return false;
        *ret_error = (ManagerError){ API_ERROR_STORAGE_UNAVAILABLE, st.cause };
        return true;
}

static void manager_on_storage_changed(StorageWatch *w, void *userdata) {
        manager_check_health(userdata);
}

/* ---- the queue ---- */

int manager_join(Manager *m, const SessionKey *session, const char *user, usec_t now) {
        int r, k;

        assert(m);
        assert(session);

        /* No ticket while the store cannot take the query it would run. */
        r = manager_check_storage(m);
        if (r < 0)
                return r;
        r = admission_join(m->admission, session, now);
        if (r < 0 || !user)
                return r;
        /* Failing loses only the name (shown to root on D-Bus). */
        k = admission_set_user(m->admission, session, user);
        if (k < 0)
                log_warning_errno(k, "Failed to keep the name of a ticket's user");
        return r;
}

int manager_leave(Manager *m, const SessionKey *session, usec_t now) {
        assert(m);
        assert(session);
        return admission_leave(m->admission, session, now);
}

void manager_heartbeat(Manager *m, const SessionKey *session, usec_t now) {
        assert(m);
        admission_heartbeat(m->admission, session, now);
}

int manager_hold_ticket(Manager *m, const SessionKey *session, const char *ticket_id, bool hold, usec_t now) {
        assert(m);
        assert(session);
        assert(ticket_id);
        return admission_hold(m->admission, session, ticket_id, hold, now);
}

void manager_set_draining(Manager *m, bool draining) {
        assert(m);

        if (admission_is_draining(m->admission) == draining)
                return;
        admission_set_draining(m->admission, draining);
        manager_check_health(m);
}

int manager_remove_ticket(Manager *m, const char *ticket_id, usec_t now) {
        assert(m);
        assert(ticket_id);
        return admission_remove_ticket(m->admission, ticket_id, now);
}

/* ---- the queries ---- */

static ManagerQuery *manager_query_free(ManagerQuery *q) {
        if (!q)
                return NULL;
        query_execution_free(q->execution);
        /* The waiters are their owners' (never answered now). */
        free(q->message);
        free(q->user);
        free(q);
        return NULL;
}

/* Every change of a query's state, checked against the transitions its
 * life allows (manager.h, "A query's life"):
 *   CLAIMED -> EXECUTING (its record written) | FINISHED (it could not be)
 *   EXECUTING -> COMPLETING (its outcome recorded)
 *   COMPLETING -> FINISHED (durable, cleanup confirmed) | AWAITING_CLEANUP
 *   AWAITING_CLEANUP -> FINISHED (the Sandbox confirmed it at last)
 * Entering AWAITING_CLEANUP changes its phase to "cleanup": announced. */
static void manager_query_set_state(ManagerQuery *q, ManagerQueryState state) {
        static const unsigned allowed[_MANAGER_QUERY_STATE_MAX] = {
                [MANAGER_QUERY_STATE_CLAIMED] = 1u << MANAGER_QUERY_STATE_EXECUTING |
                        1u << MANAGER_QUERY_STATE_FINISHED,
                [MANAGER_QUERY_STATE_EXECUTING] = 1u << MANAGER_QUERY_STATE_COMPLETING,
                [MANAGER_QUERY_STATE_COMPLETING] = 1u << MANAGER_QUERY_STATE_AWAITING_CLEANUP |
                        1u << MANAGER_QUERY_STATE_FINISHED,
                [MANAGER_QUERY_STATE_AWAITING_CLEANUP] = 1u << MANAGER_QUERY_STATE_FINISHED,
        };

        assert(q);
        assert(state >= 0 && state < _MANAGER_QUERY_STATE_MAX);
        assert(allowed[q->state] & (1u << state));

        log_debug(
                "Query %s: %s -> %s.",
                q->id,
                manager_query_state_to_string(q->state),
                manager_query_state_to_string(state));
        q->state = state;
        if (state == MANAGER_QUERY_STATE_AWAITING_CLEANUP)
                manager_announce_query(q->manager, MANAGER_QUERY_PHASE, q);
}

/* Listed (newest claim last) and findable by id. 0 or -ENOMEM. */
static int manager_add_query(Manager *m, ManagerQuery *q) {
        int r;

        r = string_hashmap_put(m->queries_by_id, q->id, q);
        if (r < 0)
                return r;
        q->queries_next = NULL;
        q->queries_prev = m->queries_tail;
        if (m->queries_tail)
                m->queries_tail->queries_next = q;
        else
                m->queries = q;
        m->queries_tail = q;
        m->n_queries++;
        return 0;
}

static void manager_remove_query(Manager *m, ManagerQuery *q) {
        (void) string_hashmap_remove(m->queries_by_id, q->id);
        if (m->queries_tail == q)
                m->queries_tail = q->queries_prev;
        LIST_REMOVE(queries, m->queries, q);
        m->n_queries--;
}

void manager_query_wait(ManagerQuery *q, ManagerQueryWaiter *w, ManagerQueryDone done, void *userdata) {
        assert(q);
        assert(w);
        assert(done);
        assert(IN_SET(q->state, MANAGER_QUERY_STATE_CLAIMED, MANAGER_QUERY_STATE_EXECUTING));

        *w = (ManagerQueryWaiter){ .done = done, .userdata = userdata, .waiters_prev = q->waiters_tail };
        if (q->waiters_tail)
                q->waiters_tail->waiters_next = w;
        else
                q->waiters = w;
        q->waiters_tail = w;
}

/* The end of a query, as importd's transfer_finalize(), once its record is
 * durable (or could not be made so): MANAGER_QUERY_DURABLE is announced to
 * every subscriber, then the waiters of this query are answered, each once,
 * in the order they subscribed, and forgotten. With its cleanup confirmed
 * the query is released after (manager_query_release()). */
static void manager_query_finalize(Manager *m, ManagerQuery *q, const ManagerOutcome *outcome) {
        ManagerQueryWaiter *w;

        manager_announce(m, &(ManagerEvent){ .type = MANAGER_QUERY_DURABLE, .query = q, .outcome = outcome });
        /* Each out of the list before its call: done may free it. */
        while ((w = q->waiters)) {
                q->waiters = w->waiters_next;
                if (q->waiters)
                        q->waiters->waiters_prev = NULL;
                else
                        q->waiters_tail = NULL;
                w->waiters_next = NULL;
                w->done(q, outcome, w->userdata);
        }
}

/* The last of every query, once its slot is given up
 * (manager_query_give_up_slot()): MANAGER_QUERY_CLEANUP_CONFIRMED is
 * announced, and it is freed. */
static void manager_query_release(Manager *m, ManagerQuery *q) {
        manager_remove_query(m, q);
        manager_announce_query(m, MANAGER_QUERY_CLEANUP_CONFIRMED, q);
        manager_query_free(q);
        manager_check_health(m);
}

ManagerQuery *manager_get_query(Manager *m, const char *query_id) {
        assert(m);
        return string_hashmap_get(m->queries_by_id, query_id);
}

ManagerQuery *manager_get_query_by_session(Manager *m, const SessionKey *session) {
        assert(m);
        if (!session)
                return NULL;
        /* At most one query per slot (ADMISSION_SLOTS_MAX). */
        for (ManagerQuery *q = m->queries; q; q = q->queries_next)
                if (memcmp(&q->session, session, sizeof *session) == 0)
                        return q;
        return NULL;
}

void manager_foreach_query(Manager *m, ManagerQueryVisitor f, void *userdata) {
        ManagerQuery *next;

        assert(m);
        assert(f);
        for (ManagerQuery *q = m->queries; q; q = next) {
                next = q->queries_next;
                f(q, userdata);
        }
}

unsigned manager_n_queries(const Manager *m) {
        assert(m);
        return m->n_queries;
}

ManagerQuery *manager_oldest_query(Manager *m) {
        assert(m);
        return m->queries;
}

const char *manager_query_id(const ManagerQuery *q) {
        assert(q);
        return q->id;
}

const SessionKey *manager_query_session(const ManagerQuery *q) {
        assert(q);
        return &q->session;
}

unsigned manager_query_slot(const ManagerQuery *q) {
        assert(q);
        return q->slot;
}

const char *manager_query_user(const ManagerQuery *q) {
        assert(q);
        return q->user;
}

const char *manager_query_phase(const ManagerQuery *q) {
        const char *p;

        assert(q);
        /* The Manager's own wait for the cleanup is its last phase; before
         * it the pipeline's reports say. */
        p = query_phase_to_string(
                q->state == MANAGER_QUERY_STATE_AWAITING_CLEANUP ? QUERY_PHASE_CLEANUP : q->phase);
        return p ? p : "";
}

ManagerQueryState manager_query_state(const ManagerQuery *q) {
        assert(q);
        return q->state;
}

unsigned manager_query_step(const ManagerQuery *q) {
        assert(q);
        return q->step;
}

usec_t manager_query_since(const ManagerQuery *q) {
        assert(q);
        return q->since;
}

usec_t manager_query_created(const ManagerQuery *q) {
        assert(q);
        return q->created;
}

bool manager_query_executing(const ManagerQuery *q) {
        assert(q);
        return q->state == MANAGER_QUERY_STATE_EXECUTING;
}

bool manager_query_awaiting_cleanup(const ManagerQuery *q) {
        assert(q);
        return q->state == MANAGER_QUERY_STATE_AWAITING_CLEANUP;
}

/* ---- health ---- */

void manager_get_health(Manager *m, ManagerHealth *ret) {
        HistoryStorage storage;
        SandboxState state;
        bool degraded;

        assert(m);
        assert(ret);

        degraded = m->sandbox && sandbox_cleanup_pending(m->sandbox);
        for (ManagerQuery *q = m->queries; q && !degraded; q = q->queries_next)
                if (q->state == MANAGER_QUERY_STATE_AWAITING_CLEANUP)
                        degraded = true;

        manager_get_storage(m, &storage);
        state = m->sandbox ? sandbox_get_state(m->sandbox) : SANDBOX_UNAVAILABLE;
        *ret = (ManagerHealth){
                .degraded = degraded || storage.state != HISTORY_STORAGE_OK,
                .storage = storage.state,
                .storage_cause = storage.cause,
                .sandbox = state == SANDBOX_AVAILABLE ? MANAGER_SANDBOX_OK :
                        state == SANDBOX_STARTING     ? MANAGER_SANDBOX_STARTING :
                                                        MANAGER_SANDBOX_UNAVAILABLE,
                .draining = admission_is_draining(m->admission),
                .state = admission_get_state(m->admission),
                .execution_configured = query_executor_is_configured(m->executor),
        };
        if (!ret->execution_configured)
                (void) config_missing_execution_settings(m->config, ret->missing_settings);
}

void manager_get_counters(Manager *m, ManagerCounters *ret) {
        AdmissionCounters c;

        assert(m);
        assert(ret);

        admission_get_counters(m->admission, &c);
        *ret = (ManagerCounters){
                .queries_started = c.queries_started,
                .queries_failed = m->queries_failed,
                .tickets_expired = c.tickets_expired,
        };
}

/* ---- the status ---- */

void manager_status(Manager *m, const SessionKey *session, usec_t now, ManagerStatus *ret) {
        usec_t running[ADMISSION_SLOTS_MAX]; /* only the first n_running are written and read */
        size_t n_running = 0;
        ManagerQuery *q;
        int r;

        assert(m);
        assert(ret);

        *ret = (ManagerStatus){
                .reservation_seconds = m->config->queue_reservation_seconds,
                .heartbeat_seconds = m->config->queue_heartbeat_seconds,
        };
        admission_peek(m->admission, session, now, &ret->admission);

        /* Its query is running until its record is durable (API.md 11.4). */
        q = manager_get_query_by_session(m, session);
        if (q && q->state != MANAGER_QUERY_STATE_AWAITING_CLEANUP) {
                ret->has_query = true;
                ret->query = (ManagerStatusQuery){
                        .id = q->id,
                        .step = q->step,
                        .phase = manager_query_phase(q),
                };
        }

        /* The running queries' clocks are theirs (ManagerQuery.since):
         * every query that holds its slot, oldest claim first. */
        for (ManagerQuery *i = m->queries; i && n_running < ELEMENTSOF(running); i = i->queries_next)
                if (i->state != MANAGER_QUERY_STATE_FINISHED)
                        running[n_running++] = i->since;
        wait_estimate_status(
                &ret->admission, &m->average, running, MIN(n_running, (size_t) ret->admission.slots.running), now);
        r = wait_tracker_status_range(
                m->wait_tracker,
                m->admission,
                &ret->admission,
                running,
                MIN(n_running, (size_t) ret->admission.slots.running),
                now,
                &ret->range);
        if (r < 0)
                log_warning_errno(r, "The wait range could not be computed: it is null");
        ret->range_known = r > 0;
}

usec_t manager_average_usec(const Manager *m) {
        assert(m);
        return wait_average_usec(&m->average);
}

bool manager_wait_known(const Manager *m) {
        assert(m);
        return wait_tracker_count(m->wait_tracker) >= WAIT_RANGE_KNOWN_MIN;
}

/* ---- a query's life ---- */

static void manager_log_query_started(const char *id) {
        const char *fields[] = { "WIKIWEB_EVENT=query_started", NULL, NULL };
        char f1[64];

        snprintf(f1, sizeof f1, "QUERY_ID=%s", id);
        fields[1] = f1;
        log_fields(LOG_INFO, fields, "Query %s started.", id);
}

static void manager_log_query_finished(const ManagerQuery *q) {
        const char *fields[] = { "WIKIWEB_EVENT=query_finished", NULL, NULL, NULL };
        const char *status = q->succeeded ? "succeeded" : "failed";
        char f1[64], f2[64];

        snprintf(f1, sizeof f1, "QUERY_ID=%s", q->id);
        snprintf(f2, sizeof f2, "QUERY_STATUS=%s", status);
        fields[1] = f1;
        fields[2] = f2;
        log_fields(
                LOG_INFO,
                fields,
                "Query %s %s after %" PRIu64 " ms%s%s.",
                q->id,
                status,
                q->duration / USEC_PER_MSEC,
                q->succeeded ? "" : ": ",
                q->succeeded ? "" : api_error_to_string(q->api_error));
}

/* wikiweb_queries_total and wikiweb_query_duration_seconds, once the
 * query's cleanup is confirmed (API.md 12.3). */
static void manager_count_query(const ManagerQuery *q, usec_t duration) {
        metrics_count_query(q->succeeded, q->succeeded ? NULL : api_error_to_string(q->api_error), duration);
}

/* The query's slot is given up at end (monotonic: the end of its
 * execution, or its cleanup confirmed late), its duration measured once,
 * on the Manager's clock, from its claim (ManagerQuery.since) to then, and
 * given to all that keep it: the average of the wait estimate, the
 * query metrics, the wait range and the admission (admission_finish(),
 * which frees the slot). The query is FINISHED then. */
static void manager_query_give_up_slot(Manager *m, ManagerQuery *q, usec_t end) {
        usec_t duration = end - MIN(end, q->since);
        int r;

        manager_query_set_state(q, MANAGER_QUERY_STATE_FINISHED);
        manager_count_query(q, duration);
        r = wait_tracker_add(m->wait_tracker, (double) duration / USEC_PER_SEC);
        if (r < 0)
                log_debug_errno(r, "Query %s: its duration is not kept", q->id);
        wait_average_add(&m->average, duration);
        r = admission_finish(m->admission, q->slot, duration, end);
        if (r < 0)
                log_error_errno(r, "Query %s ended but its slot was not running it", q->id);
}

#if ENABLE_TEST_FAULTS
/* WIKI_WEB_TEST_ARTIFACT_BYTES: a file of that many bytes ('x'), as if
 * the run had left it in /out (the e2e suite has no sandbox). */
static int manager_test_artifact(Manager *m, Artifact *ret) {
        _cleanup_free_ char *data = malloc(m->test_artifact_bytes);
        uint8_t digest[SHA256_DIGEST_SIZE];
        _cleanup_close_ int fd = -1;
        int r;

        if (!data)
                return -ENOMEM;
        memset(data, 'x', m->test_artifact_bytes);
        fd = memfd_create("wikiweb-test-artifact", MFD_CLOEXEC);
        if (fd < 0)
                return -errno;
        for (size_t done = 0; done < m->test_artifact_bytes;) {
                ssize_t k = write(fd, data + done, m->test_artifact_bytes - done);

                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return k < 0 ? -errno : -EIO;
                done += (size_t) k;
        }
        r = sha256(data, m->test_artifact_bytes, digest);
        if (r < 0)
                return r;
        *ret = (Artifact){
                .name = strdup("test.txt"),
                .media_type = "text/plain",
                .size_bytes = m->test_artifact_bytes,
                .fd = TAKE_FD(fd),
        };
        if (!ret->name)
                return -ENOMEM;
        sha256_to_hex(digest, ret->sha256);
        return 0;
}
#else
static int manager_test_artifact(Manager *m, Artifact *ret) {
        return -EOPNOTSUPP;
}
#endif

/* Complete the query's record (API.md 9): it was written as "running"
 * before execution started. A failure here is logged; the record then stays
 * "running" until the next start marks it failed. Durable when this
 * returns, or, with !durable, once the caller has synced the store
 * (history_finish_nosync()). message: sanitized, for a failed query. */
static void manager_record_outcome(
        Manager *m, const ManagerQuery *q, const QueryOutcome *o, const char *message, bool durable) {
        HistoryOutcome h = {
                .succeeded = o->error >= 0,
                .answer = o->error >= 0 ? (o->answer ? o->answer : "") : NULL,
                .error_code = o->error >= 0 ? NULL : api_error_to_string(o->api_error),
                .error_message = o->error >= 0 ? NULL : message,
                .sources_json = o->sources_json,
                .citations_json = o->citations_json,
                .timings = {
                        .queue_ms = q->queued / USEC_PER_MSEC,
                        .wiki_ms = o->timings.wiki / USEC_PER_MSEC,
                        .model_ms = o->timings.model / USEC_PER_MSEC,
                        .sandbox_ms = o->timings.sandbox / USEC_PER_MSEC,
                        .cleanup_ms = o->timings.cleanup / USEC_PER_MSEC,
                        .total_ms = (q->queued + q->duration) / USEC_PER_MSEC,
                },
                .model = o->model ? o->model : m->config->llm_model,
                .prompt_tokens = o->prompt_tokens,
                .completion_tokens = o->completion_tokens,
                .finished_at = now(CLOCK_REALTIME),
                .sandbox = o->sandbox,
                .searches_json = o->searches_json,
                /* Files left in /out are kept, also for a failed query (API.md
                 * 8.3), streamed from the files the pipeline collected; on a
                 * full disk they wait with the outcome. */
                .artifacts = o->artifacts,
                .n_artifacts = o->n_artifacts,
        };
        _cleanup_free_ Artifact *with_test = NULL;
        _cleanup_(artifact_done) Artifact test = { .fd = -1 };
        unsigned signals;
        int r;

        /* Without memory for the sanitized message there is none to keep. */
        if (o->error < 0 && !message)
                return;
        /* The test fault's file, after the run's own. */
        if (TEST_FAULT(m->test_artifact_bytes > 0) && manager_test_artifact(m, &test) >= 0 &&
            (with_test = calloc(o->n_artifacts + 1, sizeof *with_test))) {
                for (size_t i = 0; i < o->n_artifacts; i++)
                        with_test[i] = o->artifacts[i];
                with_test[o->n_artifacts] = test;
                h.artifacts = with_test;
                h.n_artifacts = o->n_artifacts + 1;
        }

        r = durable ? history_finish(m->history, q->id, &h) : history_finish_nosync(m->history, q->id, &h);
        /* Not written but kept by the store, which lands it later: the
         * record reads as it will be stored meanwhile. */
        if (r > 0)
                storage_watch_poke(m->storage);
        if (r == -ENOENT)
                log_warning("Query %s ended, but its record is gone.", q->id);
        else if (r < 0)
                log_error_errno(r, "Failed to record the outcome of query %s", q->id);
        else {
                /* What the wiki could not answer (API.md 9.2), as counted. */
                signals = history_outcome_signals(&h);
                if (signals & HISTORY_SIGNAL_NO_SOURCES)
                        metrics_count_unanswered("no_sources");
                if (signals & HISTORY_SIGNAL_UNVERIFIED)
                        metrics_count_unanswered("unverified");
                if (signals & HISTORY_SIGNAL_FAILED)
                        metrics_count_unanswered("failed");
        }
}

/* The outcome's message as the record and the client get it: sanitized
 * (API.md 2), the code's default when the outcome has none. NULL: out of
 * memory. */
static char *outcome_message(const QueryOutcome *o) {
        const char *raw = o->message ? o->message : api_error_default_message(o->api_error);
        char *message = NULL;

        if (sanitize_message(raw, strlen(raw), &message) < 0) {
                log_oom();
                return NULL;
        }
        return message;
}

/* The record of the query that ended is durable (or could not be made
 * so, error, logged): give up the slot if its cleanup is confirmed, tell
 * the journal, the subscribers and the query's waiters
 * (manager_query_finalize()). */
static void manager_record_durable(ManagerQuery *q, int error) {
        Manager *m = q->manager;
        ManagerOutcome outcome;

        assert(q->state == MANAGER_QUERY_STATE_COMPLETING);
        if (error < 0)
                log_error_errno(error, "Query %s: its record could not be made durable", q->id);

        if (q->cleanup_confirmed)
                manager_query_give_up_slot(m, q, q->ended);
        else {
                /* The slot stays taken until cleanup is confirmed (API.md 8.4). */
                log_error("Query %s: cleanup could not be confirmed; the queue stays blocked.", q->id);
                manager_query_set_state(q, MANAGER_QUERY_STATE_AWAITING_CLEANUP);
        }

        manager_log_query_finished(q);
        if (!q->succeeded)
                m->queries_failed++;

        outcome = (ManagerOutcome){
                .succeeded = q->succeeded,
                .api_error = q->api_error,
                .message = q->message ? q->message : api_error_default_message(q->api_error),
                .duration = q->duration,
                .cleanup_confirmed = q->cleanup_confirmed,
        };
        manager_query_finalize(m, q, &outcome);

        if (q->state == MANAGER_QUERY_STATE_FINISHED)
                manager_query_release(m, q);
        else
                manager_check_health(m);
}

static void manager_on_record_durable(SyncWorker *w, int error, void *userdata);

/* The queries whose record the sync that ended (error) covered are
 * durable (freed as their slots are given up). */
static void manager_records_synced(Manager *m, int error) {
        ManagerQuery *next;

        for (ManagerQuery *q = m->queries; q; q = next) {
                next = q->queries_next;
                if (q->sync_in_flight) {
                        q->sync_in_flight = false;
                        manager_record_durable(q, error);
                }
        }
}

/* One sync on the worker for every committed record not yet covered by
 * one (a group commit: with several slots, records committed while a sync
 * is in flight wait for the next, rather than for an fdatasync() on the
 * loop). Without the worker, or if it cannot start, the sync runs here. */
static void manager_start_sync(Manager *m) {
        bool any = false;
        int r;

        if (m->sync && sync_worker_busy(m->sync))
                return; /* its end starts the next */
        for (ManagerQuery *q = m->queries; q; q = q->queries_next)
                if (q->state == MANAGER_QUERY_STATE_COMPLETING && !q->sync_in_flight) {
                        q->sync_in_flight = true;
                        any = true;
                }
        if (!any)
                return;
        r = m->sync ? sync_worker_start(m->sync, history_sync_fd(m->history), manager_on_record_durable, m) :
                      -EOPNOTSUPP;
        if (r >= 0)
                return;
        manager_records_synced(m, history_sync(m->history));
}

static void manager_on_record_durable(SyncWorker *w, int error, void *userdata) {
        Manager *m = userdata;

        manager_records_synced(m, error);
        /* Records committed meanwhile. */
        manager_start_sync(m);
}

/* Where every query ends after its claim, however it ended (the
 * executor's report, a cancel, the stop grace, an executor that could not
 * start it, or a record that could not be written), with the outcome o
 * (borrowed for the call): the end is timed on the Manager's clock, and
 * the outcome kept.
 * A query that ran has its record completed now (manager_record_outcome())
 * and the rest waits for the sync that makes it durable
 * (manager_record_durable()), done on the worker's thread (several
 * milliseconds on a disk, during which the loop serves requests) or,
 * without it, here; then manager_query_finalize().
 * A query whose record could not be written (CLAIMED) was never announced:
 * its slot is given up at once and it is freed, announcing nothing. */
static void manager_query_end(ManagerQuery *q, int error, const QueryOutcome *o) {
        Manager *m = q->manager;
        usec_t t = now(CLOCK_MONOTONIC);

        q->succeeded = error >= 0;
        q->cleanup_confirmed = o->cleanup_confirmed;
        q->api_error = o->api_error;
        q->ended = t;
        q->duration = t - MIN(t, q->since);

        if (q->state == MANAGER_QUERY_STATE_CLAIMED) {
                /* Out of the list first: the admission's events that
                 * giving up the slot causes are announced, and no face has
                 * heard of this query. */
                manager_remove_query(m, q);
                manager_query_give_up_slot(m, q, t);
                manager_query_free(q);
                return;
        }

        /* Without memory for it the default message of the code is sent. */
        q->message = q->succeeded ? NULL : outcome_message(o);
        manager_record_outcome(m, q, o, q->message, /* durable= */ false);
        manager_query_set_state(q, MANAGER_QUERY_STATE_COMPLETING);
        /* The run's outcome is recorded: the run (its query directory) goes. */
        q->execution = query_execution_free(q->execution);
        manager_start_sync(m);
}

/* The executor's report of q's run, on the loop. */
static void manager_on_query_done(QueryExecution *e, int error, const QueryOutcome *o, void *userdata) {
        ManagerQuery *q = userdata;

        assert(q->execution == e);
        assert(q->state == MANAGER_QUERY_STATE_EXECUTING);
        manager_query_end(q, error, o);
}

/* One event of q's run, from the pipeline. */
static void manager_on_query_event(const char *query_id, const QueryEvent *ev, void *userdata) {
        ManagerQuery *q = userdata;
        Manager *m = q->manager;
        bool phase_changed;

        phase_changed = q->phase != ev->phase;
        q->phase = ev->phase;
        if (ev->type == QUERY_EVENT_STEP)
                q->step = ev->step;
        manager_announce(m, &(ManagerEvent){ .type = MANAGER_QUERY_EVENT, .query = q, .event = ev });
        if (phase_changed)
                manager_announce_query(m, MANAGER_QUERY_PHASE, q);
}

int manager_start_query(Manager *m, const ManagerQueryRequest *req, ManagerQuery **ret) {
        const SessionKey *session;
        ManagerQuery *q;
        QueryJob job = { 0 };
        AdmissionStatus st;
        usec_t t = now(CLOCK_MONOTONIC);
        bool storage;
        int r;

        assert(m);
        assert(req);
        assert(req->session);
        assert(req->question);
        session = req->session;

        if (m->stopping)
                return -ESHUTDOWN;
        /* Refused before any work while the store cannot take a record. */
        r = manager_check_storage(m);
        if (r < 0)
                return r;

        q = calloc(1, sizeof *q);
        if (!q)
                return -ENOMEM;
        q->manager = m;
        q->state = MANAGER_QUERY_STATE_CLAIMED;
        q->session = *session;
        q->phase = QUERY_PHASE_MODEL;
        q->since = t;
        q->created = now(CLOCK_REALTIME);

        r = random_id("qr_", q->id, sizeof q->id);
        if (r < 0) {
                manager_query_free(q);
                return r;
        }

        /* How long the session's ticket waited, if it had one (an implicit
         * join from idle waited for nothing). */
        admission_peek(m->admission, session, t, &st);
        q->queued = st.has_ticket ? t - MIN(t, st.ticket.joined) : 0;
        /* Its user: the caller's, or the name its ticket held (which goes
         * with the ticket at the claim). */
        if (req->user || (st.has_ticket && st.ticket.user)) {
                q->user = strdup(req->user ? req->user : st.ticket.user);
                if (!q->user) {
                        manager_query_free(q);
                        return -ENOMEM;
                }
        }

        /* Held (findable) from its claim on. */
        r = manager_add_query(m, q);
        if (r < 0) {
                manager_query_free(q);
                return r;
        }
        r = admission_claim(m->admission, session, q->id, t);
        if (r < 0) {
                manager_remove_query(m, q);
                manager_query_free(q);
                return r;
        }
        q->slot = (unsigned) r;
        /* The ticket's wait ends with the claim; the pipeline counts the
         * other phases as each ends (API.md 12.3). */
        metrics_count_query_phase("queue", q->queued);

        /* The history is authoritative: the record exists before execution
         * starts (API.md 9). Without it the query does not run, and ends
         * as every query after its claim ends. */
        r = history_begin_follow_up(
                m->history,
                q->id,
                session,
                req->question,
                req->follow_up ? req->follow_up->follow_up : NULL,
                req->follow_up ? req->follow_up->conversation : NULL,
                req->follow_up ? req->follow_up->notes : NULL,
                q->created);
        if (r < 0) {
                /* The store said why, once: the asker is told storage_unavailable. */
                storage = manager_check_storage(m) < 0;
                if (!storage)
                        log_error_errno(r, "Failed to record query %s; not running it", q->id);
                else
                        storage_watch_poke(m->storage);
                manager_query_end(
                        q,
                        r,
                        &(QueryOutcome){
                                .query_id = q->id,
                                .error = r,
                                .api_error = API_ERROR_INTERNAL_ERROR,
                                .cleanup_confirmed = true,
                        });
                if (storage)
                        return MANAGER_STORAGE_UNAVAILABLE;
                return -EIO;
        }

        /* Announced before the executor starts: the pipeline reports its
         * first events from inside query_executor_start(). */
        manager_query_set_state(q, MANAGER_QUERY_STATE_EXECUTING);
        manager_announce_query(m, MANAGER_QUERY_STARTED, q);

        memcpy(job.id, q->id, sizeof job.id);
        job.session = *session;
        job.question = req->question;
        /* Whose wiki permissions count in person mode (API.md "Whose
         * permissions"): the query's user, as its record names it. */
        job.user = q->user;
        job.pages = req->pages;
        if (req->follow_up) {
                job.turns = req->follow_up->turns;
                job.n_turns = req->follow_up->n_turns;
        }
        r = query_executor_start(
                m->executor, &job, manager_on_query_done, manager_on_query_event, q, &q->execution);
        if (r < 0) {
                log_error_errno(r, "Failed to start query %s", q->id);
                /* It ends as every query does: internal_error, nothing to
                 * clean up. */
                manager_query_end(
                        q,
                        r,
                        &(QueryOutcome){
                                .query_id = q->id,
                                .error = r,
                                .api_error = API_ERROR_INTERNAL_ERROR,
                                .cleanup_confirmed = true,
                        });
                return -EIO;
        }

        manager_log_query_started(q->id);
        if (ret)
                *ret = q;
        return 0;
}

int manager_cancel_query(Manager *m, const char *query_id, const char *reason) {
        ManagerQuery *q;

        assert(m);
        assert(reason);

        q = manager_get_query(m, query_id);
        if (!q || q->state != MANAGER_QUERY_STATE_EXECUTING)
                return -ESRCH;
        return query_execution_abort(q->execution, reason);
}

/* The Sandbox confirmed the cleanup of a query late: its slot is given
 * up now (API.md 8.4), and health follows. */
static void manager_on_cleanup_confirmed(Sandbox *s, const char *query_id, void *userdata) {
        Manager *m = userdata;
        ManagerQuery *q = manager_get_query(m, query_id);
        usec_t t = now(CLOCK_MONOTONIC);

        if (!q || q->state != MANAGER_QUERY_STATE_AWAITING_CLEANUP) {
                manager_check_health(m);
                return;
        }
        /* Its duration runs to the confirmed cleanup (API.md 12.3). */
        manager_query_give_up_slot(m, q, t);
        log_notice("Query %s: cleanup confirmed at last; the queue moves on.", query_id);
        manager_query_release(m, q);
}

/* ---- the sandbox ---- */

/* One journal line for the sandbox's state. */
static void log_sandbox_state(SandboxState state, const char *reason) {
        if (state == SANDBOX_AVAILABLE)
                log_info("Sandbox available: run_python can be offered.");
        else if (state == SANDBOX_STARTING)
                log_info(
                        "Sandbox starting, a query waits for it (at most %" PRIu64 " s): %s.",
                        (uint64_t) (QUERY_SANDBOX_WAIT_MAX_USEC / USEC_PER_SEC),
                        reason);
        else
                log_warning("Sandbox unavailable, run_python is not offered: %s.", reason);
}

/* The Sandbox's announcement (from the loop): the journal, a query that
 * waits for the sandbox to start, and health (degraded while a sandbox
 * cleanup is not confirmed, API.md 8.4). */
static void manager_on_sandbox_state(Sandbox *s, void *userdata) {
        Manager *m = userdata;
        SandboxState state = sandbox_get_state(s);

        if (state != m->sandbox_state) {
                m->sandbox_state = state;
                log_sandbox_state(state, sandbox_unavailable_reason(s));
        }
        query_executor_sandbox_changed(m->executor);
        manager_check_health(m);
}

/* ---- admission ---- */

static void manager_on_admission_event(const AdmissionEvent *ev, void *userdata) {
        Manager *m = userdata;
        char f_event[64], f_ticket[64];
        const char *fields[] = { f_event, f_ticket, NULL };
        const char *event = NULL, *what = NULL;

        switch (ev->type) {
        case ADMISSION_EVENT_TICKET_ADDED:
                event = "ticket_added";
                what = "joined the queue";
                break;
        case ADMISSION_EVENT_TICKET_PROMOTED:
                event = "ticket_promoted";
                what = "was promoted to reserved";
                break;
        case ADMISSION_EVENT_TICKET_REMOVED:
                event = "ticket_removed";
                what = "was removed";
                break;
        case ADMISSION_EVENT_STATE_CHANGED:
                log_debug("Admission state is now %s.", admission_state_to_string(ev->state));
                break;
        default:
                break;
        }

        if (event) {
                snprintf(f_event, sizeof f_event, "WIKIWEB_EVENT=%s", event);
                snprintf(f_ticket, sizeof f_ticket, "TICKET_ID=%s", ev->ticket_id);
                if (ev->type == ADMISSION_EVENT_TICKET_REMOVED)
                        log_fields(
                                LOG_INFO,
                                fields,
                                "Ticket %s %s (%s).",
                                ev->ticket_id,
                                what,
                                remove_reason_to_string(ev->reason));
                else
                        log_fields(LOG_INFO, fields, "Ticket %s %s.", ev->ticket_id, what);
        }

        if (ev->type == ADMISSION_EVENT_TICKET_REMOVED)
                metrics_count_ticket_removed(remove_reason_to_string(ev->reason));
        manager_announce(m, &(ManagerEvent){ .type = MANAGER_ADMISSION, .admission = ev });
        manager_check_health(m);
}

static void random_ticket_id(char buf[static TICKET_ID_MAX], void *userdata) {
        static uint64_t fallback = 0;

        if (random_id("tk_", buf, TICKET_ID_MAX) < 0)
                /* getrandom() does not fail once the pool is ready; be total anyway. */
                snprintf(buf, TICKET_ID_MAX, "tk_%032" PRIx64, ++fallback);
}

/* ---- set-up ---- */

/* The state directory holds the history, which is authoritative: without
 * one the daemon does not start. */
static int open_history(const char *path, const char *credentials, UserKeySecret *secret, History **ret) {
        const char *source = NULL;
        unsigned recovered = 0;
        int r;

        if (!path) {
                log_error("No state directory: set WIKI_WEB_STATE_DIRECTORY, or run under systemd with StateDirectory=.");
                return -EINVAL;
        }
        if (mkdir(path, 0750) < 0 && errno != EEXIST)
                return log_error_errno(errno, "Failed to create the state directory %s", path);

        r = user_key_secret_load(path, credentials, secret, &source);
        if (r < 0)
                return log_error_errno(r, "Failed to load the user key of the history");
        if (streq(source, "new"))
                log_notice(
                        "History: made the user key %s/%s; back it up with the database (wikiwebd(8), \"Backups\").",
                        path,
                        USER_KEY_FILE);
        r = history_open_keyed(path, secret, ret, &recovered);
        if (r < 0)
                return log_error_errno(r, "Failed to open the history in %s", path);
        if (recovered > 0)
                log_warning(
                        "%u %s still running when the service last stopped; recorded %s as failed.",
                        recovered,
                        recovered == 1 ? "query was" : "queries were",
                        recovered == 1 ? "it" : "them");
        return 0;
}

#if ENABLE_TEST_FAULTS
/* The test-only fault switches (shared/fault.h) of the executor. */
static int manager_setup_executor_faults(Manager *m) {
        uint64_t n;
        int r;

        r = fault_uint64("WIKI_WEB_TEST_QUERY_DELAY_MS", 3600000, &n);
        if (r < 0)
                return r;
        if (r > 0) {
                log_warning("Test fault: every query takes %" PRIu64 " ms.", n);
                query_executor_set_test_delay(m->executor, n * USEC_PER_MSEC);
        }
        r = fault_uint64("WIKI_WEB_TEST_ARTIFACT_BYTES", 1024 * 1024, &n);
        if (r < 0)
                return r;
        if (r > 0) {
                log_warning("Test fault: every outcome carries a file of %" PRIu64 " bytes.", n);
                m->test_artifact_bytes = n;
        }
        return 0;
}

/* The test-only fault switch (shared/fault.h) of the history's retention.
 * 0 leaves the hour. */
static int manager_setup_retention_faults(Manager *m) {
        uint64_t n;
        int r;

        r = fault_uint64("WIKI_WEB_TEST_RETENTION_INTERVAL_MS", 3600000, &n);
        if (r < 0)
                return r;
        if (r > 0 && n > 0 && m->retention) {
                log_warning("Test fault: the history's retention runs every %" PRIu64 " ms.", n);
                manager_retention_set_test_interval(m->retention, n * USEC_PER_MSEC);
        }
        return 0;
}

/* The test-only fault switches (shared/fault.h) of the sandbox. */
static int manager_setup_sandbox_faults(Manager *m) {
        uint64_t n;
        int r;

        r = fault_uint64("WIKI_WEB_TEST_SANDBOX_UNCONFIRMABLE", 100, &n);
        if (r < 0)
                return r;
        if (r > 0) {
                log_warning("Test fault: the next %" PRIu64 " sandbox scope confirmations fail.", n);
                sandbox_set_test_unconfirmable(m->sandbox, (unsigned) n);
        }
        if (fault_bool("WIKI_WEB_TEST_SANDBOX_DEAF_INIT")) {
                log_warning("Test fault: the containers' init is never told to stop.");
                sandbox_set_test_deaf_init(m->sandbox, true);
        }
        r = fault_uint64("WIKI_WEB_TEST_SANDBOX_STARTING_MS", 3600000, &n);
        if (r < 0)
                return r;
        if (r > 0) {
                log_warning("Test fault: the sandbox is starting for %" PRIu64 " ms.", n);
                sandbox_set_test_starting(m->sandbox, n * USEC_PER_MSEC);
        }
        return 0;
}
#else
/* A build without the test faults (shared/fault.h): nothing to set. */
static int manager_setup_executor_faults(Manager *m) {
        return 0;
}

static int manager_setup_retention_faults(Manager *m) {
        return 0;
}

static int manager_setup_sandbox_faults(Manager *m) {
        return 0;
}
#endif

/* The wait range's durations, seeded from the history: the most recent
 * WAIT_DURATIONS_MAX, oldest first, so that a restart forgets nothing. A
 * history that cannot be read leaves it empty ("no estimate yet"). */
static int manager_make_wait_tracker(History *h, WaitTracker **ret) {
        _cleanup_(wait_tracker_freep) WaitTracker *t = NULL;
        double seconds[WAIT_DURATIONS_MAX];
        size_t n = 0;
        int r;

        r = wait_tracker_new(&t);
        if (r < 0)
                return r;
        r = history_recent_durations(h, ELEMENTSOF(seconds), seconds, &n);
        if (r < 0)
                log_warning_errno(
                        r, "The recent query durations could not be read: the wait range starts empty");
        for (size_t i = n; i-- > 0;)
                (void) wait_tracker_add(t, seconds[i]);
        log_debug("Wait range: %zu recent durations from the history.", n);
        *ret = TAKE_PTR(t);
        return 0;
}

int manager_new(sd_event *event, const Config *config, Manager **ret) {
        _cleanup_(manager_freep) Manager *m = NULL;
        int r;

        assert(event);
        assert(config);
        assert(ret);

        m = calloc(1, sizeof *m);
        if (!m)
                return log_oom();
        m->event = event;
        m->config = config;

        r = string_hashmap_new(&m->queries_by_id);
        if (r < 0)
                return log_oom();

        r = open_history(config->state_directory, config->credentials_directory, &m->user_secret, &m->history);
        if (r < 0)
                return r;

        r = admission_new(
                &(AdmissionSettings){
                        .reservation_usec = config->queue_reservation_seconds * USEC_PER_SEC,
                        .heartbeat_usec = config->queue_heartbeat_seconds * USEC_PER_SEC,
                        .max_length = config->queue_max_length,
                        .slots = (unsigned) config->queue_slots,
                },
                &m->admission);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the admission controller");
        admission_set_id_generator(m->admission, random_ticket_id, NULL);
        admission_set_event_handler(m->admission, manager_on_admission_event, m);

        r = admission_timer_new(event, m->admission, &m->admission_timer);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the admission timers");

        r = manager_make_wait_tracker(m->history, &m->wait_tracker);
        if (r < 0)
                return log_oom();

        /* The store's worker, on a connection of its own: deletes, the
         * retention, feedback, shares, the report, the retries. */
        r = history_worker_new(event, m->history, &m->worker);
        if (r < 0)
                return log_error_errno(r, "Failed to start the history's worker");

        r = manager_retention_new(m, &m->retention);
        if (r < 0)
                return r;
        r = manager_setup_retention_faults(m);
        if (r < 0)
                return r;

        r = query_executor_new(event, config, &m->executor);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the query executor");
        r = manager_setup_executor_faults(m);
        if (r < 0)
                return r;
        if (!query_executor_is_configured(m->executor))
                log_warning("Query execution is not configured: every query will fail with execution_failed.");

        /* Without the thread, the sync is done on the loop. */
        r = sync_worker_new(event, &m->sync);
        if (r < 0)
                log_warning_errno(r, "No thread for the history's syncs; they run on the event loop");
        r = storage_watch_new(
                event,
                m->history,
                m->worker,
                config->state_min_free_bytes,
                /* check= */ true,
                manager_on_storage_changed,
                m,
                &m->storage);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the history's retries");

        /* The sandbox owns SIGCHLD (the daemon is a subreaper), checks
         * runtime, rootfs and the user manager, and sweeps what a previous
         * run left behind. Unavailable is a state, not an error: queries
         * still answer from the wiki. */
        r = sandbox_new(event, config, NULL, &m->sandbox);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the sandbox");
        sandbox_set_state_handler(m->sandbox, manager_on_sandbox_state, m);
        sandbox_set_cleanup_confirmed_handler(m->sandbox, manager_on_cleanup_confirmed, m);
        /* Queries offer run_python whenever the sandbox is available. */
        query_executor_set_sandbox(m->executor, m->sandbox);
        r = manager_setup_sandbox_faults(m);
        if (r < 0)
                return r;
        /* Unavailable from the start was logged by the sandbox already. */
        m->sandbox_state = sandbox_get_state(m->sandbox);
        if (m->sandbox_state == SANDBOX_STARTING)
                log_sandbox_state(m->sandbox_state, sandbox_unavailable_reason(m->sandbox));

        manager_get_health(m, &m->health);
        *ret = TAKE_PTR(m);
        return 0;
}

Manager *manager_free(Manager *m) {
        ManagerQuery *q;

        if (!m)
                return NULL;
        m->stop_timer = sd_event_source_disable_unref(m->stop_timer);
        m->retention = manager_retention_free(m->retention);
        m->stop_post = sd_event_source_disable_unref(m->stop_post);
        /* A sync in flight is completed (joined), its callback dropped. */
        m->sync = sync_worker_free(m->sync);
        /* The queries first: each frees its run, which borrows the
         * executor's upstream. */
        while ((q = m->queries)) {
                manager_remove_query(m, q);
                manager_query_free(q);
        }
        m->queries_by_id = string_hashmap_free(m->queries_by_id);
        m->executor = query_executor_free(m->executor);
        m->storage = storage_watch_free(m->storage);
        /* The job running completes, the queued are dropped; then the
         * loop's connection gives the outcomes waiting a last chance. */
        m->worker = history_worker_free(m->worker);
        m->history = history_free(m->history);
        m->sandbox = sandbox_free(m->sandbox);
        m->admission_timer = admission_timer_free(m->admission_timer);
        m->admission = admission_free(m->admission);
        m->wait_tracker = wait_tracker_free(m->wait_tracker);
        free(m->subscribers);
        explicit_bzero(&m->user_secret, sizeof m->user_secret);
        free(m);
        return NULL;
}

/* ---- stopping ---- */

/* The end of the stop grace: the queries still executing are aborted, so
 * that their outcome is recorded before systemd kills us. */
static int manager_on_stop_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        int r;

        for (ManagerQuery *q = m->queries; q; q = q->queries_next) {
                if (q->state != MANAGER_QUERY_STATE_EXECUTING)
                        continue;
                log_warning(
                        "The running query %s did not end within %" PRIu64
                        " s of the stop request: aborting it.",
                        q->id,
                        (uint64_t) (m->stop_grace / USEC_PER_SEC));
                r = query_execution_abort(q->execution, m->stop_reason);
                if (r < 0)
                        log_error_errno(r, "Query %s: cannot abort it", q->id);
        }
        return 0;
}

/* After every loop iteration while stopping: once nothing of a query's
 * life is in flight, the stop is announced as done, once. */
static int manager_on_stop_post(sd_event_source *s, void *userdata) {
        Manager *m = userdata;

        if (manager_busy(m) || sd_event_get_state(m->event) == SD_EVENT_FINISHED)
                return 0;
        (void) sd_event_source_set_enabled(m->stop_post, SD_EVENT_OFF);
        if (m->stopped_handler)
                m->stopped_handler(m, m->stopped_userdata);
        return 0;
}

void manager_set_stopped_handler(Manager *m, ManagerStoppedHandler handler, void *userdata) {
        assert(m);
        m->stopped_handler = handler;
        m->stopped_userdata = userdata;
}

void manager_stop(Manager *m, usec_t grace_usec, const char *reason) {
        int r;

        assert(m);
        assert(reason);

        if (m->stopping)
                return;
        m->stopping = true;
        m->stop_reason = reason;
        m->stop_grace = grace_usec;
        manager_announce(m, &(ManagerEvent){ .type = MANAGER_STOPPING });
        r = sd_event_add_post(m->event, &m->stop_post, manager_on_stop_post, m);
        if (r < 0) {
                /* Without it nobody hears the end: do not wait for it. */
                log_error_errno(r, "Failed to watch the end of the running queries; stopping now");
                if (m->stopped_handler)
                        m->stopped_handler(m, m->stopped_userdata);
        } else
                (void) sd_event_source_set_description(m->stop_post, "manager-stopped");
        if (query_executor_n_running(m->executor) == 0)
                return;
        /* Let the queries finish, but not past the stop grace: systemd
         * kills us at TimeoutStopSec=, and the outcome must be recorded
         * before that. */
        r = sd_event_add_time_relative(
                m->event, &m->stop_timer, CLOCK_MONOTONIC, grace_usec, 0, manager_on_stop_timer, m);
        if (r < 0) {
                log_error_errno(r, "Failed to set up the stop grace; aborting the running queries now");
                (void) manager_on_stop_timer(NULL, 0, m);
                return;
        }
        (void) sd_event_source_set_description(m->stop_timer, "manager-stop-grace");
}

bool manager_is_stopping(const Manager *m) {
        assert(m);
        return m->stopping;
}

bool manager_busy(const Manager *m) {
        assert(m);
        for (const ManagerQuery *q = m->queries; q; q = q->queries_next)
                if (IN_SET(q->state, MANAGER_QUERY_STATE_EXECUTING, MANAGER_QUERY_STATE_COMPLETING))
                        return true;
        return false;
}
