/* SPDX-License-Identifier: MIT */
#pragma once

#include <json-c/json.h>

#include "admission/admission.h"
#include "admission/wait-range.h"
#include "manager/manager.h"
#include "store/history.h"
#include "store/report.h"
#include "store/tokens.h"

/* The JSON of API.md 6 and 9 from the structs of the admission machine and
 * the store: they return plain structs (store/history.h), the API edge
 * renders them. The field order is the contract's and the bytes are the
 * ones the responses always carried (tests/unit/test-render.c pins them).
 *
 * Each returns a new object (the caller puts it), NULL when out of memory. */

/* The query record, its sources and citations written by
 * shared/source.h. */
json_object *render_history_record(const HistoryRecord *r);

/* The query stream's `citations` event of the record (API.md 11.2):
 * {"citations": [...]}, the record's own list, so that the two never
 * differ. A new string (the caller frees it), NULL when out of memory. */
char *render_citations_event(const HistoryRecord *r);

/* A listing page: {"items": [...], "next_cursor": "..." or null}. */
json_object *render_history_page(const HistoryPage *p);

/* {"total", "idle", "reserved", "running"}: the admission slots (API.md 5),
 * in the status object and in health. */
json_object *render_slots(const AdmissionSlotCounts *c);

/* The status object of API.md 6 as one session sees it (manager_status():
 * the admission status, the queue's settings, running_query (11.4; none:
 * null) and the wait range (5; unknown: null, and "wait_known": false)),
 * with the user of the session ("Identity"; NULL: null), as the text of a
 * response or a queue stream's status event: a new string (the caller
 * frees it), NULL when out of memory. The one writer of that object. */
char *render_status_text(const ManagerStatus *status, const char *user);

/* The body of a response carrying o (owned by o: valid until it is put). */
const char *render_body(json_object *o);

/* The unanswered report (API.md 9.2) of the last days: {"since", "days",
 * "records", "groups": [...]}, each group with its "new_page_url" made
 * from wiki_api_url (NULL: null). */
json_object *render_report(const Report *r, unsigned days, const char *wiki_api_url);

/* The same report as CSV (RFC 4180, CRLF, every cell quoted, a header
 * line; a cell that starts with = + - @, a tab or a carriage return gets a
 * leading apostrophe): a new string, NULL when out of memory. */
char *render_report_csv(const Report *r);

/* The wiki's page to create for a title: index.php beside wiki_api_url,
 * ?title=T&action=edit, T the text up to its last word (at most 200
 * bytes), spaces as underscores, percent-encoded. A new string; NULL
 * without a URL or a title, or when out of memory. */
char *render_new_page_url(const char *wiki_api_url, const char *title);

/* A person's access tokens (API.md "Access tokens"): {"tokens": [{"id",
 * "name", "created_at", "expires_at", "last_used_at", "expired"}],
 * "max_days"}; no secret, no digest. expired is decided at now
 * (CLOCK_REALTIME). NULL when out of memory. */
json_object *render_tokens(const HistoryToken *tokens, size_t n, usec_t now, uint64_t max_days);
