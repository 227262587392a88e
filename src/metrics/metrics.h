/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "metrics/openmetrics.h"
#include "shared/time-util.h"

/* The daemon's metrics (API.md 12.3): one process-wide registry, counted
 * where the events happen (the HTTP server counts its responses and
 * connections, the Manager its tickets' removals, its queries as they
 * end and a ticket's wait at the claim, the pipeline each phase as it
 * ends and the model's tokens as a reply arrives, the sandbox its runs), and
 * rendered by metrics_render() in time proportional to the number of
 * series: a scrape recomputes nothing.
 *
 * Pure and single-threaded like the rest of the loop: no locks, no I/O
 * (metrics_read_process() reads /proc/self and is the only exception).
 * Counting never fails: a labelled counter has room for
 * METRICS_VEC_MAX label values; beyond, values are counted as "other". */

#define METRICS_VEC_MAX 40
#define METRICS_LABEL_VALUE_MAX 48

/* Forget everything and start again with every known series at 0 (the
 * daemon at start, each unit test). */
void metrics_reset(void);

/* wikiweb_tickets_removed_total{reason}: "left", "claimed", ... */
void metrics_count_ticket_removed(const char *reason);
/* wikiweb_queries_total{status,code} (code: the API error code of a failed
 * query, no code for a succeeded one) and, with the duration from claim to
 * confirmed cleanup, wikiweb_query_duration_seconds. */
void metrics_count_query(bool succeeded, const char *code, usec_t duration_usec);
/* wikiweb_query_phase_seconds_total{phase}: "queue", "wiki", "model",
 * "sandbox", "cleanup". */
/* wikiweb_event_loop_busy_seconds and _cpu_seconds: one iteration of the
 * event loop, from its wake-up to its next wait, in wall-clock and in the
 * loop thread's CPU time. */
void metrics_observe_loop_busy(usec_t wall_usec, usec_t cpu_usec);
void metrics_count_query_phase(const char *phase, usec_t usec);
/* wikiweb_model_tokens_total{kind}: "prompt", "completion". */
void metrics_count_model_tokens(const char *kind, uint64_t n);
/* wikiweb_sandbox_runs_total{outcome}: "exited", "timeout", "failed",
 * "cleanup_failed". */
void metrics_count_sandbox_run(const char *outcome);
/* wikiweb_identity_refused_total{reason} (API.md "Identity"): the user
 * header from a peer that is not a trusted proxy ("untrusted_peer"), a
 * value that is not a user name ("invalid"), the header sent twice
 * ("repeated"), a request without an identity where one is required
 * ("missing"), a session cookie issued to another user ("cookie"), an
 * access token refused ("token": wrong, expired, revoked, or naming
 * another person than the user header), a request with a token from an
 * address past its refusals ("token_rate_limited"). Never a user name,
 * a token or an address as a label. */
void metrics_count_identity_refused(const char *reason);

/* wikiweb_citations_total{status}: n citations of an answer with that
 * status, "verified", "not_found", "not_read", "too_short". */
void metrics_count_citations(const char *status, unsigned n);
/* wikiweb_wiki_read_checks_total{outcome}: "answered", "failed" (API.md
 * "Whose permissions"). */
void metrics_count_read_check(bool answered);
/* wikiweb_wiki_pages_withheld_total{from}: "search", "read", "sources", "report". */
void metrics_count_withheld(const char *from, unsigned n);
/* wikiweb_http_requests_total{code}: each response sent on the API socket. */
/* wikiweb_history_pruned_total{kind}: what a retention run removed. */
void metrics_count_pruned(unsigned records, unsigned artifacts);
/* A rating of an answer (API.md 9.1): "up" or "down". */
void metrics_count_feedback(const char *rating);
/* A query with a signal of the unanswered report (API.md 9.2), once per
 * signal: "no_sources", "unverified", "failed" when its record is
 * finished, "negative_feedback" when it is rated down. */
void metrics_count_unanswered(const char *signal);
void metrics_count_http_request(unsigned status);
/* wikiweb_http_connections and wikiweb_event_streams, gauges kept by their
 * owners: +1 when one opens, -1 when it closes. */
void metrics_http_connections_add(int delta);
void metrics_event_streams_add(int delta);

/* The process_* series, read from /proc/self at scrape time (a handful of
 * reads; the open descriptors are counted in /proc/self/fd). */
typedef struct MetricsProcess {
        double cpu_seconds;
        uint64_t resident_bytes;
        uint64_t virtual_bytes;
        uint64_t open_fds;
        uint64_t max_fds;
        double start_time_seconds; /* since the epoch */
} MetricsProcess;
int metrics_read_process(MetricsProcess *ret);

/* The history store's condition (store/history.h HistoryStorage). */
typedef struct MetricsStorage {
        uint64_t free_bytes; /* of the state directory's file system; UINT64_MAX: not known (no series) */
        uint64_t writes_failed;
        uint64_t outcomes_waiting;
        unsigned state; /* 0 ok, 1 degraded, 2 failed */
} MetricsStorage;

/* What the daemon's state says at scrape time, all O(1) to read. */
typedef struct MetricsGauges {
        const char *const *states; /* every state's name, for wikiweb_state{state} */
        size_t n_states;
        size_t state;          /* the index of the current one */
        const uint64_t *slots; /* n_states: how many admission slots are in each state; NULL: no wikiweb_slots */
        bool admission_open;
        uint64_t queue_length;
        uint64_t queue_max_length;
        const MetricsProcess *process; /* NULL: no process_* series */
        /* The history store's (NULL: no wikiweb_state_* and wikiweb_store_* series). */
        const MetricsStorage *storage;
} MetricsGauges;

/* The exposition of everything, in format. Returns 0 and the text (the
 * caller frees it), or -ENOMEM. */
int metrics_render(MetricsFormat format, const MetricsGauges *gauges, char **ret, size_t *ret_size);

/* The buckets of wikiweb_query_duration_seconds, 0.5 s to 10 min: a query
 * takes from half a second (an answer from the wiki alone) to minutes (the
 * default deadline is 2 min; beyond 10 the +Inf bucket counts them). */
extern const double metrics_query_duration_bounds[];
extern const size_t metrics_query_duration_n_bounds;
