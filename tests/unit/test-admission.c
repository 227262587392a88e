/* SPDX-License-Identifier: MIT */
#include <math.h>

#include "admission/admission.h"
#include "shared/macro.h"
#include "tests.h"

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

static Admission *new_admission(const AdmissionSettings *s, Recorder *rec) {
        Admission *a = NULL;

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

static AdmissionStatus status_of(Admission *a, unsigned n, usec_t now) {
        AdmissionStatus st;
        SessionKey k = key(n);

        ASSERT_EQ_INT(admission_status(a, &k, now, &st), 0);
        return st;
}

static AdmissionStatus peek_of(Admission *a, unsigned n, usec_t now) {
        AdmissionStatus st;
        SessionKey k = key(n);

        admission_peek(a, &k, now, &st);
        return st;
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
        return admission_claim(a, &k, qid, now);
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
        ASSERT_TRUE(!a);

        s = (AdmissionSettings){ .reservation_usec = SEC(3600),
                                 .heartbeat_usec = SEC(1),
                                 .max_length = 1000000 };
        ASSERT_OK(admission_new(&s, &a));
        ASSERT_TRUE(admission_get_settings(a)->reservation_usec == SEC(3600));
        ASSERT_TRUE(admission_get_settings(a)->heartbeat_usec == SEC(1));
        ASSERT_TRUE(admission_get_settings(a)->max_length == 1000000);
        ASSERT_EQ_INT(admission_get_state(a), ADMISSION_IDLE);
        ASSERT_TRUE(admission_next_deadline(a) == USEC_INFINITY);
        ASSERT_EQ_STR(admission_running_query_id(a), "");
        ASSERT_TRUE(admission_running_since(a) == USEC_INFINITY);
        ASSERT_TRUE(admission_average_usec(a) == 0);
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
        AdmissionSettings s = { .reservation_usec = SEC(60), .heartbeat_usec = SEC(3600), .max_length = 10 };
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
        AdmissionSettings s = { .reservation_usec = SEC(30), .heartbeat_usec = SEC(30), .max_length = 10 };
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

        /* No ticket, no running query: nothing to name. */
        ASSERT_EQ_INT(admission_set_user(a, &k1, "alice"), -ENOENT);
        ASSERT_TRUE(!admission_running_user(a));

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

        /* The claim moves the name to the running query. */
        ASSERT_EQ_INT(claim(a, 1, "qr_1", T0 + SEC(1)), 0);
        ASSERT_EQ_STR(admission_running_user(a), "alice");
        ASSERT_OK(admission_set_user(a, &k1, "alice2"));
        ASSERT_EQ_STR(admission_running_user(a), "alice2");
        ASSERT_EQ_INT(admission_set_user(a, &k9, "zed"), -ENOENT);
        /* The query's name goes at the finish. */
        ASSERT_OK(admission_finish(a, T0 + SEC(2)));
        ASSERT_TRUE(!admission_running_user(a));

        /* A ticket without a name claims: the query has none until it is
         * given one. */
        ASSERT_EQ_INT(claim(a, 2, "qr_2", T0 + SEC(3)), 0);
        ASSERT_TRUE(!admission_running_user(a));
        {
                SessionKey k2 = key(2);
                ASSERT_OK(admission_set_user(a, &k2, "bob"));
        }
        ASSERT_EQ_STR(admission_running_user(a), "bob");
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
        ASSERT_EQ_STR(admission_running_query_id(a), "qr_1");
        ASSERT_TRUE(admission_running_since(a) == T0);
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
        ASSERT_EQ_STR(admission_running_query_id(a), "qr_1");

        /* Finish: 2 is promoted. */
        rec.n = 0;
        ASSERT_EQ_INT(admission_finish(a, T0 + SEC(10)), 0);
        ASSERT_EQ_INT(rec.n, 3);
        expect_event(&rec, 0, ADMISSION_EVENT_QUERY_FINISHED, NULL);
        ASSERT_EQ_STR(rec.events[0].query_id, "qr_1");
        ASSERT_TRUE(rec.events[0].duration_usec == SEC(10));
        expect_event(&rec, 1, ADMISSION_EVENT_TICKET_PROMOTED, expected_id(1));
        expect_state(&rec, 2, ADMISSION_RESERVED);
        ASSERT_EQ_STR(admission_running_query_id(a), "");
        ASSERT_TRUE(admission_running_since(a) == USEC_INFINITY);

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
        ASSERT_EQ_STR(admission_running_query_id(a), "qr_4");
        ASSERT_TRUE(admission_running_since(a) == T0 + SEC(13));

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
        ASSERT_EQ_INT(admission_finish(a, T0 + SEC(3)), 0);
        ASSERT_EQ_INT(admission_get_state(a), ADMISSION_RESERVED);
        ASSERT_EQ_INT(claim(a, 3, "qr_3", T0 + SEC(4)), -ESHUTDOWN);
        ASSERT_EQ_INT(claim(a, 2, "qr_2", T0 + SEC(4)), 0);
        ASSERT_EQ_INT(admission_finish(a, T0 + SEC(5)), 0);
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

        ASSERT_EQ_INT(admission_finish(a, T0), -ESRCH);
        ASSERT_EQ_INT(join(a, 1, T0), 1);
        ASSERT_EQ_INT(admission_finish(a, T0), -ESRCH); /* reserved is not running */
        ASSERT_EQ_INT(leave(a, 1, T0), 0);

        st = peek_of(a, 1, T0);
        ASSERT_TRUE(!st.average_known);

        ASSERT_EQ_INT(claim(a, 1, "qr_a", T0), 0);
        rec.n = 0;
        ASSERT_EQ_INT(admission_finish(a, T0 + SEC(10)), 0);
        ASSERT_EQ_INT(rec.n, 2);
        expect_event(&rec, 0, ADMISSION_EVENT_QUERY_FINISHED, NULL);
        ASSERT_EQ_STR(rec.events[0].query_id, "qr_a");
        ASSERT_TRUE(rec.events[0].duration_usec == SEC(10));
        expect_state(&rec, 1, ADMISSION_IDLE);
        ASSERT_TRUE(admission_average_usec(a) == SEC(10));
        st = peek_of(a, 1, T0 + SEC(10));
        ASSERT_TRUE(st.average_known);
        assert_near(st.average_query_seconds, 10.0);

        ASSERT_EQ_INT(claim(a, 2, "qr_b", T0 + SEC(100)), 0);
        ASSERT_EQ_INT(admission_finish(a, T0 + SEC(120)), 0);
        /* 0.2 * 20 + 0.8 * 10 */
        ASSERT_TRUE(admission_average_usec(a) == SEC(12));
        assert_near(peek_of(a, 1, T0 + SEC(120)).average_query_seconds, 12.0);
        ASSERT_EQ_INT(admission_finish(a, T0 + SEC(121)), -ESRCH);

        /* Sub-second durations are kept exactly. */
        ASSERT_EQ_INT(claim(a, 2, "qr_c", T0 + SEC(200)), 0);
        ASSERT_EQ_INT(admission_finish(a, T0 + SEC(200) + 500 * USEC_PER_MSEC), 0);
        assert_near(peek_of(a, 1, T0 + SEC(201)).average_query_seconds, 0.2 * 0.5 + 0.8 * 12.0);
        admission_free(a);
}

static void expect_estimate(AdmissionStatus st, bool known, double value) {
        ASSERT_EQ_INT(st.estimate_known, known);
        if (known)
                assert_near(st.estimated_wait_seconds, value);
}

TEST(estimates) {
        AdmissionSettings s = { .reservation_usec = SEC(3600), .heartbeat_usec = SEC(3600), .max_length = 10 };
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
        ASSERT_EQ_INT(admission_finish(a, T0 + SEC(10)), 0);
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
        ASSERT_EQ_INT(admission_finish(a, T0 + SEC(40)), 0);
        ASSERT_EQ_INT(admission_get_state(a), ADMISSION_IDLE);
        expect_estimate(peek_of(a, 9, T0 + SEC(40)), true, 0);
        /* avg = 0.2 * 20 + 0.8 * 10 = 12 */
        assert_near(peek_of(a, 9, T0 + SEC(40)).average_query_seconds, 12);
        admission_free(a);
}

TEST(next_deadline) {
        AdmissionSettings s = { .reservation_usec = SEC(10), .heartbeat_usec = SEC(30), .max_length = 10 };
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
        ASSERT_EQ_INT(admission_finish(a, T0 + SEC(6)), 0);
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
        AdmissionSettings s = { .reservation_usec = SEC(3600), .heartbeat_usec = SEC(3600), .max_length = 3000 };
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
        AdmissionSettings s = { .reservation_usec = SEC(3600), .heartbeat_usec = SEC(5), .max_length = 1500 };
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

/* ---- the reference model ---- */

#define N_SESSIONS 50

typedef struct RefTicket {
        unsigned session;
        unsigned id;
        usec_t joined;
        usec_t heartbeat_deadline;
} RefTicket;

/* Event counts per operation; compared with what the handler saw. */
typedef struct EventTally {
        unsigned added, promoted, finished;
        unsigned removed[_REMOVE_REASON_MAX];
        AdmissionState states[16];
        unsigned n_states;
        unsigned removed_ids[N_SESSIONS * 2]; /* ticket numbers, in any order */
        unsigned n_removed_ids;
} EventTally;

typedef struct Ref {
        AdmissionSettings settings;
        AdmissionState state;
        RefTicket q[N_SESSIONS]; /* q[0] is the reserved one when state == reserved */
        unsigned n;
        usec_t reservation_deadline;
        usec_t last_now;
        unsigned next_id;
        char query_id[QUERY_ID_MAX];
        usec_t claimed_at;
        bool avg_known;
        double avg;
        uint64_t started, expired;
        EventTally tally;
} Ref;

static void ref_tally_state(Ref *m, AdmissionState s) {
        ASSERT_TRUE(m->tally.n_states < ELEMENTSOF(m->tally.states));
        m->tally.states[m->tally.n_states++] = s;
}

static void ref_remove_at(Ref *m, unsigned i, RemoveReason reason) {
        m->tally.removed[reason]++;
        m->tally.removed_ids[m->tally.n_removed_ids++] = m->q[i].id;
        if (reason == REMOVE_HEARTBEAT || reason == REMOVE_RESERVATION)
                m->expired++;
        if (i == 0 && m->state == ADMISSION_RESERVED)
                m->state = ADMISSION_IDLE;
        memmove(&m->q[i], &m->q[i + 1], sizeof(RefTicket) * (m->n - i - 1));
        m->n--;
}

static void ref_promote(Ref *m, usec_t t) {
        if (m->state == ADMISSION_IDLE && m->n > 0) {
                m->state = ADMISSION_RESERVED;
                m->reservation_deadline = t + m->settings.reservation_usec;
                m->tally.promoted++;
        }
}

/* Transitions report a state change only when the state at their end
 * differs from the one at their start. */
static void ref_end(Ref *m, AdmissionState before) {
        if (m->state != before)
                ref_tally_state(m, m->state);
}

static void ref_expire(Ref *m, usec_t now) {
        for (;;) {
                usec_t t = USEC_INFINITY;
                AdmissionState before = m->state;

                for (unsigned i = 0; i < m->n; i++)
                        t = MIN(t, m->q[i].heartbeat_deadline);
                if (m->state == ADMISSION_RESERVED)
                        t = MIN(t, m->reservation_deadline);
                if (t > now)
                        return;

                /* Everything due at t; a heartbeat beats a reservation. */
                bool reserved_gone = false;
                for (unsigned i = 0; i < m->n;) {
                        if (m->q[i].heartbeat_deadline <= t) {
                                if (i == 0 && m->state == ADMISSION_RESERVED)
                                        reserved_gone = true;
                                ref_remove_at(m, i, REMOVE_HEARTBEAT);
                        } else
                                i++;
                }
                if (!reserved_gone && m->state == ADMISSION_RESERVED && m->reservation_deadline <= t)
                        ref_remove_at(m, 0, REMOVE_RESERVATION);
                ref_promote(m, t);
                ref_end(m, before);
        }
}

static usec_t ref_begin(Ref *m, usec_t now) {
        memset(&m->tally, 0, sizeof(m->tally));
        m->last_now = MAX(m->last_now, now);
        ref_expire(m, m->last_now);
        return m->last_now;
}

static int ref_find(const Ref *m, unsigned session) {
        for (unsigned i = 0; i < m->n; i++)
                if (m->q[i].session == session)
                        return (int) i;
        return -1;
}

static int ref_join(Ref *m, unsigned s, usec_t now) {
        AdmissionState before;
        int i;

        now = ref_begin(m, now);
        before = m->state;
        i = ref_find(m, s);
        if (i >= 0) {
                m->q[i].heartbeat_deadline = now + m->settings.heartbeat_usec;
                return 0;
        }
        if (m->n >= m->settings.max_length)
                return -ENOSPC;
        m->q[m->n++] = (RefTicket){
                .session = s,
                .id = ++m->next_id,
                .joined = now,
                .heartbeat_deadline = now + m->settings.heartbeat_usec,
        };
        m->tally.added++;
        ref_promote(m, now);
        ref_end(m, before);
        return 1;
}

static int ref_leave(Ref *m, unsigned s, usec_t now) {
        AdmissionState before;
        int i;

        now = ref_begin(m, now);
        before = m->state;
        i = ref_find(m, s);
        if (i < 0)
                return -ENOENT;
        ref_remove_at(m, (unsigned) i, REMOVE_LEFT);
        ref_promote(m, now);
        ref_end(m, before);
        return 0;
}

static int ref_claim(Ref *m, unsigned s, const char *qid, usec_t now) {
        AdmissionState before;

        now = ref_begin(m, now);
        before = m->state;
        if (m->state == ADMISSION_RESERVED && m->q[0].session == s)
                ref_remove_at(m, 0, REMOVE_CLAIMED);
        else if (m->state == ADMISSION_IDLE) {
                if (m->settings.max_length == 0)
                        return -ENOSPC;
        } else
                return -EBUSY;
        m->state = ADMISSION_RUNNING;
        m->claimed_at = now;
        (void) snprintf(m->query_id, sizeof(m->query_id), "%s", qid);
        m->started++;
        ref_end(m, before);
        return 0;
}

static int ref_finish(Ref *m, usec_t now) {
        double d;

        now = ref_begin(m, now);
        if (m->state != ADMISSION_RUNNING)
                return -ESRCH;
        d = (double) (now - m->claimed_at) / 1e6;
        m->avg = m->avg_known ? 0.2 * d + 0.8 * m->avg : d;
        m->avg_known = true;
        m->tally.finished++;
        m->state = ADMISSION_IDLE;
        ref_promote(m, now);
        ref_end(m, ADMISSION_RUNNING);
        return 0;
}

static void ref_status(Ref *m, unsigned s, usec_t now, bool heartbeat, AdmissionStatus *ret) {
        uint64_t waiting;
        int i;

        now = ref_begin(m, now);
        i = ref_find(m, s);
        if (i >= 0 && heartbeat)
                m->q[i].heartbeat_deadline = now + m->settings.heartbeat_usec;

        *ret = (AdmissionStatus){
                .state = m->state,
                .queue_length = m->n,
                .max_length = m->settings.max_length,
                .has_ticket = i >= 0,
                .average_known = m->avg_known,
                .average_query_seconds = m->avg_known ? m->avg : 0,
        };
        waiting = m->n - (m->state == ADMISSION_RESERVED ? 1 : 0);

        uint64_t p;
        if (i >= 0) {
                RefTicket *t = &m->q[i];
                bool reserved = i == 0 && m->state == ADMISSION_RESERVED;
                p = m->state == ADMISSION_RESERVED ? (uint64_t) i : (uint64_t) i + 1;
                (void) snprintf(ret->ticket.id, sizeof(ret->ticket.id), "tk_%032x", t->id);
                ret->ticket.status = reserved ? TICKET_RESERVED : TICKET_WAITING;
                ret->ticket.position = p;
                ret->ticket.joined = t->joined;
                ret->ticket.heartbeat_deadline = t->heartbeat_deadline;
                ret->ticket.reservation_deadline = reserved ? m->reservation_deadline : USEC_INFINITY;
                if (reserved) {
                        ret->estimate_known = true;
                        ret->estimated_wait_seconds = 0;
                        return;
                }
        } else
                p = waiting + 1;

        /* API.md 5, literally. */
        if (m->state == ADMISSION_IDLE && i < 0) {
                ret->estimate_known = true;
                ret->estimated_wait_seconds = 0;
                return;
        }
        if (!m->avg_known)
                return;
        double base = 0;
        if (m->state == ADMISSION_RESERVED)
                base = m->avg;
        else if (m->state == ADMISSION_RUNNING)
                base = MAX(0.0, m->avg - (double) (now - m->claimed_at) / 1e6);
        ret->estimate_known = true;
        ret->estimated_wait_seconds = base + (double) (p - 1) * m->avg;
}

static usec_t ref_next_deadline(const Ref *m) {
        usec_t t = m->state == ADMISSION_RESERVED ? m->reservation_deadline : USEC_INFINITY;

        for (unsigned i = 0; i < m->n; i++)
                t = MIN(t, m->q[i].heartbeat_deadline);
        return t;
}

/* What the handler saw during one operation. */
static EventTally seen;

static void tally(const AdmissionEvent *ev, void *userdata) {
        switch (ev->type) {
        case ADMISSION_EVENT_TICKET_ADDED:
                seen.added++;
                break;
        case ADMISSION_EVENT_TICKET_PROMOTED:
                seen.promoted++;
                break;
        case ADMISSION_EVENT_TICKET_REMOVED: {
                unsigned id;
                ASSERT_TRUE(ev->reason >= 0 && ev->reason < _REMOVE_REASON_MAX);
                seen.removed[ev->reason]++;
                ASSERT_TRUE(sscanf(ev->ticket_id, "tk_%x", &id) == 1);
                ASSERT_TRUE(seen.n_removed_ids < ELEMENTSOF(seen.removed_ids));
                seen.removed_ids[seen.n_removed_ids++] = id;
                break;
        }
        case ADMISSION_EVENT_STATE_CHANGED:
                ASSERT_TRUE(seen.n_states < ELEMENTSOF(seen.states));
                seen.states[seen.n_states++] = ev->state;
                break;
        case ADMISSION_EVENT_QUERY_FINISHED:
                seen.finished++;
                break;
        default:
                ASSERT_TRUE(false);
        }
}

static int cmp_unsigned(const void *x, const void *y) {
        unsigned a = *(const unsigned *) x, b = *(const unsigned *) y;
        return a < b ? -1 : a > b;
}

static void compare_tallies(EventTally *got, EventTally *want) {
        ASSERT_EQ_INT(got->added, want->added);
        ASSERT_EQ_INT(got->promoted, want->promoted);
        ASSERT_EQ_INT(got->finished, want->finished);
        for (unsigned r = 0; r < _REMOVE_REASON_MAX; r++)
                ASSERT_EQ_INT(got->removed[r], want->removed[r]);
        ASSERT_EQ_INT(got->n_states, want->n_states);
        for (unsigned i = 0; i < got->n_states; i++)
                ASSERT_EQ_INT(got->states[i], want->states[i]);
        ASSERT_EQ_INT(got->n_removed_ids, want->n_removed_ids);
        qsort(got->removed_ids, got->n_removed_ids, sizeof(unsigned), cmp_unsigned);
        qsort(want->removed_ids, want->n_removed_ids, sizeof(unsigned), cmp_unsigned);
        for (unsigned i = 0; i < got->n_removed_ids; i++)
                ASSERT_EQ_INT(got->removed_ids[i], want->removed_ids[i]);
}

static void compare_status(const AdmissionStatus *got, const AdmissionStatus *want) {
        ASSERT_EQ_INT(got->state, want->state);
        ASSERT_EQ_INT(got->queue_length, want->queue_length);
        ASSERT_EQ_INT(got->max_length, want->max_length);
        ASSERT_EQ_INT(got->has_ticket, want->has_ticket);
        if (want->has_ticket) {
                ASSERT_EQ_STR(got->ticket.id, want->ticket.id);
                ASSERT_EQ_INT(got->ticket.status, want->ticket.status);
                ASSERT_EQ_INT(got->ticket.position, want->ticket.position);
                ASSERT_TRUE(got->ticket.joined == want->ticket.joined);
                ASSERT_TRUE(got->ticket.heartbeat_deadline == want->ticket.heartbeat_deadline);
                ASSERT_TRUE(got->ticket.reservation_deadline == want->ticket.reservation_deadline);
        }
        ASSERT_EQ_INT(got->estimate_known, want->estimate_known);
        if (want->estimate_known)
                assert_near(got->estimated_wait_seconds, want->estimated_wait_seconds);
        ASSERT_EQ_INT(got->average_known, want->average_known);
        if (want->average_known)
                assert_near(got->average_query_seconds, want->average_query_seconds);
}

typedef struct ListCheck {
        const Ref *m;
        unsigned i;
} ListCheck;

static void check_listed(const TicketView *v, void *userdata) {
        ListCheck *c = userdata;
        const RefTicket *t;
        char id[TICKET_ID_MAX];

        ASSERT_TRUE(c->i < c->m->n);
        t = &c->m->q[c->i];
        (void) snprintf(id, sizeof(id), "tk_%032x", t->id);
        ASSERT_EQ_STR(v->id, id);
        ASSERT_EQ_INT(v->position, c->m->state == ADMISSION_RESERVED ? c->i : c->i + 1);
        ASSERT_TRUE(v->heartbeat_deadline == t->heartbeat_deadline);
        c->i++;
}

static uint64_t rng_state;

static uint64_t rng(void) {
        /* splitmix64: fixed, portable, good enough for test input */
        uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        return z ^ (z >> 31);
}

static unsigned rnd(unsigned n) {
        return (unsigned) (rng() % n);
}

/* A random time step: mostly small against the deadlines, sometimes
 * exactly on the next deadline or a microsecond before it, sometimes whole
 * seconds (many deadlines tie), sometimes past every deadline, and
 * occasionally backwards (must be treated as no step). */
static usec_t time_step(usec_t now, const AdmissionSettings *s, const Ref *m) {
        unsigned k = rnd(100);
        usec_t next = ref_next_deadline(m);

        if (k < 1)
                return now + s->reservation_usec + s->heartbeat_usec + rnd(3) * USEC_PER_SEC;
        if (k < 6 && next != USEC_INFINITY)
                return next - rnd(2);
        if (k < 8)
                return now - MIN(now, (usec_t) rnd(5) * USEC_PER_SEC);
        if (k < 20)
                return now + rnd(3) * USEC_PER_SEC;
        return now + rng() % (MIN(s->reservation_usec, s->heartbeat_usec) / 40);
}

static void random_run(const AdmissionSettings *s, unsigned ops, uint64_t seed) {
        static Ref m;
        Admission *a = new_admission(s, NULL);
        usec_t now = T0;
        unsigned qn = 0;

        fprintf(stderr,
                "random run: seed %" PRIu64 ", %u operations, reservation %" PRIu64 " s, heartbeat %" PRIu64
                " s, max_length %" PRIu64 "\n",
                seed,
                ops,
                s->reservation_usec / USEC_PER_SEC,
                s->heartbeat_usec / USEC_PER_SEC,
                s->max_length);
        rng_state = seed;
        m = (Ref){ .settings = *s, .state = ADMISSION_IDLE, .claimed_at = USEC_INFINITY };
        admission_set_event_handler(a, tally, NULL);
        /* What the run exercised, so a run that never reaches some case
         * is visible (and checked below). */
        unsigned n_created = 0, n_full = 0, n_claimed = 0, n_busy = 0, n_finished = 0;
        unsigned n_expired[_REMOVE_REASON_MAX] = { 0 };

        for (unsigned op = 0; op < ops; op++) {
                unsigned sess = rnd(N_SESSIONS);
                SessionKey k;
                AdmissionStatus got, want;
                char qid[QUERY_ID_MAX];
                int r = 0, rr;

                if (rnd(4) == 0)
                        now = time_step(now, s, &m);
                /* Claims mostly come from the holder of the reservation, as
                 * they would: otherwise reservations would nearly always
                 * expire. */
                if (m.state == ADMISSION_RESERVED && rnd(2) == 0)
                        sess = m.q[0].session;
                k = key(sess);

                memset(&seen, 0, sizeof(seen));
                unsigned kind = rnd(16);
                if (kind < 4) {
                        r = admission_join(a, &k, now);
                        rr = ref_join(&m, sess, now);
                        ASSERT_EQ_INT(r, rr);
                } else if (kind < 7) {
                        r = admission_status(a, &k, now, &got);
                        ASSERT_EQ_INT(r, 0);
                        ref_status(&m, sess, now, true, &want);
                        compare_status(&got, &want);
                } else if (kind < 9) {
                        r = admission_leave(a, &k, now);
                        rr = ref_leave(&m, sess, now);
                        ASSERT_EQ_INT(r, rr);
                } else if (kind < 12) {
                        (void) snprintf(qid, sizeof(qid), "qr_%u", ++qn);
                        r = admission_claim(a, &k, qid, now);
                        rr = ref_claim(&m, sess, qid, now);
                        ASSERT_EQ_INT(r, rr);
                } else if (kind < 14) {
                        r = admission_finish(a, now);
                        rr = ref_finish(&m, now);
                        ASSERT_EQ_INT(r, rr);
                } else if (kind == 14) {
                        (void) admission_expire(a, now);
                        (void) ref_begin(&m, now);
                } else {
                        admission_peek(a, NULL, now, &got);
                        ref_status(&m, UINT32_MAX, now, false, &want);
                        compare_status(&got, &want);
                }
                compare_tallies(&seen, &m.tally);
                n_created += seen.added;
                n_finished += seen.finished;
                for (unsigned i = 0; i < _REMOVE_REASON_MAX; i++)
                        n_expired[i] += seen.removed[i];
                if (kind < 4 && r == -ENOSPC)
                        n_full++;
                if (kind >= 9 && kind < 12)
                        r == 0 ? n_claimed++ : r == -EBUSY ? n_busy++ : 0;

                /* The whole visible state, as every session sees it. */
                ASSERT_EQ_INT(admission_get_state(a), m.state);
                ASSERT_EQ_INT(admission_queue_length(a), m.n);
                ASSERT_EQ_INT(admission_waiting_count(a), m.n - (m.state == ADMISSION_RESERVED));
                ASSERT_TRUE(admission_next_deadline(a) == ref_next_deadline(&m));
                ASSERT_TRUE(
                        admission_running_since(a) ==
                        (m.state == ADMISSION_RUNNING ? m.claimed_at : USEC_INFINITY));
                ASSERT_EQ_STR(admission_running_query_id(a), m.state == ADMISSION_RUNNING ? m.query_id : "");
                AdmissionCounters c;
                admission_get_counters(a, &c);
                ASSERT_EQ_INT(c.queries_started, m.started);
                ASSERT_EQ_INT(c.tickets_expired, m.expired);
                ASSERT_TRUE(
                        admission_average_usec(a) ==
                        (m.avg_known ? MAX((usec_t) llround(m.avg * 1e6), (usec_t) 1) : 0));

                for (unsigned i = 0; i < N_SESSIONS; i++) {
                        SessionKey ki = key(i);
                        /* Same "now": peeking applies nothing more. */
                        memset(&seen, 0, sizeof(seen));
                        admission_peek(a, &ki, now, &got);
                        ref_status(&m, i, now, false, &want);
                        compare_status(&got, &want);
                        ASSERT_EQ_INT(seen.n_states + seen.n_removed_ids + seen.promoted, 0);
                }

                ListCheck lc = { .m = &m };
                admission_foreach_ticket(a, check_listed, &lc);
                ASSERT_EQ_INT(lc.i, m.n);
        }

        fprintf(stderr,
                "  created %u, queue_full %u, claimed %u, busy %u, finished %u, removed: left %u, "
                "claimed %u, heartbeat %u, reservation %u\n",
                n_created,
                n_full,
                n_claimed,
                n_busy,
                n_finished,
                n_expired[REMOVE_LEFT],
                n_expired[REMOVE_CLAIMED],
                n_expired[REMOVE_HEARTBEAT],
                n_expired[REMOVE_RESERVATION]);
        if (s->max_length > 0) {
                ASSERT_TRUE(n_claimed > 0 && n_busy > 0 && n_finished > 0);
                ASSERT_TRUE(n_created > 0);
                /* Every reason a client or a timer causes (REMOVE_ADMIN
                 * has its own test). */
                for (unsigned i = 0; i <= REMOVE_RESERVATION; i++)
                        ASSERT_TRUE(n_expired[i] > 0);
        }
        if (s->max_length < N_SESSIONS)
                ASSERT_TRUE(n_full > 0);
        admission_free(a);
}

TEST(random) {
        const char *e = getenv("WIKIWEB_TEST_SEED");
        uint64_t seed = e ? strtoull(e, NULL, 10) : 20261122;

        /* Short deadlines relative to the time steps, so expiries of every
         * kind happen often; a small max_length so queue_full does too. */
        random_run(
                &(AdmissionSettings){ .reservation_usec = SEC(10), .heartbeat_usec = SEC(30), .max_length = 12 },
                60000,
                seed);
        random_run(
                &(AdmissionSettings){ .reservation_usec = SEC(2), .heartbeat_usec = SEC(8), .max_length = 1000 },
                40000,
                seed + 1);
        random_run(
                &(AdmissionSettings){ .reservation_usec = SEC(1), .heartbeat_usec = SEC(1), .max_length = 5 },
                10000,
                seed + 2);
        random_run(
                &(AdmissionSettings){ .reservation_usec = SEC(3), .heartbeat_usec = SEC(3), .max_length = 0 },
                5000,
                seed + 3);
}

DEFINE_TEST_MAIN()
