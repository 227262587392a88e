/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>

#include "api/render.h"
#include "shared/json-util.h"
#include "shared/macro.h"
#include "shared/source.h"
#include "shared/strbuf.h"
#include "shared/time-util.h"
#include "shared/utf8.h"
#include "query/citation.h"

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
        json_object *sources, *citations, *artifacts, *error, *timings, *usage, *notes;

        assert(r);

        if (!o || !render_add_string(o, "id", r->id) || !render_add_string(o, "status", r->status) ||
            !render_add_string(o, "question", r->question) || !render_add_string(o, "answer", r->answer))
                return NULL;

        sources = source_to_json(r->sources, r->n_sources);
        if (!sources || !render_add(o, "sources", sources))
                return NULL;

        citations = source_citation_to_json(r->citations, r->n_citations);
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

        /* The asker's feedback (API.md 9.1), null without one. */
        if (r->feedback_rating) {
                json_object *f = json_object_new_object();

                if (!f || !render_add(o, "feedback", f) ||
                    !render_add_string(f, "rating", r->feedback_rating) ||
                    !render_add_string(f, "reason", r->feedback_reason) ||
                    !render_add_string(f, "comment", r->feedback_comment) ||
                    !render_add_time(f, "rated_at", r->feedback_at))
                        return NULL;
        } else if (!render_add(o, "feedback", NULL))
                return NULL;

        /* The conversation (API.md 7): the record followed, and the id of
         * the conversation's first record (a record without one is its
         * own). */
        if (!render_add_string(o, "follow_up", r->follow_up) ||
            !render_add_string(o, "conversation", r->conversation ? r->conversation : r->id))
                return NULL;

        /* What the record says of how it was made (API.md 9 "notes"). */
        notes = json_object_new_array();
        if (json_add(o, "notes", notes) < 0)
                return NULL;
        for (size_t i = 0; r->notes && r->notes[i]; i++)
                if (json_append(notes, json_string(r->notes[i])) < 0)
                        return NULL;

        return TAKE_PTR(o);
}

char *render_citations_event(const HistoryRecord *r) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        const char *t;

        assert(r);

        if (!o || json_add(o, "citations", source_citation_to_json(r->citations, r->n_citations)) < 0)
                return NULL;
        t = render_body(o);
        return t ? strdup(t) : NULL;
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

/* ---- the unanswered report (API.md 9.2) ---- */

static const char *sb_str(const StrBuf *b) {
        return b->data ? b->data : "";
}

/* Stop at the end of the question's last word: "Parking policy?" ->
 * "Parking policy", at most 200 bytes (a title is at most 255). */
static char *render_page_title(const char *text) {
        size_t n = utf8_cut(text, strlen(text), 200);

        while (n > 0 && strchr(" \t\n?!.:;,", text[n - 1]))
                n--;
        return strndup(text, n);
}

char *render_new_page_url(const char *wiki_api_url, const char *title) {
        static const char hex[] = "0123456789ABCDEF";
        _cleanup_free_ char *base = NULL, *t = NULL;
        StrBuf b = { 0 };
        char *q;

        if (!wiki_api_url || !title || citation_permalink(wiki_api_url, 1, &base) < 0)
                return NULL;
        q = strchr(base, '?');
        if (q)
                *q = 0;
        t = render_page_title(title);
        if (!t || !*t)
                return NULL;
        strbuf_printf(&b, "%s?title=", base);
        for (const unsigned char *p = (const unsigned char *) t; *p; p++)
                if (*p == ' ')
                        (void) strbuf_put(&b, "_", 1);
                else if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("-._~", *p))
                        (void) strbuf_put(&b, (const char *) p, 1);
                else {
                        char e[3] = { '%', hex[*p >> 4], hex[*p & 15] };

                        (void) strbuf_put(&b, e, 3);
                }
        strbuf_printf(&b, "&action=edit");
        return strbuf_steal(&b);
}

static json_object *render_items(const ReportItem *items, size_t n, const char *key) {
        _cleanup_(json_object_putp) json_object *a = json_object_new_array();

        if (!a)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_new_object();

                if (!e || json_object_array_add(a, e) < 0) {
                        json_object_put(e);
                        return NULL;
                }
                if (!render_add_string(e, key, items[i].text))
                        return NULL;
                /* A search's results not known for this reader: null. */
                if (streq(key, "query") &&
                    !(items[i].results >= 0 ? render_add_int(e, "results", items[i].results) :
                                              render_add(e, "results", NULL)))
                        return NULL;
                if (streq(key, "title") && !render_add_string(e, "url", items[i].url))
                        return NULL;
                if (!render_add_int(e, "count", (int64_t) items[i].n))
                        return NULL;
        }
        return TAKE_PTR(a);
}

