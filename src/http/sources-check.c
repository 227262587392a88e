/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <json-c/json.h>
#include <stdio.h>

#include "http/render.h"
#include "http/sources-check.h"
#include "metrics/metrics.h"
#include "query/mediawiki.h"
#include "query/wiki-client.h"
#include "shared/json-util.h"
#include "shared/list.h"
#include "shared/log.h"
#include "shared/strv.h"
#include "shared/time-util.h"

typedef struct SourcesCheck SourcesCheck;

struct SourcesCheck {
        SourcesChecks *owner;
        HttpRequest *req;
        RevisionCheck *check;
        ManagerReadableCheck *readable; /* person mode: the read check first */
        Source *sources;                /* the record's, to answer with */
        size_t n_sources;
        /* WIKI_WEB_WIKI_READ_AS=person: the titles checked for the person
         * first, and those they may not read now (answered as missing). */
        char **titles;
        char **withheld;
        SourcesCheck *checks_prev, *checks_next;
};

typedef struct SessionSlot {
        SessionKey session;
        usec_t last; /* monotonic; 0: free */
} SessionSlot;

struct SourcesChecks {
        Manager *manager;
        SourcesCheck *checks_head;
        unsigned in_flight;
        SessionSlot sessions[SOURCES_CHECK_SESSIONS];
};

static SourcesCheck *sources_check_free(SourcesCheck *c) {
        if (!c)
                return NULL;
        if (c->owner) {
                LIST_REMOVE(checks, c->owner->checks_head, c);
                c->owner->in_flight--;
        }
        revision_check_free(c->check);
        manager_readable_check_free(c->readable);
        source_free_many(c->sources, c->n_sources);
        strv_free(c->titles);
        strv_free(c->withheld);
        free(c);
        return NULL;
}

int sources_checks_new(Manager *manager, SourcesChecks **ret) {
        SourcesChecks *s;

        assert(manager);
        assert(ret);
        s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->manager = manager;
        *ret = s;
        return 0;
}

SourcesChecks *sources_checks_free(SourcesChecks *s) {
        if (!s)
                return NULL;
        while (s->checks_head)
                sources_check_free(s->checks_head);
        free(s);
        return NULL;
}

/* The session's slot when it may start a check now (its time taken), else
 * NULL and the seconds to wait in *ret_wait. The slot of a session not seen
 * yet is the least recently used one. */
static bool sources_checks_admit(SourcesChecks *s, const SessionKey *session, usec_t now, unsigned *ret_wait) {
        SessionSlot *slot = NULL, *oldest = &s->sessions[0];

        for (size_t i = 0; i < SOURCES_CHECK_SESSIONS; i++) {
                SessionSlot *e = &s->sessions[i];

                if (e->last != 0 && memcmp(&e->session, session, sizeof *session) == 0) {
                        slot = e;
                        break;
                }
                if (e->last < oldest->last)
                        oldest = e;
        }
        if (slot && now < slot->last + SOURCES_CHECK_INTERVAL_USEC) {
                *ret_wait =
                        (unsigned) ((slot->last + SOURCES_CHECK_INTERVAL_USEC - now + USEC_PER_SEC - 1) / USEC_PER_SEC);
                return false;
        }
        if (s->in_flight >= SOURCES_CHECK_IN_FLIGHT_MAX) {
                *ret_wait = 1;
                return false;
        }
        if (!slot) {
                slot = oldest;
                slot->session = *session;
        }
        slot->last = now;
        return true;
}

/* The record's sources, each with what the wiki says of it now (NULL revs:
 * none checked). */
static json_object *sources_render(
        const Source *sources, size_t n, const MediaWikiRevision *revs, size_t n_revs, char *const *withheld) {
        static const MediaWikiRevision missing = { .missing = true };
        _cleanup_(json_object_putp) json_object *list = json_object_new_array();

        if (!list)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                const char *title = sources[i].title;
                uint64_t rev = sources[i].has_revision_id ? sources[i].revision_id : 0;
                const MediaWikiRevision *now = NULL;
                _cleanup_(json_object_putp) json_object *o = json_object_new_object();

                /* A page the person may not read now reads as a missing one. */
                if (title && strv_contains(withheld, title))
                        now = &missing;
                for (size_t k = 0; title && !now && k < n_revs; k++)
                        if (streq(revs[k].title, title)) {
                                now = &revs[k];
                                break;
                        }
                if (!o || json_add(o, "title", json_string(title)) < 0 ||
                    json_add(o, "url", json_string(sources[i].url)) < 0 ||
                    json_add(o, "revision_id", json_object_new_uint64(rev)) < 0)
                        return NULL;
                /* Not checked (past the first MEDIAWIKI_TITLES_MAX): all null. */
                if (!now) {
                        if (json_object_object_add(o, "current_revision_id", NULL) < 0 ||
                            json_object_object_add(o, "changed", NULL) < 0 ||
                            json_object_object_add(o, "missing", NULL) < 0)
                                return NULL;
                } else {
                        if ((now->missing ? json_object_object_add(o, "current_revision_id", NULL) :
                                            json_add(
                                                    o,
                                                    "current_revision_id",
                                                    json_object_new_uint64(now->revision_id))) < 0 ||
                            json_add(
                                    o,
                                    "changed",
                                    json_object_new_boolean(now->missing || now->revision_id != rev)) < 0 ||
                            json_add(o, "missing", json_object_new_boolean(now->missing)) < 0)
                                return NULL;
                }
                if (json_object_array_add(list, TAKE_PTR(o)) < 0)
                        return NULL;
        }
        return TAKE_PTR(list);
}

