/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "admission/admission.h"
#include "shared/macro.h"
#include "shared/time-util.h"

/* The org.wikiweb.Queue1 object (API.md sections 10 and 12; the interface
 * is dbus/org.wikiweb.Queue1.xml): the admission machine for admins, on
 * the system bus. Anyone reads it; Drain, Resume, CancelQuery and
 * RemoveTicket act, each authorized asynchronously by polkit (action
 * org.wikiweb.queue.manage, bus/bus-polkit.h), root always.
 *
 * Signals (TicketPromoted, TicketRemoved) are emitted at once from the
 * forwarded admission events. Properties are compared against the last
 * emitted snapshot from a one-shot defer event source of the highest
 * priority, which runs right after the event source that caused the change:
 * each transition that changes a property yields one PropertiesChanged,
 * after its signals, with the values after the transition (never the
 * momentary "idle" between a removal and the next promotion).
 *
 * Nothing derived from a session (token or key) is ever put on the bus:
 * the machine hands out ticket ids only.
 *
 * Ownership: a QueueBus borrows the sd_event and the Admission (both must
 * outlive it) and owns its bus connection. */
typedef struct QueueBus QueueBus;

/* Connect (address NULL: the system bus via sd_bus_open_system(), which
 * honours $DBUS_SYSTEM_BUS_ADDRESS; otherwise that bus address), attach to
 * the event loop, add /org/wikiweb/Queue1 and request the name
 * org.wikiweb.Queue1. Returns 0 and the object in *ret (free with
 * queue_bus_free()); a negative errno when the bus cannot be reached or the
 * name cannot be owned (-EEXIST: somebody else owns it; -EACCES: the bus
 * policy does not allow us). */
int queue_bus_new(sd_event *event, Admission *admission, const char *address, QueueBus **ret);

/* Flush queued signals, release the name, close the connection. NULL is
 * fine. Returns NULL. */
QueueBus *queue_bus_free(QueueBus *b);

/* Forwarded by the daemon for every admission event (from inside the
 * admission event handler: this never calls back into the machine). Emits
 * TicketPromoted/TicketRemoved and schedules the PropertiesChanged check. */
void queue_bus_admission_event(QueueBus *b, const AdmissionEvent *event);

/* Emits QueryFinished(query_id, status, duration_usec); counts
 * QueriesFailed when status is "failed". */
void queue_bus_query_finished(QueueBus *b, const char *query_id, const char *status, usec_t duration_usec);

/* D-Bus errors of the methods that act. */
#define QUEUE_BUS_ERROR_NO_SUCH_QUERY "org.wikiweb.Error.NoSuchQuery"
#define QUEUE_BUS_ERROR_NO_SUCH_TICKET "org.wikiweb.Error.NoSuchTicket"

/* CancelQuery(id), once authorized: stop the running query id as its
 * deadline would. Returns 0 when the cancellation has begun (the query then
 * ends as usual: QueryFinished follows), -ESRCH when no query with that id
 * runs (NoSuchQuery), another negative errno on failure. */
typedef int (*QueueBusCancelHandler)(const char *query_id, void *userdata);
void queue_bus_set_cancel_handler(QueueBus *b, QueueBusCancelHandler handler, void *userdata);

/* Health: "ok" (false) or "degraded" (true). */
void queue_bus_set_health(QueueBus *b, bool degraded);

/* RunningQueryPhase (API.md 11.4): "model", "wiki", "sandbox", "cleanup",
 * or "" (NULL too) when no query runs. */
#define QUEUE_BUS_PHASE_MAX 16
void queue_bus_set_running_phase(QueueBus *b, const char *phase);

/* Compare the properties against the last snapshot now and emit
 * PropertiesChanged for those that changed (the defer source does this on
 * its own; useful before shutdown and in tests). Returns 0 or a negative
 * errno from sd-bus. */
int queue_bus_flush_properties(QueueBus *b);

/* The connection, borrowed (for tests and for the daemon's diagnostics). */
sd_bus *queue_bus_get_bus(QueueBus *b);

DEFINE_TRIVIAL_CLEANUP_FUNC(QueueBus *, queue_bus_free);

/* Make the object a face of the Manager (borrowed, must outlive it): it
 * subscribes to the Manager's announcements and forwards them (the
 * admission events, QueryFinished, Health, RunningQueryPhase), reads
 * RunningQueryId from manager_oldest_query(), and CancelQuery calls
 * manager_cancel_query(). b NULL: nothing. Returns 0 or -ENOMEM. */
typedef struct Manager Manager;
int queue_bus_set_manager(QueueBus *b, Manager *m);
