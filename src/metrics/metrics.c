/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "metrics/metrics.h"
#include "shared/macro.h"

const double metrics_query_duration_bounds[] = { 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600 };
const size_t metrics_query_duration_n_bounds = ELEMENTSOF(metrics_query_duration_bounds);
/* The event loop's busy time per iteration: its target is under 20 ms
 * (docs/PERFORMANCE.md), so the buckets are dense around it. */
static const double loop_busy_bounds[] = { 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5, 1, 5 };

/* A counter with one or two labels: one entry per label value (pair),
 * found by a linear search over at most METRICS_VEC_MAX short strings. */
typedef struct CounterEntry {
        char value1[METRICS_LABEL_VALUE_MAX];
        char value2[METRICS_LABEL_VALUE_MAX]; /* "" when the entry has no second label */
        uint64_t count;
} CounterEntry;

typedef struct CounterVec {
        CounterEntry entries[METRICS_VEC_MAX];
        size_t n;
} CounterVec;

static struct {
        CounterVec tickets_removed; /* reason */
        CounterVec queries;         /* status, code */
        MetricsHistogram query_duration;
        MetricsHistogram loop_busy;     /* wall clock */
        MetricsHistogram loop_busy_cpu; /* the loop thread's CPU time */
        CounterVec phase_usec;          /* phase; microseconds, shown as seconds */
        CounterVec tokens;              /* kind */
        CounterVec sandbox_runs;        /* outcome */
        CounterVec http_requests;       /* code */
        CounterVec identity_refused;    /* reason */
        CounterVec citations;           /* status */
        CounterVec feedback;            /* rating */
        CounterVec unanswered;          /* signal */
        CounterVec read_checks;         /* outcome */
        CounterVec withheld;            /* from */
        CounterVec retention_pruned;    /* kind */
        int64_t http_connections;
        int64_t event_streams;
} registry;

static void copy_value(char dst[static METRICS_LABEL_VALUE_MAX], const char *src) {
        snprintf(dst, METRICS_LABEL_VALUE_MAX, "%s", src ? src : "");
}

/* The entry of (v1, v2), made if new; a full vector counts into its last
 * entry, made "other" (never a new series per request of a client). */
static CounterEntry *vec_entry(CounterVec *v, const char *v1, const char *v2) {
        CounterEntry *e;

        for (size_t i = 0; i < v->n; i++) {
                e = &v->entries[i];
                if (strneq(e->value1, v1 ? v1 : "", METRICS_LABEL_VALUE_MAX) &&
                    strneq(e->value2, v2 ? v2 : "", METRICS_LABEL_VALUE_MAX))
                        return e;
        }
        if (v->n == METRICS_VEC_MAX) {
                e = &v->entries[METRICS_VEC_MAX - 1];
                copy_value(e->value1, "other");
                e->value2[0] = 0;
                return e;
        }
        e = &v->entries[v->n++];
        copy_value(e->value1, v1);
        copy_value(e->value2, v2);
        e->count = 0;
        return e;
}

static void vec_add(CounterVec *v, const char *v1, const char *v2, uint64_t n) {
        vec_entry(v, v1, v2)->count += n;
}

static void vec_seed(CounterVec *v, const char *const *values) {
        for (const char *const *p = values; *p; p++)
                (void) vec_entry(v, *p, NULL);
}

