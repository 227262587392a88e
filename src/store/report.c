/* SPDX-License-Identifier: MIT */
#include <assert.h>
/* json-c reads the searches the store kept (checked to be an array when
 * they were written); the sources are read by shared/source.h. */
#include <json-c/json.h>
#include <sqlite3.h>

#include "shared/json-util.h"
#include "shared/log.h"
#include "shared/parse-util.h"
#include "shared/source.h"
#include "shared/strv.h"
#include "store/wording.h"
#include "store/history-internal.h"
#include "store/report.h"

static const char *const report_reason_table[_REPORT_REASON_MAX] = {
        [REPORT_REASON_WRONG] = "wrong",
        [REPORT_REASON_INCOMPLETE] = "incomplete",
        [REPORT_REASON_NOT_WHAT_I_ASKED] = "not_what_i_asked",
        [REPORT_REASON_BAD_SOURCES] = "bad_sources",
        [REPORT_REASON_OTHER] = "other",
};

const char *report_reason_to_string(ReportReason r) {
        if (r < 0 || r >= _REPORT_REASON_MAX)
                return NULL;
        return report_reason_table[r];
}

ReportReason report_reason_from_string(const char *s) {
        if (!s)
                return _REPORT_REASON_INVALID;
        for (ReportReason r = 0; r < _REPORT_REASON_MAX; r++)
                if (streq(s, report_reason_table[r]))
                        return r;
        return _REPORT_REASON_INVALID;
}

int report_parse_days(const char *days, unsigned *ret_days, const char **ret_message) {
        uint64_t v;

        assert(ret_days);
        assert(ret_message);

        if (!days) {
                *ret_days = REPORT_DAYS_DEFAULT;
                return 0;
        }
        if ((days[0] == '0' && days[1] != '\0') || days[0] == '+' ||
            parse_uint64_range(days, REPORT_DAYS_MIN, REPORT_DAYS_MAX, &v) < 0) {
                *ret_message = "days must be an integer from 1 to 365";
                return -EINVAL;
        }
        *ret_days = (unsigned) v;
        return 0;
}

static void items_free(ReportItem *items, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(items[i].text);
                free(items[i].url);
        }
        free(items);
}

static void group_done(ReportGroup *g) {
        free(g->question);
        items_free(g->wordings, g->n_wordings);
        items_free(g->failed_codes, g->n_failed_codes);
        items_free(g->searches, g->n_searches);
        items_free(g->pages, g->n_pages);
        for (size_t i = 0; i < g->n_comments; i++)
                free(g->comments[i]);
        free(g->comments);
}

Report *report_free(Report *r) {
        if (!r)
                return NULL;
        for (size_t i = 0; i < r->n_groups; i++)
                group_done(&r->groups[i]);
        free(r->groups);
        free(r);
        return NULL;
}

char **report_page_titles(const Report *r) {
        _cleanup_(strv_freep) char **titles = calloc(1, sizeof(char *));
        size_t n = 0;

        assert(r);

        if (!titles)
                return NULL;
        for (size_t i = 0; i < r->n_groups; i++)
                for (size_t j = 0; j < r->groups[i].n_pages; j++)
                        if (strv_extend_unique(&titles, &n, r->groups[i].pages[j].text) < 0)
                                return NULL;
        return TAKE_PTR(titles);
}

static bool title_readable(char *const *titles, const bool *readable, const char *title) {
        for (size_t i = 0; titles && titles[i]; i++)
                if (streq(titles[i], title))
                        return readable[i];
        return false;
}

size_t report_keep_pages(Report *r, char *const *titles, const bool *readable) {
        size_t left_out = 0;

        assert(r);

        for (size_t i = 0; i < r->n_groups; i++) {
                ReportGroup *g = &r->groups[i];
                size_t k = 0;

                for (size_t j = 0; j < g->n_pages; j++) {
                        if (title_readable(titles, readable, g->pages[j].text)) {
                                g->pages[k++] = g->pages[j];
                                continue;
                        }
                        free(g->pages[j].text);
                        free(g->pages[j].url);
                        left_out++;
                }
                g->n_pages = k;
        }
        return left_out;
}

