/* SPDX-License-Identifier: MIT */
#include <math.h>

#include "admission/admission.h"
#include "shared/macro.h"
#include "tests.h"
#include "admission-model.h"
#include "admission/wait-estimate.h"

/* Tests of the admission state machine (API.md 5): first every transition
 * with injected time and a recording event handler, then a long randomized
 * run checked after each operation against a deliberately naive reference
 * model (a plain array in FIFO order, O(n) everything). */

#define SEC(x) ((usec_t) (x) *USEC_PER_SEC)
#define T0 SEC(1000) /* an arbitrary, non-zero start time */

static const AdmissionSettings default_settings = {
        .reservation_usec = SEC(60),
        .heartbeat_usec = SEC(30),
        .max_length = 100,
        .slots = 1,
};

/* ---- helpers ---- */

static SessionKey key(unsigned n) {
        SessionKey k = { .bytes = { 0 } };
        unsigned h = (n / 2) * 2654435761u;

        /* The machine hashes the first 8 bytes only. Sessions 2k and 2k+1
         * share them, so full hash collisions happen all the time; the
         * last bytes keep the keys distinct. */
        for (unsigned i = 0; i < sizeof(k.bytes); i++)
                k.bytes[i] = (uint8_t) (h >> ((i % 4) * 8));
        memcpy(k.bytes + 28, &n, sizeof(n));
        return k;
}

static const char *expected_id(unsigned n) {
        static char buf[TICKET_ID_MAX];

        (void) snprintf(buf, sizeof(buf), "tk_%032x", n);
        return buf;
}

typedef struct RecordedEvent {
        AdmissionEventType type;
        char id[TICKET_ID_MAX];
        RemoveReason reason;
        AdmissionState state;
        char query_id[QUERY_ID_MAX];
        usec_t duration_usec;
} RecordedEvent;

typedef struct Recorder {
        RecordedEvent events[64];
        size_t n;
        Admission *a; /* to check consistency at emission time */
} Recorder;

static void record(const AdmissionEvent *ev, void *userdata) {
        Recorder *rec = userdata;
        RecordedEvent *e;

        ASSERT_TRUE(rec->n < ELEMENTSOF(rec->events));
        e = &rec->events[rec->n++];
        *e = (RecordedEvent){
                .type = ev->type,
                .reason = ev->reason,
                .state = ev->state,
                .duration_usec = ev->duration_usec,
        };
        if (ev->ticket_id)
                (void) snprintf(e->id, sizeof(e->id), "%s", ev->ticket_id);
        if (ev->query_id)
                (void) snprintf(e->query_id, sizeof(e->query_id), "%s", ev->query_id);

        /* "After the machine is consistent": never idle with tickets. */
        if (rec->a)
                ASSERT_TRUE(
                        admission_get_state(rec->a) != ADMISSION_IDLE || admission_queue_length(rec->a) == 0);
        if (ev->type == ADMISSION_EVENT_STATE_CHANGED && rec->a)
                ASSERT_EQ_INT(ev->state, admission_get_state(rec->a));
}

/* The claim times, as the Manager keeps them (ManagerQuery.since): the
 * admission keeps none. claim() records them, newest last. */
static struct {
        char id[QUERY_ID_MAX];
        usec_t since;
} claimed[256];
static size_t n_claimed;

static usec_t claim_time(const char *query_id) {
        for (size_t i = n_claimed; i-- > 0;)
                if (streq(claimed[i].id, query_id))
                        return claimed[i].since;
        return USEC_INFINITY;
}

/* The Manager's average (wait-estimate.h) of the durations finish()
 * measures: a new machine starts it afresh. */
static WaitAverage average;

static Admission *new_admission(const AdmissionSettings *s, Recorder *rec) {
        Admission *a = NULL;

        average = (WaitAverage){ .known = false };
        n_claimed = 0;

        ASSERT_OK(admission_new(s, &a));
        ASSERT_TRUE(a);
        if (rec) {
                *rec = (Recorder){ .a = a };
                admission_set_event_handler(a, record, rec);
        }
        return a;
}

static void expect_event(Recorder *rec, size_t i, AdmissionEventType type, const char *id) {
        ASSERT_TRUE(i < rec->n);
        ASSERT_EQ_INT(rec->events[i].type, type);
        if (id)
                ASSERT_EQ_STR(rec->events[i].id, id);
}

static void expect_removed(Recorder *rec, size_t i, const char *id, RemoveReason reason) {
        expect_event(rec, i, ADMISSION_EVENT_TICKET_REMOVED, id);
        ASSERT_EQ_INT(rec->events[i].reason, reason);
}

static void expect_state(Recorder *rec, size_t i, AdmissionState s) {
        expect_event(rec, i, ADMISSION_EVENT_STATE_CHANGED, NULL);
        ASSERT_EQ_INT(rec->events[i].state, s);
}

/* The running queries' claim times, oldest first. */
typedef struct Claims {
        usec_t since[ADMISSION_SLOTS_MAX];
        size_t n;
} Claims;

static void collect_since(const char *query_id, unsigned slot, void *userdata) {
        Claims *c = userdata;

        c->since[c->n++] = claim_time(query_id);
}

/* A status as the Manager shows it: the admission's, with the estimate
 * and the average of wait_estimate_status(). */
static void add_estimate(const Admission *a, usec_t now, AdmissionStatus *st) {
        Claims c = { .n = 0 };

        admission_foreach_running(a, collect_since, &c);
        wait_estimate_status(st, &average, c.since, c.n, now);
}

static AdmissionStatus status_of(Admission *a, unsigned n, usec_t now) {
        AdmissionStatus st;
        SessionKey k = key(n);

        ASSERT_EQ_INT(admission_status(a, &k, now, &st), 0);
        add_estimate(a, now, &st);
        return st;
}

static AdmissionStatus peek_of(Admission *a, unsigned n, usec_t now) {
        AdmissionStatus st;
        SessionKey k = key(n);

        admission_peek(a, &k, now, &st);
        add_estimate(a, now, &st);
        return st;
}

/* The oldest running query's id ("" when none) and claim time
 * (USEC_INFINITY), from admission_foreach_running(). */
typedef struct Oldest {
        char id[QUERY_ID_MAX];
        usec_t since;
        bool found;
} Oldest;

static void oldest_one(const char *query_id, unsigned slot, void *userdata) {
        Oldest *o = userdata;

        if (o->found)
                return;
        o->found = true;
        snprintf(o->id, sizeof o->id, "%s", query_id);
        o->since = claim_time(query_id);
}

/* Borrowed: valid until the next call. */
typedef struct FinishFind {
        const char *query_id;
        unsigned slot;
        usec_t since;
        bool found;
} FinishFind;

static void finish_find(const char *query_id, unsigned slot, void *userdata) {
        FinishFind *f = userdata;

        if (f->query_id && strcmp(query_id, f->query_id) == 0)
                *f = (FinishFind){
                        .query_id = f->query_id, .slot = slot, .since = claim_time(query_id), .found = true
                };
}

/* The end of query_id at now, measured as the Manager measures it: from its
 * claim, given to admission_finish() with its slot. -ESRCH when it does
 * not run. */
static int finish(Admission *a, const char *query_id, usec_t now) {
        FinishFind f = { .query_id = query_id };
        int r;

        admission_foreach_running(a, finish_find, &f);
        if (!f.found)
                return -ESRCH;
        r = admission_finish(a, f.slot, now - MIN(now, f.since), now);
        if (r == 0)
                wait_average_add(&average, now - MIN(now, f.since));
        return r;
}

static const char *running_query_id(const Admission *a) {
        static Oldest o;

        o = (Oldest){ .since = USEC_INFINITY };
        admission_foreach_running(a, oldest_one, &o);
        return o.id;
}

static usec_t running_since(const Admission *a) {
        Oldest o = { .since = USEC_INFINITY };

        admission_foreach_running(a, oldest_one, &o);
        return o.since;
}


static int join(Admission *a, unsigned n, usec_t now) {
        SessionKey k = key(n);
        return admission_join(a, &k, now);
}

static int leave(Admission *a, unsigned n, usec_t now) {
        SessionKey k = key(n);
        return admission_leave(a, &k, now);
}

static int claim(Admission *a, unsigned n, const char *qid, usec_t now) {
        SessionKey k = key(n);
        int r = admission_claim(a, &k, qid, now);

        if (r >= 0) {
                ASSERT_TRUE(n_claimed < ELEMENTSOF(claimed));
                snprintf(claimed[n_claimed].id, sizeof claimed[n_claimed].id, "%s", qid);
                claimed[n_claimed++].since = now;
        }
        return r;
}

static void assert_near(double a, double b) {
        if (fabs(a - b) > 1e-9 * MAX(1.0, fabs(b))) {
                fprintf(stderr, "expected %.12g, got %.12g\n", b, a);
                ASSERT_TRUE(fabs(a - b) <= 1e-9 * MAX(1.0, fabs(b)));
        }
}