static json_object *render_group(const ReportGroup *g, const char *wiki_api_url) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        _cleanup_free_ char *url = NULL;
        json_object *wordings, *signals, *failed, *codes, *negative, *reasons, *comments, *v;

        if (!o || !render_add_string(o, "question", g->question))
                return NULL;
        wordings = json_object_new_array();
        if (!wordings || !render_add(o, "wordings", wordings))
                return NULL;
        for (size_t i = 0; i < g->n_wordings; i++)
                if (!(v = json_object_new_string(g->wordings[i].text)) ||
                    json_object_array_add(wordings, v) < 0) {
                        json_object_put(v);
                        return NULL;
                }
        if (!render_add_int(o, "count", (int64_t) g->count) ||
            !render_add_time(o, "first_asked", g->first_asked) ||
            !render_add_time(o, "last_asked", g->last_asked))
                return NULL;

        signals = json_object_new_object();
        if (!signals || !render_add(o, "signals", signals) ||
            !render_add_int(signals, "no_sources", (int64_t) g->no_sources) ||
            !render_add_int(signals, "unverified", (int64_t) g->unverified))
                return NULL;
        negative = json_object_new_object();
        if (!negative || !render_add(signals, "negative_feedback", negative) ||
            !render_add_int(negative, "count", (int64_t) g->negative_feedback))
                return NULL;
        reasons = json_object_new_object();
        if (!reasons || !render_add(negative, "reasons", reasons))
                return NULL;
        for (ReportReason r = 0; r < _REPORT_REASON_MAX; r++)
                if (g->reasons[r] > 0 &&
                    !render_add_int(reasons, report_reason_to_string(r), (int64_t) g->reasons[r]))
                        return NULL;
        comments = json_object_new_array();
        if (!comments || !render_add(negative, "comments", comments))
                return NULL;
        for (size_t i = 0; i < g->n_comments; i++)
                if (!(v = json_object_new_string(g->comments[i])) || json_object_array_add(comments, v) < 0) {
                        json_object_put(v);
                        return NULL;
                }
        failed = json_object_new_object();
        if (!failed || !render_add(signals, "failed", failed) ||
            !render_add_int(failed, "count", (int64_t) g->failed))
                return NULL;
        codes = json_object_new_object();
        if (!codes || !render_add(failed, "codes", codes))
                return NULL;
        for (size_t i = 0; i < g->n_failed_codes; i++)
                if (!render_add_int(codes, g->failed_codes[i].text, (int64_t) g->failed_codes[i].n))
                        return NULL;

        v = render_items(g->searches, g->n_searches, "query");
        if (!v || !render_add(o, "searches", v))
                return NULL;
        v = render_items(g->pages, g->n_pages, "title");
        if (!v || !render_add(o, "pages", v))
                return NULL;

        /* The page to write: named as the model searched for it, else as asked. */
        url = render_new_page_url(wiki_api_url, g->n_searches > 0 ? g->searches[0].text : g->question);
        if (!render_add_string(o, "new_page_url", url))
                return NULL;
        return TAKE_PTR(o);
}

json_object *render_report(const Report *r, unsigned days, const char *wiki_api_url) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        json_object *groups;

        assert(r);

        if (!o || !render_add_time(o, "since", r->since) || !render_add_int(o, "days", days) ||
            !render_add_int(o, "records", (int64_t) r->n_records))
                return NULL;
        groups = json_object_new_array();
        if (!groups || !render_add(o, "groups", groups))
                return NULL;
        for (size_t i = 0; i < r->n_groups; i++) {
                json_object *g = render_group(&r->groups[i], wiki_api_url);

                if (!g || json_object_array_add(groups, g) < 0) {
                        json_object_put(g);
                        return NULL;
                }
        }
        return TAKE_PTR(o);
}

/* One CSV cell (RFC 4180: quoted, quotes doubled). A cell a spreadsheet
 * would run as a formula (starting with = + - @, a tab or a carriage
 * return) gets a leading apostrophe, which shows it as text (OWASP, "CSV
 * Injection"). */
