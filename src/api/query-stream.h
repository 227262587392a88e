/* SPDX-License-Identifier: MIT */
#pragma once

#include "http/httpd.h"
#include "query/query-types.h"
#include "shared/ids.h"
#include "shared/macro.h"

/* The query stream (API.md 11.2) and re-attaching to it (11.3).
 *
 * Each running query has a log: its events (`query`, `step`, `text`, `tool`,
 * `tool_result`, `phase`) as they happened, with their ids, in memory only,
 * from the start of the query until its `record`; then every stream gets
 * the record, ends, and the log is freed. Streams attached to the query get
 * each event as it is appended, and a stream that attaches later (a reload,
 * a second tab) first gets the log after its Last-Event-ID.
 *
 * Bounded: everything but the model's text is a few hundred bytes an event,
 * and the text is bounded by the query's own limits (steps, and one reply's
 * output bytes). The text deltas of a step are kept as one run (the text,
 * and where each delta began), so that a replay sends the text after any
 * id in one `text` event (API.md 11.3 allows the merge) and the log costs
 * 4 bytes a delta beyond the text itself. Past QUERY_LOG_MAX_BYTES the log
 * keeps no more (the live streams still get everything): a later replay
 * then lacks the rest, which the log says.
 *
 * Streams are the server's (http/stream.h); this borrows them until their
 * closed callback. Up to WIKI_WEB_QUEUE_SLOTS queries run at once, each
 * with its log (one per session: API.md 5), so the memory is at most that
 * many times one query's. */

#define QUERY_LOG_MAX_BYTES (64U * 1024U * 1024U)

typedef struct QueryStreams QueryStreams;

int query_streams_new(QueryStreams **ret);
/* Only after the HTTP server is freed (which closes the streams). */
QueryStreams *query_streams_free(QueryStreams *q);
DEFINE_TRIVIAL_CLEANUP_FUNC(QueryStreams *, query_streams_free);

/* A query starts: its log begins with `query` (id and created_at, the
 * record's). The logs of the other running queries stay. */
int query_streams_begin(QueryStreams *q, const char *query_id, const SessionKey *session, usec_t created_realtime);

/* One event of the running query query_id (from the executor). */
void query_streams_event(QueryStreams *q, const char *query_id, const QueryEvent *ev);

/* The query ended and its record is durable: citations_json (the
 * `citations` event of the record, render_citations_event(); NULL when out
 * of memory) and then record_json (the record as GET /history/{id} returns
 * it; NULL if it could not be read: neither event is sent) are the last
 * events of every stream, which then ends; the log is freed. */
void query_streams_finish(
        QueryStreams *q, const char *query_id, const char *citations_json, const char *record_json);

/* Answer req with a stream of the running query query_id, if it is running
 * and the session's: the log after last_event_id (0: all of it), then live.
 * extra_headers as for http_stream_open(). Returns 0 (answered), -ENOENT
 * (not this session's running query: nothing was sent), -EMFILE (the
 * session's streams are open: nothing was sent), -ENOMEM. */
int query_streams_attach(
        QueryStreams *q,
        HttpRequest *req,
        const char *query_id,
        uint64_t last_event_id,
        const char *const *extra_headers);