/* ---- transitions ---- */

TEST(strings) {
        ASSERT_EQ_STR(admission_state_to_string(ADMISSION_IDLE), "idle");
        ASSERT_EQ_STR(admission_state_to_string(ADMISSION_RESERVED), "reserved");
        ASSERT_EQ_STR(admission_state_to_string(ADMISSION_RUNNING), "running");
        ASSERT_TRUE(!admission_state_to_string(_ADMISSION_STATE_MAX));
        ASSERT_TRUE(!admission_state_to_string(_ADMISSION_STATE_INVALID));
        ASSERT_EQ_STR(ticket_status_to_string(TICKET_WAITING), "waiting");
        ASSERT_EQ_STR(ticket_status_to_string(TICKET_RESERVED), "reserved");
        ASSERT_TRUE(!ticket_status_to_string(_TICKET_STATUS_MAX));
        ASSERT_EQ_STR(remove_reason_to_string(REMOVE_LEFT), "left");
        ASSERT_EQ_STR(remove_reason_to_string(REMOVE_CLAIMED), "claimed");
        ASSERT_EQ_STR(remove_reason_to_string(REMOVE_HEARTBEAT), "heartbeat");
        ASSERT_EQ_STR(remove_reason_to_string(REMOVE_RESERVATION), "reservation");
        ASSERT_EQ_STR(remove_reason_to_string(REMOVE_ADMIN), "admin");
        ASSERT_TRUE(!remove_reason_to_string(_REMOVE_REASON_MAX));
}

TEST(settings) {
        Admission *a = NULL;
        AdmissionSettings s = default_settings;

        s.reservation_usec = SEC(1) - 1;
        ASSERT_EQ_INT(admission_new(&s, &a), -EINVAL);
        s.reservation_usec = SEC(3600) + 1;
        ASSERT_EQ_INT(admission_new(&s, &a), -EINVAL);
        s = default_settings;
        s.heartbeat_usec = 0;
        ASSERT_EQ_INT(admission_new(&s, &a), -EINVAL);
        s.heartbeat_usec = SEC(3601);
        ASSERT_EQ_INT(admission_new(&s, &a), -EINVAL);
        s = default_settings;
        s.max_length = 1000001;
        ASSERT_EQ_INT(admission_new(&s, &a), -EINVAL);
        s = default_settings;
        s.slots = 0;
        ASSERT_EQ_INT(admission_new(&s, &a), -EINVAL);
        s.slots = ADMISSION_SLOTS_MAX + 1;
        ASSERT_EQ_INT(admission_new(&s, &a), -EINVAL);
        ASSERT_TRUE(!a);
        s.slots = ADMISSION_SLOTS_MAX;
        ASSERT_OK(admission_new(&s, &a));
        a = admission_free(a);

        s = (AdmissionSettings){
                .reservation_usec = SEC(3600), .heartbeat_usec = SEC(1), .max_length = 1000000, .slots = 1
        };
        ASSERT_OK(admission_new(&s, &a));
        ASSERT_TRUE(admission_get_settings(a)->reservation_usec == SEC(3600));
        ASSERT_TRUE(admission_get_settings(a)->heartbeat_usec == SEC(1));
        ASSERT_TRUE(admission_get_settings(a)->max_length == 1000000);
        ASSERT_EQ_INT(admission_get_state(a), ADMISSION_IDLE);
        ASSERT_TRUE(admission_next_deadline(a) == USEC_INFINITY);
        ASSERT_EQ_STR(running_query_id(a), "");
        ASSERT_TRUE(running_since(a) == USEC_INFINITY);
        ASSERT_TRUE(wait_average_usec(&average) == 0);
        ASSERT_TRUE(!admission_free(a));
        ASSERT_TRUE(!admission_free(NULL));
}

TEST(join) {
        Recorder rec;
        Admission *a = new_admission(&default_settings, &rec);
        AdmissionStatus st;

        /* First join: created, promoted at once. */
        ASSERT_EQ_INT(join(a, 1, T0), 1);
        ASSERT_EQ_INT(rec.n, 3);
        expect_event(&rec, 0, ADMISSION_EVENT_TICKET_ADDED, expected_id(1));
        expect_event(&rec, 1, ADMISSION_EVENT_TICKET_PROMOTED, expected_id(1));
        expect_state(&rec, 2, ADMISSION_RESERVED);
        ASSERT_EQ_INT(admission_get_state(a), ADMISSION_RESERVED);
        ASSERT_EQ_INT(admission_queue_length(a), 1);
        ASSERT_EQ_INT(admission_waiting_count(a), 0);

        st = peek_of(a, 1, T0);
        ASSERT_TRUE(st.has_ticket);
        ASSERT_EQ_STR(st.ticket.id, expected_id(1));
        ASSERT_EQ_INT(st.ticket.status, TICKET_RESERVED);
        ASSERT_EQ_INT(st.ticket.position, 0);
        ASSERT_TRUE(st.ticket.joined == T0);
        ASSERT_TRUE(st.ticket.heartbeat_deadline == T0 + SEC(30));
        ASSERT_TRUE(st.ticket.reservation_deadline == T0 + SEC(60));

        /* Second join of the same session: refresh only, no events. */
        rec.n = 0;
        ASSERT_EQ_INT(join(a, 1, T0 + SEC(10)), 0);
        ASSERT_EQ_INT(rec.n, 0);
        st = peek_of(a, 1, T0 + SEC(10));
        ASSERT_TRUE(st.ticket.heartbeat_deadline == T0 + SEC(40));
        ASSERT_TRUE(st.ticket.reservation_deadline == T0 + SEC(60)); /* not extended */
        ASSERT_TRUE(st.ticket.joined == T0);
        ASSERT_EQ_INT(admission_queue_length(a), 1);

        /* Others wait, in order. */
        ASSERT_EQ_INT(join(a, 2, T0 + SEC(11)), 1);
        ASSERT_EQ_INT(rec.n, 1);
        expect_event(&rec, 0, ADMISSION_EVENT_TICKET_ADDED, expected_id(2));
        ASSERT_EQ_INT(join(a, 3, T0 + SEC(12)), 1);
        ASSERT_EQ_INT(join(a, 4, T0 + SEC(13)), 1);
        for (unsigned i = 1; i <= 4; i++) {
                st = peek_of(a, i, T0 + SEC(13));
                ASSERT_TRUE(st.has_ticket);
                ASSERT_EQ_INT(st.ticket.position, i - 1);
                ASSERT_EQ_INT(st.ticket.status, i == 1 ? TICKET_RESERVED : TICKET_WAITING);
                ASSERT_EQ_STR(st.ticket.id, expected_id(i));
                if (i > 1)
                        ASSERT_TRUE(st.ticket.reservation_deadline == USEC_INFINITY);
                ASSERT_EQ_INT(st.queue_length, 4);
                ASSERT_EQ_INT(st.max_length, 100);
                ASSERT_EQ_INT(st.state, ADMISSION_RESERVED);
        }
        ASSERT_EQ_INT(admission_waiting_count(a), 3);

        /* A session without a ticket. */
        st = peek_of(a, 99, T0 + SEC(13));
        ASSERT_TRUE(!st.has_ticket);
        ASSERT_EQ_INT(st.queue_length, 4);

        /* Leaving in the middle moves the later ones up. */
        rec.n = 0;
        ASSERT_EQ_INT(leave(a, 3, T0 + SEC(14)), 0);
        ASSERT_EQ_INT(rec.n, 1);
        expect_removed(&rec, 0, expected_id(3), REMOVE_LEFT);
        ASSERT_EQ_INT(peek_of(a, 4, T0 + SEC(14)).ticket.position, 2);
        ASSERT_EQ_INT(peek_of(a, 2, T0 + SEC(14)).ticket.position, 1);
        ASSERT_TRUE(!peek_of(a, 3, T0 + SEC(14)).has_ticket);
        ASSERT_EQ_INT(leave(a, 3, T0 + SEC(14)), -ENOENT);
        ASSERT_EQ_INT(leave(a, 77, T0 + SEC(14)), -ENOENT);

        /* Leaving the reserved ticket promotes the next one at once: no
         * STATE_CHANGED, since it stays reserved. */
        rec.n = 0;
        ASSERT_EQ_INT(leave(a, 1, T0 + SEC(15)), 0);
        ASSERT_EQ_INT(rec.n, 2);
        expect_removed(&rec, 0, expected_id(1), REMOVE_LEFT);
        expect_event(&rec, 1, ADMISSION_EVENT_TICKET_PROMOTED, expected_id(2));
        st = peek_of(a, 2, T0 + SEC(15));
        ASSERT_EQ_INT(st.ticket.status, TICKET_RESERVED);
        ASSERT_EQ_INT(st.ticket.position, 0);
        ASSERT_TRUE(st.ticket.reservation_deadline == T0 + SEC(75));
        ASSERT_EQ_INT(peek_of(a, 4, T0 + SEC(15)).ticket.position, 1);

        /* Leaving the last tickets: the reserved one last goes idle. */
        ASSERT_EQ_INT(leave(a, 4, T0 + SEC(16)), 0);
        rec.n = 0;
        ASSERT_EQ_INT(leave(a, 2, T0 + SEC(16)), 0);
        ASSERT_EQ_INT(rec.n, 2);
        expect_removed(&rec, 0, expected_id(2), REMOVE_LEFT);
        expect_state(&rec, 1, ADMISSION_IDLE);
        ASSERT_EQ_INT(admission_get_state(a), ADMISSION_IDLE);
        ASSERT_EQ_INT(admission_queue_length(a), 0);
        ASSERT_TRUE(admission_next_deadline(a) == USEC_INFINITY);

        AdmissionCounters c;
        admission_get_counters(a, &c);
        ASSERT_TRUE(c.tickets_expired == 0 && c.queries_started == 0);
        admission_free(a);
}

