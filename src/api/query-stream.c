/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <json-c/json.h>
#include <stdio.h>

#include "api/query-stream.h"
#include "http/stream.h"
#include "shared/json-util.h"
#include "shared/list.h"
#include "shared/log.h"
#include "shared/time-util.h"

/* One event of the log. A text run (event "text", json NULL) holds the
 * consecutive deltas first_id..id of one step. */
typedef struct QueryLogEntry {
        uint64_t id;
        const char *event; /* static */
        char *json;

        unsigned step;
        uint64_t first_id;
        char *text;
        size_t text_size;
        size_t text_allocated; /* grown by doubling: a reply comes in many small deltas */
        uint32_t *offsets;     /* where delta first_id + i begins in text */
        size_t n_deltas, n_offsets_allocated;
} QueryLogEntry;

typedef struct QueryLog {
        char id[QUERY_ID_MAX];
        SessionKey session;
        uint64_t last_id;
        QueryLogEntry *entries;
        size_t n_entries, n_allocated;
        size_t bytes;
        bool full; /* past QUERY_LOG_MAX_BYTES: nothing more is kept */
        struct QueryLog *logs_prev, *logs_next;
} QueryLog;

typedef struct QueryStream QueryStream;

/* One log per running query (WIKI_WEB_QUEUE_SLOTS of them at most), the
 * newest first. */
struct QueryStreams {
        QueryLog *logs_head;
        QueryStream *streams_head;
};

/* A stream attached to the running query. */
struct QueryStream {
        QueryStreams *owner;
        HttpStream *stream;
        char query_id[QUERY_ID_MAX];
        QueryStream *streams_prev, *streams_next;
};

static void query_log_entry_done(QueryLogEntry *e) {
        free(e->json);
        free(e->text);
        free(e->offsets);
}

static QueryLog *query_log_free(QueryLog *l) {
        if (!l)
                return NULL;
        for (size_t i = 0; i < l->n_entries; i++)
                query_log_entry_done(&l->entries[i]);
        free(l->entries);
        free(l);
        return NULL;
}

/* A new entry at the end (zeroed), or NULL when the log is full or out of
 * memory (the event is then not kept, and later replays lack it). */
static QueryLogEntry *query_log_append(QueryLog *l, size_t bytes) {
        if (l->full || bytes > QUERY_LOG_MAX_BYTES - l->bytes) {
                if (!l->full)
                        log_warning(
                                "Query %s: its event log is full; a re-attached stream will lack the rest.",
                                l->id);
                l->full = true;
                return NULL;
        }
        if (l->n_entries == l->n_allocated) {
                size_t n = MAX(l->n_allocated * 2, (size_t) 16);
                QueryLogEntry *e = reallocarray(l->entries, n, sizeof *e);

                if (!e)
                        return NULL;
                l->entries = e;
                l->n_allocated = n;
        }
        l->bytes += bytes + sizeof(QueryLogEntry);
        l->entries[l->n_entries] = (QueryLogEntry){ 0 };
        return &l->entries[l->n_entries++];
}

static QueryLog *query_streams_find(const QueryStreams *q, const char *query_id) {
        for (QueryLog *l = q->logs_head; l; l = l->logs_next)
                if (streq(l->id, query_id))
                        return l;
        return NULL;
}

/* Out of the list, and freed. */
static void query_streams_drop(QueryStreams *q, QueryLog *l) {
        LIST_REMOVE(logs, q->logs_head, l);
        query_log_free(l);
}

/* Send to every stream attached to the query of log l. */
static void query_streams_broadcast(
        QueryStreams *q, const QueryLog *l, uint64_t id, const char *event, const char *json) {
        for (QueryStream *s = q->streams_head; s; s = s->streams_next)
                if (s->stream && streq(s->query_id, l->id))
                        (void) http_stream_send(s->stream, id, event, json);
}

/* A plain event of log l: kept, and sent to the streams. json is copied. */
static void query_streams_add(QueryStreams *q, QueryLog *l, const char *event, const char *json) {
        QueryLogEntry *e;
        uint64_t id = ++l->last_id;

        e = query_log_append(l, strlen(json));
        if (e) {
                e->json = strdup(json);
                if (e->json) {
                        e->id = id;
                        e->event = event;
                } else
                        l->n_entries--;
        }
        query_streams_broadcast(q, l, id, event, json);
}

