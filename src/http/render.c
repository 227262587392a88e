/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "http/render.h"
#include "shared/json-util.h"
#include "shared/macro.h"
#include "shared/strbuf.h"
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

        /* The conversation (API.md 7): the record followed, and the id of
         * the conversation's first record (a record without one is its
         * own). */
        if (!render_add_string(o, "follow_up", r->follow_up) ||
            !render_add_string(o, "conversation", r->conversation ? r->conversation : r->id))
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

/* The status object is what is asked for most (every waiting page and
 * every poll), so it is written as text by hand: a json-c tree made,
 * printed and freed would cost the request a third more instructions
 * (tests/bench/bench-http-instructions.sh). The bytes are json-c's own
 * (JSON_C_TO_STRING_PLAIN): test-render pins them. */

/* The puts below are checked once, at the end (strbuf_steal()): a failed
 * allocation is sticky. */

static void text_u64(StrBuf *t, uint64_t v) {
        char buf[24], *p = buf + sizeof buf;

        do {
                *--p = (char) ('0' + v % 10);
                v /= 10;
        } while (v > 0);
        strbuf_put(t, p, (size_t) (buf + sizeof buf - p));
}

/* s as a JSON string, escaped as json-c escapes it ('/' too); NULL is "". */
static void text_string(StrBuf *t, const char *s) {
        static const char hex[] = "0123456789abcdef";
        const char *run;

        strbuf_put_literal(t, "\"");
        if (!s)
                s = "";
        run = s;
        for (;; s++) {
                unsigned char c = (unsigned char) *s;
                char esc[6] = { '\\', 0 };
                size_t n = 2;

                if (c >= 0x20 && c != '"' && c != '\\' && c != '/')
                        continue;
                strbuf_put(t, run, (size_t) (s - run));
                if (c == 0)
                        break;
                switch (c) {
                case '\b':
                        esc[1] = 'b';
                        break;
                case '\n':
                        esc[1] = 'n';
                        break;
                case '\r':
                        esc[1] = 'r';
                        break;
                case '\t':
                        esc[1] = 't';
                        break;
                case '\f':
                        esc[1] = 'f';
                        break;
                case '"':
                case '\\':
                case '/':
                        esc[1] = (char) c;
                        break;
                default:
                        memcpy(esc + 1, "u00", 3);
                        esc[4] = hex[c >> 4];
                        esc[5] = hex[c & 0xf];
                        n = 6;
                }
                strbuf_put(t, esc, n);
                run = s + 1;
        }
        strbuf_put_literal(t, "\"");
}

/* Seconds as a JSON number with millisecond precision ("84.0", "12.345"). */
static void text_seconds(StrBuf *t, double seconds) {
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
        strbuf_put(t, p, (size_t) (buf + sizeof buf - p));
}

/* A monotonic time as an RFC 3339 string; USEC_INFINITY is null. */
static void text_time(StrBuf *t, usec_t mono) {
        char buf[RFC3339_MS_MAX];

        if (mono == USEC_INFINITY) {
                strbuf_put_literal(t, "null");
                return;
        }
        format_rfc3339_ms(buf, monotonic_to_wallclock(mono));
        strbuf_put_literal(t, "\"");
        strbuf_put(t, buf, strlen(buf));
        strbuf_put_literal(t, "\"");
}

