/* SPDX-License-Identifier: MIT */
#pragma once

#include <sys/types.h>
#include <systemd/sd-bus.h>

#include "shared/macro.h"

/* Asynchronous polkit checks for D-Bus method handlers, the way systemd's
 * bus-polkit.c does them: the daemon never waits for polkit.
 *
 * A method handler calls bus_verify_polkit_async() first:
 *   - > 0: allowed, go on;
 *   - 0: polkit was asked; return 1 from the handler without replying.
 *     When polkit answers, the very same request message is put back into
 *     the connection's read queue (sd_bus_enqueue_for_read()), so the
 *     handler runs again and this time gets the recorded verdict;
 *   - < 0: refused or failed, with error set (AccessDenied, or
 *     InteractiveAuthorizationRequired when polkit would have asked the
 *     user but the message did not allow it); return it.
 *
 * Root (the sender's effective uid 0) is always allowed and polkit is not
 * asked. When polkit is not on the bus (ServiceUnknown, NameHasNoOwner),
 * everybody else is refused. The message's allow-interactive-authorization
 * flag becomes polkit's AllowUserInteraction flag. The subject is the
 * sender's bus name ("system-bus-name"): polkit resolves it to the process
 * and user itself, and requires the caller (the daemon's user) to be a
 * trusted caller for the action: the .policy file names it with the
 * org.freedesktop.policykit.owner annotation.
 *
 * Ownership: the registry holds one reference on each request in flight
 * and the slot of its CheckAuthorization call; freeing the registry
 * cancels them (no reply is then sent for those requests). */
typedef struct PolkitRegistry PolkitRegistry;

int bus_verify_polkit_async(
        sd_bus_message *call, const char *action, PolkitRegistry **registry, sd_bus_error *error);

/* The effective uid of the sender of m (the one place its credentials are
 * read): 0 with ret_euid set, a negative errno when they cannot be had. */
int bus_sender_euid(sd_bus_message *m, uid_t *ret_euid);

/* 1 when the sender of m has effective uid 0, 0 when not, a negative errno
 * when its credentials cannot be had. */
int bus_sender_is_root(sd_bus_message *m);

PolkitRegistry *polkit_registry_free(PolkitRegistry *registry);
DEFINE_TRIVIAL_CLEANUP_FUNC(PolkitRegistry *, polkit_registry_free);

/* The number of checks still waiting for polkit (for tests). */
unsigned polkit_registry_pending(const PolkitRegistry *registry);
