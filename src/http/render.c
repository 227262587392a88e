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

/* Seconds as a JSON number with millisecond precision ("84.0", "12.345"). */
static json_object *json_seconds(double seconds) {
        char buf[64];
        size_t n;

        if (!isfinite(seconds) || seconds < 0)
                seconds = 0;
        snprintf(buf, sizeof buf, "%.3f", round(seconds * 1000.0) / 1000.0);
        /* Trim trailing zeros but keep one digit after the point. */
        n = strlen(buf);
        while (n > 2 && buf[n - 1] == '0' && buf[n - 2] != '.')
                buf[--n] = 0;
        return json_object_new_double_s(seconds, buf);
}

static json_object *json_time(usec_t mono) {
        char buf[RFC3339_MS_MAX];

        if (mono == USEC_INFINITY)
                return NULL;
        return json_object_new_string(format_rfc3339_ms(buf, monotonic_to_wallclock(mono)));
}

static json_object *ticket_to_json(const TicketView *t) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        json_object_object_add(o, "id", json_object_new_string(t->id));
        json_object_object_add(o, "status", json_object_new_string(ticket_status_to_string(t->status)));
        json_object_object_add(o, "position", json_object_new_uint64(t->position));
        json_object_object_add(o, "joined_at", json_time(t->joined));
        json_object_object_add(o, "heartbeat_expires_at", json_time(t->heartbeat_deadline));
        json_object_object_add(
                o,
                "reservation_expires_at",
                t->status == TICKET_RESERVED ? json_time(t->reservation_deadline) : NULL);
        return o;
}

static json_object *render_running_query(const RenderRunningQuery *rq) {
        json_object *o = json_object_new_object();

        if (o &&
            (json_add(o, "id", json_string(rq->id)) < 0 ||
             json_add(o, "step", json_object_new_int64(rq->step)) < 0 ||
             json_add(o, "phase", json_string(rq->phase)) < 0)) {
                json_object_put(o);
                return NULL;
        }
        return o;
}

json_object *render_slots(const AdmissionSlotCounts *c) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();

        assert(c);

        if (!o)
                return NULL;
        if (json_add(o, "total", json_object_new_uint64(c->total)) < 0 ||
            json_add(o, "idle", json_object_new_uint64(c->idle)) < 0 ||
            json_add(o, "reserved", json_object_new_uint64(c->reserved)) < 0 ||
            json_add(o, "running", json_object_new_uint64(c->running)) < 0)
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
        json_object_object_add(o, "state", json_object_new_string(admission_state_to_string(st->state)));
        json_object_object_add(o, "queue_length", json_object_new_uint64(st->queue_length));
        json_object_object_add(o, "max_length", json_object_new_uint64(st->max_length));
        json_object_object_add(o, "ticket", st->has_ticket ? ticket_to_json(&st->ticket) : NULL);
        json_object_object_add(
                o,
                "estimated_wait_seconds",
                st->estimate_known ? json_seconds(st->estimated_wait_seconds) : NULL);
        json_object_object_add(
                o, "average_query_seconds", st->average_known ? json_seconds(st->average_query_seconds) : NULL);
        json_object_object_add(o, "reservation_seconds", json_object_new_uint64(reservation_seconds));
        json_object_object_add(o, "heartbeat_seconds", json_object_new_uint64(hb));
        json_object_object_add(o, "poll_after_seconds", json_object_new_uint64(hb / 3 > 0 ? hb / 3 : 1));
        if (json_add(o, "slots", render_slots(&st->slots)) < 0)
                return NULL;
        if (!running)
                json_object_object_add(o, "running_query", NULL);
        else if (json_add(o, "running_query", render_running_query(running)) < 0)
                return NULL;
        if (!user)
                json_object_object_add(o, "user", NULL);
        else if (json_add(o, "user", json_string(user)) < 0)
                return NULL;
        return TAKE_PTR(o);
}
