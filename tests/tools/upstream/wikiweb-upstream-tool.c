/* SPDX-License-Identifier: MIT */
/* A test driver for src/query/upstream.c (and the MediaWiki client): runs a
 * real sd-event loop, performs the operations named on the command line and
 * prints one JSON object per operation on stdout. Used by tests/e2e and
 * tests/bench; not installed.
 *
 *   wikiweb-upstream-tool [options] fetch URL
 *   wikiweb-upstream-tool [options] fetch-n N URL      N sequential fetches (bench)
 *   wikiweb-upstream-tool [options] lateness N URL     N concurrent fetches while a
 *                                                      10 ms timer measures loop lateness
 *   wikiweb-upstream-tool [options] cancel URL         3 concurrent fetches, the second
 *                                                      freed after 200 ms: 2 callbacks
 * options: --allow HOST (repeatable) --wiki-url URL --llm-url URL
 *          --max-bytes N --timeout-ms N --method GET|POST --data STRING
 *          --header "Name: value" (repeatable) --content-type TYPE
 *          --connect-timeout-ms N --limit N (wiki search)
 *   wikiweb-upstream-tool --wiki-url URL [--wiki-user U --wiki-password-file F]
 *          wiki search:QUERY read:TITLE ...   (or "wiki -": commands on stdin) */

#include <getopt.h>
#include <json-c/json.h>
#include <systemd/sd-event.h>

#include "query/destination.h"
#include "query/upstream.h"
#include "query/wiki-client.h"
#include "shared/macro.h"
#include "shared/time-util.h"
#include "tools.h"

#define MAX_HEADERS 16

static const char *arg_method = "GET";
static const char *arg_data;
static const char *arg_content_type;
static const char *arg_headers[MAX_HEADERS + 1];
static size_t arg_n_headers;
static char *arg_allow[33];
static size_t arg_n_allow;
static const char *arg_wiki_url;
static const char *arg_llm_url;
static const char *arg_wiki_user;
static const char *arg_wiki_password_file;
static uint64_t arg_max_bytes = 8 * 1024 * 1024;
static uint64_t arg_timeout_ms = 30000;
static uint64_t arg_connect_timeout_ms = 0;

static sd_event *event;
static Upstream *upstream;
static unsigned pending;

static unsigned arg_limit = 5;

unsigned tool_limit(void) {
        return arg_limit;
}

const char *tool_startswith(const char *s, const char *prefix) {
        size_t n = strlen(prefix);
        return strncmp(s, prefix, n) == 0 ? s + n : NULL;
}

void tool_print_json(json_object *o) {
        fputs(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE),
              stdout);
        fputc('\n', stdout);
        fflush(stdout);
}

static json_object *response_json(const UpstreamResponse *r, usec_t elapsed) {
        json_object *o = json_object_new_object();

        json_object_object_add(o, "ok", json_object_new_boolean(r->error >= 0));
        json_object_object_add(
                o, "error", r->error >= 0 ? NULL : json_object_new_string(api_error_to_string(r->api_error)));
        json_object_object_add(o, "message", r->message ? json_object_new_string(r->message) : NULL);
        json_object_object_add(o, "status", json_object_new_int64(r->status));
        json_object_object_add(o, "body_size", json_object_new_int64((int64_t) r->body_size));
        json_object_object_add(
                o, "body", r->body ? json_object_new_string_len(r->body, (int) r->body_size) : NULL);
        json_object_object_add(
                o, "content_type", r->content_type ? json_object_new_string(r->content_type) : NULL);
        json_object_object_add(
                o, "retry_after", r->retry_after ? json_object_new_string(r->retry_after) : NULL);
        json_object_object_add(
                o,
                "mediawiki_api_error",
                r->mediawiki_api_error ? json_object_new_string(r->mediawiki_api_error) : NULL);
        json_object_object_add(o, "url", r->url ? json_object_new_string(r->url) : NULL);
        json_object_object_add(o, "redirects", json_object_new_int((int) r->redirects));
        json_object_object_add(o, "denied_by", r->denied_by ? json_object_new_string(r->denied_by) : NULL);
        json_object_object_add(o, "elapsed_ms", json_object_new_double((double) elapsed / 1000.0));
        return o;
}

static UpstreamRequest make_request(const char *url) {
        return (UpstreamRequest){
                .method = arg_method,
                .url = url,
                .headers = arg_headers,
                .body = arg_data,
                .body_size = arg_data ? strlen(arg_data) : 0,
                .content_type = arg_content_type,
                .deadline = usec_add(now(CLOCK_MONOTONIC), arg_timeout_ms * USEC_PER_MSEC),
        };
}