char *render_status_text(const ManagerStatus *status, const char *user) {
        const AdmissionStatus *st = &status->admission;
        const ManagerStatusQuery *running = status->has_query ? &status->query : NULL;
        const WaitRange *range = status->range_known ? &status->range : NULL;
        uint64_t reservation_seconds = status->reservation_seconds,
                 heartbeat_seconds = status->heartbeat_seconds;
        StrBuf t = { .failed = false };

        assert(status);

        (void) strbuf_reserve(&t, 1024); /* the whole object, as a rule */

        strbuf_put_literal(&t, "{\"state\":");
        text_string(&t, admission_state_to_string(st->state));
        strbuf_put_literal(&t, ",\"queue_length\":");
        text_u64(&t, st->queue_length);
        strbuf_put_literal(&t, ",\"max_length\":");
        text_u64(&t, st->max_length);
        strbuf_put_literal(&t, ",\"ticket\":");
        if (!st->has_ticket)
                strbuf_put_literal(&t, "null");
        else {
                strbuf_put_literal(&t, "{\"id\":");
                text_string(&t, st->ticket.id);
                strbuf_put_literal(&t, ",\"status\":");
                text_string(&t, ticket_status_to_string(st->ticket.status));
                strbuf_put_literal(&t, ",\"position\":");
                text_u64(&t, st->ticket.position);
                strbuf_put_literal(&t, ",\"joined_at\":");
                text_time(&t, st->ticket.joined);
                strbuf_put_literal(&t, ",\"heartbeat_expires_at\":");
                text_time(&t, st->ticket.heartbeat_deadline);
                strbuf_put_literal(&t, ",\"reservation_expires_at\":");
                text_time(
                        &t,
                        st->ticket.status == TICKET_RESERVED ? st->ticket.reservation_deadline :
                                                               USEC_INFINITY);
                strbuf_put_literal(&t, "}");
        }
        strbuf_put_literal(&t, ",\"estimated_wait_seconds\":");
        if (st->estimate_known)
                text_seconds(&t, st->estimated_wait_seconds);
        else
                strbuf_put_literal(&t, "null");
        strbuf_put_literal(&t, ",\"average_query_seconds\":");
        if (st->average_known)
                text_seconds(&t, st->average_query_seconds);
        else
                strbuf_put_literal(&t, "null");
        strbuf_put_literal(&t, ",\"reservation_seconds\":");
        text_u64(&t, reservation_seconds);
        strbuf_put_literal(&t, ",\"heartbeat_seconds\":");
        text_u64(&t, heartbeat_seconds);
        strbuf_put_literal(&t, ",\"poll_after_seconds\":");
        text_u64(&t, heartbeat_seconds / 3 > 0 ? heartbeat_seconds / 3 : 1);
        strbuf_put_literal(&t, ",\"slots\":{\"total\":");
        text_u64(&t, st->slots.total);
        strbuf_put_literal(&t, ",\"idle\":");
        text_u64(&t, st->slots.idle);
        strbuf_put_literal(&t, ",\"reserved\":");
        text_u64(&t, st->slots.reserved);
        strbuf_put_literal(&t, ",\"running\":");
        text_u64(&t, st->slots.running);
        strbuf_put_literal(&t, "},\"running_query\":");
        if (!running)
                strbuf_put_literal(&t, "null");
        else {
                strbuf_put_literal(&t, "{\"id\":");
                text_string(&t, running->id);
                strbuf_put_literal(&t, ",\"step\":");
                text_u64(&t, running->step);
                strbuf_put_literal(&t, ",\"phase\":");
                text_string(&t, running->phase);
                strbuf_put_literal(&t, "}");
        }
        strbuf_put_literal(&t, ",\"user\":");
        if (user)
                text_string(&t, user);
        else
                strbuf_put_literal(&t, "null");
        strbuf_put_literal(&t, ",\"estimated_wait_range_seconds\":");
        if (!range)
                strbuf_put_literal(&t, "null");
        else {
                strbuf_put_literal(&t, "{\"p10\":");
                text_seconds(&t, range->p10);
                strbuf_put_literal(&t, ",\"p50\":");
                text_seconds(&t, range->p50);
                strbuf_put_literal(&t, ",\"p90\":");
                text_seconds(&t, range->p90);
                strbuf_put_literal(&t, "}");
        }
        if (range)
                strbuf_put_literal(&t, ",\"wait_known\":true}");
        else
                strbuf_put_literal(&t, ",\"wait_known\":false}");
        return strbuf_steal(&t);
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
