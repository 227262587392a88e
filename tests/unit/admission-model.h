/* SPDX-License-Identifier: MIT */
#pragma once

/* A deliberately naive reference model of the admission controller with N
 * slots (API.md 5): a plain array of tickets in FIFO order and a plain
 * array of slots, O(n) everything, written from the rules rather than from
 * admission.c (it does not assume, for instance, that the reserved tickets
 * are the first ones in the FIFO: it checks it). admission_model_run()
 * drives the machine and the model with the same operations, drawn from a
 * source of numbers (a PRNG in the unit test, the input in the fuzz
 * target), and compares after every operation everything a client, an
 * admin or the daemon can see. Every check aborts (tests.h). */

#include <math.h>

#include "admission/admission.h"
#include "admission/wait-estimate.h"
#include "shared/macro.h"
#include "tests.h"

#define MODEL_SESSIONS 50
#define MODEL_SLOTS_MAX 8

typedef struct RefTicket {
        unsigned session;
        unsigned id;
        int slot; /* the slot reserved for it, -1 while it waits */
        usec_t joined;
        usec_t heartbeat_deadline;
} RefTicket;

typedef struct RefSlot {
        AdmissionState state;
        unsigned ticket;  /* reserved: its ticket's id */
        usec_t deadline;  /* reserved: reservation deadline */
        unsigned session; /* running */
        char query_id[QUERY_ID_MAX];
        usec_t claimed_at;  /* running */
        uint64_t claim_seq; /* running: order of claims */
} RefSlot;

/* Event counts per operation; compared with what the handler saw. */
typedef struct EventTally {
        unsigned added, promoted, finished;
        unsigned removed[_REMOVE_REASON_MAX];
        AdmissionState states[16];
        unsigned n_states;
        unsigned removed_ids[MODEL_SESSIONS * 2]; /* ticket numbers, in any order */
        unsigned n_removed_ids;
} EventTally;

typedef struct Ref {
        AdmissionSettings settings;
        RefTicket q[MODEL_SESSIONS];
        unsigned n;
        RefSlot slots[MODEL_SLOTS_MAX];
        bool draining;
        usec_t last_now;
        unsigned next_id;
        uint64_t claims;
        bool avg_known;
        double avg;
        uint64_t started, expired;
        EventTally tally;
} Ref;

static inline void model_assert_near(double a, double b) {
        if (fabs(a - b) > 1e-9 * MAX(1.0, fabs(b))) {
                fprintf(stderr, "expected %.12g, got %.12g\n", b, a);
                ASSERT_TRUE(fabs(a - b) <= 1e-9 * MAX(1.0, fabs(b)));
        }
}

