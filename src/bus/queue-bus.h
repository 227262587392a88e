/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "manager/manager.h"
#include "shared/macro.h"

/* The org.wikiweb.Queue1 object (API.md sections 10 and 12; the interface
 * is dbus/org.wikiweb.Queue1.xml): a face of the Manager for admins, on
 * the system bus. Anyone reads it; Drain, Resume, CancelQuery and
 * RemoveTicket act through the Manager, each authorized asynchronously by
 * polkit (action org.wikiweb.queue.manage, bus/bus-polkit.h), root always.
 *
 * Every property is read from the Manager when asked (its record of the
 * running queries, its health and counters, the admission it owns): the
 * object keeps no copy. It subscribes to the Manager's announcements:
 * TicketPromoted and TicketRemoved go out at once from the admission's
 * events, QueryFinished when a query's record is durable. After any
 * announcement, a one-shot defer event source of the highest priority,
 * which runs right after the event source that caused the change, compares
 * a key of each property's value (a table: the number, or the hash of a
 * string or list) with the one last emitted: each transition that changes
 * a property yields one PropertiesChanged, after its signals, with the
 * values after the transition (never the momentary "idle" between a
 * removal and the next promotion).
 *
 * Nothing derived from a session (token or key) is ever put on the bus:
 * the Manager hands out ticket and query ids only.
 *
 * Ownership: a QueueBus borrows the sd_event and the Manager (both must
 * outlive it) and owns its bus connection. */
typedef struct QueueBus QueueBus;

/* Connect (address NULL: the system bus via sd_bus_open_system(), which
 * honours $DBUS_SYSTEM_BUS_ADDRESS; otherwise that bus address), attach to
 * the event loop, add /org/wikiweb/Queue1, request the name
 * org.wikiweb.Queue1 and subscribe to the Manager. Returns 0 and the
 * object in *ret (free with queue_bus_free()); a negative errno when the
 * bus cannot be reached or the name cannot be owned (-EEXIST: somebody
 * else owns it; -EACCES: the bus policy does not allow us). */
int queue_bus_new(sd_event *event, Manager *manager, const char *address, QueueBus **ret);

/* Unsubscribe, flush queued signals, release the name, close the
 * connection. NULL is fine. Returns NULL. */
QueueBus *queue_bus_free(QueueBus *b);
DEFINE_TRIVIAL_CLEANUP_FUNC(QueueBus *, queue_bus_free);

/* D-Bus errors of the methods that act. */
#define QUEUE_BUS_ERROR_NO_SUCH_QUERY "org.wikiweb.Error.NoSuchQuery"
#define QUEUE_BUS_ERROR_NO_SUCH_TICKET "org.wikiweb.Error.NoSuchTicket"
/* EraseUser: a query of the person did not end in time. */
#define QUEUE_BUS_ERROR_BUSY "org.wikiweb.Error.Busy"

/* Compare the properties with those last emitted now and emit
 * PropertiesChanged for those that changed (the defer source does this on
 * its own; useful before shutdown). Returns 0 or a negative errno from
 * sd-bus. */
int queue_bus_flush_properties(QueueBus *b);

/* The connection, borrowed (for tests and for the daemon's diagnostics). */
sd_bus *queue_bus_get_bus(QueueBus *b);
