/* SPDX-License-Identifier: MIT */
/* The exposition encoder (both formats: escaping, HELP/TYPE/UNIT, counters'
 * "_total", cumulative histogram buckets, "# EOF") and the registry (what
 * the daemon counts shows up in its series). promtool checks the real
 * daemon's output in the e2e suite. */
#include "metrics/metrics.h"
#include "metrics/openmetrics.h"
#include "shared/macro.h"
#include "tests.h"

static char *finish(MetricsWriter *w) {
        char *text = NULL;
        size_t size = 0;

        ASSERT_OK(metrics_writer_finish(w, &text, &size));
        ASSERT_EQ_INT(strlen(text), size);
        return text;
}

static void expect_contains(const char *text, const char *want) {
        if (!strstr(text, want)) {
                fprintf(stderr, "missing:\n%s\nin:\n%s\n", want, text);
                abort();
        }
}

TEST(content_negotiation) {
        ASSERT_EQ_INT(metrics_format_from_accept(NULL), METRICS_FORMAT_PROMETHEUS);
        ASSERT_EQ_INT(metrics_format_from_accept("*/*"), METRICS_FORMAT_PROMETHEUS);
        /* What Prometheus 2.42 sends. */
        ASSERT_EQ_INT(
                metrics_format_from_accept("application/openmetrics-text;version=1.0.0,application/"
                                           "openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;"
                                           "q=0.5,*/*;q=0.1"),
                METRICS_FORMAT_OPENMETRICS);
        ASSERT_EQ_STR(
                metrics_format_content_type(METRICS_FORMAT_OPENMETRICS),
                "application/openmetrics-text; version=1.0.0; charset=utf-8");
        ASSERT_EQ_STR(
                metrics_format_content_type(METRICS_FORMAT_PROMETHEUS),
                "text/plain; version=0.0.4; charset=utf-8");
}

/* The same families in both formats: a counter with labels to escape, a
 * counter with a unit, a gauge with a unit. */
static char *write_families(MetricsFormat format) {
        MetricsWriter w;

        metrics_writer_init(&w, format);
        metrics_family(&w, "x_requests", METRIC_COUNTER, NULL, "Requests \"served\", back\\slash\nnewline.");
        metrics_sample_u64(&w, (const char *const[]){ "code", "200", NULL }, 7);
        metrics_sample_u64(&w, (const char *const[]){ "a", "q\"uo\\te\nnl", "b", "", NULL }, 0);
        metrics_family(&w, "x_busy_seconds", METRIC_COUNTER, "seconds", "Busy time.");
        metrics_sample_double(&w, NULL, 1.5);
        metrics_family(&w, "x_temperature_celsius", METRIC_GAUGE, "celsius", "A gauge.");
        metrics_sample_double(&w, NULL, -3);
        return finish(&w);
}

TEST(counter_openmetrics) {
        _cleanup_free_ char *text = write_families(METRICS_FORMAT_OPENMETRICS);

        ASSERT_EQ_STR(
                text,
                "# HELP x_requests Requests \\\"served\\\", back\\\\slash\\nnewline.\n"
                "# TYPE x_requests counter\n"
                "x_requests_total{code=\"200\"} 7\n"
                "x_requests_total{a=\"q\\\"uo\\\\te\\nnl\",b=\"\"} 0\n"
                "# HELP x_busy_seconds Busy time.\n"
                "# TYPE x_busy_seconds counter\n"
                "# UNIT x_busy_seconds seconds\n"
                "x_busy_seconds_total 1.5\n"
                "# HELP x_temperature_celsius A gauge.\n"
                "# TYPE x_temperature_celsius gauge\n"
                "# UNIT x_temperature_celsius celsius\n"
                "x_temperature_celsius -3\n"
                "# EOF\n");
}

TEST(counter_prometheus) {
        _cleanup_free_ char *text = write_families(METRICS_FORMAT_PROMETHEUS);

        /* The text format: family named with _total, no UNIT, no EOF, a
         * double quote in HELP as it is. */
        ASSERT_EQ_STR(
                text,
                "# HELP x_requests_total Requests \"served\", back\\\\slash\\nnewline.\n"
                "# TYPE x_requests_total counter\n"
                "x_requests_total{code=\"200\"} 7\n"
                "x_requests_total{a=\"q\\\"uo\\\\te\\nnl\",b=\"\"} 0\n"
                "# HELP x_busy_seconds_total Busy time.\n"
                "# TYPE x_busy_seconds_total counter\n"
                "x_busy_seconds_total 1.5\n"
                "# HELP x_temperature_celsius A gauge.\n"
                "# TYPE x_temperature_celsius gauge\n"
                "x_temperature_celsius -3\n");
}