void metrics_reset(void) {
        static const char *const reasons[] = { "left", "claimed", "heartbeat", "reservation", "admin", NULL };
        static const char *const phases[] = { "queue", "wiki", "model", "sandbox", "cleanup", NULL };
        static const char *const kinds[] = { "prompt", "completion", NULL };
        static const char *const outcomes[] = { "exited", "timeout", "failed", "cleanup_failed", NULL };
        static const char *const identity_reasons[] = {
                "untrusted_peer", "invalid", "repeated",           "missing",
                "cookie",         "token",   "token_rate_limited", NULL
        };
        static const char *const statuses[] = { "verified", "not_found", "not_read", "too_short", NULL };
        static const char *const ratings[] = { "up", "down", NULL };
        static const char *const signals[] = { "no_sources", "unverified", "negative_feedback", "failed", NULL };
        static const char *const check_outcomes[] = { "answered", "failed", NULL };
        static const char *const withheld_from[] = { "search", "read", "sources", "report", NULL };
        static const char *const pruned_kinds[] = { "records", "artifacts", NULL };

        memset(&registry, 0, sizeof registry);
        registry.query_duration.bounds = metrics_query_duration_bounds;
        registry.query_duration.n_bounds = metrics_query_duration_n_bounds;
        registry.loop_busy = registry.loop_busy_cpu = (MetricsHistogram){
                .bounds = loop_busy_bounds,
                .n_bounds = ELEMENTSOF(loop_busy_bounds),
        };
        /* Every series that is known in advance exists from the start, at
         * 0, so that rate() and increase() see its first event. */
        vec_seed(&registry.tickets_removed, reasons);
        vec_seed(&registry.phase_usec, phases);
        vec_seed(&registry.tokens, kinds);
        vec_seed(&registry.sandbox_runs, outcomes);
        vec_seed(&registry.identity_refused, identity_reasons);
        vec_seed(&registry.citations, statuses);
        vec_seed(&registry.feedback, ratings);
        vec_seed(&registry.unanswered, signals);
        vec_seed(&registry.read_checks, check_outcomes);
        vec_seed(&registry.withheld, withheld_from);
        vec_seed(&registry.retention_pruned, pruned_kinds);
        (void) vec_entry(&registry.queries, "succeeded", NULL);
}

void metrics_count_ticket_removed(const char *reason) {
        vec_add(&registry.tickets_removed, reason, NULL, 1);
}

void metrics_count_query(bool succeeded, const char *code, usec_t duration_usec) {
        vec_add(&registry.queries, succeeded ? "succeeded" : "failed", succeeded ? NULL : code, 1);
        metrics_histogram_observe(&registry.query_duration, (double) duration_usec / (double) USEC_PER_SEC);
}

void metrics_observe_loop_busy(usec_t wall_usec, usec_t cpu_usec) {
        metrics_histogram_observe(&registry.loop_busy, (double) wall_usec / (double) USEC_PER_SEC);
        metrics_histogram_observe(&registry.loop_busy_cpu, (double) cpu_usec / (double) USEC_PER_SEC);
}

void metrics_count_query_phase(const char *phase, usec_t usec) {
        vec_add(&registry.phase_usec, phase, NULL, usec);
}

void metrics_count_model_tokens(const char *kind, uint64_t n) {
        vec_add(&registry.tokens, kind, NULL, n);
}

void metrics_count_sandbox_run(const char *outcome) {
        vec_add(&registry.sandbox_runs, outcome, NULL, 1);
}

void metrics_count_identity_refused(const char *reason) {
        vec_add(&registry.identity_refused, reason, NULL, 1);
}

void metrics_count_citations(const char *status, unsigned n) {
        vec_add(&registry.citations, status, NULL, n);
}

void metrics_count_pruned(unsigned records, unsigned artifacts) {
        vec_add(&registry.retention_pruned, "records", NULL, records);
        vec_add(&registry.retention_pruned, "artifacts", NULL, artifacts);
}

void metrics_count_feedback(const char *rating) {
        vec_add(&registry.feedback, rating, NULL, 1);
}

void metrics_count_unanswered(const char *signal) {
        vec_add(&registry.unanswered, signal, NULL, 1);
}

void metrics_count_read_check(bool answered) {
        vec_add(&registry.read_checks, answered ? "answered" : "failed", NULL, 1);
}

void metrics_count_withheld(const char *from, unsigned n) {
        vec_add(&registry.withheld, from, NULL, n);
}

void metrics_count_http_request(unsigned status) {
        char code[16];

        snprintf(code, sizeof code, "%u", status);
        vec_add(&registry.http_requests, code, NULL, 1);
}

void metrics_http_connections_add(int delta) {
        registry.http_connections += delta;
}

void metrics_event_streams_add(int delta) {
        registry.event_streams += delta;
}

