/* SPDX-License-Identifier: MIT */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shared/macro.h"

/* The text exposition of metrics, pure: families and samples in, bytes out.
 * Two formats, chosen by the scraper's Accept header as client_golang does:
 *
 *  - OpenMetrics 1.0 (application/openmetrics-text; version=1.0.0), what
 *    Prometheus asks for: "# TYPE", "# UNIT" and "# HELP" per family, a
 *    counter family named without its "_total" and sampled with it, "# EOF"
 *    at the end;
 *  - the Prometheus text format 0.0.4 (text/plain; version=0.0.4), for
 *    everything else (curl, promtool check metrics): the counter family
 *    named with "_total", no "# UNIT", no "# EOF".
 *
 * Label values are escaped (backslash, double quote, line feed), HELP text
 * too (backslash and line feed; in OpenMetrics the double quote as well).
 * Histogram buckets are written cumulative, with "+Inf", "_count" and
 * "_sum". Names are the caller's (checked by the unit test and promtool).
 *
 * Errors are sticky: the first allocation failure is kept and returned by
 * metrics_writer_finish(); the calls in between do nothing. */

typedef enum MetricsFormat {
        METRICS_FORMAT_OPENMETRICS,
        METRICS_FORMAT_PROMETHEUS,
        _METRICS_FORMAT_MAX,
        _METRICS_FORMAT_INVALID = -EINVAL,
} MetricsFormat;

typedef enum MetricType {
        METRIC_COUNTER,
        METRIC_GAUGE,
        METRIC_HISTOGRAM,
        _METRIC_TYPE_MAX,
        _METRIC_TYPE_INVALID = -EINVAL,
} MetricType;

/* The Content-Type of a format. */
const char *metrics_format_content_type(MetricsFormat f);
/* The format a scraper asks for with this Accept header (NULL: none). */
MetricsFormat metrics_format_from_accept(const char *accept);

/* A histogram's state: counts[i] is the number of observations v with
 * bounds[i-1] < v <= bounds[i] (counts[n_bounds]: above the last bound),
 * not cumulative; the writer makes them so. */
#define METRICS_HISTOGRAM_MAX_BOUNDS 16
typedef struct MetricsHistogram {
        const double *bounds; /* ascending, borrowed */
        size_t n_bounds;      /* <= METRICS_HISTOGRAM_MAX_BOUNDS */
        uint64_t counts[METRICS_HISTOGRAM_MAX_BOUNDS + 1];
        uint64_t count;
        double sum;
} MetricsHistogram;

void metrics_histogram_observe(MetricsHistogram *h, double v);

typedef struct MetricsWriter {
        MetricsFormat format;
        char *buf;
        size_t size, allocated;
        int error;
        /* The current family. */
        char family[128];
        MetricType type;
} MetricsWriter;

void metrics_writer_init(MetricsWriter *w, MetricsFormat format);
/* Free the buffer (after finish, or instead of it). */
void metrics_writer_done(MetricsWriter *w);

/* Start a family. name is the family's name: for a counter without
 * "_total"; with a unit, ending in "_" unit. unit may be NULL; help is
 * required (promtool wants it). */
void metrics_family(MetricsWriter *w, const char *name, MetricType type, const char *unit, const char *help);

/* One sample of the current family. labels: NULL, or name/value pairs
 * ending with NULL. A counter's sample gets "_total". */
void metrics_sample_u64(MetricsWriter *w, const char *const *labels, uint64_t value);
void metrics_sample_double(MetricsWriter *w, const char *const *labels, double value);
/* The samples of one histogram of the current family. */
void metrics_sample_histogram(MetricsWriter *w, const char *const *labels, const MetricsHistogram *h);

/* End the exposition ("# EOF" in OpenMetrics) and hand over the text
 * (NUL-terminated; *ret_size without the NUL; the caller frees it).
 * Returns 0 or -ENOMEM (the writer then holds nothing). */
int metrics_writer_finish(MetricsWriter *w, char **ret, size_t *ret_size);