TEST(queue_full) {
        Recorder rec;
        AdmissionSettings s = default_settings;
        Admission *a;

        s.max_length = 2;
        a = new_admission(&s, &rec);
        ASSERT_EQ_INT(join(a, 1, T0), 1);
        ASSERT_EQ_INT(join(a, 2, T0), 1);
        rec.n = 0;
        ASSERT_EQ_INT(join(a, 3, T0), -ENOSPC);
        ASSERT_EQ_INT(rec.n, 0);
        ASSERT_EQ_INT(admission_queue_length(a), 2);
        ASSERT_TRUE(!peek_of(a, 3, T0).has_ticket);
        /* Holders still refresh while full. */
        ASSERT_EQ_INT(join(a, 2, T0 + SEC(1)), 0);
        ASSERT_TRUE(peek_of(a, 2, T0 + SEC(1)).ticket.heartbeat_deadline == T0 + SEC(31));
        /* Room again after a leave; the failed join did not use an id. */
        ASSERT_EQ_INT(leave(a, 1, T0 + SEC(2)), 0);
        ASSERT_EQ_INT(join(a, 3, T0 + SEC(2)), 1);
        ASSERT_EQ_STR(peek_of(a, 3, T0 + SEC(2)).ticket.id, expected_id(3));
        admission_free(a);

        /* max_length 0: no ticket ever. */
        s.max_length = 0;
        a = new_admission(&s, &rec);
        ASSERT_EQ_INT(join(a, 1, T0), -ENOSPC);
        ASSERT_EQ_INT(admission_get_state(a), ADMISSION_IDLE);
        ASSERT_EQ_INT(rec.n, 0);
        admission_free(a);
}

TEST(heartbeat_expiry) {
        Recorder rec;
        Admission *a = new_admission(&default_settings, &rec);
        AdmissionCounters c;
        AdmissionStatus st;

        ASSERT_EQ_INT(join(a, 1, T0), 1);          /* reserved, hb T0+30 */
        ASSERT_EQ_INT(join(a, 2, T0 + SEC(5)), 1); /* waiting, hb T0+35 */
        ASSERT_EQ_INT(join(a, 3, T0 + SEC(6)), 1); /* waiting, hb T0+36 */
        ASSERT_TRUE(admission_next_deadline(a) == T0 + SEC(30));

        /* Keep 2 alive; 3 goes silent. */
        st = status_of(a, 2, T0 + SEC(20));
        ASSERT_TRUE(st.ticket.heartbeat_deadline == T0 + SEC(50));

        /* One microsecond before the deadline: nothing happens. */
        rec.n = 0;
        ASSERT_EQ_INT(admission_expire(a, T0 + SEC(30) - 1), 0);
        ASSERT_EQ_INT(rec.n, 0);
        ASSERT_EQ_INT(admission_queue_length(a), 3);

        /* Exactly at the deadline: removed (reason heartbeat), 2 promoted
         * with its reservation counted from the deadline. */
        ASSERT_EQ_INT(admission_expire(a, T0 + SEC(30)), 1);
        ASSERT_EQ_INT(rec.n, 2);
        expect_removed(&rec, 0, expected_id(1), REMOVE_HEARTBEAT);
        expect_event(&rec, 1, ADMISSION_EVENT_TICKET_PROMOTED, expected_id(2));
        st = peek_of(a, 2, T0 + SEC(30));
        ASSERT_EQ_INT(st.ticket.status, TICKET_RESERVED);
        ASSERT_TRUE(st.ticket.reservation_deadline == T0 + SEC(90));
        ASSERT_EQ_INT(peek_of(a, 3, T0 + SEC(30)).ticket.position, 1);
        ASSERT_TRUE(admission_next_deadline(a) == T0 + SEC(36));

        /* A waiting ticket expiring changes no state; applied by any call
         * (here a status of someone else), not only the timer. */
        rec.n = 0;
        st = status_of(a, 50, T0 + SEC(36));
        ASSERT_EQ_INT(rec.n, 1);
        expect_removed(&rec, 0, expected_id(3), REMOVE_HEARTBEAT);
        ASSERT_EQ_INT(st.queue_length, 1);
        ASSERT_EQ_INT(admission_get_state(a), ADMISSION_RESERVED);

        admission_get_counters(a, &c);
        ASSERT_EQ_INT(c.tickets_expired, 2);

        /* The last one expires: idle. */
        rec.n = 0;
        ASSERT_EQ_INT(admission_expire(a, T0 + SEC(50)), 1);
        ASSERT_EQ_INT(rec.n, 2);
        expect_removed(&rec, 0, expected_id(2), REMOVE_HEARTBEAT);
        expect_state(&rec, 1, ADMISSION_IDLE);
        ASSERT_TRUE(admission_next_deadline(a) == USEC_INFINITY);
        admission_free(a);
}

/* API.md 11.1: an open queue stream is its ticket's heartbeat. A held
 * ticket does not expire by heartbeat however long it waits, shows the
 * deadline a poll would give it, keeps its reservation deadline, and once
 * released has an ordinary deadline from the release. */
static int hold(Admission *a, unsigned n, bool on, usec_t now) {
        SessionKey k = key(n);
        char id[TICKET_ID_MAX];

        snprintf(id, sizeof id, "%s", expected_id(n));
        return admission_hold(a, &k, id, on, now);
}

TEST(hold) {
        Recorder rec;
        Admission *a = new_admission(&default_settings, &rec);
        AdmissionStatus st;
        SessionKey k2 = key(2);

        ASSERT_EQ_INT(join(a, 1, T0), 1); /* reserved */
        ASSERT_EQ_INT(join(a, 2, T0), 1); /* waiting */
        ASSERT_EQ_INT(join(a, 3, T0), 1); /* waiting, silent */
        ASSERT_EQ_INT(hold(a, 2, true, T0 + SEC(1)), 0);
        ASSERT_EQ_INT(hold(a, 2, true, T0 + SEC(2)), 0); /* idempotent */
        ASSERT_EQ_INT(hold(a, 1, true, T0 + SEC(2)), 0);
        /* Another session's ticket, or a ticket id the session no longer has. */
        ASSERT_EQ_INT(admission_hold(a, &k2, expected_id(3), true, T0 + SEC(2)), -ENOENT);
        ASSERT_EQ_INT(hold(a, 9, true, T0 + SEC(2)), -ENOENT);

        /* Only 3 can expire by heartbeat now. */
        ASSERT_TRUE(admission_next_deadline(a) == T0 + SEC(30));
        rec.n = 0;
        ASSERT_EQ_INT(admission_expire(a, T0 + SEC(45)), 1);
        expect_removed(&rec, 0, expected_id(3), REMOVE_HEARTBEAT);
        /* The reservation of 1 still runs out at T0 + 60. */
        ASSERT_TRUE(admission_next_deadline(a) == T0 + SEC(60));

        /* A held ticket shows the deadline a poll would give it; a poll
         * changes nothing. */
        st = peek_of(a, 2, T0 + SEC(50));
        ASSERT_TRUE(st.ticket.heartbeat_deadline == T0 + SEC(80));
        st = status_of(a, 2, T0 + SEC(55));
        ASSERT_TRUE(st.ticket.heartbeat_deadline == T0 + SEC(85));

        rec.n = 0;
        ASSERT_EQ_INT(admission_expire(a, T0 + SEC(60)), 1);
        expect_removed(&rec, 0, expected_id(1), REMOVE_RESERVATION);
        expect_event(&rec, 1, ADMISSION_EVENT_TICKET_PROMOTED, expected_id(2));
        ASSERT_TRUE(admission_next_deadline(a) == T0 + SEC(120));

        /* Long after its last poll, 2 is still there; released, it gets
         * the ordinary interval from the release. */
        ASSERT_EQ_INT(admission_expire(a, T0 + SEC(100)), 0);
        ASSERT_EQ_INT(hold(a, 2, false, T0 + SEC(100)), 0);
        ASSERT_EQ_INT(hold(a, 2, false, T0 + SEC(101)), 0); /* idempotent: the deadline stays */
        st = peek_of(a, 2, T0 + SEC(101));
        ASSERT_TRUE(st.ticket.heartbeat_deadline == T0 + SEC(130));
        ASSERT_TRUE(admission_next_deadline(a) == T0 + SEC(120));
        rec.n = 0;
        ASSERT_EQ_INT(admission_expire(a, T0 + SEC(120)), 1);
        expect_removed(&rec, 0, expected_id(2), REMOVE_RESERVATION);
        admission_free(a);
}