static void csv_cell(StrBuf *b, const char *text, bool last) {
        (void) strbuf_put(b, "\"", 1);
        if (text && strchr("=+-@\t\r", text[0]) && text[0])
                (void) strbuf_put(b, "'", 1);
        for (const char *p = text ? text : ""; *p; p++)
                (void) strbuf_put(b, *p == '"' ? "\"\"" : p, *p == '"' ? 2 : 1);
        (void) strbuf_put(b, last ? "\"\r\n" : "\",", last ? 3 : 2);
}

static void csv_items(StrBuf *b, const ReportItem *items, size_t n) {
        StrBuf cell = { 0 };

        for (size_t i = 0; i < n; i++)
                strbuf_printf(&cell, "%s%s (%" PRIu64 ")", i > 0 ? "; " : "", items[i].text, items[i].n);
        csv_cell(b, sb_str(&cell), false);
        strbuf_done(&cell);
}

char *render_report_csv(const Report *r) {
        StrBuf b = { 0 };

        assert(r);

        strbuf_printf(
                &b,
                "\"question\",\"count\",\"first_asked\",\"last_asked\",\"no_sources\",\"unverified\","
                "\"negative_feedback\",\"failed\",\"wordings\",\"searches\",\"pages\",\"reasons\","
                "\"comments\"\r\n");
        for (size_t i = 0; i < r->n_groups; i++) {
                const ReportGroup *g = &r->groups[i];
                char t1[RFC3339_MS_MAX], t2[RFC3339_MS_MAX], num[32];
                StrBuf cell = { 0 };

                csv_cell(&b, g->question, false);
                snprintf(num, sizeof num, "%" PRIu64, g->count);
                csv_cell(&b, num, false);
                csv_cell(&b, format_rfc3339_ms(t1, g->first_asked), false);
                csv_cell(&b, format_rfc3339_ms(t2, g->last_asked), false);
                snprintf(num, sizeof num, "%" PRIu64, g->no_sources);
                csv_cell(&b, num, false);
                snprintf(num, sizeof num, "%" PRIu64, g->unverified);
                csv_cell(&b, num, false);
                snprintf(num, sizeof num, "%" PRIu64, g->negative_feedback);
                csv_cell(&b, num, false);
                snprintf(num, sizeof num, "%" PRIu64, g->failed);
                csv_cell(&b, num, false);
                csv_items(&b, g->wordings, g->n_wordings);
                csv_items(&b, g->searches, g->n_searches);
                csv_items(&b, g->pages, g->n_pages);
                for (ReportReason why = 0; why < _REPORT_REASON_MAX; why++)
                        if (g->reasons[why] > 0)
                                strbuf_printf(
                                        &cell,
                                        "%s%s (%" PRIu64 ")",
                                        cell.len > 0 ? "; " : "",
                                        report_reason_to_string(why),
                                        g->reasons[why]);
                csv_cell(&b, sb_str(&cell), false);
                strbuf_done(&cell);
                for (size_t k = 0; k < g->n_comments; k++)
                        strbuf_printf(&cell, "%s%s", k > 0 ? " | " : "", g->comments[k]);
                csv_cell(&b, sb_str(&cell), true);
                strbuf_done(&cell);
        }
        return strbuf_steal(&b);
}

json_object *render_tokens(const HistoryToken *tokens, size_t n, usec_t now, uint64_t max_days) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        json_object *list = json_object_new_array();

        if (!o || !list || !render_add(o, "tokens", list) ||
            !render_add_int(o, "max_days", (int64_t) max_days))
                return NULL;
        for (size_t i = 0; i < n; i++) {
                json_object *t = json_object_new_object();

                if (!t || json_object_array_add(list, t) < 0) {
                        json_object_put(t);
                        return NULL;
                }
                if (!render_add_string(t, "id", tokens[i].id) ||
                    !render_add_string(t, "name", tokens[i].name) ||
                    !render_add_time(t, "created_at", tokens[i].created_at) ||
                    !render_add_time(t, "expires_at", tokens[i].expires_at) ||
                    !render_add_time(t, "last_used_at", tokens[i].last_used_at) ||
                    !render_add(t, "expired", json_object_new_boolean(tokens[i].expires_at <= now)))
                        return NULL;
        }
        return TAKE_PTR(o);
}
