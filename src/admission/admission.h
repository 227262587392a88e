/* SPDX-License-Identifier: MIT */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shared/ids.h"
#include "shared/macro.h"
#include "shared/time-util.h"

/* The admission controller of API.md section 5, as a pure state machine:
 * N slots (AdmissionSettings.slots), each idle, reserved for one ticket or
 * running one query, behind one FIFO of tickets;
 * no I/O, no clock reads, no allocation except its own tables and the
 * names of the tickets' users. Every call
 * takes "now" on CLOCK_MONOTONIC and first applies every expiry due at or
 * before "now", so the machine is correct even if a timer fires late. The
 * sd-event glue (admission-timers.c) re-arms one timer at
 * admission_next_deadline() after every call.
 *
 * Complexity: join, leave, status (including the position), claim and each
 * expiry are O(log n) amortised in the number of tickets, plus O(N) in the
 * number of slots for a transition that reserves, claims or frees a slot
 * (N <= 256; O(1) with one slot); listing is O(n).
 *
 * Sessions are identified by a SessionKey (shared/ids.h, included here so
 * that every user of the machine has it): the SHA-256 of the session
 * token, never the token itself. */

typedef struct Admission Admission;

/* The state of one slot, and of the controller as a whole: running when
 * any slot runs, else reserved when any is reserved, else idle. */
typedef enum AdmissionState {
        ADMISSION_IDLE,
        ADMISSION_RESERVED,
        ADMISSION_RUNNING,
        _ADMISSION_STATE_MAX,
        _ADMISSION_STATE_INVALID = -EINVAL,
} AdmissionState;

typedef enum TicketStatus {
        TICKET_WAITING,
        TICKET_RESERVED,
        _TICKET_STATUS_MAX,
        _TICKET_STATUS_INVALID = -EINVAL,
} TicketStatus;

typedef enum RemoveReason {
        REMOVE_LEFT,
        REMOVE_CLAIMED,
        REMOVE_HEARTBEAT,
        REMOVE_RESERVATION,
        REMOVE_ADMIN, /* an administrator removed it (D-Bus RemoveTicket) */
        _REMOVE_REASON_MAX,
        _REMOVE_REASON_INVALID = -EINVAL,
} RemoveReason;

/* "idle", "reserved", "running" */
const char *admission_state_to_string(AdmissionState s);
/* "waiting", "reserved" */
const char *ticket_status_to_string(TicketStatus s);
/* "left", "claimed", "heartbeat", "reservation", "admin" */
const char *remove_reason_to_string(RemoveReason r);

typedef struct AdmissionSettings {
        usec_t reservation_usec; /* 1..3600 s */
        usec_t heartbeat_usec;   /* 1..3600 s */
        uint64_t max_length;     /* 0..1000000 */
        unsigned slots;          /* 1..ADMISSION_SLOTS_MAX */
} AdmissionSettings;

#define ADMISSION_SLOTS_MAX 256u

/* How many slots are in each state. */
typedef struct AdmissionSlotCounts {
        unsigned total;
        unsigned idle;
        unsigned reserved;
        unsigned running;
} AdmissionSlotCounts;

/* Writes a fresh opaque ticket id ("tk_...", NUL-terminated) into buf.
 * The daemon uses the kernel's random source; tests may use a counter. */
typedef void (*AdmissionIdGenerator)(char buf[static TICKET_ID_MAX], void *userdata);

typedef enum AdmissionEventType {
        ADMISSION_EVENT_TICKET_ADDED,    /* ticket_id */
        ADMISSION_EVENT_TICKET_PROMOTED, /* ticket_id */
        ADMISSION_EVENT_TICKET_REMOVED,  /* ticket_id, reason */
        ADMISSION_EVENT_STATE_CHANGED,   /* state (the new one) */
        ADMISSION_EVENT_QUERY_FINISHED,  /* query_id, duration_usec, slot */
        _ADMISSION_EVENT_MAX,
        _ADMISSION_EVENT_INVALID = -EINVAL,
} AdmissionEventType;

typedef struct AdmissionEvent {
        AdmissionEventType type;
        const char *ticket_id; /* borrowed, valid during the callback */
        RemoveReason reason;
        AdmissionState state;
        const char *query_id; /* borrowed */
        usec_t duration_usec;
        unsigned slot; /* TICKET_PROMOTED, QUERY_FINISHED: the slot */
} AdmissionEvent;

