/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/openmetrics.h"

const char *metrics_format_content_type(MetricsFormat f) {
        return f == METRICS_FORMAT_OPENMETRICS ? "application/openmetrics-text; version=1.0.0; charset=utf-8" :
                                                 "text/plain; version=0.0.4; charset=utf-8";
}

MetricsFormat metrics_format_from_accept(const char *accept) {
        /* Prometheus sends "application/openmetrics-text;version=1.0.0,...;q=0.5,..."
         * with a weight per type; any mention of OpenMetrics is enough:
         * it parses the text format too, whatever it prefers. */
        if (accept && strstr(accept, "application/openmetrics-text"))
                return METRICS_FORMAT_OPENMETRICS;
        return METRICS_FORMAT_PROMETHEUS;
}

void metrics_histogram_observe(MetricsHistogram *h, double v) {
        size_t i = 0;

        assert(h);
        assert(h->n_bounds <= METRICS_HISTOGRAM_MAX_BOUNDS);

        while (i < h->n_bounds && v > h->bounds[i])
                i++;
        h->counts[i]++;
        h->count++;
        h->sum += v;
}

void metrics_writer_init(MetricsWriter *w, MetricsFormat format) {
        assert(w);
        *w = (MetricsWriter){ .format = format };
}

void metrics_writer_done(MetricsWriter *w) {
        if (!w)
                return;
        free(w->buf);
        w->buf = NULL;
        w->size = w->allocated = 0;
}

static bool reserve(MetricsWriter *w, size_t n) {
        size_t want;
        char *p;

        if (w->error < 0)
                return false;
        if (w->size + n + 1 <= w->allocated)
                return true;
        want = MAX(w->allocated * 2, w->size + n + 1);
        want = MAX(want, (size_t) 4096);
        p = realloc(w->buf, want);
        if (!p) {
                w->error = -ENOMEM;
                return false;
        }
        w->buf = p;
        w->allocated = want;
        return true;
}

static void put(MetricsWriter *w, const char *s, size_t n) {
        if (!reserve(w, n))
                return;
        memcpy(w->buf + w->size, s, n);
        w->size += n;
        w->buf[w->size] = 0;
}

static void puts_(MetricsWriter *w, const char *s) {
        put(w, s, strlen(s));
}

_printf_(2, 3) static void putf(MetricsWriter *w, const char *fmt, ...) {
        char small[128];
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vsnprintf(small, sizeof small, fmt, ap);
        va_end(ap);
        /* Only numbers and names go through here: they fit. */
        assert(n >= 0 && (size_t) n < sizeof small);
        put(w, small, (size_t) n);
}

/* Backslash and line feed always; the double quote in label values, and in
 * OpenMetrics' HELP. */
static void put_escaped(MetricsWriter *w, const char *s, bool quote) {
        for (const char *p = s; *p; p++)
                switch (*p) {
                case '\\':
                        puts_(w, "\\\\");
                        break;
                case '\n':
                        puts_(w, "\\n");
                        break;
                case '"':
                        puts_(w, quote ? "\\\"" : "\"");
                        break;
                default:
                        put(w, p, 1);
                }
}

/* A number as both formats read it: integers without exponent, "+Inf",
 * "-Inf", "NaN"; a bucket bound keeps a ".0" (le="1.0", as client
 * libraries write it). */
static void put_double(MetricsWriter *w, double v, bool bound) {
        char buf[64];

        if (isnan(v))
                puts_(w, "NaN");
        else if (isinf(v))
                puts_(w, v > 0 ? "+Inf" : "-Inf");
        else if (v == floor(v) && fabs(v) < 9007199254740992.0) {
                /* Integral (most values): exact, and the fast path. */
                snprintf(buf, sizeof buf, "%.0f", v);
                puts_(w, buf);
                if (bound)
                        puts_(w, ".0");
        } else {
                snprintf(buf, sizeof buf, "%.17g", v);
                /* The shortest form that reads back the same. */
                for (int prec = 1; prec < 17; prec++) {
                        char t[64];

                        snprintf(t, sizeof t, "%.*g", prec, v);
                        if (strtod(t, NULL) == v) {
                                memcpy(buf, t, sizeof buf);
                                break;
                        }
                }
                puts_(w, buf);
                if (bound && !strpbrk(buf, ".eE"))
                        puts_(w, ".0");
        }
}

