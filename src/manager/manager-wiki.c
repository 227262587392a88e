/* SPDX-License-Identifier: MIT */
/* The wiki for a person outside a query: a search and a read, filtered by
 * the Manager's read check as a query's tools filter. */
#include <assert.h>

#include "manager/manager-ops.h"
#include "metrics/metrics.h"
#include "query/mediawiki.h"
#include "query/wiki-client.h"
#include "shared/log.h"
#include "shared/strv.h"

struct ManagerWikiOperation {
        Manager *manager;
        char *user;
        bool search;
        unsigned limit;
        RevisionCheck *wiki;
        WikiResult result; /* taken from the wiki's answer */
        ManagerReadableCheck *check;
        ManagerWikiHit *hits;
        char *message;
        ManagerWikiSearchDone search_done;
        ManagerWikiReadDone read_done;
        void *userdata;
};

ManagerWikiOperation *manager_wiki_operation_free(ManagerWikiOperation *o) {
        if (!o)
                return NULL;
        revision_check_free(o->wiki);
        manager_readable_check_free(o->check);
        wiki_result_done(&o->result);
        free(o->hits);
        free(o->message);
        free(o->user);
        free(o);
        return NULL;
}

static void manager_wiki_fail(ManagerWikiOperation *o, const ManagerError *e) {
        if (o->search)
                o->search_done(o, e, NULL, o->userdata);
        else
                o->read_done(o, e, NULL, o->userdata);
}

/* A search keeps the first limit hits the person may read. */
static void manager_wiki_answer_search(ManagerWikiOperation *o, const bool *readable, size_t n) {
        WikiResult *r = &o->result;
        unsigned withheld = 0;
        size_t kept = 0;

        o->hits = calloc(r->n_hits + 1, sizeof *o->hits);
        if (!o->hits) {
                manager_wiki_fail(o, &(ManagerError){ API_ERROR_INTERNAL_ERROR, NULL });
                return;
        }
        for (size_t i = 0; i < r->n_hits; i++) {
                bool ok = readable ? i < n && readable[i] : true;

                if (!ok)
                        withheld++;
                else if (kept < o->limit)
                        o->hits[kept++] = (ManagerWikiHit){ .title = r->hits[i].title,
                                                            .snippet = r->hits[i].snippet };
        }
        if (withheld > 0)
                metrics_count_withheld("search", withheld);
        o->search_done(o, NULL, &(ManagerWikiHits){ .hits = o->hits, .n = kept }, o->userdata);
}

/* A page the person may not read becomes the missing page of the title
 * asked for, exactly as the wiki reports a page that does not exist. */
static void manager_wiki_answer_read(ManagerWikiOperation *o, const bool *readable, size_t n) {
        WikiPage *p = &o->result.page;
        bool withheld = false;

        for (size_t i = 0; readable && i < n; i++)
                withheld = withheld || !readable[i];
        if (withheld) {
                char *asked = p->redirected_from ? p->redirected_from : p->title;

                if (asked == p->redirected_from)
                        p->redirected_from = NULL;
                else
                        p->title = NULL;
                wiki_page_done(p);
                *p = (WikiPage){ .missing = true, .title = asked };
                metrics_count_withheld("read", 1);
        }
        o->read_done(o, NULL, p, o->userdata);
}

static void manager_wiki_on_readable(
        ManagerReadableCheck *c, const ManagerError *error, const ManagerReadable *result, void *userdata) {
        ManagerWikiOperation *o = userdata;

        if (error) {
                manager_wiki_fail(o, error);
                return;
        }
        if (o->search)
                manager_wiki_answer_search(o, result->readable, result->n);
        else
                manager_wiki_answer_read(o, result->readable, result->n);
}

/* The titles of the answer the person must be allowed to read. */
static char **manager_wiki_titles(const ManagerWikiOperation *o) {
        _cleanup_(strv_freep) char **l = calloc(1, sizeof(char *));
        size_t n = 0;

        if (!l)
                return NULL;
        if (o->search) {
                for (size_t i = 0; i < MIN(o->result.n_hits, (size_t) MEDIAWIKI_TITLES_MAX); i++)
                        if (strv_extend_unique(&l, &n, o->result.hits[i].title) < 0)
                                return NULL;
        } else if (!o->result.page.missing && o->result.page.title) {
                if (strv_extend_unique(&l, &n, o->result.page.title) < 0 ||
                    (o->result.page.redirected_from &&
                     strv_extend_unique(&l, &n, o->result.page.redirected_from) < 0))
                        return NULL;
        }
        return TAKE_PTR(l);
}