TEST(reservation_expiry) {
        Recorder rec;
        AdmissionSettings s = {
                .reservation_usec = SEC(60), .heartbeat_usec = SEC(3600), .max_length = 10, .slots = 1
        };
        Admission *a = new_admission(&s, &rec);
        AdmissionCounters c;
        AdmissionStatus st;

        for (unsigned i = 1; i <= 5; i++)
                ASSERT_EQ_INT(join(a, i, T0), 1);
        ASSERT_TRUE(admission_next_deadline(a) == T0 + SEC(60));

        rec.n = 0;
        ASSERT_EQ_INT(admission_expire(a, T0 + SEC(60) - 1), 0);
        ASSERT_EQ_INT(admission_expire(a, T0 + SEC(60)), 1);
        ASSERT_EQ_INT(rec.n, 2);
        expect_removed(&rec, 0, expected_id(1), REMOVE_RESERVATION);
        expect_event(&rec, 1, ADMISSION_EVENT_TICKET_PROMOTED, expected_id(2));
        ASSERT_TRUE(admission_next_deadline(a) == T0 + SEC(120));

        /* A late call catches up as if each expiry happened on time: 2 at
         * 120, 3 at 180, 4 promoted at 180 with deadline 240. */
        rec.n = 0;
        st = status_of(a, 5, T0 + SEC(200));
        ASSERT_EQ_INT(rec.n, 4);
        expect_removed(&rec, 0, expected_id(2), REMOVE_RESERVATION);
        expect_event(&rec, 1, ADMISSION_EVENT_TICKET_PROMOTED, expected_id(3));
        expect_removed(&rec, 2, expected_id(3), REMOVE_RESERVATION);
        expect_event(&rec, 3, ADMISSION_EVENT_TICKET_PROMOTED, expected_id(4));
        ASSERT_EQ_INT(st.ticket.position, 1);
        st = peek_of(a, 4, T0 + SEC(200));
        ASSERT_EQ_INT(st.ticket.status, TICKET_RESERVED);
        ASSERT_TRUE(st.ticket.reservation_deadline == T0 + SEC(240));

        /* A far jump drains everything, ending idle. */
        rec.n = 0;
        ASSERT_EQ_INT(admission_expire(a, T0 + SEC(10000)), 2);
        ASSERT_EQ_INT(rec.n, 4);
        expect_removed(&rec, 0, expected_id(4), REMOVE_RESERVATION);
        expect_event(&rec, 1, ADMISSION_EVENT_TICKET_PROMOTED, expected_id(5));
        expect_removed(&rec, 2, expected_id(5), REMOVE_RESERVATION);
        expect_state(&rec, 3, ADMISSION_IDLE);

        admission_get_counters(a, &c);
        ASSERT_EQ_INT(c.tickets_expired, 5);
        admission_free(a);
}

TEST(expiry_ties) {
        Recorder rec;
        AdmissionSettings s = {
                .reservation_usec = SEC(30), .heartbeat_usec = SEC(30), .max_length = 10, .slots = 1
        };
        Admission *a = new_admission(&s, &rec);

        /* Reserved ticket whose heartbeat and reservation end together:
         * reason heartbeat. The waiting ticket 2 expires at the same time,
         * so 3 is promoted directly (2 is never promoted). */
        ASSERT_EQ_INT(join(a, 1, T0), 1);
        ASSERT_EQ_INT(join(a, 2, T0), 1);
        ASSERT_EQ_INT(join(a, 3, T0 + SEC(1)), 1);
        rec.n = 0;
        ASSERT_EQ_INT(admission_expire(a, T0 + SEC(30)), 2);
        ASSERT_EQ_INT(rec.n, 3);
        expect_removed(&rec, 0, expected_id(2), REMOVE_HEARTBEAT);
        expect_removed(&rec, 1, expected_id(1), REMOVE_HEARTBEAT);
        expect_event(&rec, 2, ADMISSION_EVENT_TICKET_PROMOTED, expected_id(3));
        ASSERT_TRUE(peek_of(a, 3, T0 + SEC(30)).ticket.reservation_deadline == T0 + SEC(60));
        admission_free(a);
}

TEST(nonmonotonic) {
        Admission *a = new_admission(&default_settings, NULL);
        AdmissionStatus st;

        ASSERT_EQ_INT(join(a, 1, T0 + SEC(10)), 1);
        ASSERT_EQ_INT(join(a, 2, T0 + SEC(10)), 1);
        /* A stale "now": treated as the latest one seen. */
        st = status_of(a, 2, T0);
        ASSERT_TRUE(st.ticket.heartbeat_deadline == T0 + SEC(40));
        ASSERT_EQ_INT(join(a, 3, T0), 1);
        ASSERT_TRUE(peek_of(a, 3, T0).ticket.joined == T0 + SEC(10));
        ASSERT_EQ_INT(admission_expire(a, 0), 0);
        ASSERT_EQ_INT(admission_queue_length(a), 3);
        admission_free(a);
}

typedef struct UserList {
        char users[8][16];
        size_t n;
} UserList;

static void collect_user(const TicketView *t, void *userdata) {
        UserList *l = userdata;

        snprintf(l->users[l->n++], sizeof l->users[0], "%s", t->user ? t->user : "-");
}

TEST(users) {
        Admission *a = new_admission(&default_settings, NULL);
        SessionKey k1 = key(1), k9 = key(9);
        UserList l = { 0 };

        /* No ticket: nothing to name. */
        ASSERT_EQ_INT(admission_set_user(a, &k1, "alice"), -ENOENT);

        ASSERT_EQ_INT(join(a, 1, T0), 1);
        ASSERT_EQ_INT(join(a, 2, T0), 1);
        ASSERT_EQ_INT(join(a, 3, T0), 1);
        ASSERT_OK(admission_set_user(a, &k1, "alice"));
        ASSERT_OK(admission_set_user(a, &k1, "alice")); /* the same: kept */
        {
                SessionKey k2 = key(2);
                ASSERT_OK(admission_set_user(a, &k2, "bob"));
                ASSERT_OK(admission_set_user(a, &k2, NULL)); /* forgotten */
        }
        admission_foreach_ticket(a, collect_user, &l);
        ASSERT_EQ_INT(l.n, 3);
        ASSERT_EQ_STR(l.users[0], "alice");
        ASSERT_EQ_STR(l.users[1], "-");
        ASSERT_EQ_STR(l.users[2], "-");

        /* The name goes with the ticket at the claim: the running query's
         * user is the Manager's record, not the machine's. */
        ASSERT_EQ_INT(claim(a, 1, "qr_1", T0 + SEC(1)), 0);
        ASSERT_EQ_INT(admission_set_user(a, &k1, "alice2"), -ENOENT);
        ASSERT_EQ_INT(admission_set_user(a, &k9, "zed"), -ENOENT);
        l.n = 0;
        admission_foreach_ticket(a, collect_user, &l);
        ASSERT_EQ_INT(l.n, 2);
        ASSERT_EQ_STR(l.users[0], "-");
        ASSERT_EQ_STR(l.users[1], "-");
        ASSERT_OK(finish(a, "qr_1", T0 + SEC(2)));

        /* A ticket that goes takes its name along; the machine is freed
         * with live names (the sanitizer build checks for leaks). */
        {
                SessionKey k3 = key(3), k4 = key(4);
                ASSERT_OK(admission_set_user(a, &k3, "carol"));
                ASSERT_EQ_INT(join(a, 4, T0 + SEC(3)), 1);
                ASSERT_OK(admission_set_user(a, &k4, "dave"));
                ASSERT_OK(admission_leave(a, &k3, T0 + SEC(3)));
                ASSERT_EQ_INT(admission_set_user(a, &k3, "carol"), -ENOENT);
        }
        admission_free(a);
}

