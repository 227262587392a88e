/* SPDX-License-Identifier: MIT */
/* The daemon's side of a scrape (API.md 12.3), in process: what
 * wikiwebd's render_metrics() does (the gauges read from an admission
 * machine with 1,000 waiting tickets, /proc/self for process_*, the
 * exposition of a registry that counted 100 queries), timed over many
 * runs. Prints the median and the 99th percentile. Target: under 1 ms. */
#include <stdio.h>
#include <stdlib.h>

#include "admission/admission.h"
#include "metrics/metrics.h"
#include "shared/macro.h"

#define RUNS 2000

static int cmp(const void *a, const void *b) {
        usec_t x = *(const usec_t *) a, y = *(const usec_t *) b;
        return x < y ? -1 : x > y;
}

int main(void) {
        static usec_t times[RUNS];
        Admission *a = NULL;
        const char *states[_ADMISSION_STATE_MAX];
        usec_t t = now(CLOCK_MONOTONIC);
        size_t size = 0;

        if (admission_new(
                    &(AdmissionSettings){ .reservation_usec = 60 * USEC_PER_SEC,
                                          .heartbeat_usec = 3600 * USEC_PER_SEC,
                                          .max_length = 2000,
                                          .slots = 1 },
                    &a) < 0)
                return EXIT_FAILURE;
        for (unsigned i = 0; i < 1000; i++) {
                SessionKey k = { .bytes = { 0 } };

                memcpy(k.bytes, &i, sizeof i);
                if (admission_join(a, &k, t) < 0)
                        return EXIT_FAILURE;
        }
        metrics_reset();
        for (unsigned i = 0; i < 100; i++) {
                metrics_count_query(i % 3 != 0, i % 3 != 0 ? NULL : "upstream_failed", (i + 1) * USEC_PER_SEC);
                metrics_count_http_request(i % 5 ? 200 : 503);
        }
        for (int i = 0; i < _ADMISSION_STATE_MAX; i++)
                states[i] = admission_state_to_string((AdmissionState) i);

        for (unsigned i = 0; i < RUNS; i++) {
                usec_t t0 = now(CLOCK_MONOTONIC);
                MetricsProcess p;
                MetricsGauges g = {
                        .states = states,
                        .n_states = ELEMENTSOF(states),
                        .state = (size_t) admission_get_state(a),
                        .admission_open = !admission_is_draining(a),
                        .queue_length = admission_queue_length(a),
                        .queue_max_length = admission_get_settings(a)->max_length,
                };
                char *text = NULL;

                if (metrics_read_process(&p) >= 0)
                        g.process = &p;
                if (metrics_render(METRICS_FORMAT_OPENMETRICS, &g, &text, &size) < 0)
                        return EXIT_FAILURE;
                free(text);
                times[i] = now(CLOCK_MONOTONIC) - t0;
        }
        qsort(times, RUNS, sizeof times[0], cmp);
        printf("render (gauges, /proc/self, %zu bytes) with 1000 tickets waiting and 100 queries counted: "
               "median %.1f us, p99 %.1f us, over %d runs\n",
               size,
               (double) times[RUNS / 2],
               (double) times[RUNS * 99 / 100],
               RUNS);
        admission_free(a);
        return EXIT_SUCCESS;
}