/* /proc/self/stat: utime and stime (fields 14, 15) in clock ticks, the
 * start time (22) in ticks after boot, vsize (23) in bytes, rss (24) in
 * pages. */
int metrics_read_process(MetricsProcess *ret) {
        unsigned long long utime, stime, start, vsize, btime = 0;
        long long rss;
        long ticks = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
        char buf[1024], line[256];
        const char *p;
        struct rlimit rl;
        size_t n;
        FILE *f;
        DIR *d;

        assert(ret);
        *ret = (MetricsProcess){ 0 };

        f = fopen("/proc/self/stat", "re");
        if (!f)
                return -errno;
        n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        /* The command may contain anything: fields start after its ')'. */
        p = strrchr(buf, ')');
        if (!p ||
            sscanf(p + 2,
                   "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d %llu %llu %lld",
                   &utime,
                   &stime,
                   &start,
                   &vsize,
                   &rss) != 5)
                return -EIO;

        f = fopen("/proc/stat", "re");
        if (f) {
                while (fgets(line, sizeof line, f))
                        if (sscanf(line, "btime %llu", &btime) == 1)
                                break;
                fclose(f);
        }

        ret->cpu_seconds = (double) (utime + stime) / (double) ticks;
        ret->virtual_bytes = vsize;
        ret->resident_bytes = rss > 0 ? (uint64_t) rss * (uint64_t) page : 0;
        ret->start_time_seconds = (double) btime + (double) start / (double) ticks;
        if (getrlimit(RLIMIT_NOFILE, &rl) >= 0)
                ret->max_fds = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t) rl.rlim_cur;

        d = opendir("/proc/self/fd");
        if (d) {
                struct dirent *de;

                while ((de = readdir(d)))
                        if (de->d_name[0] != '.')
                                ret->open_fds++;
                closedir(d);
                /* Not the one opendir() used. */
                if (ret->open_fds > 0)
                        ret->open_fds--;
        }
        return 0;
}

static void render_vec(MetricsWriter *w, const CounterVec *v, const char *label1, const char *label2) {
        for (size_t i = 0; i < v->n; i++) {
                const CounterEntry *e = &v->entries[i];
                const char *labels[] = { label1, e->value1, e->value2[0] ? label2 : NULL, e->value2, NULL };

                metrics_sample_u64(w, labels, e->count);
        }
}

static void render_gauge(MetricsWriter *w, const char *name, const char *help, double v) {
        metrics_family(w, name, METRIC_GAUGE, NULL, help);
        metrics_sample_double(w, NULL, v);
}

/* The admission: its state, its slots, the queue. */
static void render_admission(MetricsWriter *w, const MetricsGauges *g) {
        render_gauge(w, "wikiweb_up", "Whether wikiwebd is up (always 1 when it answers).", 1);

        metrics_family(w, "wikiweb_state", METRIC_GAUGE, NULL, "The admission state: 1 for the current one.");
        for (size_t i = 0; i < g->n_states; i++)
                metrics_sample_u64(w, (const char *const[]){ "state", g->states[i], NULL }, i == g->state);
        if (g->slots) {
                metrics_family(
                        w,
                        "wikiweb_slots",
                        METRIC_GAUGE,
                        NULL,
                        "Admission slots in each state (WIKI_WEB_QUEUE_SLOTS in all).");
                for (size_t i = 0; i < g->n_states; i++)
                        metrics_sample_u64(
                                w, (const char *const[]){ "state", g->states[i], NULL }, g->slots[i]);
        }
        render_gauge(
                w,
                "wikiweb_admission_open",
                "1 while admission is open, 0 while an administrator drains it.",
                g->admission_open);
        render_gauge(
                w,
                "wikiweb_queue_length",
                "Tickets in the queue, waiting and reserved.",
                (double) g->queue_length);
        render_gauge(
                w,
                "wikiweb_queue_max_length",
                "The most tickets the queue holds (WIKI_WEB_QUEUE_MAX_LENGTH).",
                (double) g->queue_max_length);
}