/* The heartbeat alone (a status call's, without its status). */
TEST(heartbeat) {
        Admission *a = new_admission(&default_settings, NULL);
        SessionKey k1 = key(1);
        AdmissionStatus st;

        ASSERT_EQ_INT(join(a, 1, T0), 1);
        ASSERT_EQ_INT(join(a, 2, T0), 1);
        admission_heartbeat(a, &k1, T0 + SEC(20));
        admission_heartbeat(a, NULL, T0 + SEC(20)); /* nobody's: nothing */
        /* Session 2 expired by heartbeat at T0 + 30 s, session 1 did not. */
        ASSERT_EQ_INT(admission_expire(a, T0 + SEC(31)), 1);
        admission_peek(a, &k1, T0 + SEC(31), &st);
        ASSERT_TRUE(st.has_ticket);
        ASSERT_TRUE(st.ticket.heartbeat_deadline == T0 + SEC(50));
        admission_free(a);
}

TEST(claim) {
        Recorder rec;
        Admission *a = new_admission(&default_settings, &rec);
        AdmissionCounters c;
        AdmissionStatus st;

        /* Idle: implicit join and claim, no ticket events, no ticket left. */
        ASSERT_EQ_INT(claim(a, 1, "qr_1", T0), 0);
        ASSERT_EQ_INT(rec.n, 1);
        expect_state(&rec, 0, ADMISSION_RUNNING);
        ASSERT_EQ_INT(admission_get_state(a), ADMISSION_RUNNING);
        ASSERT_EQ_INT(admission_queue_length(a), 0);
        ASSERT_EQ_STR(running_query_id(a), "qr_1");
        ASSERT_TRUE(running_since(a) == T0);
        ASSERT_TRUE(!peek_of(a, 1, T0).has_ticket);
        ASSERT_TRUE(admission_next_deadline(a) == USEC_INFINITY);

        /* Running: everyone is busy, including the claimer; a waiting
         * ticket is kept and its heartbeat not refreshed by the claim. */
        ASSERT_EQ_INT(join(a, 2, T0 + SEC(1)), 1);
        ASSERT_EQ_INT(peek_of(a, 2, T0 + SEC(1)).ticket.position, 1);
        ASSERT_EQ_INT(peek_of(a, 2, T0 + SEC(1)).ticket.status, TICKET_WAITING);
        rec.n = 0;
        ASSERT_EQ_INT(claim(a, 2, "qr_2", T0 + SEC(2)), -EBUSY);
        ASSERT_EQ_INT(claim(a, 1, "qr_2", T0 + SEC(2)), -EBUSY);
        ASSERT_EQ_INT(rec.n, 0);
        st = peek_of(a, 2, T0 + SEC(2));
        ASSERT_TRUE(st.has_ticket);
        ASSERT_TRUE(st.ticket.heartbeat_deadline == T0 + SEC(31));
        ASSERT_EQ_STR(running_query_id(a), "qr_1");

        /* Finish: 2 is promoted. */
        rec.n = 0;
        ASSERT_EQ_INT(finish(a, running_query_id(a), T0 + SEC(10)), 0);
        ASSERT_EQ_INT(rec.n, 3);
        expect_event(&rec, 0, ADMISSION_EVENT_QUERY_FINISHED, NULL);
        ASSERT_EQ_STR(rec.events[0].query_id, "qr_1");
        ASSERT_TRUE(rec.events[0].duration_usec == SEC(10));
        expect_event(&rec, 1, ADMISSION_EVENT_TICKET_PROMOTED, expected_id(1));
        expect_state(&rec, 2, ADMISSION_RESERVED);
        ASSERT_EQ_STR(running_query_id(a), "");
        ASSERT_TRUE(running_since(a) == USEC_INFINITY);

        /* Reserved for someone else: busy, and the other's waiting ticket
         * stays where it is with its heartbeat untouched. */
        ASSERT_EQ_INT(join(a, 3, T0 + SEC(11)), 1);
        rec.n = 0;
        ASSERT_EQ_INT(claim(a, 3, "qr_3", T0 + SEC(12)), -EBUSY);
        ASSERT_EQ_INT(claim(a, 4, "qr_3", T0 + SEC(12)), -EBUSY);
        ASSERT_EQ_INT(rec.n, 0);
        st = peek_of(a, 3, T0 + SEC(12));
        ASSERT_TRUE(st.has_ticket);
        ASSERT_EQ_INT(st.ticket.position, 1);
        ASSERT_TRUE(st.ticket.heartbeat_deadline == T0 + SEC(41));
        ASSERT_EQ_INT(admission_get_state(a), ADMISSION_RESERVED);

        /* Reserved for S: the ticket goes (claimed), running. */
        rec.n = 0;
        ASSERT_EQ_INT(claim(a, 2, "qr_4", T0 + SEC(13)), 0);
        ASSERT_EQ_INT(rec.n, 2);
        expect_removed(&rec, 0, expected_id(1), REMOVE_CLAIMED);
        expect_state(&rec, 1, ADMISSION_RUNNING);
        ASSERT_TRUE(!peek_of(a, 2, T0 + SEC(13)).has_ticket);
        ASSERT_EQ_INT(admission_queue_length(a), 1);
        ASSERT_EQ_INT(peek_of(a, 3, T0 + SEC(13)).ticket.position, 1);
        ASSERT_EQ_STR(running_query_id(a), "qr_4");
        ASSERT_TRUE(running_since(a) == T0 + SEC(13));

        /* A bad query id changes nothing. */
        char long_id[QUERY_ID_MAX + 1];
        memset(long_id, 'x', sizeof(long_id) - 1);
        long_id[QUERY_ID_MAX] = '\0';
        ASSERT_EQ_INT(claim(a, 3, long_id, T0 + SEC(14)), -EINVAL);
        ASSERT_EQ_INT(claim(a, 3, NULL, T0 + SEC(14)), -EINVAL);

        admission_get_counters(a, &c);
        ASSERT_EQ_INT(c.queries_started, 2);
        ASSERT_EQ_INT(c.tickets_expired, 0);
        admission_free(a);

        /* Idle with max_length 0: queue_full, nothing changes. */
        AdmissionSettings s = default_settings;
        s.max_length = 0;
        a = new_admission(&s, &rec);
        ASSERT_EQ_INT(claim(a, 1, "qr_1", T0), -ENOSPC);
        ASSERT_EQ_INT(rec.n, 0);
        ASSERT_EQ_INT(admission_get_state(a), ADMISSION_IDLE);
        admission_get_counters(a, &c);
        ASSERT_EQ_INT(c.queries_started, 0);
        admission_free(a);
}

/* API.md 12.1: while draining, no new ticket and no claim but the reserved
 * ticket's; tickets keep waiting and are promoted; the running query
 * finishes. */
TEST(drain) {
        Recorder rec;
        Admission *a = new_admission(&default_settings, &rec);

        ASSERT_TRUE(!admission_is_draining(a));
        ASSERT_EQ_INT(claim(a, 1, "qr_1", T0), 0);
        ASSERT_EQ_INT(join(a, 2, T0), 1);
        ASSERT_EQ_INT(join(a, 3, T0), 1);

        admission_set_draining(a, true);
        ASSERT_TRUE(admission_is_draining(a));
        rec.n = 0;
        ASSERT_EQ_INT(join(a, 4, T0 + SEC(1)), -ESHUTDOWN);
        ASSERT_EQ_INT(claim(a, 4, "qr_x", T0 + SEC(1)), -ESHUTDOWN);
        ASSERT_EQ_INT(claim(a, 2, "qr_x", T0 + SEC(1)), -ESHUTDOWN);
        ASSERT_EQ_INT(rec.n, 0);
        /* An existing ticket's join is its heartbeat, as always. */
        ASSERT_EQ_INT(join(a, 3, T0 + SEC(2)), 0);
        ASSERT_TRUE(peek_of(a, 3, T0 + SEC(2)).ticket.heartbeat_deadline == T0 + SEC(32));

        /* The running query finishes; 2 is promoted and may claim, 3 may not. */
        ASSERT_EQ_INT(finish(a, running_query_id(a), T0 + SEC(3)), 0);
        ASSERT_EQ_INT(admission_get_state(a), ADMISSION_RESERVED);
        ASSERT_EQ_INT(claim(a, 3, "qr_3", T0 + SEC(4)), -ESHUTDOWN);
        ASSERT_EQ_INT(claim(a, 2, "qr_2", T0 + SEC(4)), 0);
        ASSERT_EQ_INT(finish(a, running_query_id(a), T0 + SEC(5)), 0);
        ASSERT_EQ_INT(admission_get_state(a), ADMISSION_RESERVED);
        ASSERT_EQ_INT(leave(a, 3, T0 + SEC(6)), 0);

        /* Idle and draining: even the implicit join of a claim is refused. */
        ASSERT_EQ_INT(admission_get_state(a), ADMISSION_IDLE);
        ASSERT_EQ_INT(claim(a, 5, "qr_5", T0 + SEC(7)), -ESHUTDOWN);
        ASSERT_EQ_INT(admission_get_state(a), ADMISSION_IDLE);

        admission_set_draining(a, false);
        ASSERT_EQ_INT(join(a, 4, T0 + SEC(8)), 1);
        ASSERT_EQ_INT(claim(a, 4, "qr_4", T0 + SEC(8)), 0);
        admission_free(a);
}

