/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <json-c/json.h>
#include <stdio.h>

#include "api/render.h"
#include "api/sources-check.h"
#include "manager/manager-ops.h"
#include "shared/json-util.h"
#include "shared/list.h"
#include "shared/log.h"
#include "shared/strv.h"
#include "shared/time-util.h"

typedef struct SourcesCheck SourcesCheck;

struct SourcesCheck {
        SourcesChecks *owner;
        HttpRequest *req;
        ManagerSourcesCheck *check;
        Source *sources; /* the record's, to answer with */
        size_t n_sources;
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
        manager_sources_check_free(c->check);
        source_free_many(c->sources, c->n_sources);
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

/* The record's sources, each with what the Manager's check says of it now
 * (NULL: none checked). */
static json_object *sources_render(const Source *sources, size_t n, const ManagerSources *now) {
        _cleanup_(json_object_putp) json_object *list = json_object_new_array();

        if (!list)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                const char *title = sources[i].title;
                uint64_t rev = sources[i].has_revision_id ? sources[i].revision_id : 0;
                const ManagerSourceState *st = NULL;
                _cleanup_(json_object_putp) json_object *o = json_object_new_object();

                for (size_t k = 0; title && now && k < now->n; k++)
                        if (now->sources[k].checked && streq(now->sources[k].title, title)) {
                                st = &now->sources[k];
                                break;
                        }
                if (!o || json_add(o, "title", json_string(title)) < 0 ||
                    json_add(o, "url", json_string(sources[i].url)) < 0 ||
                    json_add(o, "revision_id", json_object_new_uint64(rev)) < 0)
                        return NULL;
                /* Not checked (past the first MANAGER_SOURCES_MAX, or not a title): all null. */
                if (!st) {
                        if (json_object_object_add(o, "current_revision_id", NULL) < 0 ||
                            json_object_object_add(o, "changed", NULL) < 0 ||
                            json_object_object_add(o, "missing", NULL) < 0)
                                return NULL;
                } else {
                        if ((st->missing ?
                                     json_object_object_add(o, "current_revision_id", NULL) :
                                     json_add(o, "current_revision_id", json_object_new_uint64(st->revision_id))) <
                                    0 ||
                            json_add(
                                    o,
                                    "changed",
                                    json_object_new_boolean(st->missing || st->revision_id != rev)) < 0 ||
                            json_add(o, "missing", json_object_new_boolean(st->missing)) < 0)
                                return NULL;
                }
                if (json_object_array_add(list, TAKE_PTR(o)) < 0)
                        return NULL;
        }
        return TAKE_PTR(list);
}

static HttpHandlerResult sources_reply(
        HttpRequest *req, const char *id, const Source *sources, size_t n, const ManagerSources *now_) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        char t[RFC3339_MS_MAX];

        if (!o || json_add(o, "id", json_string(id)) < 0 ||
            json_add(o, "checked_at", json_string(format_rfc3339_ms(t, now(CLOCK_REALTIME)))) < 0 ||
            json_add(o, "sources", sources_render(sources, n, now_)) < 0)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        return http_reply(req, 200, render_body(o), NULL);
}

/* The Manager's check came back; one that could not be made fails the
 * request (fail closed in person mode). */
static void sources_check_on_done(
        ManagerSourcesCheck *mc, const ManagerError *error, const ManagerSources *result, void *userdata) {
        SourcesCheck *c = userdata;
        const RouteMatch *m = http_request_route(c->req);

        if (error)
                (void) http_reply_error(c->req, error->api_error, error->message, NULL);
        else
                (void) sources_reply(c->req, m->id, c->sources, c->n_sources, result);
        sources_check_free(c);
}

HttpHandlerResult sources_checks_handle(SourcesChecks *s, HttpRequest *req, const HistoryRecord *record) {
        _cleanup_(strv_freep) char **titles = NULL;
        Source *sources = NULL;
        SourcesCheck *c;
        ManagerError e;
        size_t n, n_titles;
        unsigned wait;
        int r;

        assert(s);
        assert(req);
        assert(record);

        n = record->n_sources;
        if (n == 0)
                return sources_reply(req, record->id, NULL, 0, NULL);

        if (!sources_checks_admit(s, http_request_session(req), now(CLOCK_MONOTONIC), &wait)) {
                char retry[16];
                const char *h[] = { "Retry-After", retry, NULL };

                snprintf(retry, sizeof retry, "%u", wait);
                return http_reply_error(req, API_ERROR_RATE_LIMITED, "Too many checks of sources", h);
        }

        /* The Manager asks for the first MANAGER_SOURCES_MAX; a title the
         * wiki would not take is left unchecked. */
        n_titles = MIN(n, (size_t) MANAGER_SOURCES_MAX);
        titles = calloc(n_titles + 1, sizeof(char *));
        if (!titles)
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        for (size_t i = 0; i < n_titles; i++) {
                titles[i] = strdup(record->sources[i].title);
                if (!titles[i])
                        return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        }

        c = calloc(1, sizeof *c);
        if (!c || source_copy_many(record->sources, n, &sources) < 0) {
                free(c);
                return http_reply_error(req, API_ERROR_INTERNAL_ERROR, NULL, NULL);
        }
        r = manager_check_sources(
                s->manager, http_request_user(req), titles, sources_check_on_done, c, &c->check, &e);
        if (r < 0) {
                free(c);
                source_free_many(sources, n);
                return http_reply_error(req, e.api_error, e.message, NULL);
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