/* What queries did: tickets, outcomes, durations, phases, tokens, runs. */
static void render_queries(MetricsWriter *w) {
        metrics_family(
                w,
                "wikiweb_tickets_removed",
                METRIC_COUNTER,
                NULL,
                "Tickets removed from the queue, by reason (left, claimed, heartbeat, reservation, admin).");
        render_vec(w, &registry.tickets_removed, "reason", NULL);

        metrics_family(
                w,
                "wikiweb_queries",
                METRIC_COUNTER,
                NULL,
                "Queries that ended, by status and, for a failed one, its error code.");
        render_vec(w, &registry.queries, "status", "code");

        metrics_family(
                w,
                "wikiweb_query_duration_seconds",
                METRIC_HISTOGRAM,
                "seconds",
                "Time from a query's claim to its confirmed cleanup.");
        metrics_sample_histogram(w, NULL, &registry.query_duration);

        metrics_family(
                w,
                "wikiweb_query_phase_seconds",
                METRIC_COUNTER,
                "seconds",
                "Time spent by queries in each phase (queue, wiki, model, sandbox, cleanup).");
        for (size_t i = 0; i < registry.phase_usec.n; i++) {
                const CounterEntry *e = &registry.phase_usec.entries[i];

                metrics_sample_double(
                        w,
                        (const char *const[]){ "phase", e->value1, NULL },
                        (double) e->count / (double) USEC_PER_SEC);
        }

        metrics_family(
                w,
                "wikiweb_model_tokens",
                METRIC_COUNTER,
                NULL,
                "Tokens the model reported, by kind (prompt, completion).");
        render_vec(w, &registry.tokens, "kind", NULL);

        metrics_family(
                w,
                "wikiweb_sandbox_runs",
                METRIC_COUNTER,
                NULL,
                "run_python runs, by outcome (exited, timeout, failed, cleanup_failed).");
        render_vec(w, &registry.sandbox_runs, "outcome", NULL);
}

/* What happened to people and pages: identities, citations, ratings,
 * unanswered queries, read checks, pages withheld. */
static void render_people(MetricsWriter *w) {
        metrics_family(
                w,
                "wikiweb_identity_refused",
                METRIC_COUNTER,
                NULL,
                "Identities refused, by reason (untrusted_peer, invalid, repeated, missing, cookie, token, "
                "token_rate_limited).");
        render_vec(w, &registry.identity_refused, "reason", NULL);

        metrics_family(
                w,
                "wikiweb_citations",
                METRIC_COUNTER,
                NULL,
                "Citations of answers, by status (verified, not_found, not_read, too_short).");
        render_vec(w, &registry.citations, "status", NULL);

        metrics_family(
                w,
                "wikiweb_feedback",
                METRIC_COUNTER,
                NULL,
                "Ratings of answers by their askers, by rating (up, down).");
        render_vec(w, &registry.feedback, "rating", NULL);

        metrics_family(
                w,
                "wikiweb_unanswered",
                METRIC_COUNTER,
                NULL,
                "Queries the wiki could not answer, by signal (no_sources, unverified, negative_feedback, failed).");
        render_vec(w, &registry.unanswered, "signal", NULL);

        metrics_family(
                w,
                "wikiweb_wiki_read_checks",
                METRIC_COUNTER,
                NULL,
                "Checks of what the asking person may read (WIKI_WEB_WIKI_READ_AS=person), by outcome "
                "(answered, failed).");
        render_vec(w, &registry.read_checks, "outcome", NULL);

        metrics_family(
                w,
                "wikiweb_wiki_pages_withheld",
                METRIC_COUNTER,
                NULL,
                "Pages withheld because the asking person may not read them, by where they came from "
                "(search, read, sources).");
        render_vec(w, &registry.withheld, "from", NULL);

        metrics_family(
                w,
                "wikiweb_history_pruned",
                METRIC_COUNTER,
                NULL,
                "Records and artifacts removed from the history by its retention, by kind (records, artifacts).");
        render_vec(w, &registry.retention_pruned, "kind", NULL);
}

