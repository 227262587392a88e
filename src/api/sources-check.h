/* SPDX-License-Identifier: MIT */
#pragma once

#include "http/httpd.h"
#include "manager/manager.h"
#include "shared/macro.h"
#include "store/history.h"

/* GET /api/v1/history/{id}/sources (API.md 9): each source of a record
 * with the wiki's current revision, so that a person reading an old answer
 * sees which pages changed since. One batched request to the wiki (prop=info,
 * the first MEDIAWIKI_TITLES_MAX sources; on a private wiki the login before
 * it), made beside any running query.
 *
 * Bounded because each check costs the wiki a request: a session may start
 * one check per SOURCES_CHECK_INTERVAL_USEC (the last SOURCES_CHECK_SESSIONS
 * sessions are remembered), and at most SOURCES_CHECK_IN_FLIGHT_MAX run at
 * once in the daemon; beyond either, rate_limited (429) with Retry-After. A
 * record without sources is answered without asking the wiki, and is not
 * counted.
 *
 * The request is suspended while the wiki answers (at most
 * REVISION_CHECK_TIMEOUT_USEC). Ownership: the checks borrow the executor,
 * which must outlive them; sources_checks_free() cancels the checks in
 * flight without answering their requests (the HTTP server, freed first,
 * has closed them). */

#define SOURCES_CHECK_INTERVAL_USEC (10 * USEC_PER_SEC)
#define SOURCES_CHECK_SESSIONS 256
#define SOURCES_CHECK_IN_FLIGHT_MAX 4

typedef struct SourcesChecks SourcesChecks;

int sources_checks_new(Manager *manager, SourcesChecks **ret);
SourcesChecks *sources_checks_free(SourcesChecks *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(SourcesChecks *, sources_checks_free);

/* Answer req (GET .../sources of record, the caller's own) now or once the
 * wiki has answered. */
HttpHandlerResult sources_checks_handle(SourcesChecks *s, HttpRequest *req, const HistoryRecord *record);