/* text's item in the list (added with n = 0 if new). NULL: out of memory. */
static ReportItem *items_get(ReportItem **items, size_t *n, const char *text) {
        ReportItem *l;

        for (size_t i = 0; i < *n; i++)
                if (streq((*items)[i].text, text))
                        return &(*items)[i];
        l = reallocarray(*items, *n + 1, sizeof(ReportItem));
        if (!l)
                return NULL;
        *items = l;
        l[*n] = (ReportItem){ .text = strdup(text), .results = -1 };
        if (!l[*n].text)
                return NULL;
        return &l[(*n)++];
}

static int compare_items(const void *a, const void *b) {
        const ReportItem *x = a, *y = b;

        /* Most first; among equals the first seen (newest) first: the
         * sort is not stable, so the text decides, deterministically. */
        if (x->n != y->n)
                return x->n > y->n ? -1 : 1;
        return strcmp(x->text, y->text);
}

/* Sort most first and keep max. */
static void items_top(ReportItem *items, size_t *n, size_t max) {
        qsort_safe(items, *n, sizeof(ReportItem), compare_items);
        if (*n > max) {
                for (size_t i = max; i < *n; i++) {
                        free(items[i].text);
                        free(items[i].url);
                }
                *n = max;
        }
}

/* One wording key of phase 1. */
typedef struct KeyRow {
        char *key;
        uint64_t count, no_sources, unverified, failed, negative;
        usec_t first, last;
        size_t group;
} KeyRow;

static int compare_key_rows(const void *a, const void *b) {
        const KeyRow *x = a, *y = b;

        if (x->count != y->count)
                return x->count > y->count ? -1 : 1;
        return strcmp(x->key, y->key);
}

typedef struct GroupSlot {
        size_t founded; /* the founding order */
        ReportGroup g;
        size_t *keys; /* indices into the key rows, most asked first */
        size_t n_keys;
} GroupSlot;

static int compare_slots(const void *a, const void *b) {
        const GroupSlot *x = a, *y = b;

        if (x->g.count != y->g.count)
                return x->g.count > y->g.count ? -1 : 1;
        return x->founded < y->founded ? -1 : x->founded > y->founded;
}

/* The common condition: finished since ?, with a signal or a down rating. */
#define REPORT_WHERE                                                \
        " FROM queries q LEFT JOIN feedback f ON f.query_id = q.id" \
        " WHERE q.wording_key IS NOT NULL AND q.finished_at >= ?1 AND (q.signals != 0 OR f.rating = 'down')"

/* Phase 1, in two: the records with a signal kept at finish time, read
 * from the covering index of the records finished with a signal
 * (queries_by_finished: the window's only), grouped by key; then the
 * records rated down in the window (feedback_down: a rating is given
 * after its record finished), each looked up by id: those without such a
 * signal add to the count. Both grow with the window, not with the whole
 * history (docs/PERFORMANCE.md). */
static const char phase1_signals_sql[] =
        "SELECT wording_key, count(*), min(created_at), max(created_at),"
        " sum((signals & 1) != 0), sum((signals & 2) != 0), sum((signals & 4) != 0)"
        /* The planner would rather read queries_by_wording in key order
         * (no sort), which is every record's: named, the window's. */
        " FROM queries INDEXED BY queries_by_finished"
        " WHERE wording_key IS NOT NULL AND finished_at >= ?1 AND signals != 0"
        " GROUP BY wording_key";

static const char phase1_down_sql[] =
        "SELECT q.wording_key, count(*), sum(q.signals = 0),"
        " min(CASE WHEN q.signals = 0 THEN q.created_at END), max(CASE WHEN q.signals = 0 THEN q.created_at END)"
        " FROM feedback f CROSS JOIN queries q ON q.id = f.query_id"
        " WHERE f.rating = 'down' AND f.rated_at >= ?1 AND q.wording_key IS NOT NULL AND q.finished_at >= ?1"
        " GROUP BY q.wording_key";

static const char phase2_sql[] =
        "SELECT q.question, q.signals, q.error_code, q.searches, q.sources, f.rating, f.reason, f.comment,"
        " f.rated_at" REPORT_WHERE " AND q.wording_key = ?2 ORDER BY q.finished_at DESC LIMIT ?3";

/* A comment with its time, for sorting newest first. */
typedef struct Comment {
        char *text;
        int64_t at;
} Comment;

static int compare_comments(const void *a, const void *b) {
        const Comment *x = a, *y = b;

        if (x->at != y->at)
                return x->at > y->at ? -1 : 1;
        return strcmp(x->text, y->text);
}