/* Called synchronously from inside the transition that caused the event,
 * after the machine is consistent again. It must not call back into the
 * machine.
 *
 * Order within one transition: TICKET_REMOVED / TICKET_ADDED /
 * QUERY_FINISHED first, then TICKET_PROMOTED (one per slot reserved, in
 * FIFO order), then STATE_CHANGED (the controller's state). The
 * momentary "idle" between losing the reserved ticket (or finishing) and
 * promoting the next one is not reported, since the controller is never
 * observably idle while a ticket waits: STATE_CHANGED is emitted only when
 * the state after the whole transition differs from the state before.
 * The implicit ticket of a claim on an idle slot is not reported either
 * (it is added and claimed in the same instant): that claim emits at most
 * STATE_CHANGED(running). Expiries are applied as of their deadlines, so a
 * ticket promoted by an expiry gets its reservation deadline counted from
 * the deadline that expired, however late the timer fired. */
typedef void (*AdmissionEventHandler)(const AdmissionEvent *event, void *userdata);

/* A ticket as shown to its holder or to an admin. Deadlines are monotonic;
 * reservation_deadline is USEC_INFINITY for a waiting ticket. */
typedef struct TicketView {
        char id[TICKET_ID_MAX];
        TicketStatus status;
        uint64_t position;
        usec_t joined;
        usec_t heartbeat_deadline;
        usec_t reservation_deadline;
        const char *user; /* its holder's name (admission_set_user()), NULL: anonymous; borrowed */
} TicketView;

/* The status object of API.md section 6, seen by one session. */
typedef struct AdmissionStatus {
        AdmissionState state;
        uint64_t queue_length; /* all tickets, waiting and reserved */
        uint64_t max_length;
        bool has_ticket;
        TicketView ticket; /* valid when has_ticket */
        /* Not the admission's: admission_status() and admission_peek()
         * leave them unknown, the Manager fills them from its average and
         * its queries' claim times (wait_estimate_status()). */
        bool estimate_known; /* false: estimated_wait_seconds is null */
        double estimated_wait_seconds;
        bool average_known; /* false: average_query_seconds is null */
        double average_query_seconds;
        AdmissionSlotCounts slots;
} AdmissionStatus;

/* Counters for D-Bus and the STATUS line. */
typedef struct AdmissionCounters {
        uint64_t queries_started;
        uint64_t tickets_expired; /* heartbeat + reservation removals */
} AdmissionCounters;

/* Returns 0 and a new machine in *ret (owned by the caller, free with
 * admission_free()), -EINVAL for settings out of range, -ENOMEM. */
int admission_new(const AdmissionSettings *settings, Admission **ret);
Admission *admission_free(Admission *a);
DEFINE_TRIVIAL_CLEANUP_FUNC(Admission *, admission_free);

void admission_set_event_handler(Admission *a, AdmissionEventHandler handler, void *userdata);
void admission_set_id_generator(Admission *a, AdmissionIdGenerator generator, void *userdata);

/* join(S): 1 when a ticket was created, 0 when S already had one (its
 * heartbeat refreshed), -ENOSPC (queue_full), -ESHUTDOWN (draining: no new
 * ticket, API.md 12.1), -ENOMEM. */
int admission_join(Admission *a, const SessionKey *session, usec_t now);

/* Heartbeat S's ticket if it has one, then fill *ret as S sees the queue.
 * Always succeeds (returns 0). */
int admission_status(Admission *a, const SessionKey *session, usec_t now, AdmissionStatus *ret);

/* The heartbeat of admission_status() alone: S's ticket, if it has one,
 * is refreshed (expiries due by now applied first). */
void admission_heartbeat(Admission *a, const SessionKey *session, usec_t now);

/* Like admission_status() but without a heartbeat (for callers that are not
 * a queue call: health, D-Bus, the STATUS line). session may be NULL. */
void admission_peek(Admission *a, const SessionKey *session, usec_t now, AdmissionStatus *ret);