/* ---- fetch ---- */

typedef struct Fetch {
        UpstreamOperation *op;
        usec_t started;
        bool print;
} Fetch;

static void upstream_tool_on_fetch_done(
        UpstreamOperation *op, int error, const UpstreamResponse *r, void *userdata) {
        Fetch *f = userdata;
        bool ok = error >= 0;

        if (f->print) {
                json_object *o = response_json(r, now(CLOCK_MONOTONIC) - f->started);
                tool_print_json(o);
                json_object_put(o);
        }
        f->op = upstream_operation_free(f->op); /* r is gone now */
        if (--pending == 0)
                (void) sd_event_exit(event, ok ? 0 : 3);
}

static int cmd_fetch(const char *url) {
        Fetch f = { .started = now(CLOCK_MONOTONIC), .print = true };
        UpstreamRequest req = make_request(url);
        int r;

        r = upstream_start(upstream, &req, upstream_tool_on_fetch_done, &f, &f.op);
        if (r < 0)
                return r;
        pending = 1;
        r = sd_event_loop(event);
        upstream_operation_free(f.op);
        return r;
}

/* ---- fetch-n: sequential, for the benchmark ---- */

typedef struct Sequence {
        const char *url;
        unsigned left, failures, done;
        UpstreamOperation *op;
} Sequence;

static void upstream_tool_on_sequence_done(
        UpstreamOperation *op, int error, const UpstreamResponse *r, void *userdata);

static int sequence_next(Sequence *s) {
        UpstreamRequest req = make_request(s->url);
        return upstream_start(upstream, &req, upstream_tool_on_sequence_done, s, &s->op);
}

static void upstream_tool_on_sequence_done(
        UpstreamOperation *op, int error, const UpstreamResponse *r, void *userdata) {
        Sequence *s = userdata;

        if (error < 0)
                s->failures++;
        s->done++;
        s->op = upstream_operation_free(s->op);
        if (--s->left == 0 || sequence_next(s) < 0)
                (void) sd_event_exit(event, 0);
}

static int cmd_fetch_n(unsigned n, const char *url) {
        Sequence s = { .url = url, .left = n };
        usec_t t0 = now(CLOCK_MONOTONIC);
        json_object *o;
        int r;

        if (n == 0)
                return -EINVAL;
        r = sequence_next(&s);
        if (r < 0)
                return r;
        r = sd_event_loop(event);
        o = json_object_new_object();
        json_object_object_add(o, "count", json_object_new_int((int) s.done));
        json_object_object_add(o, "failures", json_object_new_int((int) s.failures));
        json_object_object_add(
                o, "elapsed_ms", json_object_new_double((double) (now(CLOCK_MONOTONIC) - t0) / 1000.0));
        tool_print_json(o);
        json_object_put(o);
        upstream_operation_free(s.op);
        return s.failures > 0 ? 3 : r;
}

/* ---- lateness: concurrent slow fetches and a 10 ms ticker ---- */

#define TICK_USEC (10 * USEC_PER_MSEC)

#define TICK_SAMPLES 100000

typedef struct Ticker {
        usec_t next;
        usec_t max_late, sum_late;
        unsigned ticks;
        usec_t *samples;
} Ticker;

static int cmp_usec(const void *a, const void *b) {
        usec_t x = *(const usec_t *) a, y = *(const usec_t *) b;
        return x < y ? -1 : x > y;
}

static int upstream_tool_on_tick(sd_event_source *s, uint64_t usec, void *userdata) {
        Ticker *t = userdata;
        usec_t n = now(CLOCK_MONOTONIC);
        usec_t late = n > t->next ? n - t->next : 0;

        t->max_late = MAX(t->max_late, late);
        t->sum_late += late;
        if (t->ticks < TICK_SAMPLES)
                t->samples[t->ticks] = late;
        t->ticks++;
        t->next = n + TICK_USEC;
        (void) sd_event_source_set_time(s, t->next);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ON);
        return 0;
}