static void manager_wiki_on_wiki(RevisionCheck *c, int error, const WikiResult *r, void *userdata) {
        ManagerWikiOperation *o = userdata;
        _cleanup_(strv_freep) char **titles = NULL;
        ManagerError e;
        int k;

        if (error < 0) {
                e = (ManagerError){ .api_error = r->api_error };
                if (r->message && (o->message = strdup(r->message)))
                        e.message = o->message;
                manager_wiki_fail(o, &e);
                return;
        }
        revision_check_take_result(c, &o->result);
        o->wiki = revision_check_free(o->wiki);
        titles = manager_wiki_titles(o);
        if (!titles) {
                manager_wiki_fail(o, &(ManagerError){ API_ERROR_INTERNAL_ERROR, NULL });
                return;
        }
        if (!manager_reads_as_person(o->manager) || !titles[0]) {
                if (o->search)
                        manager_wiki_answer_search(o, NULL, 0);
                else
                        manager_wiki_answer_read(o, NULL, 0);
                return;
        }
        k = manager_check_readable(o->manager, o->user, titles, manager_wiki_on_readable, o, &o->check, &e);
        if (k < 0)
                manager_wiki_fail(o, &e);
}

static int manager_wiki_start(
        Manager *m,
        const char *user,
        bool search,
        const char *arg,
        unsigned limit,
        ManagerWikiSearchDone search_done,
        ManagerWikiReadDone read_done,
        void *userdata,
        ManagerWikiOperation **ret,
        ManagerError *ret_error) {
        _cleanup_(manager_wiki_operation_freep) ManagerWikiOperation *o = NULL;
        QueryExecutor *x = manager_get_executor(m);
        int r;

        o = calloc(1, sizeof *o);
        if (!o || (user && !(o->user = strdup(user)))) {
                *ret_error = (ManagerError){ API_ERROR_INTERNAL_ERROR, NULL };
                return -ENOMEM;
        }
        o->manager = m;
        o->search = search;
        o->limit = limit;
        o->userdata = userdata;
        o->search_done = search_done;
        o->read_done = read_done;
        /* A person may read less than the wiki finds: the check sees up to
         * MEDIAWIKI_SEARCH_MAX hits (one request), as a query's does. */
        r = search ? query_executor_wiki_search(
                             x,
                             arg,
                             manager_reads_as_person(m) ? MEDIAWIKI_SEARCH_MAX : limit,
                             manager_wiki_on_wiki,
                             o,
                             &o->wiki) :
                     query_executor_wiki_read(x, arg, manager_wiki_on_wiki, o, &o->wiki);
        if (r == -EINVAL)
                *ret_error = (ManagerError){ API_ERROR_INVALID_INPUT,
                                             search ? "Invalid search" : "Invalid title" };
        else if (r == -EOPNOTSUPP)
                *ret_error = (ManagerError){ API_ERROR_EXECUTION_FAILED, "The wiki is not configured" };
        else if (r < 0)
                *ret_error = (ManagerError){ API_ERROR_INTERNAL_ERROR, NULL };
        if (r < 0)
                return r;
        *ret = TAKE_PTR(o);
        return 0;
}

int manager_wiki_search(
        Manager *m,
        const char *user,
        const char *query,
        unsigned limit,
        ManagerWikiSearchDone done,
        void *userdata,
        ManagerWikiOperation **ret,
        ManagerError *ret_error) {
        assert(m);
        assert(query);
        assert(done);
        assert(ret);
        assert(ret_error);

        if (limit < 1 || limit > MANAGER_WIKI_SEARCH_MAX) {
                *ret_error = (ManagerError){ API_ERROR_INVALID_INPUT, "limit must be 1 to 50" };
                return -EINVAL;
        }
        return manager_wiki_start(m, user, true, query, limit, done, NULL, userdata, ret, ret_error);
}

int manager_wiki_read(
        Manager *m,
        const char *user,
        const char *title,
        ManagerWikiReadDone done,
        void *userdata,
        ManagerWikiOperation **ret,
        ManagerError *ret_error) {
        assert(m);
        assert(title);
        assert(done);
        assert(ret);
        assert(ret_error);

        if (!mediawiki_title_is_valid(title)) {
                *ret_error = (ManagerError){ API_ERROR_INVALID_INPUT, "Invalid title" };
                return -EINVAL;
        }
        return manager_wiki_start(m, user, false, title, 0, NULL, done, userdata, ret, ret_error);
}