/* Hold S's ticket ticket_id (API.md 11.1: an open queue stream is its
 * heartbeat): while held it does not expire by heartbeat (its reservation
 * still runs out), and shows a heartbeat deadline one interval after the
 * latest time the machine has seen. Releasing it (hold false) starts an
 * ordinary heartbeat deadline from now. Holding is not counted: the caller
 * holds once for any number of streams. 0, or -ENOENT when S has no ticket
 * or another one than ticket_id (it was removed meanwhile). */
int admission_hold(Admission *a, const SessionKey *session, const char *ticket_id, bool hold, usec_t now);

/* leave(S): 0, or -ENOENT (ticket_not_found). */
int admission_leave(Admission *a, const SessionKey *session, usec_t now);

/* claim(S) for the query query_id (copied): S's reserved ticket's slot,
 * or (S has no ticket, no ticket waits, a slot is idle) the lowest idle
 * slot, runs the query. Returns that slot's index (>= 0); -EBUSY (busy,
 * also when S already runs a query; a ticket of S is kept); -ENOSPC
 * (queue_full: the implicit join with max_length 0); -ESHUTDOWN (draining,
 * and S holds no reserved ticket: only those may still claim); -EINVAL
 * when query_id is NULL, not shorter than QUERY_ID_MAX or already
 * running (nothing changed). */
int admission_claim(Admission *a, const SessionKey *session, const char *query_id, usec_t now);

/* Remove the ticket with this id (an administrator's RemoveTicket), with
 * reason REMOVE_ADMIN; a reserved ticket leaves its slot idle, then the
 * next one is promoted. 0, or -ENOENT when no ticket has that id.
 * O(n) in the number of tickets: ids are not indexed, and this is not a
 * client's operation. */
int admission_remove_ticket(Admission *a, const char *ticket_id, usec_t now);

/* Drain (true) or open (false) admission (API.md 12.1): while draining,
 * joins without a ticket and claims other than the reserved ticket's fail
 * with -ESHUTDOWN; existing tickets keep waiting and are still promoted,
 * the running queries finish. No event: the caller publishes it. */
void admission_set_draining(Admission *a, bool draining);
bool admission_is_draining(const Admission *a);

/* finish: the query running in slot (admission_claim()'s result) ended
 * and its cleanup is confirmed, after duration (the caller's measure, from
 * the claim: the Manager keeps the one clock of a query and its average;
 * the admission only reports duration in QUERY_FINISHED). The slot goes
 * idle, promotes (the promoted ticket's reservation runs from now).
 * -ESRCH when the slot runs no query. */
int admission_finish(Admission *a, unsigned slot, usec_t duration, usec_t now);

/* Apply every expiry due at or before now. Returns the number of tickets
 * removed. */
size_t admission_expire(Admission *a, usec_t now);

/* The earliest pending deadline (heartbeat or reservation), USEC_INFINITY
 * when none. */
usec_t admission_next_deadline(const Admission *a);

AdmissionState admission_get_state(const Admission *a);
uint64_t admission_queue_length(const Admission *a);
uint64_t admission_waiting_count(const Admission *a);
const AdmissionSettings *admission_get_settings(const Admission *a);
/* Who holds S's ticket, by name (API.md "Identity": shown to root on
 * D-Bus, never to clients): a copy of user is kept with the ticket
 * (TicketView.user) until it goes, by a claim too; a running query's user
 * is its caller's record (the Manager's). user NULL forgets the name. 0,
 * -ENOENT when S has no ticket, -ENOMEM. */
int admission_set_user(Admission *a, const SessionKey *session, const char *user);
/* Whether query_id runs in a slot. */
bool admission_is_running(const Admission *a, const char *query_id);
void admission_get_slot_counts(const Admission *a, AdmissionSlotCounts *ret);

/* Calls f for each running query, oldest claim first: its id (borrowed,
 * valid during the call) and its slot. The claim times are the Manager's
 * (ManagerQuery.since): the admission keeps no clock of a query. */
typedef void (*AdmissionRunningVisitor)(const char *query_id, unsigned slot, void *userdata);
void admission_foreach_running(const Admission *a, AdmissionRunningVisitor f, void *userdata);
void admission_get_counters(const Admission *a, AdmissionCounters *ret);

/* Calls f for each ticket in FIFO order (the reserved ones first). */
typedef void (*AdmissionTicketVisitor)(const TicketView *ticket, void *userdata);
void admission_foreach_ticket(const Admission *a, AdmissionTicketVisitor f, void *userdata);