TEST(histogram) {
        static const double bounds[] = { 0.5, 1, 2.5 };
        MetricsHistogram h = { .bounds = bounds, .n_bounds = ELEMENTSOF(bounds) };
        MetricsFormat formats[] = { METRICS_FORMAT_OPENMETRICS, METRICS_FORMAT_PROMETHEUS };

        metrics_histogram_observe(&h, 0.1);
        metrics_histogram_observe(&h, 0.5); /* le is inclusive */
        metrics_histogram_observe(&h, 2);
        metrics_histogram_observe(&h, 100);
        ASSERT_EQ_INT(h.count, 4);
        ASSERT_EQ_INT(h.counts[0], 2);
        ASSERT_EQ_INT(h.counts[1], 0);
        ASSERT_EQ_INT(h.counts[2], 1);
        ASSERT_EQ_INT(h.counts[3], 1);

        for (size_t i = 0; i < ELEMENTSOF(formats); i++) {
                _cleanup_free_ char *text = NULL;
                MetricsWriter w;

                metrics_writer_init(&w, formats[i]);
                metrics_family(&w, "x_duration_seconds", METRIC_HISTOGRAM, "seconds", "Durations.");
                metrics_sample_histogram(&w, (const char *const[]){ "kind", "a", NULL }, &h);
                text = finish(&w);
                /* Cumulative, le after the other labels, +Inf equal to
                 * _count, no _total. */
                expect_contains(
                        text,
                        "x_duration_seconds_bucket{kind=\"a\",le=\"0.5\"} 2\n"
                        "x_duration_seconds_bucket{kind=\"a\",le=\"1.0\"} 2\n"
                        "x_duration_seconds_bucket{kind=\"a\",le=\"2.5\"} 3\n"
                        "x_duration_seconds_bucket{kind=\"a\",le=\"+Inf\"} 4\n"
                        "x_duration_seconds_count{kind=\"a\"} 4\n"
                        "x_duration_seconds_sum{kind=\"a\"} 102.6\n");
                expect_contains(text, "# TYPE x_duration_seconds histogram\n");
                ASSERT_TRUE(!strstr(text, "_total"));
                ASSERT_EQ_INT(
                        !!strstr(text, "# UNIT x_duration_seconds seconds\n"),
                        formats[i] == METRICS_FORMAT_OPENMETRICS);
        }
}

TEST(numbers) {
        _cleanup_free_ char *text = NULL;
        MetricsWriter w;

        metrics_writer_init(&w, METRICS_FORMAT_PROMETHEUS);
        metrics_family(&w, "x", METRIC_GAUGE, NULL, "Numbers.");
        metrics_sample_double(&w, NULL, 0.1);
        metrics_sample_double(&w, NULL, 1e300);
        metrics_sample_double(&w, NULL, 12345678901234.0);
        metrics_sample_double(&w, NULL, 1.0 / 3.0);
        metrics_sample_u64(&w, NULL, UINT64_MAX);
        text = finish(&w);
        expect_contains(
                text,
                "x 0.1\n"
                "x 1e+300\n"
                "x 12345678901234\n"
                "x 0.3333333333333333\n"
                "x 18446744073709551615\n");
}

static char *render(MetricsFormat f) {
        static const char *const states[] = { "idle", "reserved", "running" };
        static const uint64_t slots[] = { 1, 2, 5 };
        MetricsProcess p;
        MetricsGauges g = {
                .states = states,
                .n_states = ELEMENTSOF(states),
                .slots = slots,
                .state = 2,
                .admission_open = false,
                .queue_length = 4,
                .queue_max_length = 100,
                .process = &p,
        };
        char *text = NULL;

        ASSERT_OK(metrics_read_process(&p));
        ASSERT_TRUE(p.open_fds >= 3 && p.max_fds >= p.open_fds);
        ASSERT_TRUE(p.resident_bytes > 0 && p.start_time_seconds > 1e9);
        ASSERT_OK(metrics_render(f, &g, &text, NULL));
        return text;
}

