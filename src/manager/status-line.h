/* SPDX-License-Identifier: MIT */
#pragma once

#include "manager/manager.h"
#include "shared/macro.h"

/* The service's STATUS= line (sd_notify(3), `systemctl status`): a small
 * subscriber of the Manager that writes the line again after each of its
 * announcements but a query's events and phases:
 *
 *   [Stopping; ]STATE; waiting: N; running: ID[, ID...]|none; average query: X.Xs|n/a[; health: degraded]
 *   [; storage: degraded|failed (CAUSE)]
 *
 * naming every running query (manager_foreach_query(), oldest claim
 * first). Borrows the Manager, which must outlive it. */
typedef struct StatusLine StatusLine;

/* Subscribes and sends the first line. 0 or -ENOMEM. */
int status_line_new(Manager *m, StatusLine **ret);
StatusLine *status_line_free(StatusLine *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(StatusLine *, status_line_free);

/* The line as it would be sent now, without "STATUS=": a new string (the
 * caller frees it), NULL when out of memory. */
char *status_line_format(Manager *m);
