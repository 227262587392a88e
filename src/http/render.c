/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <json-c/json.h>
#include <math.h>

#include "http/render.h"
#include "shared/json-util.h"
#include "shared/macro.h"
#include "shared/time-util.h"

/* Each adds key to o and returns false when out of memory (whatever was
 * made is freed). A NULL string or an unset time is a JSON null. */

static bool render_add(json_object *o, const char *key, json_object *v) {
        if (json_object_object_add(o, key, v) < 0) {
                json_object_put(v);
                return false;
        }
        return true;
}

static bool render_add_string(json_object *o, const char *key, const char *s) {
        json_object *v = NULL;

        if (s && !(v = json_object_new_string(s)))
                return false;
        return render_add(o, key, v);
}

static bool render_add_int(json_object *o, const char *key, int64_t i) {
        json_object *v = json_object_new_int64(i);

        return v && render_add(o, key, v);
}

static bool render_add_time(json_object *o, const char *key, usec_t t) {
        char buf[RFC3339_MS_MAX];

        return render_add_string(o, key, t == USEC_INFINITY ? NULL : format_rfc3339_ms(buf, t));
}

static json_object *render_artifact(const HistoryArtifactInfo *a) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        _cleanup_free_ char *url = NULL;

        if (!o || asprintf(&url, "/api/v1/artifacts/%s", a->id ? a->id : "") < 0)
                return NULL;
        if (!render_add_string(o, "id", a->id) || !render_add_string(o, "name", a->name) ||
            !render_add_string(o, "media_type", a->media_type) ||
            !render_add_int(o, "size_bytes", a->size_bytes) || !render_add_string(o, "sha256", a->sha256) ||
            !render_add_string(o, "download_url", url))
                return NULL;
        return TAKE_PTR(o);
}

/* The stored sources or citations, or [] when they are not an array. */
static json_object *render_sources(const char *text) {
        json_object *sources = json_tokener_parse(text ? text : "[]");

        if (!json_object_is_type(sources, json_type_array)) {
                json_object_put(sources);
                sources = json_object_new_array();
        }
        return sources;
}

/* A new array of n items, the i-th rendered by render(items, i); NULL when
 * out of memory. */
static json_object *
        render_array(const void *items, size_t n, json_object *(*render)(const void *items, size_t i)) {
        _cleanup_(json_object_putp) json_object *a = json_object_new_array_ext((int) n);

        if (!a)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                json_object *v = render(items, i);

                if (!v || json_object_array_add(a, v) < 0) {
                        json_object_put(v);
                        return NULL;
                }
        }
        return TAKE_PTR(a);
}

static json_object *render_artifact_at(const void *items, size_t i) {
        return render_artifact((const HistoryArtifactInfo *) items + i);
}

static json_object *render_record_at(const void *items, size_t i) {
        return render_history_record((const HistoryRecord *) items + i);
}