TEST(remove_ticket) {
        Recorder rec;
        Admission *a = new_admission(&default_settings, &rec);
        char reserved[TICKET_ID_MAX], waiting[TICKET_ID_MAX];
        AdmissionCounters c;

        ASSERT_EQ_INT(join(a, 1, T0), 1);
        ASSERT_EQ_INT(join(a, 2, T0), 1);
        ASSERT_EQ_INT(join(a, 3, T0), 1);
        snprintf(reserved, sizeof reserved, "%s", peek_of(a, 1, T0).ticket.id);
        snprintf(waiting, sizeof waiting, "%s", peek_of(a, 3, T0).ticket.id);

        rec.n = 0;
        ASSERT_EQ_INT(admission_remove_ticket(a, "tk_nope", T0 + SEC(1)), -ENOENT);
        ASSERT_EQ_INT(admission_remove_ticket(a, NULL, T0 + SEC(1)), -ENOENT);
        ASSERT_EQ_INT(rec.n, 0);

        /* A waiting ticket: gone, nobody promoted. */
        ASSERT_EQ_INT(admission_remove_ticket(a, waiting, T0 + SEC(1)), 0);
        ASSERT_EQ_INT(rec.n, 1);
        expect_removed(&rec, 0, waiting, REMOVE_ADMIN);
        ASSERT_TRUE(!peek_of(a, 3, T0 + SEC(1)).has_ticket);
        ASSERT_EQ_INT(admission_queue_length(a), 2);

        /* The reserved ticket: the next one is promoted. */
        rec.n = 0;
        ASSERT_EQ_INT(admission_remove_ticket(a, reserved, T0 + SEC(2)), 0);
        expect_removed(&rec, 0, reserved, REMOVE_ADMIN);
        expect_event(&rec, 1, ADMISSION_EVENT_TICKET_PROMOTED, NULL);
        ASSERT_EQ_INT(admission_get_state(a), ADMISSION_RESERVED);
        ASSERT_EQ_INT(peek_of(a, 2, T0 + SEC(2)).ticket.status, TICKET_RESERVED);
        ASSERT_EQ_INT(admission_remove_ticket(a, reserved, T0 + SEC(2)), -ENOENT);

        /* Not an expiry. */
        admission_get_counters(a, &c);
        ASSERT_EQ_INT(c.tickets_expired, 0);
        admission_free(a);
}

TEST(finish_ema) {
        Recorder rec;
        Admission *a = new_admission(&default_settings, &rec);
        AdmissionStatus st;

        ASSERT_EQ_INT(finish(a, running_query_id(a), T0), -ESRCH);
        ASSERT_EQ_INT(join(a, 1, T0), 1);
        ASSERT_EQ_INT(finish(a, running_query_id(a), T0), -ESRCH); /* reserved is not running */
        ASSERT_EQ_INT(leave(a, 1, T0), 0);

        st = peek_of(a, 1, T0);
        ASSERT_TRUE(!st.average_known);

        ASSERT_EQ_INT(claim(a, 1, "qr_a", T0), 0);
        rec.n = 0;
        ASSERT_EQ_INT(finish(a, running_query_id(a), T0 + SEC(10)), 0);
        ASSERT_EQ_INT(rec.n, 2);
        expect_event(&rec, 0, ADMISSION_EVENT_QUERY_FINISHED, NULL);
        ASSERT_EQ_STR(rec.events[0].query_id, "qr_a");
        ASSERT_TRUE(rec.events[0].duration_usec == SEC(10));
        expect_state(&rec, 1, ADMISSION_IDLE);
        ASSERT_TRUE(wait_average_usec(&average) == SEC(10));
        st = peek_of(a, 1, T0 + SEC(10));
        ASSERT_TRUE(st.average_known);
        assert_near(st.average_query_seconds, 10.0);

        ASSERT_EQ_INT(claim(a, 2, "qr_b", T0 + SEC(100)), 0);
        ASSERT_EQ_INT(finish(a, running_query_id(a), T0 + SEC(120)), 0);
        /* 0.2 * 20 + 0.8 * 10 */
        ASSERT_TRUE(wait_average_usec(&average) == SEC(12));
        assert_near(peek_of(a, 1, T0 + SEC(120)).average_query_seconds, 12.0);
        ASSERT_EQ_INT(finish(a, running_query_id(a), T0 + SEC(121)), -ESRCH);

        /* Sub-second durations are kept exactly. */
        ASSERT_EQ_INT(claim(a, 2, "qr_c", T0 + SEC(200)), 0);
        ASSERT_EQ_INT(finish(a, running_query_id(a), T0 + SEC(200) + 500 * USEC_PER_MSEC), 0);
        assert_near(peek_of(a, 1, T0 + SEC(201)).average_query_seconds, 0.2 * 0.5 + 0.8 * 12.0);
        admission_free(a);
}

static void expect_estimate(AdmissionStatus st, bool known, double value) {
        ASSERT_EQ_INT(st.estimate_known, known);
        if (known)
                assert_near(st.estimated_wait_seconds, value);
}

TEST(estimates) {
        AdmissionSettings s = {
                .reservation_usec = SEC(3600), .heartbeat_usec = SEC(3600), .max_length = 10, .slots = 1
        };
        Admission *a = new_admission(&s, NULL);

        /* Average unknown. Idle, no ticket: 0. */
        expect_estimate(peek_of(a, 9, T0), true, 0);
        ASSERT_EQ_INT(join(a, 1, T0), 1);
        ASSERT_EQ_INT(join(a, 2, T0), 1);
        /* The reserved ticket: 0 even when unknown; others null. */
        expect_estimate(peek_of(a, 1, T0), true, 0);
        expect_estimate(peek_of(a, 2, T0), false, 0);
        expect_estimate(peek_of(a, 9, T0), false, 0);
        ASSERT_TRUE(!peek_of(a, 9, T0).average_known);

        /* Learn avg = 10 s: 1 claims and runs 10 s. */
        ASSERT_EQ_INT(claim(a, 1, "qr_1", T0), 0);
        expect_estimate(peek_of(a, 2, T0 + SEC(3)), false, 0); /* running, unknown */
        ASSERT_EQ_INT(finish(a, running_query_id(a), T0 + SEC(10)), 0);
        /* 2 is now reserved. */
        ASSERT_EQ_INT(join(a, 3, T0 + SEC(10)), 1);
        ASSERT_EQ_INT(join(a, 4, T0 + SEC(10)), 1);

        /* Reserved for someone else: base = avg. */
        expect_estimate(peek_of(a, 2, T0 + SEC(10)), true, 0);
        expect_estimate(peek_of(a, 3, T0 + SEC(10)), true, 10); /* p = 1 */
        expect_estimate(peek_of(a, 4, T0 + SEC(10)), true, 20); /* p = 2 */
        expect_estimate(peek_of(a, 9, T0 + SEC(10)), true, 30); /* p = waiting + 1 = 3 */
        assert_near(peek_of(a, 9, T0 + SEC(10)).average_query_seconds, 10);

        /* Running for 4 s: base = max(0, 10 - 4) = 6. */
        ASSERT_EQ_INT(claim(a, 2, "qr_2", T0 + SEC(20)), 0);
        expect_estimate(peek_of(a, 3, T0 + SEC(24)), true, 6);  /* p = 1 */
        expect_estimate(peek_of(a, 4, T0 + SEC(24)), true, 16); /* p = 2 */
        expect_estimate(peek_of(a, 9, T0 + SEC(24)), true, 26); /* p = 3 */
        /* Running longer than the average: base 0. */
        expect_estimate(peek_of(a, 3, T0 + SEC(35)), true, 0);
        expect_estimate(peek_of(a, 4, T0 + SEC(35)), true, 10);
        expect_estimate(peek_of(a, 9, T0 + SEC(35)), true, 20);

        /* Back to idle with a known average: a caller without a ticket 0. */
        ASSERT_EQ_INT(leave(a, 3, T0 + SEC(36)), 0);
        ASSERT_EQ_INT(leave(a, 4, T0 + SEC(36)), 0);
        ASSERT_EQ_INT(finish(a, running_query_id(a), T0 + SEC(40)), 0);
        ASSERT_EQ_INT(admission_get_state(a), ADMISSION_IDLE);
        expect_estimate(peek_of(a, 9, T0 + SEC(40)), true, 0);
        /* avg = 0.2 * 20 + 0.8 * 10 = 12 */
        assert_near(peek_of(a, 9, T0 + SEC(40)).average_query_seconds, 12);
        admission_free(a);
}