static inline SessionKey model_key(unsigned n) {
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

static inline unsigned ref_count(const Ref *m, AdmissionState s) {
        unsigned c = 0;

        for (unsigned i = 0; i < m->settings.slots; i++)
                c += m->slots[i].state == s;
        return c;
}

/* The controller's state, from the slots (API.md 5). */
static inline AdmissionState ref_state(const Ref *m) {
        if (ref_count(m, ADMISSION_RUNNING) > 0)
                return ADMISSION_RUNNING;
        if (ref_count(m, ADMISSION_RESERVED) > 0)
                return ADMISSION_RESERVED;
        return ADMISSION_IDLE;
}

static inline unsigned ref_waiting(const Ref *m) {
        unsigned c = 0;

        for (unsigned i = 0; i < m->n; i++)
                c += m->q[i].slot < 0;
        return c;
}

static inline void ref_tally_state(Ref *m, AdmissionState s) {
        ASSERT_TRUE(m->tally.n_states < ELEMENTSOF(m->tally.states));
        m->tally.states[m->tally.n_states++] = s;
}

static inline void ref_remove_at(Ref *m, unsigned i, RemoveReason reason) {
        m->tally.removed[reason]++;
        m->tally.removed_ids[m->tally.n_removed_ids++] = m->q[i].id;
        if (reason == REMOVE_HEARTBEAT || reason == REMOVE_RESERVATION)
                m->expired++;
        if (m->q[i].slot >= 0)
                m->slots[m->q[i].slot] = (RefSlot){ .state = ADMISSION_IDLE };
        memmove(&m->q[i], &m->q[i + 1], sizeof(RefTicket) * (m->n - i - 1));
        m->n--;
}

/* While a slot is idle and a ticket waits, the first waiting ticket gets
 * the lowest idle slot. */
static inline void ref_promote(Ref *m, usec_t t) {
        for (;;) {
                int ticket = -1, slot = -1;

                for (unsigned i = 0; i < m->n && ticket < 0; i++)
                        if (m->q[i].slot < 0)
                                ticket = (int) i;
                for (unsigned i = 0; i < m->settings.slots && slot < 0; i++)
                        if (m->slots[i].state == ADMISSION_IDLE)
                                slot = (int) i;
                if (ticket < 0 || slot < 0)
                        return;
                m->q[ticket].slot = slot;
                m->slots[slot] = (RefSlot){
                        .state = ADMISSION_RESERVED,
                        .ticket = m->q[ticket].id,
                        .deadline = t + m->settings.reservation_usec,
                };
                m->tally.promoted++;
        }
}

/* Transitions report a state change only when the state at their end
 * differs from the one at their start. */
static inline void ref_end(Ref *m, AdmissionState before) {
        if (ref_state(m) != before)
                ref_tally_state(m, ref_state(m));
}

static inline usec_t ref_next_deadline(const Ref *m) {
        usec_t t = USEC_INFINITY;

        for (unsigned i = 0; i < m->settings.slots; i++)
                if (m->slots[i].state == ADMISSION_RESERVED)
                        t = MIN(t, m->slots[i].deadline);
        for (unsigned i = 0; i < m->n; i++)
                t = MIN(t, m->q[i].heartbeat_deadline);
        return t;
}

static inline void ref_expire(Ref *m, usec_t now) {
        for (;;) {
                usec_t t = ref_next_deadline(m);
                AdmissionState before = ref_state(m);

                if (t > now)
                        return;

                /* Everything due at t; a heartbeat beats a reservation. */
                for (unsigned i = 0; i < m->n;)
                        if (m->q[i].heartbeat_deadline <= t)
                                ref_remove_at(m, i, REMOVE_HEARTBEAT);
                        else
                                i++;
                for (unsigned i = 0; i < m->n;)
                        if (m->q[i].slot >= 0 && m->slots[m->q[i].slot].deadline <= t)
                                ref_remove_at(m, i, REMOVE_RESERVATION);
                        else
                                i++;
                ref_promote(m, t);
                ref_end(m, before);
        }
}

static inline usec_t ref_begin(Ref *m, usec_t now) {
        memset(&m->tally, 0, sizeof(m->tally));
        m->last_now = MAX(m->last_now, now);
        ref_expire(m, m->last_now);
        return m->last_now;
}

static inline int ref_find(const Ref *m, unsigned session) {
        for (unsigned i = 0; i < m->n; i++)
                if (m->q[i].session == session)
                        return (int) i;
        return -1;
}

static inline bool ref_runs(const Ref *m, unsigned session) {
        for (unsigned i = 0; i < m->settings.slots; i++)
                if (m->slots[i].state == ADMISSION_RUNNING && m->slots[i].session == session)
                        return true;
        return false;
}

/* The running slot claimed first, -1 when none runs. */
static inline int ref_oldest(const Ref *m) {
        int best = -1;

        for (unsigned i = 0; i < m->settings.slots; i++)
                if (m->slots[i].state == ADMISSION_RUNNING &&
                    (best < 0 || m->slots[i].claim_seq < m->slots[best].claim_seq))
                        best = (int) i;
        return best;
}

static inline int ref_join(Ref *m, unsigned s, usec_t now) {
        AdmissionState before;
        int i;

        now = ref_begin(m, now);
        before = ref_state(m);
        i = ref_find(m, s);
        if (i >= 0) {
                m->q[i].heartbeat_deadline = now + m->settings.heartbeat_usec;
                return 0;
        }
        if (m->draining)
                return -ESHUTDOWN;
        if (m->n >= m->settings.max_length)
                return -ENOSPC;
        m->q[m->n++] = (RefTicket){
                .session = s,
                .id = ++m->next_id,
                .slot = -1,
                .joined = now,
                .heartbeat_deadline = now + m->settings.heartbeat_usec,
        };
        m->tally.added++;
        ref_promote(m, now);
        ref_end(m, before);
        return 1;
}

static inline int ref_leave(Ref *m, unsigned s, usec_t now) {
        AdmissionState before;
        int i;

        now = ref_begin(m, now);
        before = ref_state(m);
        i = ref_find(m, s);
        if (i < 0)
                return -ENOENT;
        ref_remove_at(m, (unsigned) i, REMOVE_LEFT);
        ref_promote(m, now);
        ref_end(m, before);
        return 0;
}

static inline int ref_claim(Ref *m, unsigned s, const char *qid, usec_t now) {
        AdmissionState before;
        int i, slot = -1;

        now = ref_begin(m, now);
        before = ref_state(m);
        i = ref_find(m, s);
        if (i >= 0 && m->q[i].slot >= 0) {
                if (ref_runs(m, s))
                        return -EBUSY;
                slot = m->q[i].slot;
                ref_remove_at(m, (unsigned) i, REMOVE_CLAIMED);
        } else if (m->draining)
                return -ESHUTDOWN;
        else if (i < 0 && ref_waiting(m) == 0 && ref_count(m, ADMISSION_IDLE) > 0 && !ref_runs(m, s)) {
                if (m->settings.max_length == 0)
                        return -ENOSPC;
                for (unsigned k = 0; k < m->settings.slots && slot < 0; k++)
                        if (m->slots[k].state == ADMISSION_IDLE)
                                slot = (int) k;
        } else
                return -EBUSY;
        m->slots[slot] = (RefSlot){
                .state = ADMISSION_RUNNING,
                .session = s,
                .claimed_at = now,
                .claim_seq = ++m->claims,
        };
        (void) snprintf(m->slots[slot].query_id, sizeof(m->slots[slot].query_id), "%s", qid);
        m->started++;
        ref_end(m, before);
        return slot;
}

/* The caller's measure of a running slot's query at now: from its claim
 * (as the Manager measures it). */
static inline usec_t ref_duration(const Ref *m, unsigned slot, usec_t now) {
        usec_t t = MAX(m->last_now, now);

        if (slot >= m->settings.slots || m->slots[slot].state != ADMISSION_RUNNING)
                return 0;
        return t - m->slots[slot].claimed_at;
}

static inline int ref_finish(Ref *m, unsigned slot, usec_t duration, usec_t now) {
        AdmissionState before;
        double d;

        now = ref_begin(m, now);
        before = ref_state(m);
        if (slot >= m->settings.slots || m->slots[slot].state != ADMISSION_RUNNING)
                return -ESRCH;
        d = (double) duration / 1e6;
        m->avg = m->avg_known ? 0.2 * d + 0.8 * m->avg : d;
        m->avg_known = true;
        m->tally.finished++;
        m->slots[slot] = (RefSlot){ .state = ADMISSION_IDLE };
        ref_promote(m, now);
        ref_end(m, before);
        return 0;
}

/* The wait of position p, by simulation: each slot is free after f (idle
 * 0, reserved avg, running max(0, avg - running time)); the waiting
 * tickets in turn take the slot that frees first, each for avg. */
static inline double ref_estimate(const Ref *m, uint64_t p, usec_t now) {
        double f[MODEL_SLOTS_MAX], start = 0;

        for (unsigned i = 0; i < m->settings.slots; i++)
                switch (m->slots[i].state) {
                case ADMISSION_IDLE:
                        f[i] = 0;
                        break;
                case ADMISSION_RESERVED:
                        f[i] = m->avg;
                        break;
                default:
                        f[i] = MAX(0.0, m->avg - (double) (now - m->slots[i].claimed_at) / 1e6);
                }
        for (uint64_t k = 0; k < p; k++) {
                unsigned best = 0;
                for (unsigned i = 1; i < m->settings.slots; i++)
                        if (f[i] < f[best])
                                best = i;
                start = f[best];
                f[best] += m->avg;
        }
        return start;
}

static inline void ref_status(Ref *m, unsigned s, usec_t now, bool heartbeat, AdmissionStatus *ret) {
        uint64_t p;
        int i;

        now = ref_begin(m, now);
        i = ref_find(m, s);
        if (i >= 0 && heartbeat)
                m->q[i].heartbeat_deadline = now + m->settings.heartbeat_usec;

        *ret = (AdmissionStatus){
                .state = ref_state(m),
                .queue_length = m->n,
                .max_length = m->settings.max_length,
                .has_ticket = i >= 0,
                .average_known = m->avg_known,
                .average_query_seconds = m->avg_known ? m->avg : 0,
                .slots = {
                        .total = m->settings.slots,
                        .idle = ref_count(m, ADMISSION_IDLE),
                        .reserved = ref_count(m, ADMISSION_RESERVED),
                        .running = ref_count(m, ADMISSION_RUNNING),
                },
        };

        if (i >= 0) {
                RefTicket *t = &m->q[i];
                bool reserved = t->slot >= 0;

                /* Waiting tickets count 1, 2, 3... in FIFO order. */
                p = 0;
                if (!reserved)
                        for (int k = 0; k <= i; k++)
                                p += m->q[k].slot < 0;
                (void) snprintf(ret->ticket.id, sizeof(ret->ticket.id), "tk_%032x", t->id);
                ret->ticket.status = reserved ? TICKET_RESERVED : TICKET_WAITING;
                ret->ticket.position = p;
                ret->ticket.joined = t->joined;
                ret->ticket.heartbeat_deadline = t->heartbeat_deadline;
                ret->ticket.reservation_deadline = reserved ? m->slots[t->slot].deadline : USEC_INFINITY;
                if (reserved) {
                        ret->estimate_known = true;
                        ret->estimated_wait_seconds = 0;
                        return;
                }
        } else
                p = ref_waiting(m) + 1;

        /* API.md 5: without a ticket and with an idle slot, 0. */
        if (i < 0 && ref_count(m, ADMISSION_IDLE) > 0) {
                ret->estimate_known = true;
                ret->estimated_wait_seconds = 0;
                return;
        }
        if (!m->avg_known)
                return;
        ret->estimate_known = true;
        ret->estimated_wait_seconds = ref_estimate(m, p, now);
}

/* The rules the model does not build in, checked on it. */
static inline void ref_check_invariants(const Ref *m) {
        unsigned reserved = 0;
        bool seen_waiting = false;

        for (unsigned i = 0; i < m->n; i++) {
                /* FIFO across slots: no ticket holds a slot while one that
                 * joined earlier waits. */
                if (m->q[i].slot < 0)
                        seen_waiting = true;
                else {
                        ASSERT_TRUE(!seen_waiting);
                        ASSERT_TRUE(m->slots[m->q[i].slot].state == ADMISSION_RESERVED);
                        ASSERT_EQ_INT(m->slots[m->q[i].slot].ticket, m->q[i].id);
                        reserved++;
                }
                /* One ticket per session. */
                for (unsigned k = i + 1; k < m->n; k++)
                        ASSERT_TRUE(m->q[i].session != m->q[k].session);
        }
        ASSERT_EQ_INT(reserved, ref_count(m, ADMISSION_RESERVED));
        /* Never a slot idle while a ticket waits. */
        ASSERT_TRUE(ref_count(m, ADMISSION_IDLE) == 0 || ref_waiting(m) == 0);
        /* One running query per session. */
        for (unsigned i = 0; i < m->settings.slots; i++)
                for (unsigned k = i + 1; k < m->settings.slots; k++)
                        ASSERT_TRUE(
                                m->slots[i].state != ADMISSION_RUNNING ||
                                m->slots[k].state != ADMISSION_RUNNING ||
                                m->slots[i].session != m->slots[k].session);
}

/* What the handler saw during one operation. */
typedef struct ModelSeen {
        EventTally tally;
        unsigned promoted_bad_slot;
} ModelSeen;

static inline void model_tally(const AdmissionEvent *ev, void *userdata) {
        ModelSeen *seen = userdata;

        switch (ev->type) {
        case ADMISSION_EVENT_TICKET_ADDED:
                seen->tally.added++;
                break;
        case ADMISSION_EVENT_TICKET_PROMOTED:
                seen->tally.promoted++;
                break;
        case ADMISSION_EVENT_TICKET_REMOVED: {
                unsigned id;
                ASSERT_TRUE(ev->reason >= 0 && ev->reason < _REMOVE_REASON_MAX);
                seen->tally.removed[ev->reason]++;
                ASSERT_TRUE(sscanf(ev->ticket_id, "tk_%x", &id) == 1);
                ASSERT_TRUE(seen->tally.n_removed_ids < ELEMENTSOF(seen->tally.removed_ids));
                seen->tally.removed_ids[seen->tally.n_removed_ids++] = id;
                break;
        }
        case ADMISSION_EVENT_STATE_CHANGED:
                ASSERT_TRUE(seen->tally.n_states < ELEMENTSOF(seen->tally.states));
                seen->tally.states[seen->tally.n_states++] = ev->state;
                break;
        case ADMISSION_EVENT_QUERY_FINISHED:
                seen->tally.finished++;
                break;
        default:
                ASSERT_TRUE(false);
        }
}

static inline int model_cmp_unsigned(const void *x, const void *y) {
        unsigned a = *(const unsigned *) x, b = *(const unsigned *) y;
        return a < b ? -1 : a > b;
}

static inline void model_compare_tallies(EventTally *got, EventTally *want) {
        ASSERT_EQ_INT(got->added, want->added);
        ASSERT_EQ_INT(got->promoted, want->promoted);
        ASSERT_EQ_INT(got->finished, want->finished);
        for (unsigned r = 0; r < _REMOVE_REASON_MAX; r++)
                ASSERT_EQ_INT(got->removed[r], want->removed[r]);
        ASSERT_EQ_INT(got->n_states, want->n_states);
        for (unsigned i = 0; i < got->n_states; i++)
                ASSERT_EQ_INT(got->states[i], want->states[i]);
        ASSERT_EQ_INT(got->n_removed_ids, want->n_removed_ids);
        qsort(got->removed_ids, got->n_removed_ids, sizeof(unsigned), model_cmp_unsigned);
        qsort(want->removed_ids, want->n_removed_ids, sizeof(unsigned), model_cmp_unsigned);
        for (unsigned i = 0; i < got->n_removed_ids; i++)
                ASSERT_EQ_INT(got->removed_ids[i], want->removed_ids[i]);
}

static inline void model_compare_status(const AdmissionStatus *got, const AdmissionStatus *want) {
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
                model_assert_near(got->estimated_wait_seconds, want->estimated_wait_seconds);
        ASSERT_EQ_INT(got->average_known, want->average_known);
        if (want->average_known)
                model_assert_near(got->average_query_seconds, want->average_query_seconds);
        ASSERT_EQ_INT(got->slots.total, want->slots.total);
        ASSERT_EQ_INT(got->slots.idle, want->slots.idle);
        ASSERT_EQ_INT(got->slots.reserved, want->slots.reserved);
        ASSERT_EQ_INT(got->slots.running, want->slots.running);
}

typedef struct ModelListCheck {
        const Ref *m;
        unsigned i;
        uint64_t last_claim;
} ModelListCheck;

static inline void model_check_listed(const TicketView *v, void *userdata) {
        ModelListCheck *c = userdata;
        const RefTicket *t;
        char id[TICKET_ID_MAX];
        uint64_t p = 0;

        ASSERT_TRUE(c->i < c->m->n);
        t = &c->m->q[c->i];
        (void) snprintf(id, sizeof(id), "tk_%032x", t->id);
        ASSERT_EQ_STR(v->id, id);
        if (t->slot < 0)
                for (unsigned k = 0; k <= c->i; k++)
                        p += c->m->q[k].slot < 0;
        ASSERT_EQ_INT(v->position, p);
        ASSERT_EQ_INT(v->status, t->slot >= 0 ? TICKET_RESERVED : TICKET_WAITING);
        ASSERT_TRUE(v->heartbeat_deadline == t->heartbeat_deadline);
        ASSERT_TRUE(v->reservation_deadline == (t->slot >= 0 ? c->m->slots[t->slot].deadline : USEC_INFINITY));
        c->i++;
}

/* The Manager's part of a status: the estimate and the average, from
 * the durations the loop measured (avg) and the claim times of the
 * running queries, oldest first (as the Manager keeps them). */
typedef struct ModelSince {
        const Ref *m;
        usec_t since[ADMISSION_SLOTS_MAX];
        size_t n;
} ModelSince;

static inline void model_collect_since(const char *query_id, unsigned slot, void *userdata) {
        ModelSince *c = userdata;

        c->since[c->n++] = c->m->slots[slot].claimed_at;
}

static inline void model_estimate(
        const Admission *a, const Ref *m, const WaitAverage *avg, usec_t now, AdmissionStatus *st) {
        ModelSince c = { .m = m, .n = 0 };

        admission_foreach_running(a, model_collect_since, &c);
        wait_estimate_status(st, avg, c.since, c.n, now);
}

static inline void model_check_running(const char *query_id, unsigned slot, void *userdata) {
        ModelListCheck *c = userdata;
        const RefSlot *s;

        ASSERT_TRUE(slot < c->m->settings.slots);
        s = &c->m->slots[slot];
        ASSERT_EQ_INT(s->state, ADMISSION_RUNNING);
        ASSERT_EQ_STR(query_id, s->query_id);
        /* Oldest claim first. */
        ASSERT_TRUE(s->claim_seq > c->last_claim);
        c->last_claim = s->claim_seq;
        c->i++;
}

/* Where the numbers come from: returns a number below n (n >= 1), and
 * false when the source is exhausted (the run ends). */
typedef bool (*ModelSource)(void *userdata, uint64_t n, uint64_t *ret);

/* What a run exercised, so a run that never reaches some case is visible
 * (and can be checked). */
typedef struct ModelStats {
        unsigned ops, created, full, claimed, busy, busy_running, finished, finished_missing, shutdown;
        unsigned removed[_REMOVE_REASON_MAX];
        unsigned max_running;
} ModelStats;

static inline uint64_t model_draw(ModelSource src, void *userdata, uint64_t n, bool *more) {
        uint64_t v = 0;

        if (*more && !src(userdata, n, &v))
                *more = false;
        return *more ? v : 0;
}

/* A time step: mostly small against the deadlines, sometimes exactly on
 * the next deadline or a microsecond before it, sometimes whole seconds
 * (many deadlines tie), sometimes past every deadline, and occasionally
 * backwards (must be treated as no step). */
static inline usec_t model_time_step(usec_t now, const Ref *m, ModelSource src, void *u, bool *more) {
        const AdmissionSettings *s = &m->settings;
        uint64_t k = model_draw(src, u, 100, more);
        usec_t next = ref_next_deadline(m);

        if (k < 1)
                return now + s->reservation_usec + s->heartbeat_usec +
                        model_draw(src, u, 3, more) * USEC_PER_SEC;
        if (k < 6 && next != USEC_INFINITY)
                return next - model_draw(src, u, 2, more);
        if (k < 8)
                return now - MIN(now, (usec_t) model_draw(src, u, 5, more) * USEC_PER_SEC);
        if (k < 20)
                return now + model_draw(src, u, 3, more) * USEC_PER_SEC;
        usec_t small = MIN(s->reservation_usec, s->heartbeat_usec) / 40;
        return now + model_draw(src, u, MAX(small, (usec_t) 1), more);
}

/* Run at most max_ops operations (or until the source ends) on a fresh
 * machine with settings s (s->slots <= MODEL_SLOTS_MAX), checking it
 * against the model after each; *ret_stats (may be NULL) says what
 * happened. */
static inline void admission_model_run(
        const AdmissionSettings *s, unsigned max_ops, ModelSource src, void *u, ModelStats *ret_stats) {
        static Ref m;
        ModelSeen seen;
        ModelStats st = { 0 };
        Admission *a = NULL;
        WaitAverage avg = { .known = false };
        usec_t now = 1000 * USEC_PER_SEC;
        unsigned qn = 0;
        bool more = true;

        ASSERT_TRUE(s->slots >= 1 && s->slots <= MODEL_SLOTS_MAX);
        ASSERT_OK(admission_new(s, &a));
        m = (Ref){ .settings = *s };
        for (unsigned i = 0; i < s->slots; i++)
                m.slots[i] = (RefSlot){ .state = ADMISSION_IDLE };
        admission_set_event_handler(a, model_tally, &seen);

        for (st.ops = 0; st.ops < max_ops; st.ops++) {
                unsigned sess = (unsigned) model_draw(src, u, MODEL_SESSIONS, &more), kind;
                SessionKey k;
                AdmissionStatus got, want;
                char qid[QUERY_ID_MAX];
                int r = 0, rr;

                if (model_draw(src, u, 4, &more) == 0)
                        now = model_time_step(now, &m, src, u, &more);
                /* Claims mostly come from the holders of reservations, as
                 * they would: otherwise reservations would nearly always
                 * expire. Sometimes a session that runs a query acts. */
                if (model_draw(src, u, 2, &more) == 0) {
                        unsigned pick = (unsigned) model_draw(src, u, s->slots, &more);
                        if (m.slots[pick].state == ADMISSION_RESERVED)
                                for (unsigned i = 0; i < m.n; i++)
                                        if (m.q[i].id == m.slots[pick].ticket)
                                                sess = m.q[i].session;
                        if (m.slots[pick].state == ADMISSION_RUNNING && model_draw(src, u, 4, &more) == 0)
                                sess = m.slots[pick].session;
                }
                kind = (unsigned) model_draw(src, u, 17, &more);
                if (!more)
                        break;
                k = model_key(sess);

                memset(&seen, 0, sizeof(seen));
                if (kind < 4) {
                        r = admission_join(a, &k, now);
                        rr = ref_join(&m, sess, now);
                        ASSERT_EQ_INT(r, rr);
                        st.full += r == -ENOSPC;
                        st.shutdown += r == -ESHUTDOWN;
                } else if (kind < 7) {
                        r = admission_status(a, &k, now, &got);
                        ASSERT_EQ_INT(r, 0);
                        /* the machine's clamped "now": the Manager's clock never goes back */
                        model_estimate(a, &m, &avg, MAX(m.last_now, now), &got);
                        ref_status(&m, sess, now, true, &want);
                        model_compare_status(&got, &want);
                } else if (kind < 9) {
                        r = admission_leave(a, &k, now);
                        rr = ref_leave(&m, sess, now);
                        ASSERT_EQ_INT(r, rr);
                } else if (kind < 12) {
                        bool runs = ref_runs(&m, sess);
                        (void) snprintf(qid, sizeof(qid), "qr_%u", ++qn);
                        r = admission_claim(a, &k, qid, now);
                        rr = ref_claim(&m, sess, qid, now);
                        ASSERT_EQ_INT(r, rr);
                        st.claimed += r >= 0;
                        st.busy += r == -EBUSY;
                        st.busy_running += r == -EBUSY && runs;
                } else if (kind < 14) {
                        /* Finish a running query, or one that is not. */
                        unsigned pick = (unsigned) model_draw(src, u, s->slots + 1, &more);
                        usec_t duration = ref_duration(&m, pick, now);

                        r = admission_finish(a, pick, duration, now);
                        rr = ref_finish(&m, pick, duration, now);
                        ASSERT_EQ_INT(r, rr);
                        if (r == 0)
                                wait_average_add(&avg, duration);
                        st.finished += r == 0;
                        st.finished_missing += r == -ESRCH;
                } else if (kind == 14) {
                        (void) admission_expire(a, now);
                        (void) ref_begin(&m, now);
                } else if (kind == 15) {
                        admission_peek(a, NULL, now, &got);
                        /* the machine's clamped "now": the Manager's clock never goes back */
                        model_estimate(a, &m, &avg, MAX(m.last_now, now), &got);
                        ref_status(&m, UINT32_MAX, now, false, &want);
                        model_compare_status(&got, &want);
                } else {
                        /* Draining about a fifth of the time. */
                        bool d = model_draw(src, u, 4, &more) == 0;
                        admission_set_draining(a, d);
                        m.draining = d;
                        (void) ref_begin(&m, now);
                        (void) admission_expire(a, now);
                }
                model_compare_tallies(&seen.tally, &m.tally);
                st.created += seen.tally.added;
                for (unsigned i = 0; i < _REMOVE_REASON_MAX; i++)
                        st.removed[i] += seen.tally.removed[i];
                ref_check_invariants(&m);

                /* The whole visible state, as every session sees it. */
                AdmissionSlotCounts sc;
                admission_get_slot_counts(a, &sc);
                ASSERT_EQ_INT(sc.total, s->slots);
                ASSERT_EQ_INT(sc.idle, ref_count(&m, ADMISSION_IDLE));
                ASSERT_EQ_INT(sc.reserved, ref_count(&m, ADMISSION_RESERVED));
                ASSERT_EQ_INT(sc.running, ref_count(&m, ADMISSION_RUNNING));
                st.max_running = MAX(st.max_running, sc.running);
                ASSERT_EQ_INT(admission_get_state(a), ref_state(&m));
                ASSERT_EQ_INT(admission_queue_length(a), m.n);
                ASSERT_EQ_INT(admission_waiting_count(a), ref_waiting(&m));
                ASSERT_TRUE(admission_next_deadline(a) == ref_next_deadline(&m));
                for (unsigned i = 0; i < s->slots; i++)
                        if (m.slots[i].state == ADMISSION_RUNNING)
                                ASSERT_TRUE(admission_is_running(a, m.slots[i].query_id));
                ASSERT_TRUE(!admission_is_running(a, "qr_none"));
                AdmissionCounters c;
                admission_get_counters(a, &c);
                ASSERT_EQ_INT(c.queries_started, m.started);
                ASSERT_EQ_INT(c.tickets_expired, m.expired);
                ASSERT_TRUE(
                        wait_average_usec(&avg) ==
                        (m.avg_known ? MAX((usec_t) llround(m.avg * 1e6), (usec_t) 1) : 0));

                for (unsigned i = 0; i < MODEL_SESSIONS; i++) {
                        SessionKey ki = model_key(i);
                        /* Same "now": peeking applies nothing more. */
                        memset(&seen, 0, sizeof(seen));
                        admission_peek(a, &ki, now, &got);
                        /* the machine's clamped "now": the Manager's clock never goes back */
                        model_estimate(a, &m, &avg, MAX(m.last_now, now), &got);
                        ref_status(&m, i, now, false, &want);
                        model_compare_status(&got, &want);
                        ASSERT_EQ_INT(seen.tally.n_states + seen.tally.n_removed_ids + seen.tally.promoted, 0);
                }

                ModelListCheck lc = { .m = &m };
                admission_foreach_ticket(a, model_check_listed, &lc);
                ASSERT_EQ_INT(lc.i, m.n);
                lc = (ModelListCheck){ .m = &m };
                admission_foreach_running(a, model_check_running, &lc);
                ASSERT_EQ_INT(lc.i, ref_count(&m, ADMISSION_RUNNING));
        }

        admission_free(a);
        if (ret_stats)
                *ret_stats = st;
}