json_object *render_history_record(const HistoryRecord *r) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        json_object *sources, *citations, *artifacts, *error, *timings, *usage;

        assert(r);

        if (!o || !render_add_string(o, "id", r->id) || !render_add_string(o, "status", r->status) ||
            !render_add_string(o, "question", r->question) || !render_add_string(o, "answer", r->answer))
                return NULL;

        sources = render_sources(r->sources_json);
        if (!sources || !render_add(o, "sources", sources))
                return NULL;

        /* Stored by history_finish() only after checking it is an array, as
         * the sources. */
        citations = render_sources(r->citations_json);
        if (!citations || !render_add(o, "citations", citations))
                return NULL;

        artifacts = render_array(r->artifacts, r->n_artifacts, render_artifact_at);
        if (!artifacts || !render_add(o, "artifacts", artifacts))
                return NULL;

        if (r->error_code) {
                error = json_object_new_object();
                if (!error || !render_add(o, "error", error) ||
                    !render_add_string(error, "code", r->error_code) ||
                    !render_add_string(error, "message", r->error_message))
                        return NULL;
        } else if (!render_add(o, "error", NULL))
                return NULL;

        timings = json_object_new_object();
        if (!timings || !render_add(o, "timings_ms", timings) ||
            !render_add_int(timings, "queue", (int64_t) r->timings.queue_ms) ||
            !render_add_int(timings, "wiki", (int64_t) r->timings.wiki_ms) ||
            !render_add_int(timings, "model", (int64_t) r->timings.model_ms) ||
            !render_add_int(timings, "sandbox", (int64_t) r->timings.sandbox_ms) ||
            !render_add_int(timings, "cleanup", (int64_t) r->timings.cleanup_ms) ||
            !render_add_int(timings, "total", (int64_t) r->timings.total_ms))
                return NULL;

        usage = json_object_new_object();
        if (!usage || !render_add(o, "usage", usage) || !render_add_string(usage, "model", r->model) ||
            !render_add_int(usage, "prompt_tokens", (int64_t) r->prompt_tokens) ||
            !render_add_int(usage, "completion_tokens", (int64_t) r->completion_tokens))
                return NULL;

        if (!render_add_string(o, "sandbox", r->sandbox))
                return NULL;

        if (!render_add_time(o, "created_at", r->created_at) ||
            !render_add_time(o, "finished_at", r->finished_at))
                return NULL;

        return TAKE_PTR(o);
}

json_object *render_history_page(const HistoryPage *p) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        json_object *items;

        assert(p);

        if (!o)
                return NULL;
        items = render_array(p->records, p->n_records, render_record_at);
        if (!items || !render_add(o, "items", items) ||
            !render_add_string(o, "next_cursor", p->next_cursor[0] ? p->next_cursor : NULL))
                return NULL;
        return TAKE_PTR(o);
}

const char *render_body(json_object *o) {
        return json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
}

/* --- The status object of API.md 6 ------------------------------------------ */

/* Seconds as a JSON number with millisecond precision ("84.0", "12.345"):
 * whole milliseconds written by hand, which costs a fraction of a "%.3f"
 * (the status object has up to five of these). */
static json_object *json_seconds(double seconds) {
        char buf[32], *p = buf + sizeof buf;
        uint64_t ms, whole;
        unsigned frac;

        if (!isfinite(seconds) || seconds < 0)
                seconds = 0;
        if (seconds > 1e12) /* some 30,000 years: nothing the queue says */
                seconds = 1e12;
        ms = (uint64_t) llround(seconds * 1000.0);
        whole = ms / 1000;
        frac = (unsigned) (ms % 1000);
        *--p = 0;
        /* The fraction without trailing zeros, but at least one digit. */
        if (frac == 0)
                *--p = '0';
        else {
                unsigned digits = 3;

                while (frac % 10 == 0) {
                        frac /= 10;
                        digits--;
                }
                for (unsigned i = 0; i < digits; i++) {
                        *--p = (char) ('0' + frac % 10);
                        frac /= 10;
                }
        }
        *--p = '.';
        do {
                *--p = (char) ('0' + whole % 10);
                whole /= 10;
        } while (whole > 0);
        return json_object_new_double_s(seconds, p);
}

static json_object *json_time(usec_t mono) {
        char buf[RFC3339_MS_MAX];

        if (mono == USEC_INFINITY)
                return NULL;
        return json_object_new_string(format_rfc3339_ms(buf, monotonic_to_wallclock(mono)));
}

/* The status object is asked for most of all (a waiting page polls it):
 * its keys are literals, each added once, so json-c neither copies nor
 * looks them up. add_key() takes a NULL value as JSON null; add_value()
 * takes a NULL value as a failed allocation, as json_add() does. */
static int add_key(json_object *o, const char *literal_key, json_object *value) {
        if (json_object_object_add_ex(
                    o, literal_key, value, JSON_C_OBJECT_ADD_KEY_IS_NEW | JSON_C_OBJECT_ADD_CONSTANT_KEY) < 0) {
                json_object_put(value);
                return -ENOMEM;
        }
        return 0;
}