static const char *col_text(sqlite3_stmt *s, int i) {
        return (const char *) sqlite3_column_text(s, i);
}

/* The searches ([{"query", "results"}]) and pages ([{"title", "url"}]) of
 * one record into the group. */
static int add_lists(ReportGroup *g, const char *searches, const char *sources) {
        _cleanup_(json_object_putp) json_object *s = searches ? json_tokener_parse(searches) : NULL;
        Source *p = NULL;
        size_t n_p = 0;
        int r;

        for (size_t i = 0; s && json_object_is_type(s, json_type_array) && i < json_object_array_length(s);
             i++) {
                json_object *e = json_object_array_get_idx(s, i);
                const char *q = json_object_get_string(json_object_object_get(e, "query"));
                ReportItem *it;

                if (!q)
                        continue;
                it = items_get(&g->searches, &g->n_searches, q);
                if (!it)
                        return -ENOMEM;
                /* Rows come newest first: the first run seen is the last made. */
                if (it->n++ == 0)
                        it->results = json_object_get_int64(json_object_object_get(e, "results"));
        }
        /* Text that is not an array lists no page, as the record shows none. */
        r = source_parse_array(sources, &p, &n_p);
        if (r == -ENOMEM)
                return r;
        r = 0;
        for (size_t i = 0; i < n_p; i++) {
                ReportItem *it = items_get(&g->pages, &g->n_pages, p[i].title);

                if (!it) {
                        r = -ENOMEM;
                        break;
                }
                if (it->n++ == 0 && p[i].url) {
                        it->url = strdup(p[i].url);
                        if (!it->url) {
                                r = -ENOMEM;
                                break;
                        }
                }
        }
        source_free_many(p, n_p);
        return r;
}

/* Phase 2: the lists of one group, from its most asked keys. */
static int fill_group(sqlite3 *db, usec_t since, GroupSlot *slot, const KeyRow *rows) {
        ReportGroup *g = &slot->g;
        Comment *comments = NULL;
        size_t n_comments = 0;
        sqlite3_stmt *s = NULL;
        int r = 0;

        if (sqlite3_prepare_v2(db, phase2_sql, -1, &s, NULL) != SQLITE_OK) {
                log_error("Unanswered report: %s", sqlite3_errmsg(db));
                return -EIO;
        }
        /* The newest records of the most asked keys first, REPORT_SAMPLE_MAX in all. */
        for (size_t k = 0, budget = REPORT_SAMPLE_MAX; k < slot->n_keys && budget > 0 && r >= 0; k++) {
                sqlite3_reset(s);
                sqlite3_bind_int64(s, 1, (sqlite3_int64) since);
                sqlite3_bind_text(s, 2, rows[slot->keys[k]].key, -1, SQLITE_STATIC);
                sqlite3_bind_int(s, 3, (int) budget);
                budget -= MIN(budget, (size_t) rows[slot->keys[k]].count);
                while (r >= 0 && (r = sqlite3_step(s)) == SQLITE_ROW) {
                        const char *question = col_text(s, 0), *code = col_text(s, 2),
                                   *rating = col_text(s, 5), *reason = col_text(s, 6),
                                   *comment = col_text(s, 7);
                        unsigned signals = (unsigned) sqlite3_column_int(s, 1);
                        ReportItem *it;

                        r = 0;
                        it = items_get(&g->wordings, &g->n_wordings, question ? question : "");
                        if (!it) {
                                r = -ENOMEM;
                                break;
                        }
                        it->n++;
                        if ((signals & HISTORY_SIGNAL_FAILED) && code) {
                                it = items_get(&g->failed_codes, &g->n_failed_codes, code);
                                if (!it) {
                                        r = -ENOMEM;
                                        break;
                                }
                                it->n++;
                        }
                        if (rating && streq(rating, "down")) {
                                ReportReason why = report_reason_from_string(reason);

                                if (why >= 0)
                                        g->reasons[why]++;
                                if (comment && *comment) {
                                        Comment *c = reallocarray(comments, n_comments + 1, sizeof(Comment));

                                        if (!c) {
                                                r = -ENOMEM;
                                                break;
                                        }
                                        comments = c;
                                        c[n_comments] = (Comment){ .text = strdup(comment),
                                                                   .at = sqlite3_column_int64(s, 8) };
                                        if (!c[n_comments++].text) {
                                                r = -ENOMEM;
                                                break;
                                        }
                                }
                        }
                        r = add_lists(g, col_text(s, 3), col_text(s, 4));
                }
                if (r >= 0 && r != SQLITE_DONE) {
                        log_error("Unanswered report: %s", sqlite3_errmsg(db));
                        r = -EIO;
                }
        }
        sqlite3_finalize(s);

        if (r >= 0) {
                r = 0;
                items_top(g->wordings, &g->n_wordings, REPORT_WORDINGS_MAX);
                items_top(g->failed_codes, &g->n_failed_codes, SIZE_MAX);
                items_top(g->searches, &g->n_searches, REPORT_SEARCHES_MAX);
                items_top(g->pages, &g->n_pages, REPORT_PAGES_MAX);
                g->question = strdup(g->n_wordings > 0 ? g->wordings[0].text : "");
                if (!g->question)
                        r = -ENOMEM;
                qsort_safe(comments, n_comments, sizeof(Comment), compare_comments);
                g->comments = calloc(MIN(n_comments, (size_t) REPORT_COMMENTS_MAX) + 1, sizeof(char *));
                if (!g->comments)
                        r = -ENOMEM;
                for (size_t i = 0; g->comments && i < n_comments && i < REPORT_COMMENTS_MAX; i++)
                        g->comments[g->n_comments++] = TAKE_PTR(comments[i].text);
        }
        for (size_t i = 0; i < n_comments; i++)
                free(comments[i].text);
        free(comments);
        return r;
}

