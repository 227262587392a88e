/* SPDX-License-Identifier: MIT */
/* What a person may read on the wiki, asked through the Manager: the one
 * read check (batched, failing closed the same way for every caller), a
 * record's sources with their current revisions, and the unanswered
 * report with the editor's pages only. */
#include <assert.h>
#include <limits.h>

#include "manager/manager-ops.h"
#include "metrics/metrics.h"
#include "query/mediawiki.h"
#include "query/read-check.h"
#include "query/wiki-client.h"
#include "shared/log.h"
#include "shared/strv.h"

/* A start of any of the three that runs out of memory: internal_error. */
static int manager_readable_oom(ManagerError *ret_error) {
        *ret_error = (ManagerError){ API_ERROR_INTERNAL_ERROR, NULL };
        return -ENOMEM;
}

/* ---- the read check ---- */

struct ManagerReadableCheck {
        Manager *manager;
        char *user;
        char **titles;          /* as asked */
        bool *readable;         /* one per title */
        size_t *ask;            /* the indexes of the valid titles, in order */
        size_t n_ask;           /* how many */
        size_t next;            /* the first of ask[] not asked yet */
        size_t n_batch;         /* how many the check in flight asks */
        RevisionCheck *check;   /* person mode: the batch in flight */
        sd_event_source *defer; /* the answer without asking: service mode, nothing to ask */
        char *message;          /* the error's, while done runs */
        ManagerReadableDone done;
        void *userdata;
};

ManagerReadableCheck *manager_readable_check_free(ManagerReadableCheck *c) {
        if (!c)
                return NULL;
        revision_check_free(c->check);
        sd_event_source_disable_unref(c->defer);
        strv_free(c->titles);
        free(c->readable);
        free(c->ask);
        free(c->message);
        free(c->user);
        free(c);
        return NULL;
}

static void manager_readable_succeed(ManagerReadableCheck *c) {
        c->done(c,
                NULL,
                &(ManagerReadable){ .titles = c->titles, .readable = c->readable, .n = strv_length(c->titles) },
                c->userdata);
}

/* Fail closed: the one error of every read check that could not be made. */
static void manager_readable_fail(ManagerReadableCheck *c, ApiError cause, const char *message) {
        ManagerError e = { .api_error = READ_CHECK_API_ERROR };

        if (read_check_failure(cause, message, &c->message) >= 0)
                e.message = c->message;
        c->done(c, &e, NULL, c->userdata);
}

static int manager_readable_ask(ManagerReadableCheck *c);

static void manager_readable_on_check(RevisionCheck *rc, int error, const WikiResult *r, void *userdata) {
        ManagerReadableCheck *c = userdata;
        int k;

        metrics_count_read_check(error >= 0 && r->n_readable == c->n_batch);
        if (error < 0) {
                log_info("The read check failed: %s", api_error_to_string(r->api_error));
                manager_readable_fail(c, r->api_error, r->message);
                return;
        }
        if (r->n_readable != c->n_batch) {
                log_info("The read check answered for %zu titles of %zu.", r->n_readable, c->n_batch);
                manager_readable_fail(c, API_ERROR_UPSTREAM_FAILED, NULL);
                return;
        }
        for (size_t i = 0; i < c->n_batch; i++)
                c->readable[c->ask[c->next + i]] = r->readable[i];
        c->next += c->n_batch;
        c->check = revision_check_free(c->check);
        if (c->next >= c->n_ask) {
                manager_readable_succeed(c);
                return;
        }
        k = manager_readable_ask(c);
        if (k < 0) {
                log_warning_errno(k, "The read check's next batch could not be asked");
                manager_readable_fail(c, API_ERROR_INTERNAL_ERROR, NULL);
        }
}

/* The next batch of at most MEDIAWIKI_TITLES_MAX titles. */
static int manager_readable_ask(ManagerReadableCheck *c) {
        char *batch[MEDIAWIKI_TITLES_MAX + 1] = { NULL };

        c->n_batch = MIN(c->n_ask - c->next, (size_t) MEDIAWIKI_TITLES_MAX);
        for (size_t i = 0; i < c->n_batch; i++)
                batch[i] = c->titles[c->ask[c->next + i]];
        return query_executor_check_readable(
                manager_get_executor(c->manager), c->user, batch, manager_readable_on_check, c, &c->check);
}