static int add_value(json_object *o, const char *literal_key, json_object *value) {
        if (!value)
                return -ENOMEM;
        return add_key(o, literal_key, value);
}

static json_object *ticket_to_json(const TicketView *t) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        add_key(o, "id", json_object_new_string(t->id));
        add_key(o, "status", json_object_new_string(ticket_status_to_string(t->status)));
        add_key(o, "position", json_object_new_uint64(t->position));
        add_key(o, "joined_at", json_time(t->joined));
        add_key(o, "heartbeat_expires_at", json_time(t->heartbeat_deadline));
        add_key(o,
                "reservation_expires_at",
                t->status == TICKET_RESERVED ? json_time(t->reservation_deadline) : NULL);
        return o;
}

static json_object *render_running_query(const RenderRunningQuery *rq) {
        json_object *o = json_object_new_object();

        if (o &&
            (add_value(o, "id", json_string(rq->id)) < 0 ||
             add_value(o, "step", json_object_new_int64(rq->step)) < 0 ||
             add_value(o, "phase", json_string(rq->phase)) < 0)) {
                json_object_put(o);
                return NULL;
        }
        return o;
}

int render_status_add_wait_range(json_object *o, const WaitRange *range) {
        json_object *r = NULL;

        assert(o);

        if (range) {
                r = json_object_new_object();
                if (!r)
                        return -ENOMEM;
                add_key(r, "p10", json_seconds(range->p10));
                add_key(r, "p50", json_seconds(range->p50));
                add_key(r, "p90", json_seconds(range->p90));
        }
        if (add_key(o, "estimated_wait_range_seconds", r) < 0)
                return -ENOMEM;
        if (add_key(o, "wait_known", json_object_new_boolean(!!range)) < 0)
                return -ENOMEM;
        return 0;
}

json_object *render_slots(const AdmissionSlotCounts *c) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();

        assert(c);

        if (!o)
                return NULL;
        if (add_value(o, "total", json_object_new_uint64(c->total)) < 0 ||
            add_value(o, "idle", json_object_new_uint64(c->idle)) < 0 ||
            add_value(o, "reserved", json_object_new_uint64(c->reserved)) < 0 ||
            add_value(o, "running", json_object_new_uint64(c->running)) < 0)
                return NULL;
        return TAKE_PTR(o);
}

json_object *render_status(
        const AdmissionStatus *st,
        uint64_t reservation_seconds,
        uint64_t heartbeat_seconds,
        const RenderRunningQuery *running,
        const char *user) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        uint64_t hb = heartbeat_seconds;

        assert(st);

        if (!o)
                return NULL;
        add_key(o, "state", json_object_new_string(admission_state_to_string(st->state)));
        add_key(o, "queue_length", json_object_new_uint64(st->queue_length));
        add_key(o, "max_length", json_object_new_uint64(st->max_length));
        add_key(o, "ticket", st->has_ticket ? ticket_to_json(&st->ticket) : NULL);
        add_key(o,
                "estimated_wait_seconds",
                st->estimate_known ? json_seconds(st->estimated_wait_seconds) : NULL);
        add_key(o, "average_query_seconds", st->average_known ? json_seconds(st->average_query_seconds) : NULL);
        add_key(o, "reservation_seconds", json_object_new_uint64(reservation_seconds));
        add_key(o, "heartbeat_seconds", json_object_new_uint64(hb));
        add_key(o, "poll_after_seconds", json_object_new_uint64(hb / 3 > 0 ? hb / 3 : 1));
        if (add_value(o, "slots", render_slots(&st->slots)) < 0)
                return NULL;
        if (!running)
                add_key(o, "running_query", NULL);
        else if (add_value(o, "running_query", render_running_query(running)) < 0)
                return NULL;
        if (!user)
                add_key(o, "user", NULL);
        else if (add_value(o, "user", json_string(user)) < 0)
                return NULL;
        return TAKE_PTR(o);
}