static HttpHandlerResult sources_reply(
        HttpRequest *req,
        const char *id,
        const Source *sources,
        size_t n_sources,
        const MediaWikiRevision *revs,
        size_t n_revs,
        char *const *withheld) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        char t[RFC3339_MS_MAX];

        if (!o || json_add(o, "id", json_string(id)) < 0 ||
            json_add(o, "checked_at", json_string(format_rfc3339_ms(t, now(CLOCK_REALTIME)))) < 0 ||
            json_add(o, "sources", sources_render(sources, n_sources, revs, n_revs, withheld)) < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        return http_reply(req, 200, render_body(o), NULL);
}

static void sources_check_on_done(RevisionCheck *rc, int error, const WikiResult *r, void *userdata) {
        SourcesCheck *c = userdata;
        const RouteMatch *m = http_request_route(c->req);

        if (error < 0) {
                log_info("Sources of %s: the wiki could not be asked: %s", m->id, r->message ? r->message : "");
                (void) http_reply_error(c->req, r->api_error, r->message, NULL);
        } else
                (void) sources_reply(
                        c->req, m->id, c->sources, c->n_sources, r->revisions, r->n_revisions, c->withheld);
        sources_check_free(c);
}

/* Person mode: the person's read check came back. The titles they may read
 * are asked for their revisions; the others answer as missing. A check
 * that could not be made fails the request (fail closed). */
static void sources_check_on_readable(
        ManagerReadableCheck *rc,
        int error,
        ApiError api_error,
        const char *message,
        const bool *readable_titles,
        size_t n_readable,
        void *userdata) {
        SourcesCheck *c = userdata;
        const RouteMatch *m = http_request_route(c->req);
        _cleanup_(strv_freep) char **readable = NULL;
        size_t n = strv_length(c->titles), k = 0, w = 0;
        int q;

        /* What the check reports belongs to c->readable: freed only once read. */
        if (error < 0) {
                log_info("Sources of %s: the read check failed: %s", m->id, api_error_to_string(api_error));
                (void) http_reply_error(c->req, API_ERROR_WIKI_AUTH_FAILED, message, NULL);
                sources_check_free(c);
                return;
        }
        readable = calloc(n + 1, sizeof(char *));
        c->withheld = calloc(n + 1, sizeof(char *));
        if (!readable || !c->withheld)
                goto fail;
        for (size_t i = 0; i < n; i++) {
                bool ok = i < n_readable && readable_titles[i];
                char **l = ok ? readable : c->withheld;
                size_t *at = ok ? &k : &w;

                l[*at] = strdup(c->titles[i]);
                if (!l[(*at)++])
                        goto fail;
        }
        if (w > 0)
                metrics_count_withheld("sources", (unsigned) w);
        c->readable = manager_readable_check_free(c->readable);
        if (k == 0) {
                (void) sources_reply(c->req, m->id, c->sources, c->n_sources, NULL, 0, c->withheld);
                sources_check_free(c);
                return;
        }
        q = manager_check_revisions(c->owner->manager, readable, sources_check_on_done, c, &c->check);
        if (q >= 0)
                return;
fail:
        (void) http_reply_error(c->req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        sources_check_free(c);
}

HttpHandlerResult sources_checks_handle(SourcesChecks *s, HttpRequest *req, const HistoryRecord *record) {
        _cleanup_(strv_freep) char **titles = NULL;
        Source *sources = NULL;
        SourcesCheck *c;
        size_t n, n_titles;
        unsigned wait;
        int r;

        assert(s);
        assert(req);
        assert(record);

        n = record->n_sources;
        if (n == 0)
                return sources_reply(req, record->id, NULL, 0, NULL, 0, NULL);

        if (!sources_checks_admit(s, http_request_session(req), now(CLOCK_MONOTONIC), &wait)) {
                char retry[16];
                const char *h[] = { "Retry-After", retry, NULL };

                snprintf(retry, sizeof retry, "%u", wait);
                return http_reply_error(req, API_ERROR_RATE_LIMITED, "Too many checks of sources", h);
        }

        n_titles = MIN(n, (size_t) MEDIAWIKI_TITLES_MAX);
        titles = calloc(n_titles + 1, sizeof(char *));
        if (!titles)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        for (size_t i = 0, k = 0; i < n_titles; i++) {
                const char *t = record->sources[i].title;

                /* A title the wiki gave this daemon; one it would not take is left unchecked. */
                if (!t || !mediawiki_title_is_valid(t))
                        continue;
                titles[k] = strdup(t);
                if (!titles[k++])
                        return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        }
        if (!titles[0])
                return sources_reply(req, record->id, record->sources, n, NULL, 0, NULL);

        c = calloc(1, sizeof *c);
        if (!c || source_copy_many(record->sources, n, &sources) < 0) {
                free(c);
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        }
        if (manager_reads_as_person(s->manager)) {
                /* Person mode: first what the asking person may read now. */
                r = manager_check_readable(
                        s->manager, http_request_user(req), titles, sources_check_on_readable, c, &c->readable);
                if (r >= 0)
                        c->titles = TAKE_PTR(titles);
        } else
                r = manager_check_revisions(s->manager, titles, sources_check_on_done, c, &c->check);
        if (r < 0) {
                free(c);
                source_free_many(sources, n);
                if (r == -EOPNOTSUPP)
                        return http_reply_error(
                                req, API_ERROR_EXECUTION_FAILED, "The wiki is not configured", NULL);
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        }
        c->owner = s;
        c->req = req;
        c->sources = TAKE_PTR(sources);
        c->n_sources = n;
        LIST_PREPEND(checks, s->checks_head, c);
        s->in_flight++;
        http_request_suspend(req);
        return HTTP_SUSPENDED;
}