static char *text_event_json(unsigned step, const char *text, size_t size) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();

        if (!o || json_add(o, "step", json_object_new_int64(step)) < 0 ||
            json_add(o, "delta", json_string_bytes(text, size)) < 0)
                return NULL;
        return strdup(
                json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
}

/* A text delta of log l: sent on its own, and kept in the step's run. */
static void query_streams_add_text(QueryStreams *q, QueryLog *l, unsigned step, const char *text, size_t size) {
        QueryLogEntry *e = l->n_entries > 0 ? &l->entries[l->n_entries - 1] : NULL;
        _cleanup_free_ char *json = text_event_json(step, text, size);
        uint64_t id = ++l->last_id;

        if (!(e && !e->json && e->step == step && e->id + 1 == id)) {
                e = query_log_append(l, 0);
                if (e) {
                        e->event = "text";
                        e->step = step;
                        e->first_id = id;
                }
        }
        if (e && (size > QUERY_LOG_MAX_BYTES - l->bytes || e->text_size + size > UINT32_MAX)) {
                l->full = true;
                e = NULL;
        }
        if (e && e->n_deltas == e->n_offsets_allocated) {
                size_t n = MAX(e->n_offsets_allocated * 2, (size_t) 16);
                uint32_t *o = reallocarray(e->offsets, n, sizeof *o);

                if (o) {
                        e->offsets = o;
                        e->n_offsets_allocated = n;
                        l->bytes += (n - e->n_deltas) * sizeof *o;
                } else
                        e = NULL;
        }
        if (e && e->text_size + size > e->text_allocated) {
                size_t n = MAX(e->text_allocated * 2, (size_t) 256);
                char *t;

                n = MAX(n, e->text_size + size);
                t = realloc(e->text, n);
                if (t) {
                        e->text = t;
                        e->text_allocated = n;
                } else
                        e = NULL;
        }
        if (e) {
                memcpy(e->text + e->text_size, text, size);
                e->offsets[e->n_deltas++] = (uint32_t) e->text_size;
                e->text_size += size;
                e->id = id;
                l->bytes += size;
        }
        if (json)
                query_streams_broadcast(q, l, id, "text", json);
}

int query_streams_begin(
        QueryStreams *q, const char *query_id, const SessionKey *session, usec_t created_realtime) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        char created[RFC3339_MS_MAX];
        QueryLog *l;

        assert(q);
        assert(query_id);
        assert(session);

        l = query_streams_find(q, query_id);
        if (l)
                query_streams_drop(q, l);
        if (!o || json_add(o, "id", json_string(query_id)) < 0 ||
            json_add(o, "created_at", json_string(format_rfc3339_ms(created, created_realtime))) < 0)
                return -ENOMEM;
        l = calloc(1, sizeof *l);
        if (!l)
                return -ENOMEM;
        snprintf(l->id, sizeof l->id, "%s", query_id);
        l->session = *session;
        LIST_PREPEND(logs, q->logs_head, l);
        query_streams_add(q, l, "query", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        return 0;
}

void query_streams_event(QueryStreams *q, const char *query_id, const QueryEvent *ev) {
        _cleanup_free_ char *json = NULL, *name = NULL;
        const char *event = NULL;
        QueryLog *l;
        int r = 0;

        assert(q);
        assert(ev);

        l = query_streams_find(q, query_id);
        if (!l)
                return;
        if (IN_SET(ev->type, QUERY_EVENT_TOOL, QUERY_EVENT_TOOL_RESULT)) {
                /* Quoted: a rejected call's name is the model's. */
                name = json_quote(ev->name ? ev->name : "");
                if (!name) {
                        log_oom();
                        return;
                }
        }
        switch (ev->type) {
        case QUERY_EVENT_STEP:
                event = "step";
                r = asprintf(&json, "{\"step\":%u}", ev->step);
                break;
        case QUERY_EVENT_TEXT:
                query_streams_add_text(q, l, ev->step, ev->text, ev->text_size);
                return;
        case QUERY_EVENT_TOOL:
                event = "tool";
                r = asprintf(
                        &json,
                        "{\"step\":%u,\"call\":%u,\"name\":%s,\"arguments\":%s}",
                        ev->step,
                        ev->call,
                        name,
                        ev->json);
                break;
        case QUERY_EVENT_TOOL_RESULT:
                event = "tool_result";
                r = asprintf(
                        &json,
                        "{\"step\":%u,\"call\":%u,\"name\":%s,\"ok\":%s,\"duration_ms\":%" PRIu64
                        ",\"summary\":%s}",
                        ev->step,
                        ev->call,
                        name,
                        ev->ok ? "true" : "false",
                        ev->duration / USEC_PER_MSEC,
                        ev->json);
                break;
        case QUERY_EVENT_PHASE:
                /* Only the cleanup is an event of the stream (API.md 11.2);
                 * the other phases show in the status (11.4). */
                if (ev->phase != QUERY_PHASE_CLEANUP)
                        return;
                event = "phase";
                r = asprintf(&json, "{\"phase\":\"%s\"}", query_phase_to_string(ev->phase));
                break;
        default:
                return;
        }
        if (r < 0) {
                log_oom();
                return;
        }
        query_streams_add(q, l, event, json);
}