static int manager_readable_on_defer(sd_event_source *s, void *userdata) {
        ManagerReadableCheck *c = userdata;

        (void) sd_event_source_set_enabled(s, SD_EVENT_OFF);
        manager_readable_succeed(c);
        return 0;
}

int manager_check_readable(
        Manager *m,
        const char *user,
        char *const *titles,
        ManagerReadableDone done,
        void *userdata,
        ManagerReadableCheck **ret,
        ManagerError *ret_error) {
        _cleanup_(manager_readable_check_freep) ManagerReadableCheck *c = NULL;
        bool person = manager_reads_as_person(m);
        size_t n = strv_length((char **) titles);
        int r;

        assert(m);
        assert(done);
        assert(ret);
        assert(ret_error);

        c = calloc(1, sizeof *c);
        if (!c)
                return manager_readable_oom(ret_error);
        *c = (ManagerReadableCheck){ .manager = m, .done = done, .userdata = userdata };
        c->titles = strv_copy((char **) titles);
        c->readable = calloc(n + 1, sizeof(bool));
        c->ask = calloc(n + 1, sizeof(size_t));
        if (!c->titles || !c->readable || !c->ask || (user && !(c->user = strdup(user))))
                return manager_readable_oom(ret_error);
        /* A title the wiki would not take is never readable, in either mode. */
        for (size_t i = 0; i < n; i++)
                if (mediawiki_title_is_valid(c->titles[i])) {
                        c->ask[c->n_ask++] = i;
                        c->readable[i] = !person;
                }
        if (person && c->n_ask > 0 && !manager_get_config(m)->wiki_api_url) {
                *ret_error = (ManagerError){ API_ERROR_EXECUTION_FAILED, "The wiki is not configured" };
                return -EOPNOTSUPP;
        }
        if (person && c->n_ask > 0)
                r = manager_readable_ask(c);
        else {
                r = sd_event_add_defer(manager_get_event(m), &c->defer, manager_readable_on_defer, c);
                if (r >= 0)
                        (void) sd_event_source_set_description(c->defer, "manager-readable");
        }
        if (r == -ENOMEM)
                return manager_readable_oom(ret_error);
        if (r == -EOPNOTSUPP) {
                *ret_error = (ManagerError){ API_ERROR_EXECUTION_FAILED, "The wiki is not configured" };
                return r;
        }
        if (r < 0) {
                *ret_error = (ManagerError){ API_ERROR_INTERNAL_ERROR, NULL };
                return log_error_errno(r, "The read check could not be started");
        }
        *ret = TAKE_PTR(c);
        return 0;
}

/* ---- a record's sources ---- */

struct ManagerSourcesCheck {
        Manager *manager;
        char **titles;                  /* those asked, at most MEDIAWIKI_TITLES_MAX */
        ManagerSourceState *state;      /* one per title */
        ManagerReadableCheck *readable; /* person mode: first what the person may read */
        RevisionCheck *revisions;
        char *message;
        ManagerSourcesDone done;
        void *userdata;
};

ManagerSourcesCheck *manager_sources_check_free(ManagerSourcesCheck *c) {
        if (!c)
                return NULL;
        manager_readable_check_free(c->readable);
        revision_check_free(c->revisions);
        strv_free(c->titles);
        free(c->state);
        free(c->message);
        free(c);
        return NULL;
}

static void manager_sources_answer(ManagerSourcesCheck *c) {
        c->done(c, NULL, &(ManagerSources){ .sources = c->state, .n = strv_length(c->titles) }, c->userdata);
}

static void manager_sources_on_revisions(RevisionCheck *rc, int error, const WikiResult *r, void *userdata) {
        ManagerSourcesCheck *c = userdata;

        if (error < 0) {
                ManagerError e = { .api_error = r->api_error };

                log_info("Sources: the wiki could not be asked: %s", api_error_to_string(r->api_error));
                if (r->message && (c->message = strdup(r->message)))
                        e.message = c->message;
                c->done(c, &e, NULL, c->userdata);
                return;
        }
        for (size_t i = 0; c->titles[i]; i++)
                for (size_t k = 0; !c->state[i].withheld && k < r->n_revisions; k++)
                        if (streq(r->revisions[k].title, c->titles[i])) {
                                c->state[i].checked = true;
                                c->state[i].missing = r->revisions[k].missing;
                                c->state[i].revision_id = r->revisions[k].revision_id;
                                break;
                        }
        manager_sources_answer(c);
}

