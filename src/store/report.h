/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "shared/macro.h"
#include "shared/time-util.h"
#include "store/history.h"

/* What the wiki could not answer (API.md 9.2): the records of every
 * session finished since a time that carry a signal (HISTORY_SIGNAL_*, or
 * a "down" rating), grouped by wording (store/wording.h), most asked
 * first. Names nobody: no session, user or record id is in it. */

/* Bounds of the report. */
#define REPORT_DAYS_MIN 1u
#define REPORT_DAYS_MAX 365u
#define REPORT_DAYS_DEFAULT 30u
#define REPORT_GROUPS_MAX 100u  /* the most asked groups */
#define REPORT_WORDINGS_MAX 5u  /* wordings of a group, most asked first */
#define REPORT_COMMENTS_MAX 10u /* comments of a group, newest first */
#define REPORT_SEARCHES_MAX 10u /* distinct searches of a group, most made first */
#define REPORT_PAGES_MAX 10u    /* distinct pages read in a group, most read first */
#define REPORT_SAMPLE_MAX \
        200u /* records of a group read for the lists above: the most asked keys', newest first */

/* The reasons of a "down" rating (API.md 9.1), in the contract's order. */
typedef enum ReportReason {
        REPORT_REASON_WRONG,
        REPORT_REASON_INCOMPLETE,
        REPORT_REASON_NOT_WHAT_I_ASKED,
        REPORT_REASON_BAD_SOURCES,
        REPORT_REASON_OTHER,
        _REPORT_REASON_MAX,
        _REPORT_REASON_INVALID = -EINVAL,
} ReportReason;

const char *report_reason_to_string(ReportReason r);
ReportReason report_reason_from_string(const char *s);

/* A text seen n times. */
typedef struct ReportItem {
        char *text;
        char *url; /* pages: the permalink read; NULL otherwise */
        uint64_t n;
        int64_t results; /* searches: the results of its last run; -1 otherwise */
} ReportItem;

typedef struct ReportGroup {
        char *question;       /* the most asked wording */
        ReportItem *wordings; /* at most REPORT_WORDINGS_MAX, most asked first */
        size_t n_wordings;
        uint64_t count; /* records in the group */
        usec_t first_asked, last_asked;
        /* Records with each signal. */
        uint64_t no_sources, unverified, failed, negative_feedback;
        ReportItem *failed_codes; /* the error codes counted as failed, most first */
        size_t n_failed_codes;
        uint64_t reasons[_REPORT_REASON_MAX];
        char **comments; /* newest first, at most REPORT_COMMENTS_MAX */
        size_t n_comments;
        ReportItem *searches; /* with results */
        size_t n_searches;
        ReportItem *pages; /* with url */
        size_t n_pages;
} ReportGroup;

typedef struct Report {
        usec_t since; /* CLOCK_REALTIME */
        ReportGroup *groups;
        size_t n_groups;
        uint64_t n_records; /* records in all groups, also those past REPORT_GROUPS_MAX */
} Report;

Report *report_free(Report *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(Report *, report_free);

/* The report of the records finished at or after since. Returns 0 and a
 * new report in *ret (free with report_free()), -ENOMEM, -EIO. */
int report_unanswered(History *h, usec_t since, Report **ret);

/* Every page title of the report's groups, each once, NULL-terminated
 * (free with strv_free()); NULL when out of memory. */
char **report_page_titles(const Report *r);

/* Keep in every group only the pages whose title is titles[i] with
 * readable[i] true, in their order (API.md "Whose permissions": an editor
 * sees only the pages they may read). Returns how many were left out. */
size_t report_keep_pages(Report *r, char *const *titles, const bool *readable);

/* Parse the days argument (NULL: the default): a decimal integer 1..365
 * without sign, spaces or leading zeros. Returns 0 and *ret_days, or
 * -EINVAL and a static message in *ret_message. Untrusted input. */
int report_parse_days(const char *days, unsigned *ret_days, const char **ret_message);