/* Send the log after last_event_id to one stream: text runs merged from
 * the first delta after it. */
static int query_stream_replay(QueryStream *s, const QueryLog *l, uint64_t last_event_id) {
        int r = 0;

        for (size_t i = 0; r >= 0 && i < l->n_entries; i++) {
                const QueryLogEntry *e = &l->entries[i];
                _cleanup_free_ char *json = NULL;
                size_t k;

                if (e->id <= last_event_id)
                        continue;
                if (e->json) {
                        r = http_stream_send(s->stream, e->id, e->event, e->json);
                        continue;
                }
                k = last_event_id >= e->first_id ? (size_t) (last_event_id + 1 - e->first_id) : 0;
                json = text_event_json(e->step, e->text + e->offsets[k], e->text_size - e->offsets[k]);
                if (!json)
                        return -ENOMEM;
                r = http_stream_send(s->stream, e->id, "text", json);
        }
        return r;
}

static void query_stream_on_closed(HttpStream *hs, HttpStreamEnd why, void *userdata) {
        QueryStream *s = userdata;

        LIST_REMOVE(streams, s->owner->streams_head, s);
        free(s);
}

int query_streams_attach(
        QueryStreams *q,
        HttpRequest *req,
        const char *query_id,
        uint64_t last_event_id,
        const char *const *extra_headers) {
        _cleanup_free_ QueryStream *s = NULL;
        QueryStream *attached;
        QueryLog *l;
        int r;

        assert(q);
        assert(req);
        assert(query_id);

        l = query_streams_find(q, query_id);
        if (!l || memcmp(&l->session, http_request_session(req), sizeof(SessionKey)) != 0)
                return -ENOENT;

        s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->owner = q;
        snprintf(s->query_id, sizeof s->query_id, "%s", query_id);
        r = http_stream_open(req, 0, extra_headers, query_stream_on_closed, s, &s->stream);
        if (r < 0)
                return r;
        attached = TAKE_PTR(s);
        LIST_PREPEND(streams, q->streams_head, attached);
        /* A replay that does not fit is cut like any stream that is not read. */
        (void) query_stream_replay(attached, l, last_event_id);
        return 0;
}

void query_streams_finish(
        QueryStreams *q, const char *query_id, const char *citations_json, const char *record_json) {
        QueryLog *l;

        assert(q);
        assert(query_id);

        l = query_streams_find(q, query_id);
        if (!l)
                return;
        if (record_json) {
                if (citations_json)
                        query_streams_add(q, l, "citations", citations_json);
                else
                        log_oom();
                query_streams_add(q, l, "record", record_json);
        }
        for (QueryStream *s = q->streams_head; s; s = s->streams_next)
                if (s->stream && streq(s->query_id, query_id))
                        http_stream_end(s->stream);
        query_streams_drop(q, l);
}

int query_streams_new(QueryStreams **ret) {
        assert(ret);

        *ret = calloc(1, sizeof(QueryStreams));
        return *ret ? 0 : -ENOMEM;
}

QueryStreams *query_streams_free(QueryStreams *q) {
        if (!q)
                return NULL;
        assert(!q->streams_head);
        while (q->logs_head)
                query_streams_drop(q, q->logs_head);
        free(q);
        return NULL;
}