/* The revisions of the titles not withheld; none: answered now. */
static void manager_sources_ask_revisions(ManagerSourcesCheck *c) {
        _cleanup_free_ char **ask = calloc(strv_length(c->titles) + 1, sizeof(char *));
        size_t n = 0;
        int r;

        if (!ask) {
                c->done(c, &(ManagerError){ API_ERROR_INTERNAL_ERROR, NULL }, NULL, c->userdata);
                return;
        }
        for (size_t i = 0; c->titles[i]; i++)
                if (!c->state[i].withheld && mediawiki_title_is_valid(c->titles[i]))
                        ask[n++] = c->titles[i];
        if (n == 0) {
                manager_sources_answer(c);
                return;
        }
        r = query_executor_check_revisions(
                manager_get_executor(c->manager), ask, manager_sources_on_revisions, c, &c->revisions);
        if (r < 0) {
                log_warning_errno(r, "Sources: the revision check could not be started");
                c->done(c, &(ManagerError){ API_ERROR_INTERNAL_ERROR, NULL }, NULL, c->userdata);
        }
}

static void manager_sources_on_readable(
        ManagerReadableCheck *rc, const ManagerError *error, const ManagerReadable *result, void *userdata) {
        ManagerSourcesCheck *c = userdata;
        unsigned withheld = 0;

        if (error) {
                c->done(c, error, NULL, c->userdata);
                return;
        }
        for (size_t i = 0; i < result->n; i++)
                if (!result->readable[i] && mediawiki_title_is_valid(c->titles[i])) {
                        /* A page the person may not read now reads as a missing one. */
                        c->state[i] = (ManagerSourceState){
                                .title = c->titles[i], .checked = true, .missing = true, .withheld = true
                        };
                        withheld++;
                }
        if (withheld > 0)
                metrics_count_withheld("sources", withheld);
        c->readable = manager_readable_check_free(c->readable);
        manager_sources_ask_revisions(c);
}

int manager_check_sources(
        Manager *m,
        const char *user,
        char *const *titles,
        ManagerSourcesDone done,
        void *userdata,
        ManagerSourcesCheck **ret,
        ManagerError *ret_error) {
        _cleanup_(manager_sources_check_freep) ManagerSourcesCheck *c = NULL;
        size_t n = MIN(strv_length((char **) titles), (size_t) MANAGER_SOURCES_MAX);
        int r;

        assert(m);
        assert(done);
        assert(ret);
        assert(ret_error);
        _Static_assert(MANAGER_SOURCES_MAX <= MEDIAWIKI_TITLES_MAX, "one request");

        if (!manager_get_config(m)->wiki_api_url) {
                *ret_error = (ManagerError){ API_ERROR_EXECUTION_FAILED, "The wiki is not configured" };
                return -EOPNOTSUPP;
        }
        c = calloc(1, sizeof *c);
        if (!c)
                return manager_readable_oom(ret_error);
        *c = (ManagerSourcesCheck){ .manager = m, .done = done, .userdata = userdata };
        c->titles = calloc(n + 1, sizeof(char *));
        c->state = calloc(n + 1, sizeof(ManagerSourceState));
        if (!c->titles || !c->state)
                return manager_readable_oom(ret_error);
        for (size_t i = 0; i < n; i++) {
                c->titles[i] = strdup(titles[i]);
                if (!c->titles[i])
                        return manager_readable_oom(ret_error);
                c->state[i].title = c->titles[i];
        }
        /* Service mode: a defer's "all readable", so the same path in both. */
        r = manager_check_readable(m, user, c->titles, manager_sources_on_readable, c, &c->readable, ret_error);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(c);
        return 0;
}

/* ---- the unanswered report ---- */

struct ManagerReportCheck {
        Manager *manager;
        char *user;
        Report *report;
        HistoryJob *job; /* the report's queries, on the store's worker */
        ManagerReadableCheck *readable;
        ManagerReportDone done;
        void *userdata;
};

/* The report's queries, on the worker's thread. */
typedef struct ReportJob {
        usec_t since;
        Report *report;
} ReportJob;