static int cmd_lateness(unsigned n, const char *url) {
        _cleanup_free_ Fetch *f = NULL;
        Ticker t = { 0 };
        _cleanup_free_ usec_t *samples = calloc(TICK_SAMPLES, sizeof(usec_t));
        sd_event_source *tick = NULL;
        json_object *o;
        int r;

        if (n == 0 || n > 64)
                return -EINVAL;
        f = calloc(n, sizeof *f);
        if (!f || !samples)
                return -ENOMEM;
        t.samples = samples;
        for (unsigned i = 0; i < n; i++) {
                UpstreamRequest req = make_request(url);
                f[i] = (Fetch){ .started = now(CLOCK_MONOTONIC), .print = true };
                r = upstream_start(upstream, &req, upstream_tool_on_fetch_done, &f[i], &f[i].op);
                if (r < 0)
                        return r;
                pending++;
        }
        t.next = now(CLOCK_MONOTONIC) + TICK_USEC;
        /* accuracy 1 us: sd-event's default 250 ms slack would hide lateness */
        r = sd_event_add_time(event, &tick, CLOCK_MONOTONIC, t.next, 1, upstream_tool_on_tick, &t);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(tick, "upstream-tool-tick");
        r = sd_event_loop(event);
        sd_event_source_disable_unref(tick);
        o = json_object_new_object();
        json_object_object_add(o, "ticks", json_object_new_int((int) t.ticks));
        json_object_object_add(o, "max_lateness_ms", json_object_new_double((double) t.max_late / 1000.0));
        {
                size_t k = MIN((size_t) t.ticks, (size_t) TICK_SAMPLES);
                qsort(samples, k, sizeof(usec_t), cmp_usec);
                json_object_object_add(
                        o,
                        "p99_lateness_ms",
                        json_object_new_double(k ? (double) samples[k * 99 / 100] / 1000.0 : 0.0));
        }
        json_object_object_add(
                o,
                "mean_lateness_ms",
                json_object_new_double(t.ticks ? (double) t.sum_late / t.ticks / 1000.0 : 0.0));
        tool_print_json(o);
        json_object_put(o);
        for (unsigned i = 0; i < n; i++)
                upstream_operation_free(f[i].op);
        return r;
}

/* ---- cancel: free one of three operations while in flight ---- */

typedef struct Cancel {
        Fetch f[3];
        unsigned callbacks;
        bool cancelled_called;
} Cancel;

static void upstream_tool_on_cancel_done(
        UpstreamOperation *op, int error, const UpstreamResponse *r, void *userdata) {
        Cancel *c = userdata;

        c->callbacks++;
        if (op == c->f[1].op)
                c->cancelled_called = true; /* must never happen */
        for (size_t i = 0; i < ELEMENTSOF(c->f); i++)
                if (c->f[i].op == op)
                        c->f[i].op = upstream_operation_free(op);
        if (!c->f[0].op && !c->f[2].op)
                (void) sd_event_exit(event, 0);
}

static int upstream_tool_on_cancel_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Cancel *c = userdata;

        c->f[1].op = upstream_operation_free(c->f[1].op);
        return 0;
}

static int cmd_cancel(const char *url) {
        Cancel c = { 0 };
        sd_event_source *t = NULL;
        json_object *o;
        int r;

        for (size_t i = 0; i < ELEMENTSOF(c.f); i++) {
                UpstreamRequest req = make_request(url);
                r = upstream_start(upstream, &req, upstream_tool_on_cancel_done, &c, &c.f[i].op);
                if (r < 0)
                        return r;
        }
        r = sd_event_add_time_relative(
                event, &t, CLOCK_MONOTONIC, 200 * USEC_PER_MSEC, 1, upstream_tool_on_cancel_timer, &c);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(t, "upstream-tool-cancel");
        r = sd_event_loop(event);
        sd_event_source_disable_unref(t);
        o = json_object_new_object();
        json_object_object_add(o, "callbacks", json_object_new_int((int) c.callbacks));
        json_object_object_add(o, "cancelled_called", json_object_new_boolean(c.cancelled_called));
        tool_print_json(o);
        json_object_put(o);
        for (size_t i = 0; i < ELEMENTSOF(c.f); i++)
                upstream_operation_free(c.f[i].op);
        return r;
}

static int parse_u64(const char *s, uint64_t *ret) {
        char *end;
        unsigned long long v;

        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno || end == s || *end || s[0] == '-')
                return -EINVAL;
        *ret = v;
        return 0;
}

static int read_password(const char *path, char **ret) {
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        char buf[1024];
        size_t n;

        if (!f)
                return -errno;
        n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = 0;
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
                buf[--n] = 0;
        *ret = strdup(buf);
        explicit_bzero(buf, sizeof buf);
        return *ret ? 0 : -ENOMEM;
}