static int compare_key_text(const void *a, const void *b) {
        return strcmp(((const KeyRow *) a)->key, ((const KeyRow *) b)->key);
}

static KeyRow *key_rows_add(KeyRow **rows, size_t *n, const char *key) {
        KeyRow *l = reallocarray(*rows, *n + 1, sizeof(KeyRow));

        if (!l)
                return NULL;
        *rows = l;
        l[*n] = (KeyRow){ .key = strdup(key), .first = USEC_INFINITY };
        if (!l[*n].key)
                return NULL;
        return &l[(*n)++];
}

/* The key rows of phase 1, with their count. */
typedef struct KeyRows {
        KeyRow *rows;
        size_t n;
} KeyRows;

static void key_rows_done(KeyRows *k) {
        for (size_t i = 0; i < k->n; i++)
                free(k->rows[i].key);
        free(k->rows);
}

/* The group slots, with their count (n is known before they are allocated). */
typedef struct GroupSlots {
        GroupSlot *slots;
        size_t n;
} GroupSlots;

static void group_slots_done(GroupSlots *s) {
        for (size_t i = 0; s->slots && i < s->n; i++) {
                group_done(&s->slots[i].g);
                free(s->slots[i].keys);
        }
        free(s->slots);
}

static int read_error(sqlite3 *db) {
        log_error("Unanswered report: %s", sqlite3_errmsg(db));
        return -EIO;
}

/* Phase 1: rows[] of every key with its counts. */
static int read_keys(sqlite3 *db, usec_t since, KeyRow **rows, size_t *n_rows) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *s = NULL;
        size_t n_signals;
        int r;

        if (sqlite3_prepare_v2(db, phase1_signals_sql, -1, &s, NULL) != SQLITE_OK)
                return read_error(db);
        sqlite3_bind_int64(s, 1, (sqlite3_int64) MIN(since, (usec_t) INT64_MAX));
        while ((r = sqlite3_step(s)) == SQLITE_ROW) {
                KeyRow *k = key_rows_add(rows, n_rows, col_text(s, 0) ? col_text(s, 0) : "");

                if (!k)
                        return -ENOMEM;
                k->count = (uint64_t) sqlite3_column_int64(s, 1);
                k->first = (usec_t) sqlite3_column_int64(s, 2);
                k->last = (usec_t) sqlite3_column_int64(s, 3);
                k->no_sources = (uint64_t) sqlite3_column_int64(s, 4);
                k->unverified = (uint64_t) sqlite3_column_int64(s, 5);
                k->failed = (uint64_t) sqlite3_column_int64(s, 6);
        }
        sqlite3_finalize(s);
        s = NULL;
        if (r != SQLITE_DONE)
                return read_error(db);

        /* In key order already (the index's), but SQLite's collation is
         * memcmp() and so is strcmp() on UTF-8: sorted once more, cheap. */
        qsort_safe(*rows, *n_rows, sizeof(KeyRow), compare_key_text);
        n_signals = *n_rows;

        if (sqlite3_prepare_v2(db, phase1_down_sql, -1, &s, NULL) != SQLITE_OK)
                return read_error(db);
        sqlite3_bind_int64(s, 1, (sqlite3_int64) MIN(since, (usec_t) INT64_MAX));
        while ((r = sqlite3_step(s)) == SQLITE_ROW) {
                KeyRow probe = { .key = (char *) (col_text(s, 0) ? col_text(s, 0) : "") }, *k;
                uint64_t without = (uint64_t) sqlite3_column_int64(s, 2);

                k = bsearch(&probe, *rows, n_signals, sizeof(KeyRow), compare_key_text);
                if (!k && !(k = key_rows_add(rows, n_rows, probe.key)))
                        return -ENOMEM;
                k->negative += (uint64_t) sqlite3_column_int64(s, 1);
                if (without > 0) {
                        k->count += without;
                        k->first = MIN(k->first, (usec_t) sqlite3_column_int64(s, 3));
                        k->last = MAX(k->last, (usec_t) sqlite3_column_int64(s, 4));
                }
        }
        sqlite3_finalize(s);
        s = NULL;
        if (r != SQLITE_DONE)
                return read_error(db);
        return 0;
}