TEST(registry) {
        _cleanup_free_ char *om = NULL, *prom = NULL, *fresh = NULL;

        metrics_reset();
        fresh = render(METRICS_FORMAT_OPENMETRICS);
        /* Known series exist at 0 before anything happened. */
        expect_contains(fresh, "wikiweb_tickets_removed_total{reason=\"heartbeat\"} 0\n");
        expect_contains(fresh, "wikiweb_queries_total{status=\"succeeded\"} 0\n");
        expect_contains(fresh, "wikiweb_sandbox_runs_total{outcome=\"timeout\"} 0\n");
        expect_contains(fresh, "wikiweb_identity_refused_total{reason=\"untrusted_peer\"} 0\n");
        expect_contains(fresh, "wikiweb_citations_total{status=\"not_read\"} 0\n");
        expect_contains(fresh, "wikiweb_query_duration_seconds_bucket{le=\"600.0\"} 0\n");

        metrics_count_ticket_removed("heartbeat");
        metrics_count_ticket_removed("heartbeat");
        metrics_count_ticket_removed("admin");
        metrics_count_query(true, NULL, 3 * USEC_PER_SEC);
        metrics_count_query(true, NULL, 700 * USEC_PER_SEC);
        metrics_count_query(false, "query_timeout", 120 * USEC_PER_SEC);
        metrics_count_query_phase("model", 1500 * USEC_PER_MSEC);
        metrics_count_model_tokens("prompt", 1000);
        metrics_count_model_tokens("completion", 20);
        metrics_count_sandbox_run("exited");
        metrics_count_identity_refused("untrusted_peer");
        metrics_count_identity_refused("untrusted_peer");
        metrics_count_identity_refused("cookie");
        metrics_count_citations("verified", 3);
        metrics_count_citations("not_found", 1);
        metrics_count_citations("verified", 0);
        metrics_count_http_request(200);
        metrics_count_http_request(200);
        metrics_count_http_request(503);
        metrics_http_connections_add(1);
        metrics_http_connections_add(1);
        metrics_http_connections_add(-1);
        metrics_event_streams_add(1);

        om = render(METRICS_FORMAT_OPENMETRICS);
        expect_contains(om, "# TYPE wikiweb_up gauge\nwikiweb_up 1\n");
        expect_contains(
                om,
                "wikiweb_state{state=\"idle\"} 0\n"
                "wikiweb_state{state=\"reserved\"} 0\n"
                "wikiweb_state{state=\"running\"} 1\n");
        expect_contains(
                om,
                "# HELP wikiweb_slots Admission slots in each state (WIKI_WEB_QUEUE_SLOTS in all).\n"
                "# TYPE wikiweb_slots gauge\n"
                "wikiweb_slots{state=\"idle\"} 1\n"
                "wikiweb_slots{state=\"reserved\"} 2\n"
                "wikiweb_slots{state=\"running\"} 5\n");
        expect_contains(om, "wikiweb_admission_open 0\n");
        expect_contains(om, "wikiweb_queue_length 4\n");
        expect_contains(om, "wikiweb_queue_max_length 100\n");
        expect_contains(om, "wikiweb_tickets_removed_total{reason=\"heartbeat\"} 2\n");
        expect_contains(om, "wikiweb_tickets_removed_total{reason=\"admin\"} 1\n");
        expect_contains(
                om,
                "wikiweb_queries_total{status=\"succeeded\"} 2\n"
                "wikiweb_queries_total{status=\"failed\",code=\"query_timeout\"} 1\n");
        expect_contains(
                om,
                "wikiweb_query_duration_seconds_bucket{le=\"2.5\"} 0\n"
                "wikiweb_query_duration_seconds_bucket{le=\"5.0\"} 1\n");
        expect_contains(
                om,
                "wikiweb_query_duration_seconds_bucket{le=\"120.0\"} 2\n"
                "wikiweb_query_duration_seconds_bucket{le=\"300.0\"} 2\n"
                "wikiweb_query_duration_seconds_bucket{le=\"600.0\"} 2\n"
                "wikiweb_query_duration_seconds_bucket{le=\"+Inf\"} 3\n"
                "wikiweb_query_duration_seconds_count 3\n"
                "wikiweb_query_duration_seconds_sum 823\n");
        expect_contains(om, "# UNIT wikiweb_query_phase_seconds seconds\n");
        expect_contains(om, "wikiweb_query_phase_seconds_total{phase=\"model\"} 1.5\n");
        expect_contains(om, "wikiweb_model_tokens_total{kind=\"prompt\"} 1000\n");
        expect_contains(om, "wikiweb_model_tokens_total{kind=\"completion\"} 20\n");
        expect_contains(om, "wikiweb_sandbox_runs_total{outcome=\"exited\"} 1\n");
        expect_contains(
                om,
                "wikiweb_identity_refused_total{reason=\"untrusted_peer\"} 2\n"
                "wikiweb_identity_refused_total{reason=\"invalid\"} 0\n");
        expect_contains(om, "wikiweb_identity_refused_total{reason=\"cookie\"} 1\n");
        expect_contains(
                om,
                "wikiweb_citations_total{status=\"verified\"} 3\n"
                "wikiweb_citations_total{status=\"not_found\"} 1\n"
                "wikiweb_citations_total{status=\"not_read\"} 0\n");
        expect_contains(
                om,
                "wikiweb_http_requests_total{code=\"200\"} 2\n"
                "wikiweb_http_requests_total{code=\"503\"} 1\n");
        expect_contains(om, "wikiweb_http_connections 1\n");
        expect_contains(om, "wikiweb_event_streams 1\n");
        expect_contains(om, "# TYPE process_cpu_seconds counter\n# UNIT process_cpu_seconds seconds\n");
        expect_contains(om, "process_cpu_seconds_total ");
        expect_contains(om, "# TYPE process_open_fds gauge\n");
        ASSERT_TRUE(strstr(om, "# EOF\n") && streq(strstr(om, "# EOF\n"), "# EOF\n"));

        prom = render(METRICS_FORMAT_PROMETHEUS);
        expect_contains(prom, "# TYPE wikiweb_queries_total counter\n");
        expect_contains(prom, "# TYPE wikiweb_query_phase_seconds_total counter\n");
        ASSERT_TRUE(!strstr(prom, "# UNIT") && !strstr(prom, "# EOF"));
}