TEST(next_deadline) {
        AdmissionSettings s = {
                .reservation_usec = SEC(10), .heartbeat_usec = SEC(30), .max_length = 10, .slots = 1
        };
        Admission *a = new_admission(&s, NULL);

        ASSERT_TRUE(admission_next_deadline(a) == USEC_INFINITY);
        ASSERT_EQ_INT(join(a, 1, T0), 1);
        ASSERT_TRUE(admission_next_deadline(a) == T0 + SEC(10)); /* reservation first */
        ASSERT_EQ_INT(claim(a, 1, "qr", T0 + SEC(1)), 0);
        ASSERT_TRUE(admission_next_deadline(a) == USEC_INFINITY); /* running, no ticket */
        ASSERT_EQ_INT(join(a, 2, T0 + SEC(2)), 1);
        ASSERT_TRUE(admission_next_deadline(a) == T0 + SEC(32)); /* waiting: heartbeat */
        (void) status_of(a, 2, T0 + SEC(5));
        ASSERT_TRUE(admission_next_deadline(a) == T0 + SEC(35));
        ASSERT_EQ_INT(finish(a, running_query_id(a), T0 + SEC(6)), 0);
        ASSERT_TRUE(admission_next_deadline(a) == T0 + SEC(16)); /* promoted: reservation */
        admission_free(a);
}

TEST(peek_no_heartbeat) {
        Admission *a = new_admission(&default_settings, NULL);
        AdmissionStatus st;

        ASSERT_EQ_INT(join(a, 1, T0), 1);
        admission_peek(a, NULL, T0 + SEC(20), &st);
        ASSERT_TRUE(!st.has_ticket);
        ASSERT_EQ_INT(st.queue_length, 1);
        st = peek_of(a, 1, T0 + SEC(20));
        ASSERT_TRUE(st.ticket.heartbeat_deadline == T0 + SEC(30));
        /* peek still applies expiries */
        admission_peek(a, NULL, T0 + SEC(30), &st);
        ASSERT_EQ_INT(st.queue_length, 0);
        ASSERT_EQ_INT(st.state, ADMISSION_IDLE);
        admission_free(a);
}

static void custom_ids(char buf[static TICKET_ID_MAX], void *userdata) {
        unsigned *n = userdata;
        (void) snprintf(buf, TICKET_ID_MAX, "tk_custom%u", ++*n);
}

TEST(id_generator) {
        Admission *a = new_admission(&default_settings, NULL);
        unsigned n = 0;

        admission_set_id_generator(a, custom_ids, &n);
        ASSERT_EQ_INT(join(a, 1, T0), 1);
        ASSERT_EQ_INT(join(a, 2, T0), 1);
        ASSERT_EQ_STR(peek_of(a, 2, T0).ticket.id, "tk_custom2");
        ASSERT_EQ_INT(n, 2);
        admission_set_id_generator(a, NULL, NULL); /* back to the counter */
        ASSERT_EQ_INT(join(a, 3, T0), 1);
        ASSERT_EQ_STR(peek_of(a, 3, T0).ticket.id, expected_id(1));
        admission_free(a);
}

typedef struct Listing {
        TicketView views[4096];
        size_t n;
} Listing;

static void collect(const TicketView *v, void *userdata) {
        Listing *l = userdata;

        ASSERT_TRUE(l->n < ELEMENTSOF(l->views));
        l->views[l->n++] = *v;
}

/* Many tickets, heavy churn: exercises hash growth and backward-shift
 * deletion, slot compaction and the Fenwick rebuild. Positions from status
 * must match the FIFO listing. */
TEST(churn_large) {
        AdmissionSettings s = {
                .reservation_usec = SEC(3600), .heartbeat_usec = SEC(3600), .max_length = 3000, .slots = 1
        };
        Admission *a = new_admission(&s, NULL);
        static Listing l;
        static bool present[20000];
        uint64_t x = 12345;
        unsigned next = 1;

        for (unsigned round = 0; round < 40; round++) {
                /* Add up to 300, remove roughly 250 at random. */
                for (unsigned i = 0; i < 300; i++) {
                        int r = join(a, next, T0);
                        if (r == 1)
                                present[next] = true;
                        else
                                ASSERT_EQ_INT(r, -ENOSPC);
                        next++;
                }
                for (unsigned i = 0; i < 250; i++) {
                        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
                        unsigned n = 1 + (unsigned) ((x >> 33) % (next - 1));
                        ASSERT_EQ_INT(leave(a, n, T0), present[n] ? 0 : -ENOENT);
                        present[n] = false;
                }

                l.n = 0;
                admission_foreach_ticket(a, collect, &l);
                ASSERT_EQ_INT(l.n, admission_queue_length(a));
                for (size_t i = 0; i < l.n; i++) {
                        ASSERT_EQ_INT(l.views[i].position, i);
                        ASSERT_EQ_INT(l.views[i].status, i == 0 ? TICKET_RESERVED : TICKET_WAITING);
                        /* FIFO order is join order, so ids ascend. */
                        if (i > 0)
                                ASSERT_TRUE(strcmp(l.views[i - 1].id, l.views[i].id) < 0);
                }
                unsigned count = 0;
                for (unsigned n = 1; n < next; n++) {
                        AdmissionStatus st = peek_of(a, n, T0);
                        ASSERT_EQ_INT(st.has_ticket, present[n]);
                        if (!present[n])
                                continue;
                        count++;
                        ASSERT_TRUE(st.ticket.position < l.n);
                        ASSERT_EQ_STR(st.ticket.id, l.views[st.ticket.position].id);
                }
                ASSERT_EQ_INT(count, l.n);
        }
        admission_free(a);
}

/* Many tickets heartbeating in random order, many times each, with time
 * moving so that some expire between heartbeats: exercises the heartbeat
 * queue's dead entries, its compaction when full and its growth, at a
 * scale the reference model below does not reach. After every operation
 * the queue length and the next deadline must match a plain array of last
 * heartbeats; now and then every session's ticket is checked too. */
TEST(heartbeat_churn) {
        enum { N = 2000 };
        AdmissionSettings s = {
                .reservation_usec = SEC(3600), .heartbeat_usec = SEC(5), .max_length = 1500, .slots = 1
        };
        Admission *a = new_admission(&s, NULL);
        static usec_t last[N + 1]; /* last heartbeat, 0: no ticket */
        usec_t now = T0;
        uint64_t x = 777;

        for (unsigned op = 0; op < 100000; op++) {
                usec_t want = USEC_INFINITY;
                unsigned n, count = 0;
                int r;

                x = x * 6364136223846793005ULL + 1442695040888963407ULL;
                n = 1 + (unsigned) ((x >> 33) % N);
                /* Time moves by 0 to 20 ms every fourth operation or so:
                 * about 250 s in all, so a session's ticket often expires
                 * before its next turn, and no reservation ever does. */
                if ((x >> 20) % 4 == 0)
                        now += (x >> 40) % (20 * USEC_PER_MSEC);

                /* What the machine must expire first, at "now". */
                for (unsigned i = 1; i <= N; i++)
                        if (last[i] != 0 && last[i] + s.heartbeat_usec <= now)
                                last[i] = 0;

                switch ((x >> 24) % 4) {
                case 0:
                case 1:
                        r = join(a, n, now);
                        if (last[n] != 0)
                                ASSERT_EQ_INT(r, 0);
                        else if (r == -ENOSPC)
                                break;
                        else
                                ASSERT_EQ_INT(r, 1);
                        last[n] = now;
                        break;
                case 2:
                        ASSERT_EQ_INT(status_of(a, n, now).has_ticket, last[n] != 0);
                        if (last[n] != 0)
                                last[n] = now;
                        break;
                default:
                        ASSERT_EQ_INT(leave(a, n, now), last[n] != 0 ? 0 : -ENOENT);
                        last[n] = 0;
                }

                /* The reservation deadline is an hour away, later than any
                 * heartbeat deadline (the reserved ticket has one too). */
                for (unsigned i = 1; i <= N; i++)
                        if (last[i] != 0) {
                                count++;
                                want = MIN(want, last[i] + s.heartbeat_usec);
                        }
                ASSERT_EQ_INT(admission_queue_length(a), count);
                ASSERT_EQ_INT(admission_next_deadline(a), want);

                if (op % 5000 == 0)
                        for (unsigned i = 1; i <= N; i++) {
                                AdmissionStatus st = peek_of(a, i, now);
                                ASSERT_EQ_INT(st.has_ticket, last[i] != 0);
                                if (st.has_ticket)
                                        ASSERT_EQ_INT(st.ticket.heartbeat_deadline, last[i] + s.heartbeat_usec);
                        }
        }
        admission_free(a);
}

static void count_running(const char *query_id, unsigned slot, void *userdata) {
        (*(unsigned *) userdata)++;
}