int main(int argc, char **argv) {
        static const struct option options[] = {
                { "allow", required_argument, NULL, 'a' },
                { "wiki-url", required_argument, NULL, 'w' },
                { "llm-url", required_argument, NULL, 'l' },
                { "wiki-user", required_argument, NULL, 'u' },
                { "wiki-password-file", required_argument, NULL, 'p' },
                { "max-bytes", required_argument, NULL, 'm' },
                { "timeout-ms", required_argument, NULL, 't' },
                { "method", required_argument, NULL, 'X' },
                { "data", required_argument, NULL, 'd' },
                { "header", required_argument, NULL, 'H' },
                { "content-type", required_argument, NULL, 'c' },
                { "limit", required_argument, NULL, 'n' },
                { "connect-timeout-ms", required_argument, NULL, 'C' },
                { 0 },
        };
        _cleanup_(destination_policy_freep) DestinationPolicy *policy = NULL;
        const char *cmd;
        int c, r;

        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0) {
                switch (c) {
                case 'a':
                        if (arg_n_allow >= ELEMENTSOF(arg_allow) - 1)
                                return 2;
                        arg_allow[arg_n_allow++] = optarg;
                        break;
                case 'w':
                        arg_wiki_url = optarg;
                        break;
                case 'l':
                        arg_llm_url = optarg;
                        break;
                case 'u':
                        arg_wiki_user = optarg;
                        break;
                case 'p':
                        arg_wiki_password_file = optarg;
                        break;
                case 'm':
                        if (parse_u64(optarg, &arg_max_bytes) < 0)
                                return 2;
                        break;
                case 't':
                        if (parse_u64(optarg, &arg_timeout_ms) < 0)
                                return 2;
                        break;
                case 'X':
                        arg_method = optarg;
                        break;
                case 'd':
                        arg_data = optarg;
                        break;
                case 'H':
                        if (arg_n_headers >= MAX_HEADERS)
                                return 2;
                        arg_headers[arg_n_headers++] = optarg;
                        break;
                case 'c':
                        arg_content_type = optarg;
                        break;
                case 'C':
                        if (parse_u64(optarg, &arg_connect_timeout_ms) < 0)
                                return 2;
                        break;
                case 'n': {
                        uint64_t v;
                        if (parse_u64(optarg, &v) < 0 || v > 1000)
                                return 2;
                        arg_limit = (unsigned) v;
                        break;
                }
                default:
                        return 2;
                }
        }
        if (optind >= argc) {
                fprintf(stderr,
                        "usage: %s [options] fetch URL | fetch-n N URL | lateness N URL | wiki ...\n",
                        argv[0]);
                return 2;
        }
        cmd = argv[optind];

        r = destination_policy_new(arg_wiki_url, arg_llm_url, arg_allow, &policy);
        if (r < 0) {
                fprintf(stderr, "bad policy: %s\n", strerror(-r));
                return 2;
        }
        r = sd_event_default(&event);
        if (r < 0)
                return 1;
        r = upstream_new(event, policy, arg_max_bytes, &upstream);
        if (r < 0)
                return 1;
        upstream_set_connect_timeout(upstream, arg_connect_timeout_ms * USEC_PER_MSEC);

        if (streq(cmd, "fetch") && argc - optind == 2)
                r = cmd_fetch(argv[optind + 1]);
        else if (streq(cmd, "cancel") && argc - optind == 2)
                r = cmd_cancel(argv[optind + 1]);
        else if ((streq(cmd, "fetch-n") || streq(cmd, "lateness")) && argc - optind == 3) {
                uint64_t n;
                if (parse_u64(argv[optind + 1], &n) < 0 || n > 1000000)
                        r = -EINVAL;
                else if (streq(cmd, "fetch-n"))
                        r = cmd_fetch_n((unsigned) n, argv[optind + 2]);
                else
                        r = cmd_lateness((unsigned) n, argv[optind + 2]);
        } else if (streq(cmd, "wiki") && arg_wiki_url) {
                _cleanup_free_ char *password = NULL;
                WikiClientSettings ws = {
                        .api_url = arg_wiki_url,
                        .username = arg_wiki_user,
                        .deadline = usec_add(now(CLOCK_MONOTONIC), arg_timeout_ms * USEC_PER_MSEC),
                };
                if (arg_wiki_password_file) {
                        r = read_password(arg_wiki_password_file, &password);
                        if (r < 0) {
                                fprintf(stderr, "cannot read the password file\n");
                                return 2;
                        }
                        ws.password = password;
                }
                r = wiki_main(upstream, event, argc - optind - 1, argv + optind + 1, &ws);
                if (password)
                        explicit_bzero(password, strlen(password));
        } else {
                fprintf(stderr, "bad command line\n");
                r = -EINVAL;
        }

        upstream = upstream_free(upstream);
        event = sd_event_unref(event);
        if (r < 0) {
                fprintf(stderr, "error: %s\n", strerror(-r));
                return 1;
        }
        return r;
}