TEST(event_loop_busy) {
        _cleanup_free_ char *text = NULL;

        metrics_reset();
        /* Two short iterations, and one that held the loop 30 ms of which
         * 4 ms were its own CPU time. */
        metrics_observe_loop_busy(300, 250);
        metrics_observe_loop_busy(1500, 900);
        metrics_observe_loop_busy(30 * USEC_PER_MSEC, 4 * USEC_PER_MSEC);
        text = render(METRICS_FORMAT_OPENMETRICS);
        expect_contains(text, "# TYPE wikiweb_event_loop_busy_seconds histogram\n");
        expect_contains(
                text,
                "wikiweb_event_loop_busy_seconds_bucket{le=\"0.001\"} 1\n"
                "wikiweb_event_loop_busy_seconds_bucket{le=\"0.002\"} 2\n");
        expect_contains(
                text,
                "wikiweb_event_loop_busy_seconds_bucket{le=\"0.02\"} 2\n"
                "wikiweb_event_loop_busy_seconds_bucket{le=\"0.05\"} 3\n");
        expect_contains(text, "wikiweb_event_loop_busy_seconds_count 3\n");
        expect_contains(
                text,
                "wikiweb_event_loop_busy_cpu_seconds_bucket{le=\"0.002\"} 2\n"
                "wikiweb_event_loop_busy_cpu_seconds_bucket{le=\"0.005\"} 3\n");
}

TEST(vec_overflow) {
        _cleanup_free_ char *text = NULL;

        metrics_reset();
        /* A client cannot make a series per request: past the room, "other". */
        for (unsigned code = 100; code < 100 + 3 * METRICS_VEC_MAX; code++)
                metrics_count_http_request(code);
        text = render(METRICS_FORMAT_PROMETHEUS);
        expect_contains(text, "wikiweb_http_requests_total{code=\"100\"} 1\n");
        expect_contains(text, "wikiweb_http_requests_total{code=\"other\"} 81\n");
        ASSERT_TRUE(!strstr(text, "code=\"139\""));
}

DEFINE_TEST_MAIN()