/* Three slots, walked through by hand: the rules of API.md 5 for N. */
TEST(slots) {
        Recorder rec;
        AdmissionSettings s = default_settings;
        AdmissionSlotCounts c;
        AdmissionStatus st;
        Admission *a;
        unsigned n = 0;

        s.slots = 3;
        a = new_admission(&s, &rec);

        /* Three implicit claims take slots 0, 1, 2; one state change. */
        ASSERT_EQ_INT(claim(a, 1, "qr_1", T0), 0);
        ASSERT_EQ_INT(claim(a, 2, "qr_2", T0 + SEC(10)), 1);
        /* One running query per session, and ids are unique. */
        ASSERT_EQ_INT(claim(a, 1, "qr_9", T0 + SEC(10)), -EBUSY);
        ASSERT_EQ_INT(claim(a, 3, "qr_2", T0 + SEC(10)), -EINVAL);
        ASSERT_EQ_INT(claim(a, 3, "qr_3", T0 + SEC(20)), 2);
        ASSERT_EQ_INT(rec.n, 1);
        expect_state(&rec, 0, ADMISSION_RUNNING);
        admission_get_slot_counts(a, &c);
        ASSERT_TRUE(c.total == 3 && c.idle == 0 && c.reserved == 0 && c.running == 3);
        ASSERT_EQ_STR(running_query_id(a), "qr_1");
        admission_foreach_running(a, count_running, &n);
        ASSERT_EQ_INT(n, 3);

        /* A fourth waits; a session that runs may queue too. */
        ASSERT_EQ_INT(claim(a, 4, "qr_4", T0 + SEC(20)), -EBUSY);
        ASSERT_EQ_INT(join(a, 4, T0 + SEC(20)), 1);
        ASSERT_EQ_INT(join(a, 1, T0 + SEC(20)), 1);
        st = status_of(a, 4, T0 + SEC(20));
        ASSERT_TRUE(st.ticket.status == TICKET_WAITING && st.ticket.position == 1);
        /* No average yet: no estimate. */
        ASSERT_TRUE(!st.estimate_known);

        /* The second slot finishes first: the FIFO head gets slot 1. */
        rec.n = 0;
        ASSERT_EQ_INT(finish(a, "qr_2", T0 + SEC(30)), 0);
        ASSERT_EQ_INT(rec.n, 2);
        expect_event(&rec, 0, ADMISSION_EVENT_QUERY_FINISHED, NULL);
        ASSERT_EQ_STR(rec.events[0].query_id, "qr_2");
        expect_event(&rec, 1, ADMISSION_EVENT_TICKET_PROMOTED, expected_id(1));
        st = status_of(a, 4, T0 + SEC(30));
        ASSERT_TRUE(st.ticket.status == TICKET_RESERVED && st.ticket.position == 0);
        ASSERT_TRUE(st.ticket.reservation_deadline == T0 + SEC(90));
        st = status_of(a, 1, T0 + SEC(30));
        ASSERT_TRUE(st.ticket.status == TICKET_WAITING && st.ticket.position == 1);

        /* avg = 20 s. Slot 0 ran 30 s (0 left), slot 2 ran 10 s (10 s
         * left), slot 1 is reserved (20 s): the next waiting ticket gets
         * slot 0 at once, the one after it slot 2 in 10 s. */
        ASSERT_TRUE(st.estimate_known);
        assert_near(st.estimated_wait_seconds, 0);
        ASSERT_EQ_INT(join(a, 5, T0 + SEC(30)), 1);
        st = status_of(a, 5, T0 + SEC(30));
        ASSERT_EQ_INT(st.ticket.position, 2);
        assert_near(st.estimated_wait_seconds, 10);
        st = peek_of(a, 6, T0 + SEC(30));
        assert_near(st.estimated_wait_seconds, 20); /* the reserved slot */
        ASSERT_TRUE(st.slots.total == 3 && st.slots.reserved == 1 && st.slots.running == 2);

        /* Session 1 is promoted while its query still runs: its claim is
         * busy, and its reservation runs out unless that query ends. */
        ASSERT_EQ_INT(finish(a, "qr_3", T0 + SEC(31)), 0);
        ASSERT_EQ_INT(status_of(a, 1, T0 + SEC(31)).ticket.status, TICKET_RESERVED);
        ASSERT_EQ_INT(claim(a, 1, "qr_10", T0 + SEC(31)), -EBUSY);
        ASSERT_EQ_INT(finish(a, "qr_1", T0 + SEC(32)), 0);
        ASSERT_EQ_INT(claim(a, 1, "qr_10", T0 + SEC(32)), 2);
        ASSERT_EQ_STR(running_query_id(a), "qr_10");
        ASSERT_EQ_INT(claim(a, 4, "qr_11", T0 + SEC(33)), 1);

        /* Unknown ids are not finished. */
        ASSERT_EQ_INT(finish(a, "qr_1", T0 + SEC(34)), -ESRCH);
        ASSERT_EQ_INT(finish(a, NULL, T0 + SEC(34)), -ESRCH);
        admission_free(a);
}

/* ---- against the reference model (admission-model.h) ---- */

static uint64_t rng_state;

static uint64_t rng(void) {
        /* splitmix64: fixed, portable, good enough for test input */
        uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        return z ^ (z >> 31);
}

static bool rng_source(void *userdata, uint64_t n, uint64_t *ret) {
        *ret = rng() % n;
        return true;
}

static void random_run(const AdmissionSettings *s, unsigned ops, uint64_t seed) {
        ModelStats st;

        fprintf(stderr,
                "random run: seed %" PRIu64 ", %u operations, %u slots, reservation %" PRIu64
                " s, heartbeat %" PRIu64 " s, max_length %" PRIu64 "\n",
                seed,
                ops,
                s->slots,
                s->reservation_usec / USEC_PER_SEC,
                s->heartbeat_usec / USEC_PER_SEC,
                s->max_length);
        rng_state = seed;
        admission_model_run(s, ops, rng_source, NULL, &st);

        fprintf(stderr,
                "  created %u, queue_full %u, draining %u, claimed %u, busy %u (running already %u), "
                "finished %u (not running %u), most running %u, removed: left %u, claimed %u, heartbeat %u, "
                "reservation %u\n",
                st.created,
                st.full,
                st.shutdown,
                st.claimed,
                st.busy,
                st.busy_running,
                st.finished,
                st.finished_missing,
                st.max_running,
                st.removed[REMOVE_LEFT],
                st.removed[REMOVE_CLAIMED],
                st.removed[REMOVE_HEARTBEAT],
                st.removed[REMOVE_RESERVATION]);
        ASSERT_EQ_INT(st.ops, ops);
        ASSERT_TRUE(st.finished_missing > 0 && st.shutdown > 0);
        if (s->max_length > 0) {
                ASSERT_TRUE(st.claimed > 0 && st.busy > 0 && st.finished > 0);
                ASSERT_TRUE(st.created > 0);
                /* Every reason a client or a timer causes (REMOVE_ADMIN
                 * has its own test). */
                for (unsigned i = 0; i <= REMOVE_RESERVATION; i++)
                        ASSERT_TRUE(st.removed[i] > 0);
                /* Every slot ran at some point, and with several a
                 * session that already runs one was refused. */
                ASSERT_EQ_INT(st.max_running, s->slots);
                if (s->slots > 1)
                        ASSERT_TRUE(st.busy_running > 0);
        }
        if (s->max_length < MODEL_SESSIONS)
                ASSERT_TRUE(st.full > 0);
}

TEST(random) {
        const char *e = getenv("WIKIWEB_TEST_SEED");
        uint64_t seed = e ? strtoull(e, NULL, 10) : 20261122;

        /* Short deadlines relative to the time steps, so expiries of every
         * kind happen often; a small max_length so queue_full does too.
         * One slot as the service always had, then 2..8. */
        for (unsigned n = 1; n <= MODEL_SLOTS_MAX; n++) {
                unsigned scale = n == 1 ? 2 : 1;

                random_run(
                        &(AdmissionSettings){ .reservation_usec = SEC(10),
                                              .heartbeat_usec = SEC(30),
                                              .max_length = 12,
                                              .slots = n },
                        scale * 15000,
                        seed + 10 * n);
                random_run(
                        &(AdmissionSettings){ .reservation_usec = SEC(2),
                                              .heartbeat_usec = SEC(8),
                                              .max_length = 1000,
                                              .slots = n },
                        scale * 10000,
                        seed + 10 * n + 1);
                random_run(
                        &(AdmissionSettings){ .reservation_usec = SEC(1),
                                              .heartbeat_usec = SEC(1),
                                              .max_length = 5,
                                              .slots = n },
                        scale * 4000,
                        seed + 10 * n + 2);
                random_run(
                        &(AdmissionSettings){ .reservation_usec = SEC(3),
                                              .heartbeat_usec = SEC(3),
                                              .max_length = 0,
                                              .slots = n },
                        2000,
                        seed + 10 * n + 3);
        }
}

DEFINE_TEST_MAIN()