static void report_job_free(void *p) {
        ReportJob *j = p;

        if (!j)
                return;
        report_free(j->report);
        free(j);
}

static int report_job_run(History *h, void *data) {
        ReportJob *j = data;

        return report_unanswered(h, j->since, &j->report);
}

ManagerReportCheck *manager_report_check_free(ManagerReportCheck *c) {
        if (!c)
                return NULL;
        c->job = history_job_cancel(c->job);
        manager_readable_check_free(c->readable);
        report_free(c->report);
        free(c->user);
        free(c);
        return NULL;
}

/* Only the pages the editor may read stay in the report (API.md "Whose
 * permissions"); how many did not is counted, never which. */
static void manager_report_on_readable(
        ManagerReadableCheck *rc, const ManagerError *error, const ManagerReadable *result, void *userdata) {
        ManagerReportCheck *c = userdata;
        size_t n;

        if (error) {
                c->done(c, error, NULL, c->userdata);
                return;
        }
        n = report_keep_pages(c->report, result->titles, result->readable);
        if (n > 0) {
                metrics_count_withheld("report", (unsigned) MIN(n, (size_t) UINT_MAX));
                log_info("Unanswered report: pages withheld from the editor reading it: %zu", n);
        }
        /* A search's result count is what it found for the person who
         * asked that query: the reader's own cannot be known without
         * searching again, so it is left out. */
        if (manager_reads_as_person(c->manager))
                for (size_t g = 0; g < c->report->n_groups; g++)
                        for (size_t i = 0; i < c->report->groups[g].n_searches; i++)
                                c->report->groups[g].searches[i].results = -1;
        c->done(c, NULL, c->report, c->userdata);
}

/* The report is made (on the worker): then the read check of its pages. */
static void manager_report_on_made(HistoryJob *job, int error, void *data, void *userdata) {
        ManagerReportCheck *c = userdata;
        _cleanup_(strv_freep) char **titles = NULL;
        ReportJob *j = data;
        ManagerError e;
        int r;

        c->job = NULL;
        if (error < 0) {
                log_error_errno(error, "The unanswered report could not be made");
                c->done(c, &(ManagerError){ API_ERROR_INTERNAL_ERROR, NULL }, NULL, c->userdata);
                return;
        }
        c->report = TAKE_PTR(j->report);
        titles = report_page_titles(c->report);
        if (!titles) {
                c->done(c, &(ManagerError){ API_ERROR_INTERNAL_ERROR, NULL }, NULL, c->userdata);
                return;
        }
        r = manager_check_readable(
                c->manager, c->user, titles, manager_report_on_readable, c, &c->readable, &e);
        if (r < 0)
                c->done(c, &e, NULL, c->userdata);
}

int manager_report_unanswered(
        Manager *m,
        const char *user,
        usec_t since,
        ManagerReportDone done,
        void *userdata,
        ManagerReportCheck **ret,
        ManagerError *ret_error) {
        _cleanup_(manager_report_check_freep) ManagerReportCheck *c = NULL;
        ReportJob *j;
        int r;

        assert(m);
        assert(done);
        assert(ret);
        assert(ret_error);

        if (!config_is_editor(manager_get_config(m), user)) {
                *ret_error = (ManagerError){ API_ERROR_ORIGIN_DENIED, "The report is for the wiki's editors" };
                return -EPERM;
        }
        c = calloc(1, sizeof *c);
        if (!c)
                return manager_readable_oom(ret_error);
        *c = (ManagerReportCheck){ .manager = m, .done = done, .userdata = userdata };
        if (user && !(c->user = strdup(user)))
                return manager_readable_oom(ret_error);
        j = calloc(1, sizeof *j);
        if (!j)
                return manager_readable_oom(ret_error);
        j->since = since;
        /* Its queries read the window's records off the loop. */
        r = history_worker_submit(
                manager_get_history_worker(m),
                report_job_run,
                j,
                report_job_free,
                manager_report_on_made,
                c,
                &c->job);
        if (r < 0) {
                *ret_error = (ManagerError){ API_ERROR_INTERNAL_ERROR, NULL };
                return log_error_errno(r, "The unanswered report could not be started");
        }
        *ret = TAKE_PTR(c);
        return 0;
}