int report_unanswered(History *h, usec_t since, Report **ret) {
        _cleanup_(report_freep) Report *report = NULL;
        _cleanup_(key_rows_done) KeyRows rows = { 0 };
        _cleanup_(group_slots_done) GroupSlots slots = { 0 };
        _cleanup_free_ const char **keys = NULL;
        _cleanup_free_ size_t *group_of = NULL;
        sqlite3 *db = history_database(h);
        int r;

        assert(h);
        assert(ret);

        report = calloc(1, sizeof *report);
        if (!report)
                return -ENOMEM;
        report->since = since;

        /* Phase 1: each wording key with its counts. */
        r = read_keys(db, since, &rows.rows, &rows.n);
        if (r < 0)
                return r;

        /* Most asked keys found the groups. */
        qsort_safe(rows.rows, rows.n, sizeof(KeyRow), compare_key_rows);
        keys = calloc(rows.n + 1, sizeof(char *));
        group_of = calloc(rows.n + 1, sizeof(size_t));
        if (!keys || !group_of)
                return -ENOMEM;
        for (size_t i = 0; i < rows.n; i++)
                keys[i] = rows.rows[i].key;
        r = wording_group(keys, rows.n, group_of, &slots.n);
        if (r < 0)
                return r;
        slots.slots = calloc(slots.n + 1, sizeof(GroupSlot));
        if (!slots.slots)
                return -ENOMEM;
        for (size_t i = 0; i < slots.n; i++)
                slots.slots[i] = (GroupSlot){ .founded = i, .g = { .first_asked = USEC_INFINITY } };
        for (size_t i = 0; i < rows.n; i++) {
                GroupSlot *sl = &slots.slots[group_of[i]];
                ReportGroup *g = &sl->g;
                size_t *k = reallocarray(sl->keys, sl->n_keys + 1, sizeof(size_t));

                if (!k)
                        return -ENOMEM;
                sl->keys = k;
                sl->keys[sl->n_keys++] = i;
                g->count += rows.rows[i].count;
                g->no_sources += rows.rows[i].no_sources;
                g->unverified += rows.rows[i].unverified;
                g->failed += rows.rows[i].failed;
                g->negative_feedback += rows.rows[i].negative;
                g->first_asked = MIN(g->first_asked, rows.rows[i].first);
                g->last_asked = MAX(g->last_asked, rows.rows[i].last);
                report->n_records += rows.rows[i].count;
        }
        qsort_safe(slots.slots, slots.n, sizeof(GroupSlot), compare_slots);

        /* Phase 2: the lists of the groups shown. */
        report->groups = calloc(MIN(slots.n, (size_t) REPORT_GROUPS_MAX) + 1, sizeof(ReportGroup));
        if (!report->groups)
                return -ENOMEM;
        for (size_t i = 0; i < slots.n && i < REPORT_GROUPS_MAX; i++) {
                r = fill_group(db, since, &slots.slots[i], rows.rows);
                /* Counted first: a group half filled is freed with the report. */
                report->groups[report->n_groups++] = slots.slots[i].g;
                slots.slots[i].g = (ReportGroup){ 0 };
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(report);
        return 0;
}