/* The API socket. */
static void render_http(MetricsWriter *w) {
        metrics_family(
                w,
                "wikiweb_http_requests",
                METRIC_COUNTER,
                NULL,
                "Responses sent on the API socket, by HTTP status code.");
        render_vec(w, &registry.http_requests, "code", NULL);

        render_gauge(
                w,
                "wikiweb_http_connections",
                "Open connections on the API socket.",
                (double) registry.http_connections);
        render_gauge(w, "wikiweb_event_streams", "Open live event streams.", (double) registry.event_streams);
}

/* The history store's (API.md 12.3, 9 "The store under faults"). */
static void render_storage(MetricsWriter *w, const MetricsStorage *s) {
        static const char *const storage_states[] = { "ok", "degraded", "failed" };

        metrics_family(
                w, "wikiweb_storage", METRIC_GAUGE, NULL, "The history store's state: 1 for the current one.");
        for (unsigned i = 0; i < ELEMENTSOF(storage_states); i++)
                metrics_sample_u64(w, (const char *const[]){ "state", storage_states[i], NULL }, i == s->state);
        if (s->free_bytes != UINT64_MAX) {
                metrics_family(
                        w,
                        "wikiweb_state_free_bytes",
                        METRIC_GAUGE,
                        "bytes",
                        "Free bytes of the state directory's file system (for unprivileged users).");
                metrics_sample_u64(w, NULL, s->free_bytes);
        }
        metrics_family(
                w,
                "wikiweb_store_writes_failed",
                METRIC_COUNTER,
                NULL,
                "Writes of the history that failed (no space, read-only, I/O error, damaged).");
        metrics_sample_u64(w, NULL, s->writes_failed);
        render_gauge(
                w,
                "wikiweb_store_outcomes_waiting",
                "Query outcomes kept in memory until the history can store them.",
                (double) s->outcomes_waiting);
}

/* The event loop's own time per iteration (docs/PERFORMANCE.md). */
static void render_loop(MetricsWriter *w) {
        metrics_family(
                w,
                "wikiweb_event_loop_busy_seconds",
                METRIC_HISTOGRAM,
                "seconds",
                "Time the event loop took for one iteration's events, from its wake-up to its next wait.");
        metrics_sample_histogram(w, NULL, &registry.loop_busy);
        metrics_family(
                w,
                "wikiweb_event_loop_busy_cpu_seconds",
                METRIC_HISTOGRAM,
                "seconds",
                "CPU time the event loop's thread used in one iteration.");
        metrics_sample_histogram(w, NULL, &registry.loop_busy_cpu);
}

/* The process_* families every Prometheus client library exports. */
static void render_process(MetricsWriter *w, const MetricsProcess *p) {
        metrics_family(
                w,
                "process_cpu_seconds",
                METRIC_COUNTER,
                "seconds",
                "Total user and system CPU time spent in seconds.");
        metrics_sample_double(w, NULL, p->cpu_seconds);
        metrics_family(
                w, "process_resident_memory_bytes", METRIC_GAUGE, "bytes", "Resident memory size in bytes.");
        metrics_sample_u64(w, NULL, p->resident_bytes);
        metrics_family(
                w, "process_virtual_memory_bytes", METRIC_GAUGE, "bytes", "Virtual memory size in bytes.");
        metrics_sample_u64(w, NULL, p->virtual_bytes);
        render_gauge(w, "process_open_fds", "Number of open file descriptors.", (double) p->open_fds);
        render_gauge(w, "process_max_fds", "Maximum number of open file descriptors.", (double) p->max_fds);
        metrics_family(
                w,
                "process_start_time_seconds",
                METRIC_GAUGE,
                "seconds",
                "Start time of the process since unix epoch in seconds.");
        metrics_sample_double(w, NULL, p->start_time_seconds);
}

int metrics_render(MetricsFormat format, const MetricsGauges *g, char **ret, size_t *ret_size) {
        MetricsWriter w;

        assert(g);
        assert(ret);

        metrics_writer_init(&w, format);
        render_admission(&w, g);
        render_queries(&w);
        render_people(&w);
        render_http(&w);
        render_loop(&w);
        if (g->storage)
                render_storage(&w, g->storage);
        if (g->process)
                render_process(&w, g->process);
        return metrics_writer_finish(&w, ret, ret_size);
}
