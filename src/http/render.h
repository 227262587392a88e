/* SPDX-License-Identifier: MIT */
#pragma once

#include <json-c/json.h>

#include "admission/admission.h"
#include "admission/wait-range.h"
#include "manager/manager.h"
#include "store/history.h"

/* The JSON of API.md 6 and 9 from the structs of the admission machine and
 * the store: they return plain structs (store/history.h), the API edge
 * renders them. The field order is the contract's and the bytes are the
 * ones the responses always carried (tests/unit/test-render.c pins them).
 *
 * Each returns a new object (the caller puts it), NULL when out of memory. */

/* The query record. Its sources are the stored array text, parsed again;
 * text that is not an array (only a file changed behind the store's back)
 * is rendered as []. */
json_object *render_history_record(const HistoryRecord *r);

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