void metrics_family(MetricsWriter *w, const char *name, MetricType type, const char *unit, const char *help) {
        static const char *const type_names[_METRIC_TYPE_MAX] = {
                [METRIC_COUNTER] = "counter",
                [METRIC_GAUGE] = "gauge",
                [METRIC_HISTOGRAM] = "histogram",
        };
        bool om = w->format == METRICS_FORMAT_OPENMETRICS;
        /* The text format names a counter family by its samples. */
        const char *suffix = !om && type == METRIC_COUNTER ? "_total" : "";

        assert(name);
        assert(help);
        assert(type >= 0 && type < _METRIC_TYPE_MAX);
        assert(strlen(name) + 1 < sizeof w->family);

        snprintf(w->family, sizeof w->family, "%s", name);
        w->type = type;

        putf(w, "# HELP %s%s ", name, suffix);
        put_escaped(w, help, om);
        puts_(w, "\n");
        putf(w, "# TYPE %s%s %s\n", name, suffix, type_names[type]);
        if (om && unit)
                putf(w, "# UNIT %s %s\n", name, unit);
}

/* name{labels[,extra="value"]} */
static void put_series(
        MetricsWriter *w,
        const char *suffix,
        const char *const *labels,
        const char *extra,
        const char *extra_value) {
        bool any = false;

        puts_(w, w->family);
        puts_(w, suffix);
        for (const char *const *l = labels; l && l[0] && l[1]; l += 2) {
                puts_(w, any ? "," : "{");
                puts_(w, l[0]);
                puts_(w, "=\"");
                put_escaped(w, l[1], true);
                puts_(w, "\"");
                any = true;
        }
        if (extra) {
                puts_(w, any ? "," : "{");
                puts_(w, extra);
                puts_(w, "=\"");
                puts_(w, extra_value);
                puts_(w, "\"");
                any = true;
        }
        if (any)
                puts_(w, "}");
        puts_(w, " ");
}

void metrics_sample_u64(MetricsWriter *w, const char *const *labels, uint64_t value) {
        put_series(w, w->type == METRIC_COUNTER ? "_total" : "", labels, NULL, NULL);
        putf(w, "%" PRIu64 "\n", value);
}

void metrics_sample_double(MetricsWriter *w, const char *const *labels, double value) {
        put_series(w, w->type == METRIC_COUNTER ? "_total" : "", labels, NULL, NULL);
        put_double(w, value, false);
        puts_(w, "\n");
}

void metrics_sample_histogram(MetricsWriter *w, const char *const *labels, const MetricsHistogram *h) {
        uint64_t cumulative = 0;

        assert(w->type == METRIC_HISTOGRAM);
        assert(h->n_bounds <= METRICS_HISTOGRAM_MAX_BOUNDS);

        for (size_t i = 0; i <= h->n_bounds; i++) {
                char le[64];
                MetricsWriter b = { .format = w->format };

                cumulative += h->counts[i];
                if (i < h->n_bounds) {
                        /* The bound, formatted by the same code as any number. */
                        put_double(&b, h->bounds[i], true);
                        snprintf(le, sizeof le, "%s", b.buf ? b.buf : "");
                        metrics_writer_done(&b);
                } else
                        snprintf(le, sizeof le, "+Inf");
                put_series(w, "_bucket", labels, "le", le);
                putf(w, "%" PRIu64 "\n", cumulative);
        }
        put_series(w, "_count", labels, NULL, NULL);
        putf(w, "%" PRIu64 "\n", h->count);
        put_series(w, "_sum", labels, NULL, NULL);
        put_double(w, h->sum, false);
        puts_(w, "\n");
}

int metrics_writer_finish(MetricsWriter *w, char **ret, size_t *ret_size) {
        assert(ret);

        if (w->format == METRICS_FORMAT_OPENMETRICS)
                puts_(w, "# EOF\n");
        else if (!w->buf)
                puts_(w, "");
        if (w->error < 0 || !w->buf) {
                metrics_writer_done(w);
                return -ENOMEM;
        }
        *ret = w->buf;
        if (ret_size)
                *ret_size = w->size;
        w->buf = NULL;
        w->size = w->allocated = 0;
        return 0;
}
