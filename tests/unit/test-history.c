/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/render.h"
#include "history-fixture.h"
#include "shared/json-util.h"
#include "shared/macro.h"
#include "shared/sha256.h"
#include "store/history.h"
#include "shared/strv.h"
#include "shared/user-key.h"
#include "store/report.h"
#include "store/tokens.h"
#include "tests.h"

/* Tests of the SQLite query history (API.md 9) against a real file in a
 * fresh temporary directory: the record shape, the state transitions,
 * session isolation, paging, the strict argument parser, deletion, crash
 * recovery, artifacts (written directly with SQL, as the sandbox stage
 * will), and refusing files that are not ours. The store returns structs;
 * the checks read them as the API renders them (src/api/render.c). */

/* 2025-11-22T10:00:00.123456Z: sub-millisecond digits that must be cut. */
#define T0 ((usec_t) 1763805600123456ULL)

/* ---- helpers ---- */

static void write_file(const char *path, const void *data, size_t size) {
        FILE *f = fopen(path, "wbe");

        ASSERT_TRUE(f);
        ASSERT_TRUE(fwrite(data, 1, size, f) == size);
        ASSERT_TRUE(fclose(f) == 0);
}

/* The key the store keeps for k once a file made before the secret was
 * opened (schema step 9): k sealed with dir's user key. */
static SessionKey sealed_key(const char *dir, const SessionKey *k) {
        UserKeySecret secret;
        SessionKey s;

        ASSERT_OK(user_key_secret_load(dir, NULL, &secret, NULL));
        ASSERT_OK(user_key_seal(&secret, k, &s));
        return s;
}

/* Run SQL directly on the store file (the daemon's store must be closed). */
static void sql_exec(const char *dir, const char *sql) {
        _cleanup_free_ char *p = path_in(dir, "history.sqlite3");
        sqlite3 *db = NULL;
        char *err = NULL;

        ASSERT_EQ_INT(sqlite3_open_v2(p, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL), SQLITE_OK);
        if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
                fprintf(stderr, "SQL failed: %s: %s\n", sql, err ? err : "?");
                abort();
        }
        ASSERT_EQ_INT(sqlite3_close(db), SQLITE_OK);
}

/* A single integer result of SQL run directly on the store file. */
static long long sql_int(const char *dir, const char *sql) {
        _cleanup_free_ char *p = path_in(dir, "history.sqlite3");
        sqlite3_stmt *s = NULL;
        sqlite3 *db = NULL;
        long long v;

        ASSERT_EQ_INT(sqlite3_open_v2(p, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
        ASSERT_EQ_INT(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
        ASSERT_EQ_INT(sqlite3_step(s), SQLITE_ROW);
        v = sqlite3_column_int64(s, 0);
        ASSERT_EQ_INT(sqlite3_step(s), SQLITE_DONE);
        ASSERT_EQ_INT(sqlite3_finalize(s), SQLITE_OK);
        ASSERT_EQ_INT(sqlite3_close(db), SQLITE_OK);
        return v;
}

/* history_get_record() rendered as the API does; *ret untouched on failure. */
static int get_json(History *h, const char *id, const SessionKey *k, json_object **ret) {
        _cleanup_(history_record_freep) HistoryRecord *rec = NULL;
        int r;

        r = history_get_record(h, id, k, &rec);
        if (r < 0) {
                ASSERT_TRUE(rec == NULL);
                return r;
        }
        ASSERT_TRUE(rec);
        ASSERT_EQ_STR(rec->id, id);
        *ret = render_history_record(rec);
        ASSERT_TRUE(*ret);
        return 0;
}

/* history_list_records() rendered as the API does; *ret untouched on failure. */
static int list_json(History *h, const SessionKey *k, unsigned limit, const char *cursor, json_object **ret) {
        _cleanup_(history_page_freep) HistoryPage *page = NULL;
        int r;

        r = history_list_records(h, k, limit, cursor, &page);
        if (r < 0) {
                ASSERT_TRUE(page == NULL);
                return r;
        }
        ASSERT_TRUE(page);
        ASSERT_TRUE(page->n_records <= limit);
        *ret = render_history_page(page);
        ASSERT_TRUE(*ret);
        return 0;
}

static json_object *get_key(json_object *o, const char *k) {
        json_object *v = NULL;

        if (!json_object_object_get_ex(o, k, &v)) {
                fprintf(stderr, "key \"%s\" missing in %s\n", k, json_object_to_json_string(o));
                abort();
        }
        return v;
}

static const char *get_str(json_object *o, const char *k) {
        json_object *v = get_key(o, k);

        ASSERT_TRUE(json_object_is_type(v, json_type_string));
        return json_object_get_string(v);
}

static int64_t get_int(json_object *o, const char *k) {
        json_object *v = get_key(o, k);

        ASSERT_TRUE(json_object_is_type(v, json_type_int));
        return json_object_get_int64(v);
}

static void assert_null(json_object *o, const char *k) {
        ASSERT_TRUE(get_key(o, k) == NULL);
}

/* o is an object whose keys are exactly those of keys (in any order). */
static void assert_keys(json_object *o, const char *const *keys, size_t n) {
        size_t count = 0;

        ASSERT_TRUE(json_object_is_type(o, json_type_object));
        json_object_object_foreach(o, k, v) {
                bool known = false;

                (void) v;
                for (size_t i = 0; i < n; i++)
                        if (streq(k, keys[i]))
                                known = true;
                if (!known) {
                        fprintf(stderr, "unexpected key \"%s\" in %s\n", k, json_object_to_json_string(o));
                        abort();
                }
                count++;
        }
        ASSERT_EQ_INT(count, n);
}

static void assert_json(json_object *o, const char *expected) {
        ASSERT_EQ_STR(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN), expected);
}

static const char *const record_keys[] = {
        "id",          "status",   "question",   "answer",       "sources", "citations",
        "artifacts",   "error",    "timings_ms", "usage",        "sandbox", "created_at",
        "finished_at", "feedback", "follow_up",  "conversation", "notes",
};

/* RFC 3339 in UTC with exactly three fractional digits. */
static void assert_rfc3339_ms(const char *t) {
        static const char pattern[] = "dddd-dd-ddTdd:dd:dd.dddZ";

        ASSERT_TRUE(t);
        ASSERT_EQ_INT(strlen(t), sizeof(pattern) - 1);
        for (size_t i = 0; i < sizeof(pattern) - 1; i++)
                if (pattern[i] == 'd')
                        ASSERT_TRUE(t[i] >= '0' && t[i] <= '9');
                else
                        ASSERT_TRUE(t[i] == pattern[i]);
}

static json_object *get_record(History *h, const char *id, const SessionKey *k) {
        json_object *o = NULL;

        ASSERT_OK(get_json(h, id, k, &o));
        ASSERT_TRUE(o);
        assert_keys(o, record_keys, ELEMENTSOF(record_keys));
        ASSERT_EQ_STR(get_str(o, "id"), id);
        assert_rfc3339_ms(get_str(o, "created_at"));
        return o;
}

static void assert_status(History *h, const char *id, const SessionKey *k, const char *status) {
        _cleanup_(json_object_putp) json_object *o = get_record(h, id, k);

        ASSERT_EQ_STR(get_str(o, "status"), status);
}

static void finish_ok(History *h, const char *id, usec_t finished_at) {
        HistoryOutcome o = {
                .succeeded = true,
                .answer = "42",
                .model = "m",
                .finished_at = finished_at,
        };

        ASSERT_OK(history_finish(h, id, &o));
}

/* ---- tests ---- */

TEST(open_creates_file) {
        _cleanup_(rm_rf_freep) char *dir = make_subdir("create");
        _cleanup_free_ char *p = path_in(dir, "history.sqlite3");
        struct stat st;
        History *h;

        ASSERT_TRUE(stat(p, &st) < 0 && errno == ENOENT);
        h = open_store(dir, 0);
        ASSERT_TRUE(stat(p, &st) == 0 && S_ISREG(st.st_mode));
        history_free(h);

        /* Without ret_recovered, and a second open of an existing store. */
        h = NULL;
        ASSERT_OK(history_open(dir, &h, NULL));
        ASSERT_TRUE(h);
        ASSERT_TRUE(history_free(h) == NULL);
        ASSERT_TRUE(history_free(NULL) == NULL);
        ASSERT_EQ_INT(sql_int(dir, "PRAGMA user_version"), 10);

        /* A directory that does not exist. */
        {
                _cleanup_free_ char *missing = path_in(dir, "no/such/dir");
                History *h2 = NULL;

                ASSERT_TRUE(history_open(missing, &h2, NULL) < 0);
                ASSERT_TRUE(h2 == NULL);
        }
}

static void run_running_record(History *h) {
        const SessionKey k = key(1);
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_object *timings, *usage;
        const char *question = "Wie hoch ist der \"Zugspitze\"-Gipfel? \xe2\x9b\xb0 'x' \\ ;--";

        ASSERT_OK(history_begin(h, qid(1), &k, question, T0));
        ASSERT_EQ_INT(history_is_running(h, qid(1), &k), 1);

        o = get_record(h, qid(1), &k);
        ASSERT_EQ_STR(get_str(o, "status"), "running");
        ASSERT_EQ_STR(get_str(o, "question"), question);
        assert_null(o, "answer");
        assert_null(o, "sandbox");
        assert_null(o, "error");
        assert_null(o, "finished_at");
        ASSERT_EQ_STR(get_str(o, "created_at"), "2025-11-22T10:00:00.123Z");
        assert_json(get_key(o, "sources"), "[]");
        assert_json(get_key(o, "artifacts"), "[]");

        timings = get_key(o, "timings_ms");
        assert_keys(
                timings, (const char *const[]){ "queue", "wiki", "model", "sandbox", "cleanup", "total" }, 6);
        json_object_object_foreach(timings, name, value) {
                (void) name;
                ASSERT_TRUE(json_object_is_type(value, json_type_int));
                ASSERT_EQ_INT(json_object_get_int64(value), 0);
        }
        usage = get_key(o, "usage");
        assert_keys(usage, (const char *const[]){ "model", "prompt_tokens", "completion_tokens" }, 3);
        ASSERT_EQ_INT(get_int(usage, "prompt_tokens"), 0);
        ASSERT_EQ_INT(get_int(usage, "completion_tokens"), 0);
}

TEST(running_record) {
        _cleanup_(history_fixture_done) HistoryFixture f = history_fixture_new("running-record");

        run_running_record(f.h);
}

static void run_finish_failed(History *h) {
        const SessionKey k = key(1);
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_object *e;
        HistoryOutcome out = {
                .succeeded = false,
                .answer = "must not be stored",
                .error_code = "upstream_unavailable",
                .error_message = "The wiki did not answer in time",
                .timings = { .queue_ms = 1, .wiki_ms = 30000, .total_ms = 30001 },
                .model = "llama-3",
                .finished_at = T0 + 30 * USEC_PER_SEC + 999,
                .sandbox = "starting",
        };

        ASSERT_OK(history_begin(h, qid(2), &k, "q2", T0 + USEC_PER_SEC));
        ASSERT_OK(history_finish(h, qid(2), &out));
        ASSERT_EQ_INT(history_is_running(h, qid(2), &k), 0);

        o = get_record(h, qid(2), &k);
        ASSERT_EQ_STR(get_str(o, "status"), "failed");
        ASSERT_EQ_STR(get_str(o, "question"), "q2");
        assert_null(o, "answer");
        ASSERT_EQ_STR(get_str(o, "sandbox"), "starting");
        assert_json(get_key(o, "sources"), "[]");
        assert_json(get_key(o, "artifacts"), "[]");
        e = get_key(o, "error");
        assert_keys(e, (const char *const[]){ "code", "message" }, 2);
        ASSERT_EQ_STR(get_str(e, "code"), "upstream_unavailable");
        ASSERT_EQ_STR(get_str(e, "message"), "The wiki did not answer in time");
        assert_json(
                get_key(o, "timings_ms"),
                "{\"queue\":1,\"wiki\":30000,\"model\":0,\"sandbox\":0,\"cleanup\":0,\"total\":30001}");
        ASSERT_EQ_STR(get_str(o, "created_at"), "2025-11-22T10:00:01.123Z");
        ASSERT_EQ_STR(get_str(o, "finished_at"), "2025-11-22T10:00:30.124Z");
}

TEST(finish_failed) {
        _cleanup_(history_fixture_done) HistoryFixture f = history_fixture_new("finish-failed");

        run_finish_failed(f.h);
}

static void run_finish_succeeded(History *h) {
        const SessionKey k = key(1);
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_object *src, *s0;
        static const char sources[] =
                "[{\"title\":\"Apple\",\"url\":\"https://en.wikipedia.org/wiki/Apple\",\"revision_id\":123},"
                "{\"title\":\"B\\u00e4r \\\"x\\\"\",\"url\":\"https://de.wikipedia.org/wiki/B%C3%A4r\","
                "\"revision_id\":9007199254740993}]";
        HistoryOutcome out = {
                .succeeded = true,
                .answer = "Apples are \"pomes\".\nSecond line: \xc3\xa4\xc3\xb6\xc3\xbc",
                .sources_json = sources,
                .error_code = "must_not_be_stored",
                .error_message = "must not be stored",
                .timings = { 11, 22, 33, 44, 55, 165 },
                .model = "gpt-test-1",
                .prompt_tokens = 1234,
                .completion_tokens = 567,
                .finished_at = T0 + 5 * USEC_PER_SEC,
                .sandbox = "offered",
        };

        ASSERT_OK(history_begin(h, qid(3), &k, "What is an apple?", T0 + 2 * USEC_PER_SEC));
        ASSERT_OK(history_finish(h, qid(3), &out));

        o = get_record(h, qid(3), &k);
        ASSERT_EQ_STR(get_str(o, "status"), "succeeded");
        ASSERT_EQ_STR(get_str(o, "question"), "What is an apple?");
        ASSERT_EQ_STR(get_str(o, "answer"), out.answer);
        assert_null(o, "error");
        ASSERT_EQ_STR(get_str(o, "sandbox"), "offered");

        src = get_key(o, "sources");
        ASSERT_TRUE(json_object_is_type(src, json_type_array));
        ASSERT_EQ_INT(json_object_array_length(src), 2);
        s0 = json_object_array_get_idx(src, 0);
        assert_keys(s0, (const char *const[]){ "title", "url", "revision_id" }, 3);
        ASSERT_EQ_STR(get_str(s0, "title"), "Apple");
        ASSERT_EQ_STR(get_str(s0, "url"), "https://en.wikipedia.org/wiki/Apple");
        ASSERT_EQ_INT(get_int(s0, "revision_id"), 123);
        ASSERT_EQ_STR(get_str(json_object_array_get_idx(src, 1), "title"), "B\xc3\xa4r \"x\"");
        ASSERT_EQ_INT(get_int(json_object_array_get_idx(src, 1), "revision_id"), 9007199254740993LL);

        assert_json(get_key(o, "artifacts"), "[]");
        assert_json(
                get_key(o, "timings_ms"),
                "{\"queue\":11,\"wiki\":22,\"model\":33,\"sandbox\":44,\"cleanup\":55,\"total\":165}");
        assert_json(
                get_key(o, "usage"),
                "{\"model\":\"gpt-test-1\",\"prompt_tokens\":1234,\"completion_tokens\":567}");
        ASSERT_EQ_STR(get_str(o, "created_at"), "2025-11-22T10:00:02.123Z");
        ASSERT_EQ_STR(get_str(o, "finished_at"), "2025-11-22T10:00:05.123Z");

        /* Completed once only. */
        ASSERT_EQ_INT(history_finish(h, qid(3), &out), -ENOENT);
        ASSERT_EQ_INT(history_finish(h, qid(2), &out), -ENOENT);
        ASSERT_EQ_INT(history_finish(h, qid(999), &out), -ENOENT);
        json_object_put(o);
        o = get_record(h, qid(3), &k);
        ASSERT_EQ_STR(get_str(o, "status"), "succeeded");
        ASSERT_EQ_INT(get_int(get_key(o, "usage"), "prompt_tokens"), 1234);
}

/* qid(2) completed first: completing it again is refused too. */
TEST(finish_succeeded) {
        _cleanup_(history_fixture_done) HistoryFixture f = history_fixture_new("finish-succeeded");

        run_finish_failed(f.h);
        run_finish_succeeded(f.h);
}

static void run_finish_saturates(History *h) {
        const SessionKey k = key(1);
        _cleanup_(json_object_putp) json_object *o = NULL;
        HistoryOutcome out = {
                .succeeded = true,
                .answer = "",
                .timings = { UINT64_MAX, 0, 0, 0, 0, (uint64_t) INT64_MAX + 1 },
                .prompt_tokens = UINT64_MAX,
                .finished_at = T0 + 7 * USEC_PER_SEC,
        };

        ASSERT_OK(history_begin(h, qid(4), &k, "big", T0 + 6 * USEC_PER_SEC));
        ASSERT_OK(history_finish(h, qid(4), &out));
        o = get_record(h, qid(4), &k);
        ASSERT_EQ_STR(get_str(o, "answer"), "");
        ASSERT_EQ_INT(get_int(get_key(o, "timings_ms"), "queue"), INT64_MAX);
        ASSERT_EQ_INT(get_int(get_key(o, "timings_ms"), "total"), INT64_MAX);
        ASSERT_EQ_INT(get_int(get_key(o, "usage"), "prompt_tokens"), INT64_MAX);
        ASSERT_EQ_STR(get_str(get_key(o, "usage"), "model"), "");
}

TEST(finish_saturates) {
        _cleanup_(history_fixture_done) HistoryFixture f = history_fixture_new("finish-saturates");

        run_finish_saturates(f.h);
}

static void run_finish_rejects_bad_sources(History *h) {
        const SessionKey k = key(1);
        static const char *const bad[] = {
                "{}",
                "[",
                "1",
                "",
                "null",
                "\"[]\"",
                "{\"a\":[]}",
                "[1,",
                "nope",
                /* One array, then more: refused whole, not cut to the array. */
                "[1] [2]",
                "[1]]",
                "[] x",
                "[]{}",
                "[]\n[]",
        };

        ASSERT_OK(history_begin(h, qid(5), &k, "q5", T0 + 8 * USEC_PER_SEC));
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                HistoryOutcome out = {
                        .succeeded = true,
                        .answer = "a",
                        .sources_json = bad[i],
                        .finished_at = T0 + 9 * USEC_PER_SEC,
                };
                _cleanup_(json_object_putp) json_object *o = NULL;

                if (history_finish(h, qid(5), &out) != -EINVAL) {
                        fprintf(stderr, "sources_json '%s' was not refused\n", bad[i]);
                        abort();
                }
                o = get_record(h, qid(5), &k);
                ASSERT_EQ_STR(get_str(o, "status"), "running");
                assert_null(o, "answer");
                assert_null(o, "finished_at");
                ASSERT_EQ_INT(history_is_running(h, qid(5), &k), 1);
        }

        /* NULL is the empty list. */
        {
                HistoryOutcome out = { .succeeded = true, .answer = "a", .finished_at = T0 + 9 * USEC_PER_SEC };
                _cleanup_(json_object_putp) json_object *o = NULL;

                ASSERT_OK(history_finish(h, qid(5), &out));
                o = get_record(h, qid(5), &k);
                ASSERT_EQ_STR(get_str(o, "status"), "succeeded");
                assert_json(get_key(o, "sources"), "[]");
        }
}

TEST(finish_rejects_bad_sources) {
        _cleanup_(history_fixture_done) HistoryFixture f = history_fixture_new("finish-rejects-bad-sources");

        run_finish_rejects_bad_sources(f.h);
}

static void run_begin_duplicate(History *h) {
        const SessionKey k = key(1), other = key(2);

        ASSERT_EQ_INT(history_begin(h, qid(1), &k, "again", T0), -EEXIST);
        ASSERT_EQ_INT(history_begin(h, qid(3), &k, "again", T0), -EEXIST);
        /* The id is unique across sessions too. */
        ASSERT_EQ_INT(history_begin(h, qid(3), &other, "again", T0), -EEXIST);
        assert_status(h, qid(1), &k, "running");
        assert_status(h, qid(3), &k, "succeeded");
}

/* qid(1) running, qid(2) failed, qid(3) succeeded first. */
TEST(begin_duplicate) {
        _cleanup_(history_fixture_done) HistoryFixture f = history_fixture_new("begin-duplicate");

        run_running_record(f.h);
        run_finish_failed(f.h);
        run_finish_succeeded(f.h);
        run_begin_duplicate(f.h);
}

static void run_other_session(History *h) {
        const SessionKey owner = key(1), other = key(2);
        _cleanup_(json_object_putp) json_object *list = NULL;
        HistoryArtifact a = { 0 };
        json_object *o = NULL;

        for (unsigned i = 1; i <= 5; i++) {
                ASSERT_EQ_INT(get_json(h, qid(i), &other, &o), -ENOENT);
                ASSERT_TRUE(o == NULL);
                ASSERT_EQ_INT(history_delete(h, qid(i), &other), -ENOENT);
                ASSERT_EQ_INT(history_is_running(h, qid(i), &other), 0);
        }
        ASSERT_EQ_INT(history_get_artifact(h, "af_00000000000000000000000000000001", &other, &a), -ENOENT);
        ASSERT_TRUE(a.data == NULL && a.name == NULL);

        ASSERT_OK(list_json(h, &other, 20, NULL, &list));
        assert_json(list, "{\"items\":[],\"next_cursor\":null}");

        /* Still there for the owner. */
        assert_status(h, qid(1), &owner, "running");
}

/* The records qid(1)..qid(5) of the cases above first, in their state. */
TEST(other_session) {
        _cleanup_(history_fixture_done) HistoryFixture f = history_fixture_new("other-session");

        run_running_record(f.h);
        run_finish_failed(f.h);
        run_finish_succeeded(f.h);
        run_finish_saturates(f.h);
        run_finish_rejects_bad_sources(f.h);
        run_other_session(f.h);
}

static void collect_ids(json_object *items, const char **ids, size_t *n, size_t max) {
        for (size_t i = 0; i < json_object_array_length(items); i++) {
                json_object *r = json_object_array_get_idx(items, i);

                assert_keys(r, record_keys, ELEMENTSOF(record_keys));
                ASSERT_TRUE(*n < max);
                ids[(*n)++] = get_str(r, "id");
        }
}

static void run_list(History *h) {
        const SessionKey k = key(3), noise = key(4);
        char expected[5][40];
        json_object *pages[8] = { NULL };
        const char *ids[16];
        size_t n = 0, n_pages = 0;
        const char *cursor = NULL;

        /* Interleave another session's records: the cursor must skip them. */
        for (unsigned i = 0; i < 5; i++) {
                ASSERT_OK(history_begin(h, qid(100 + i), &k, "listed", T0 + i * USEC_PER_SEC));
                ASSERT_OK(history_begin(h, qid(200 + i), &noise, "noise", T0 + i * USEC_PER_SEC));
                (void) snprintf(expected[4 - i], sizeof(expected[0]), "%s", qid(100 + i));
        }
        ASSERT_EQ_STR(expected[0], "qr_00000000000000000000000000000068");

        /* Pages of two: 2, 2, 1. */
        do {
                json_object *items, *next;

                ASSERT_TRUE(n_pages < ELEMENTSOF(pages));
                ASSERT_OK(list_json(h, &k, 2, cursor, &pages[n_pages]));
                assert_keys(pages[n_pages], (const char *const[]){ "items", "next_cursor" }, 2);
                items = get_key(pages[n_pages], "items");
                next = get_key(pages[n_pages], "next_cursor");
                ASSERT_TRUE(json_object_is_type(items, json_type_array));
                ASSERT_EQ_INT(json_object_array_length(items), n_pages < 2 ? 2 : 1);
                collect_ids(items, ids, &n, ELEMENTSOF(ids));
                if (n_pages < 2) {
                        ASSERT_TRUE(json_object_is_type(next, json_type_string));
                        cursor = json_object_get_string(next);
                        /* A cursor is what the parser accepts. */
                        {
                                unsigned l = 0;
                                const char *msg = NULL;
                                ASSERT_OK(history_parse_list_arguments(NULL, cursor, &l, &msg));
                                ASSERT_EQ_INT(l, HISTORY_LIMIT_DEFAULT);
                        }
                } else {
                        ASSERT_TRUE(next == NULL);
                        cursor = NULL;
                }
                n_pages++;
        } while (cursor);
        ASSERT_EQ_INT(n_pages, 3);
        ASSERT_EQ_INT(n, 5);
        for (size_t i = 0; i < 5; i++) {
                ASSERT_EQ_STR(ids[i], expected[i]);
                for (size_t j = 0; j < i; j++)
                        ASSERT_TRUE(!streq(ids[i], ids[j]));
        }
        for (size_t i = 0; i < n_pages; i++)
                json_object_put(pages[i]);

        /* An exact fit has no next page; larger limits return everything. */
        for (unsigned limit = 5; limit <= HISTORY_LIMIT_MAX; limit += 95) {
                _cleanup_(json_object_putp) json_object *o = NULL;
                json_object *items;

                n = 0;
                ASSERT_OK(list_json(h, &k, limit, NULL, &o));
                items = get_key(o, "items");
                ASSERT_EQ_INT(json_object_array_length(items), 5);
                assert_null(o, "next_cursor");
                collect_ids(items, ids, &n, ELEMENTSOF(ids));
                for (size_t i = 0; i < 5; i++)
                        ASSERT_EQ_STR(ids[i], expected[i]);
        }

        /* Limit 4 leaves one for a second page. */
        {
                _cleanup_(json_object_putp) json_object *o1 = NULL, *o2 = NULL;

                ASSERT_OK(list_json(h, &k, 4, NULL, &o1));
                ASSERT_EQ_INT(json_object_array_length(get_key(o1, "items")), 4);
                ASSERT_OK(list_json(h, &k, 4, get_str(o1, "next_cursor"), &o2));
                ASSERT_EQ_INT(json_object_array_length(get_key(o2, "items")), 1);
                ASSERT_EQ_STR(get_str(json_object_array_get_idx(get_key(o2, "items"), 0), "id"), expected[4]);
                assert_null(o2, "next_cursor");
        }

        /* A cursor past the oldest record: an empty page. */
        {
                _cleanup_(json_object_putp) json_object *o = NULL;

                ASSERT_OK(list_json(h, &k, 20, "1", &o));
                assert_json(o, "{\"items\":[],\"next_cursor\":null}");
        }
        /* The largest cursor is "from the newest". */
        {
                _cleanup_(json_object_putp) json_object *o = NULL;

                ASSERT_OK(list_json(h, &k, 1, "9223372036854775807", &o));
                ASSERT_EQ_STR(get_str(json_object_array_get_idx(get_key(o, "items"), 0), "id"), expected[0]);
        }

        /* Bad arguments, and *ret untouched. */
        {
                static const char *const bad_cursors[] = { "", "0", "abc", "-3", "01", "9223372036854775808" };
                json_object *o = NULL;

                ASSERT_EQ_INT(list_json(h, &k, 0, NULL, &o), -EINVAL);
                ASSERT_EQ_INT(list_json(h, &k, 101, NULL, &o), -EINVAL);
                ASSERT_EQ_INT(list_json(h, &k, UINT32_MAX, NULL, &o), -EINVAL);
                for (size_t i = 0; i < ELEMENTSOF(bad_cursors); i++)
                        ASSERT_EQ_INT(list_json(h, &k, 20, bad_cursors[i], &o), -EINVAL);
                ASSERT_TRUE(o == NULL);
        }

        for (unsigned i = 0; i < 5; i++) {
                finish_ok(h, qid(100 + i), T0 + 10 * USEC_PER_SEC);
                finish_ok(h, qid(200 + i), T0 + 10 * USEC_PER_SEC);
        }
}

TEST(list) {
        _cleanup_(history_fixture_done) HistoryFixture f = history_fixture_new("list");

        run_list(f.h);
}

TEST(parse_list_arguments) {
        static const struct {
                const char *limit, *cursor;
                unsigned expected;
        } good[] = {
                { NULL, NULL, 20 },
                { "1", NULL, 1 },
                { "100", NULL, 100 },
                { "99", NULL, 99 },
                { "20", "1", 20 },
                { NULL, "1", 20 },
                { NULL, "9223372036854775807", 20 },
                { "7", "123456", 7 },
        };
        static const char *const bad_limits[] = {
                "",           "0",   "00",  "101", "1000",     "007",          "01",
                "+5",         "-1",  " 5",  "5 ",  "5x",       "1e2",          "0x10",
                "5\n",        "\t5", "1.0", "1,2", "\xd9\xa5", "\xef\xbc\x91", "99999999999999999999999",
                "4294967297",
        };
        static const char *const bad_cursors[] = {
                "0",
                "",
                "abc",
                "-3",
                "+3",
                " 3",
                "3 ",
                "03",
                "3.0",
                "9223372036854775808",
                "18446744073709551616",
                "99999999999999999999999999999999",
                "1;DROP TABLE queries",
                "1 OR 1=1",
                "0x1",
        };

        for (size_t i = 0; i < ELEMENTSOF(good); i++) {
                unsigned limit = 12345;
                const char *msg = NULL;

                if (history_parse_list_arguments(good[i].limit, good[i].cursor, &limit, &msg) != 0) {
                        fprintf(stderr,
                                "refused limit=%s cursor=%s: %s\n",
                                good[i].limit ? good[i].limit : "(null)",
                                good[i].cursor ? good[i].cursor : "(null)",
                                msg ? msg : "(null)");
                        abort();
                }
                ASSERT_EQ_INT(limit, good[i].expected);
        }

        for (size_t i = 0; i < ELEMENTSOF(bad_limits); i++)
                for (int with_cursor = 0; with_cursor <= 1; with_cursor++) {
                        unsigned limit = 12345;
                        const char *msg = NULL;

                        if (history_parse_list_arguments(
                                    bad_limits[i], with_cursor ? "5" : NULL, &limit, &msg) != -EINVAL) {
                                fprintf(stderr, "limit \"%s\" was not refused\n", bad_limits[i]);
                                abort();
                        }
                        ASSERT_TRUE(msg && strstr(msg, "limit"));
                        ASSERT_EQ_INT(limit, 12345);
                }

        for (size_t i = 0; i < ELEMENTSOF(bad_cursors); i++)
                for (int with_limit = 0; with_limit <= 1; with_limit++) {
                        unsigned limit = 12345;
                        const char *msg = NULL;

                        if (history_parse_list_arguments(
                                    with_limit ? "5" : NULL, bad_cursors[i], &limit, &msg) != -EINVAL) {
                                fprintf(stderr, "cursor \"%s\" was not refused\n", bad_cursors[i]);
                                abort();
                        }
                        ASSERT_TRUE(msg && strstr(msg, "cursor"));
                        ASSERT_EQ_INT(limit, 12345);
                }
}

static void run_delete(History *h) {
        const SessionKey k = key(5), other = key(6);
        HistoryOutcome out = { .succeeded = false, .error_code = "x", .error_message = "y" };

        ASSERT_OK(history_begin(h, qid(300), &k, "to delete", T0));
        ASSERT_EQ_INT(history_delete(h, qid(300), &k), -EBUSY);
        assert_status(h, qid(300), &k, "running");

        ASSERT_OK(history_finish(h, qid(300), &out));
        ASSERT_EQ_INT(history_delete(h, qid(300), &other), -ENOENT);
        ASSERT_OK(history_delete(h, qid(300), &k));
        {
                json_object *o = NULL;

                ASSERT_EQ_INT(get_json(h, qid(300), &k, &o), -ENOENT);
                ASSERT_TRUE(o == NULL);
        }
        ASSERT_EQ_INT(history_delete(h, qid(300), &k), -ENOENT);
        ASSERT_EQ_INT(history_delete(h, qid(301), &k), -ENOENT);
        ASSERT_EQ_INT(history_is_running(h, qid(300), &k), 0);

        /* A finish after the delete finds nothing to complete. */
        ASSERT_EQ_INT(history_finish(h, qid(300), &out), -ENOENT);
        /* The id is free again. */
        ASSERT_OK(history_begin(h, qid(300), &k, "reused", T0));
        ASSERT_OK(history_finish(h, qid(300), &out));
}

TEST(delete) {
        _cleanup_(history_fixture_done) HistoryFixture f = history_fixture_new("delete");

        run_delete(f.h);
}

/* Retention: the oldest records before the cutoff go in batches, with
 * their artifacts, feedback and share links; a running one and the newer
 * ones stay. */
TEST(prune_in_batches) {
        _cleanup_(history_fixture_done) HistoryFixture f = history_fixture_new("prune");
        const SessionKey k = key(8);
        HistoryOutcome out = { .succeeded = true, .answer = "old-answer-e3", .finished_at = T0 + 2 };
        uint8_t digest[HISTORY_SHARE_DIGEST_SIZE] = { 1 };
        unsigned records, artifacts, total = 0, total_artifacts = 0, batches = 0;
        int r;

        for (unsigned i = 0; i < 7; i++) {
                ASSERT_OK(history_begin(f.h, qid(600 + i), &k, "old-question-e3", T0 + i));
                ASSERT_OK(history_finish(f.h, qid(600 + i), &out));
        }
        ASSERT_OK(history_set_feedback(f.h, qid(600), &k, "down", NULL, "old-comment-e3", T0 + 3));
        ASSERT_OK(history_share_add(f.h, qid(601), &k, digest, T0 + 3));
        ASSERT_OK(history_begin(f.h, qid(610), &k, "old but running", T0));
        ASSERT_OK(history_begin(f.h, qid(611), &k, "new", T0 + 100));
        ASSERT_OK(history_finish(f.h, qid(611), &out));
        {
                _cleanup_free_ char *sql = NULL;

                ASSERT_TRUE(
                        asprintf(
                                &sql,
                                "INSERT INTO artifacts (id, query_id, name, media_type, size_bytes, sha256, data)"
                                " VALUES ('af_prune1', '%s', 'a.csv', 'text/csv', 1, '%s', X'41')",
                                qid(602),
                                "559aead08264d5795d3909718cdd05abd49572e84fe55590eef31a88a08fdffd") >= 0);
                sql_exec(f.dir, sql);
        }

        do {
                r = history_prune(f.h, T0 + 50, 3, &records, &artifacts);
                ASSERT_TRUE(r >= 0);
                ASSERT_TRUE(records <= 3);
                if (batches == 0)
                        ASSERT_EQ_INT(records, 3);
                total += records;
                total_artifacts += artifacts;
                batches++;
        } while (r > 0);
        ASSERT_EQ_INT(total, 7);
        ASSERT_EQ_INT(total_artifacts, 1);
        ASSERT_EQ_INT(batches, 3);
        ASSERT_OK(history_checkpoint(f.h));
        ASSERT_EQ_INT(sql_int(f.dir, "SELECT count(*) FROM queries"), 2);
        ASSERT_EQ_INT(sql_int(f.dir, "SELECT count(*) FROM artifacts"), 0);
        ASSERT_EQ_INT(sql_int(f.dir, "SELECT count(*) FROM feedback"), 0);
        ASSERT_EQ_INT(sql_int(f.dir, "SELECT count(*) FROM shares"), 0);
        assert_status(f.h, qid(610), &k, "running");
        assert_status(f.h, qid(611), &k, "succeeded");
        ASSERT_EQ_INT(history_prune(f.h, T0 + 50, 3, &records, &artifacts), 0);
        ASSERT_EQ_INT(records, 0);
}

/* A prune whose delete fails is rolled back: every record stays, and the
 * next prune (a new transaction) takes them. */
TEST(prune_failure_rolled_back) {
        _cleanup_(history_fixture_done) HistoryFixture f = history_fixture_new("prune-fail");
        const SessionKey k = key(8);
        HistoryOutcome out = { .succeeded = true, .answer = "old", .finished_at = T0 + 2 };
        unsigned records = 99, artifacts = 99;

        for (unsigned i = 0; i < 2; i++) {
                ASSERT_OK(history_begin(f.h, qid(620 + i), &k, "old", T0 + i));
                ASSERT_OK(history_finish(f.h, qid(620 + i), &out));
        }
        history_set_test_write_fault(f.h, SQLITE_FULL, 1, 1);
        ASSERT_EQ_INT(history_prune(f.h, T0 + 50, 10, &records, &artifacts), -EIO);
        ASSERT_EQ_INT(records, 99);
        ASSERT_EQ_INT(sql_int(f.dir, "SELECT count(*) FROM queries"), 2);
        ASSERT_EQ_INT(history_prune(f.h, T0 + 50, 10, &records, &artifacts), 0);
        ASSERT_EQ_INT(records, 2);
        ASSERT_EQ_INT(sql_int(f.dir, "SELECT count(*) FROM queries"), 0);
}

/* Whether a file holds the bytes of marker (a missing file holds none). */
static bool file_holds(const char *dir, const char *name, const char *marker) {
        _cleanup_free_ char *p = path_in(dir, name);
        _cleanup_free_ char *data = NULL;
        size_t size = 0, n = strlen(marker);
        FILE *f;
        bool found = false;

        f = fopen(p, "re");
        if (!f)
                return false;
        data = malloc(64 * 1024 * 1024);
        ASSERT_TRUE(data);
        size = fread(data, 1, 64 * 1024 * 1024, f);
        fclose(f);
        for (size_t i = 0; !found && i + n <= size; i++)
                found = memcmp(data + i, marker, n) == 0;
        return found;
}

static bool store_holds(const char *dir, const char *marker) {
        return file_holds(dir, "history.sqlite3", marker) || file_holds(dir, "history.sqlite3-wal", marker) ||
                file_holds(dir, "history.sqlite3-shm", marker);
}

/* Deleted means gone: secure_delete is on whatever the library's default,
 * and after a delete neither the main file nor the log holds the text. */
TEST(delete_leaves_nothing) {
        _cleanup_(history_fixture_done) HistoryFixture f = history_fixture_new("delete-gone");
        _cleanup_free_ char *wal = path_in(f.dir, "history.sqlite3-wal");
        const SessionKey k = key(7);
        HistoryOutcome out = { .succeeded = true, .answer = "answer-marker-4f1c", .finished_at = T0 + 2 };
        struct stat st;

        ASSERT_EQ_INT(history_secure_delete(f.h), 1);
        ASSERT_OK(history_begin(f.h, qid(310), &k, "question-marker-9b2e", T0));
        ASSERT_OK(history_finish(f.h, qid(310), &out));
        ASSERT_OK(history_set_feedback(f.h, qid(310), &k, "down", NULL, "comment-marker-77aa", T0 + 3));
        ASSERT_TRUE(store_holds(f.dir, "question-marker-9b2e"));
        ASSERT_TRUE(store_holds(f.dir, "comment-marker-77aa"));

        ASSERT_OK(history_delete(f.h, qid(310), &k));
        ASSERT_TRUE(stat(wal, &st) == 0);
        ASSERT_EQ_INT(st.st_size, 0);
        ASSERT_TRUE(!store_holds(f.dir, "question-marker-9b2e"));
        ASSERT_TRUE(!store_holds(f.dir, "answer-marker-4f1c"));
        ASSERT_TRUE(!store_holds(f.dir, "comment-marker-77aa"));
}

/* A person's erasure: every record of theirs in batches (a follow-up
 * chain, artifacts, feedback, share links), none of anyone else's; a
 * running one stays; afterwards no file of the store holds their text and
 * the log is empty. */
TEST(erase_session_in_batches) {
        _cleanup_(history_fixture_done) HistoryFixture f = history_fixture_new("erase");
        _cleanup_free_ char *wal = path_in(f.dir, "history.sqlite3-wal");
        const SessionKey k = key(9), other = key(10);
        HistoryOutcome out = { .succeeded = true, .answer = "erase-answer-5d0a", .finished_at = T0 + 2 };
        HistoryOutcome kept = { .succeeded = true, .answer = "kept-answer-81c3", .finished_at = T0 + 2 };
        uint8_t digest[HISTORY_SHARE_DIGEST_SIZE] = { 9 }, other_digest[HISTORY_SHARE_DIGEST_SIZE] = { 10 };
        char id[QUERY_ID_MAX];
        SessionKey owner;
        uint64_t records = 99, artifacts = 99;
        struct stat st;

        ASSERT_EQ_INT(history_secure_delete(f.h), 1);
        ASSERT_OK(history_begin(f.h, qid(700), &k, "erase-question-5d0a", T0));
        ASSERT_OK(history_finish(f.h, qid(700), &out));
        for (unsigned i = 1; i < 8; i++) {
                ASSERT_OK(history_begin_follow_up(
                        f.h, qid(700 + i), &k, "erase-question-5d0a", qid(700 + i - 1), qid(700), NULL, T0 + i));
                ASSERT_OK(history_finish(f.h, qid(700 + i), &out));
        }
        ASSERT_OK(history_set_feedback(f.h, qid(701), &k, "down", NULL, "erase-comment-5d0a", T0 + 3));
        ASSERT_OK(history_share_add(f.h, qid(702), &k, digest, T0 + 3));
        {
                _cleanup_free_ char *sql = NULL;

                ASSERT_TRUE(
                        asprintf(
                                &sql,
                                "INSERT INTO artifacts (id, query_id, name, media_type, size_bytes, sha256, data)"
                                " VALUES ('af_erase1', '%s', 'a.csv', 'text/csv', 17, '%s', "
                                "CAST('erase-file-5d0a!!' AS BLOB))",
                                qid(703),
                                "559aead08264d5795d3909718cdd05abd49572e84fe55590eef31a88a08fdffd") >= 0);
                sql_exec(f.dir, sql);
        }
        ASSERT_OK(history_begin(f.h, qid(720), &other, "kept-question-81c3", T0));
        ASSERT_OK(history_finish(f.h, qid(720), &kept));
        ASSERT_OK(history_share_add(f.h, qid(720), &other, other_digest, T0 + 3));
        ASSERT_OK(history_begin(f.h, qid(730), &k, "still running", T0 + 20));
        ASSERT_EQ_INT(history_session_running(f.h, &k), 1);
        ASSERT_EQ_INT(history_session_running(f.h, &other), 0);
        ASSERT_TRUE(store_holds(f.dir, "erase-question-5d0a"));
        ASSERT_TRUE(store_holds(f.dir, "erase-file-5d0a"));

        ASSERT_OK(history_erase_session(f.h, &k, 3, &records, &artifacts));
        ASSERT_EQ_INT(records, 8);
        ASSERT_EQ_INT(artifacts, 1);
        ASSERT_TRUE(stat(wal, &st) == 0);
        ASSERT_EQ_INT(st.st_size, 0);
        for (const char *m = "erase-question-5d0a\0erase-answer-5d0a\0erase-comment-5d0a\0erase-file-5d0a\0";
             *m;
             m += strlen(m) + 1)
                ASSERT_TRUE(!store_holds(f.dir, m));
        ASSERT_EQ_INT(sql_int(f.dir, "SELECT count(*) FROM artifacts"), 0);
        ASSERT_EQ_INT(sql_int(f.dir, "SELECT count(*) FROM feedback"), 0);
        ASSERT_EQ_INT(sql_int(f.dir, "SELECT count(*) FROM shares"), 1);
        ASSERT_EQ_INT(history_share_find(f.h, digest, id, &owner), -ENOENT);
        ASSERT_OK(history_share_find(f.h, other_digest, id, &owner));
        assert_status(f.h, qid(730), &k, "running");
        assert_status(f.h, qid(720), &other, "succeeded");
        ASSERT_TRUE(store_holds(f.dir, "kept-answer-81c3"));

        /* Nothing left but the running one: 0 records, and then none at all. */
        ASSERT_OK(history_erase_session(f.h, &k, 3, &records, &artifacts));
        ASSERT_EQ_INT(records, 0);
        ASSERT_EQ_INT(artifacts, 0);
        finish_ok(f.h, qid(730), T0 + 30);
        ASSERT_EQ_INT(history_session_running(f.h, &k), 0);
        ASSERT_OK(history_erase_session(f.h, &k, HISTORY_ERASE_BATCH, &records, NULL));
        ASSERT_EQ_INT(records, 1);
        ASSERT_EQ_INT(sql_int(f.dir, "SELECT count(*) FROM queries"), 1);
}

TEST(recovery) {
        _cleanup_(rm_rf_freep) char *dir = make_subdir("recovery");
        const SessionKey k = key(7);
        _cleanup_(json_object_putp) json_object *o = NULL;
        usec_t created = now(CLOCK_REALTIME) - 2 * USEC_PER_SEC;
        History *h;
        json_object *e;
        int64_t total;

        h = open_store(dir, 0);
        ASSERT_OK(history_begin(h, qid(400), &k, "interrupted", created));
        ASSERT_OK(history_begin(h, qid(401), &k, "done", created));
        finish_ok(h, qid(401), created + USEC_PER_SEC);
        h = history_free(h);

        h = open_store(dir, 1);
        o = get_record(h, qid(400), &k);
        ASSERT_EQ_STR(get_str(o, "status"), "failed");
        ASSERT_EQ_STR(get_str(o, "question"), "interrupted");
        assert_null(o, "answer");
        assert_null(o, "sandbox");
        e = get_key(o, "error");
        assert_keys(e, (const char *const[]){ "code", "message" }, 2);
        ASSERT_EQ_STR(get_str(e, "code"), "execution_failed");
        ASSERT_TRUE(strlen(get_str(e, "message")) > 0);
        assert_rfc3339_ms(get_str(o, "finished_at"));
        ASSERT_TRUE(strcmp(get_str(o, "finished_at"), get_str(o, "created_at")) > 0);
        /* finished_at and total stop at the last time the store knew the
         * daemon alive (the other record's finish, 1 s after the start),
         * not at the recovery: the downtime (here 1 s) is not counted. */
        total = get_int(get_key(o, "timings_ms"), "total");
        ASSERT_EQ_INT(total, 1000);
        {
                _cleanup_(json_object_putp) json_object *done = get_record(h, qid(401), &k);
                ASSERT_EQ_STR(get_str(o, "finished_at"), get_str(done, "finished_at"));
        }
        ASSERT_EQ_INT(history_is_running(h, qid(400), &k), 0);
        /* A finished record is left alone. */
        assert_status(h, qid(401), &k, "succeeded");
        h = history_free(h);

        h = open_store(dir, 0);
        assert_status(h, qid(400), &k, "failed");
        /* No longer running: deletable. */
        ASSERT_OK(history_delete(h, qid(400), &k));
        history_free(h);
}

TEST(artifacts) {
        _cleanup_(rm_rf_freep) char *dir = make_subdir("artifacts");
        _cleanup_free_ char *sql = NULL;
        const SessionKey k = key(8), other = key(9);
        static const uint8_t data[] = { 0, 'a', 0, 'b', 0, 0, 'c', 0xff, '\n', 0, 'Z' };
        static const char name[] =
                "Gr\xc3\xb6\xc3\x9f"
                "e Tabelle \xe2\x82\xac.csv";
        static const char af1[] = "af_0123456789abcdef0123456789abcdef";
        static const char af2[] = "af_fedcba9876543210fedcba9876543210";
        char hex_data[2 * sizeof(data) + 1], sha[65], sha_empty[65];
        uint8_t digest[SHA256_DIGEST_SIZE];
        HistoryArtifact a = { 0 };
        History *h;

        sha256(data, sizeof(data), digest);
        sha256_to_hex(digest, sha);
        sha256(NULL, 0, digest);
        sha256_to_hex(digest, sha_empty);
        for (size_t i = 0; i < sizeof(data); i++)
                (void) snprintf(hex_data + 2 * i, 3, "%02x", data[i]);

        h = open_store(dir, 0);
        ASSERT_OK(history_begin(h, qid(500), &k, "make a table", T0));
        finish_ok(h, qid(500), T0 + USEC_PER_SEC);
        ASSERT_OK(history_begin(h, qid(501), &k, "unrelated", T0));
        finish_ok(h, qid(501), T0 + USEC_PER_SEC);
        h = history_free(h);

        ASSERT_TRUE(
                asprintf(
                        &sql,
                        "INSERT INTO artifacts (id, query_id, name, media_type, size_bytes, sha256, data) VALUES"
                        " ('%s', '%s', '%s', 'text/csv', %zu, '%s', X'%s'),"
                        " ('%s', '%s', 'empty.bin', 'application/octet-stream', 0, '%s', zeroblob(0))",
                        af1,
                        qid(500),
                        name,
                        sizeof(data),
                        sha,
                        hex_data,
                        af2,
                        qid(500),
                        sha_empty) >= 0);
        sql_exec(dir, sql);
        ASSERT_EQ_INT(sql_int(dir, "SELECT count(*) FROM artifacts"), 2);

        h = open_store(dir, 0);

        ASSERT_EQ_INT(history_get_artifact(h, af1, &other, &a), -ENOENT);
        ASSERT_EQ_INT(history_get_artifact(h, "af_00000000000000000000000000000000", &k, &a), -ENOENT);
        ASSERT_TRUE(a.data == NULL);

        ASSERT_OK(history_get_artifact(h, af1, &k, &a));
        ASSERT_EQ_INT(a.size, sizeof(data));
        ASSERT_TRUE(memcmp(a.data, data, sizeof(data)) == 0);
        ASSERT_EQ_STR(a.name, name);
        ASSERT_EQ_STR(a.media_type, "text/csv");
        ASSERT_EQ_STR(a.sha256, sha);
        history_artifact_done(&a);
        ASSERT_TRUE(a.data == NULL && a.name == NULL && a.media_type == NULL && a.size == 0);

        ASSERT_OK(history_get_artifact(h, af2, &k, &a));
        ASSERT_EQ_INT(a.size, 0);
        ASSERT_TRUE(a.data);
        ASSERT_EQ_STR(a.name, "empty.bin");
        ASSERT_EQ_STR(a.media_type, "application/octet-stream");
        ASSERT_EQ_STR(a.sha256, sha_empty);
        history_artifact_done(&a);

        {
                _cleanup_(json_object_putp) json_object *o = get_record(h, qid(500), &k),
                                                        *o2 = get_record(h, qid(501), &k);
                json_object *arts = get_key(o, "artifacts"), *x;
                static const char *const artifact_keys[] = {
                        "id", "name", "media_type", "size_bytes", "sha256", "download_url",
                };

                ASSERT_TRUE(json_object_is_type(arts, json_type_array));
                ASSERT_EQ_INT(json_object_array_length(arts), 2);
                x = json_object_array_get_idx(arts, 0);
                assert_keys(x, artifact_keys, ELEMENTSOF(artifact_keys));
                ASSERT_EQ_STR(get_str(x, "id"), af1);
                ASSERT_EQ_STR(get_str(x, "name"), name);
                ASSERT_EQ_STR(get_str(x, "media_type"), "text/csv");
                ASSERT_EQ_INT(get_int(x, "size_bytes"), sizeof(data));
                ASSERT_EQ_STR(get_str(x, "sha256"), sha);
                ASSERT_EQ_STR(
                        get_str(x, "download_url"), "/api/v1/artifacts/af_0123456789abcdef0123456789abcdef");
                x = json_object_array_get_idx(arts, 1);
                assert_keys(x, artifact_keys, ELEMENTSOF(artifact_keys));
                ASSERT_EQ_STR(get_str(x, "id"), af2);
                ASSERT_EQ_INT(get_int(x, "size_bytes"), 0);
                ASSERT_EQ_STR(
                        get_str(x, "download_url"), "/api/v1/artifacts/af_fedcba9876543210fedcba9876543210");

                assert_json(get_key(o2, "artifacts"), "[]");
        }
        /* The listing shows them too. */
        {
                _cleanup_(json_object_putp) json_object *o = NULL;
                json_object *items;

                ASSERT_OK(list_json(h, &k, 20, NULL, &o));
                items = get_key(o, "items");
                ASSERT_EQ_INT(json_object_array_length(items), 2);
                ASSERT_EQ_STR(get_str(json_object_array_get_idx(items, 1), "id"), qid(500));
                ASSERT_EQ_INT(
                        json_object_array_length(get_key(json_object_array_get_idx(items, 1), "artifacts")),
                        2);
        }

        ASSERT_EQ_INT(history_delete(h, qid(500), &other), -ENOENT);
        ASSERT_OK(history_get_artifact(h, af1, &k, &a));
        history_artifact_done(&a);

        ASSERT_OK(history_delete(h, qid(500), &k));
        ASSERT_EQ_INT(history_get_artifact(h, af1, &k, &a), -ENOENT);
        ASSERT_EQ_INT(history_get_artifact(h, af2, &k, &a), -ENOENT);
        history_free(h);

        /* Gone from the file, not only unreachable through the join. */
        ASSERT_EQ_INT(sql_int(dir, "SELECT count(*) FROM artifacts"), 0);
        ASSERT_EQ_INT(sql_int(dir, "SELECT count(*) FROM queries"), 1);
}

TEST(refuse_garbage) {
        _cleanup_(rm_rf_freep) char *dir = make_subdir("garbage");
        _cleanup_free_ char *p = path_in(dir, "history.sqlite3"), *after = NULL;
        char garbage[4096];
        size_t size;
        History *h = NULL;
        int r;

        for (size_t i = 0; i < sizeof(garbage); i++)
                garbage[i] = "This is not an SQLite database, only text.\n"[i % 43];
        write_file(p, garbage, sizeof(garbage));

        r = history_open(dir, &h, NULL);
        ASSERT_TRUE(r < 0);
        ASSERT_TRUE(r != -ENOMEM);
        ASSERT_TRUE(h == NULL);

        /* Left as it was. */
        after = test_read_file(p, &size);
        ASSERT_EQ_INT(size, sizeof(garbage));
        ASSERT_TRUE(memcmp(after, garbage, size) == 0);

        /* A short file too. */
        write_file(p, "SQLite format 3", 15);
        r = history_open(dir, &h, NULL);
        ASSERT_TRUE(r < 0);
        ASSERT_TRUE(h == NULL);
}

/* history_open() on dir fails with expected, and leaves its file exactly as
 * it was: not a byte changed, not even the journal mode. */
static void assert_refused_untouched(const char *dir, int expected) {
        _cleanup_free_ char *p = path_in(dir, "history.sqlite3"), *before = NULL, *after = NULL;
        size_t n_before, n_after;
        History *h = NULL;

        before = test_read_file(p, &n_before);
        ASSERT_EQ_INT(history_open(dir, &h, NULL), expected);
        ASSERT_TRUE(h == NULL);
        after = test_read_file(p, &n_after);
        ASSERT_EQ_INT(n_after, n_before);
        ASSERT_TRUE(memcmp(after, before, n_before) == 0);
}

/* The schema of version 1, as its wikiwebd created it. */
static const char schema_v1[] =
        "CREATE TABLE queries ("
        "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
        "  id TEXT NOT NULL UNIQUE,"
        "  session BLOB NOT NULL CHECK (length(session) = 32),"
        "  status TEXT NOT NULL CHECK (status IN ('running', 'succeeded', 'failed')),"
        "  question TEXT NOT NULL,"
        "  answer TEXT,"
        "  sources TEXT NOT NULL DEFAULT '[]',"
        "  error_code TEXT,"
        "  error_message TEXT,"
        "  queue_ms INTEGER NOT NULL DEFAULT 0,"
        "  wiki_ms INTEGER NOT NULL DEFAULT 0,"
        "  model_ms INTEGER NOT NULL DEFAULT 0,"
        "  sandbox_ms INTEGER NOT NULL DEFAULT 0,"
        "  cleanup_ms INTEGER NOT NULL DEFAULT 0,"
        "  total_ms INTEGER NOT NULL DEFAULT 0,"
        "  model TEXT NOT NULL DEFAULT '',"
        "  prompt_tokens INTEGER NOT NULL DEFAULT 0,"
        "  completion_tokens INTEGER NOT NULL DEFAULT 0,"
        "  created_at INTEGER NOT NULL,"
        "  finished_at INTEGER"
        ");"
        "CREATE INDEX queries_by_session ON queries (session, seq);"
        "CREATE TABLE artifacts ("
        "  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
        "  id TEXT NOT NULL UNIQUE,"
        "  query_id TEXT NOT NULL REFERENCES queries (id) ON DELETE CASCADE,"
        "  name TEXT NOT NULL,"
        "  media_type TEXT NOT NULL,"
        "  size_bytes INTEGER NOT NULL,"
        "  sha256 TEXT NOT NULL CHECK (length(sha256) = 64),"
        "  data BLOB NOT NULL"
        ");"
        "CREATE INDEX artifacts_by_query ON artifacts (query_id, seq);"
        "PRAGMA user_version = 1;";

static void finish_answer(History *h, const char *id, const char *answer) {
        ASSERT_OK(history_finish(
                h,
                id,
                &(HistoryOutcome){ .succeeded = true,
                                   .answer = answer,
                                   .sources_json = "[{\"title\":\"Apple\",\"url\":\"u\",\"revision_id\":3}]",
                                   .finished_at = T0 + 10 * USEC_PER_SEC }));
}

static void digest(uint8_t d[static HISTORY_SHARE_DIGEST_SIZE], uint8_t v) {
        memset(d, v, HISTORY_SHARE_DIGEST_SIZE);
}

/* What reached a follow-up's model: the titles of the turns it was given
 * (their sources and their own given titles), kept with it when it begins,
 * however the chain changes after. */
TEST(given_titles) {
        _cleanup_(rm_rf_freep) char *dir = make_subdir("given");
        _cleanup_(history_record_freep) HistoryRecord *r = NULL;
        const SessionKey k = key(7);
        History *h = open_store(dir, 0);

        ASSERT_OK(history_begin(h, qid(1), &k, "first", T0));
        ASSERT_OK(history_finish(
                h,
                qid(1),
                &(HistoryOutcome){ .succeeded = true,
                                   .answer = "one",
                                   .sources_json = "[{\"title\":\"A\",\"url\":\"u\",\"revision_id\":1},"
                                                   "{\"title\":\"B\",\"url\":\"u\",\"revision_id\":2}]",
                                   .finished_at = T0 }));
        ASSERT_OK(history_begin_follow_up(h, qid(2), &k, "second", qid(1), qid(1), NULL, T0 + 1));
        ASSERT_OK(history_finish(
                h,
                qid(2),
                &(HistoryOutcome){ .succeeded = true,
                                   .answer = "two",
                                   .sources_json = "[{\"title\":\"A\",\"url\":\"u\",\"revision_id\":1},"
                                                   "{\"title\":\"C\",\"url\":\"u\",\"revision_id\":3}]",
                                   .finished_at = T0 + 1 }));
        ASSERT_OK(history_begin_follow_up(h, qid(3), &k, "third", qid(2), qid(1), NULL, T0 + 2));
        finish_answer(h, qid(3), "three");

        ASSERT_OK(history_get_record(h, qid(1), &k, &r));
        ASSERT_TRUE(r->given_titles && !r->given_titles[0]);
        r = history_record_free(r);
        ASSERT_OK(history_get_record(h, qid(2), &k, &r));
        ASSERT_TRUE(
                strv_length(r->given_titles) == 2 && streq(r->given_titles[0], "A") &&
                streq(r->given_titles[1], "B"));
        r = history_record_free(r);
        /* The first turn deleted: its titles still count for the third. */
        ASSERT_OK(history_delete(h, qid(1), &k));
        ASSERT_OK(history_get_record(h, qid(3), &k, &r));
        ASSERT_TRUE(strv_length(r->given_titles) == 3 && strv_contains(r->given_titles, "C"));
        history_free(h);
}

/* A conversation is its records through their follow_up links, oldest
 * first; a share link is known by its digest, revoked, trimmed to the
 * newest HISTORY_SHARES_MAX, and deleted with its record. */
TEST(conversations_and_shares) {
        _cleanup_(rm_rf_freep) char *dir = make_subdir("conversation");
        const SessionKey k = key(7), other = key(8);
        HistoryRecord *turns = NULL;
        SessionKey owner;
        char id[QUERY_ID_MAX];
        uint8_t d[HISTORY_SHARE_DIGEST_SIZE];
        size_t n;
        History *h = open_store(dir, 0);

        ASSERT_OK(history_begin(h, qid(1), &k, "first", T0));
        finish_answer(h, qid(1), "one");
        ASSERT_OK(history_begin_follow_up(h, qid(2), &k, "second", qid(1), qid(1), NULL, T0 + 1));
        finish_answer(h, qid(2), "two");
        ASSERT_OK(history_begin_follow_up(h, qid(3), &k, "third", qid(2), qid(1), NULL, T0 + 2));

        ASSERT_OK(history_get_conversation(h, qid(3), &k, 100, &turns, &n));
        ASSERT_EQ_INT(n, 3);
        ASSERT_EQ_STR(turns[0].id, qid(1));
        ASSERT_TRUE(turns[0].follow_up == NULL);
        ASSERT_EQ_STR(turns[0].conversation, qid(1));
        ASSERT_EQ_STR(turns[1].question, "second");
        ASSERT_EQ_STR(turns[1].follow_up, qid(1));
        ASSERT_EQ_STR(turns[2].conversation, qid(1));
        ASSERT_EQ_STR(turns[2].status, "running");
        history_conversation_free_records(turns, n);

        /* The newest max. */
        ASSERT_OK(history_get_conversation(h, qid(3), &k, 2, &turns, &n));
        ASSERT_EQ_INT(n, 2);
        ASSERT_EQ_STR(turns[0].id, qid(2));
        ASSERT_EQ_STR(turns[1].id, qid(3));
        history_conversation_free_records(turns, n);

        ASSERT_EQ_INT(history_get_conversation(h, qid(3), &other, 100, &turns, &n), -ENOENT);
        ASSERT_EQ_INT(history_get_conversation(h, qid(9), &k, 100, &turns, &n), -ENOENT);
        ASSERT_EQ_INT(history_get_conversation(h, qid(3), &k, 0, &turns, &n), -EINVAL);

        /* Shares: not of a running record, not of another session's. */
        digest(d, 1);
        ASSERT_EQ_INT(history_share_add(h, qid(3), &k, d, T0), -EBUSY);
        ASSERT_EQ_INT(history_share_add(h, qid(2), &other, d, T0), -ENOENT);
        ASSERT_EQ_INT(history_share_find(h, d, id, &owner), -ENOENT);
        ASSERT_OK(history_share_add(h, qid(2), &k, d, T0));
        ASSERT_OK(history_share_find(h, d, id, &owner));
        ASSERT_EQ_STR(id, qid(2));
        ASSERT_TRUE(memcmp(owner.bytes, k.bytes, sizeof k.bytes) == 0);
        digest(d, 2);
        ASSERT_EQ_INT(history_share_find(h, d, id, &owner), -ENOENT);
        ASSERT_OK(history_share_add(h, qid(2), &k, d, T0));
        ASSERT_EQ_INT(history_share_revoke(h, qid(2), &other), -ENOENT);
        ASSERT_EQ_INT(history_share_revoke(h, qid(2), &k), 2);
        ASSERT_EQ_INT(history_share_find(h, d, id, &owner), -ENOENT);
        ASSERT_EQ_INT(history_share_revoke(h, qid(2), &k), 0);

        /* The newest HISTORY_SHARES_MAX of one record stay. */
        for (unsigned i = 0; i <= HISTORY_SHARES_MAX; i++) {
                digest(d, (uint8_t) (10 + i));
                ASSERT_OK(history_share_add(h, qid(1), &k, d, T0 + i));
        }
        digest(d, 10);
        ASSERT_EQ_INT(history_share_find(h, d, id, &owner), -ENOENT);
        digest(d, 11);
        ASSERT_OK(history_share_find(h, d, id, &owner));
        ASSERT_EQ_INT(sql_int(dir, "SELECT count(*) FROM shares"), HISTORY_SHARES_MAX);

        /* Deleting the record deletes its links; the chain ends at it. */
        ASSERT_OK(history_delete(h, qid(1), &k));
        ASSERT_EQ_INT(history_share_find(h, d, id, &owner), -ENOENT);
        ASSERT_EQ_INT(sql_int(dir, "SELECT count(*) FROM shares"), 0);
        finish_answer(h, qid(3), "three");
        ASSERT_OK(history_get_conversation(h, qid(3), &k, 100, &turns, &n));
        ASSERT_EQ_INT(n, 2);
        ASSERT_EQ_STR(turns[0].id, qid(2));
        history_conversation_free_records(turns, n);
        ASSERT_OK(history_delete(h, qid(2), &k));
        ASSERT_OK(history_get_conversation(h, qid(3), &k, 100, &turns, &n));
        ASSERT_EQ_INT(n, 1);
        ASSERT_EQ_STR(turns[0].answer, "three");
        history_conversation_free_records(turns, n);

        history_free(h);
}

/* A store of version 1 gains the column "sandbox": its records keep
 * everything and say null, a running one is still recovered, and new
 * records carry the value. */
TEST(migrate_from_version_1) {
        _cleanup_(rm_rf_freep) char *dir = make_subdir("migrate");
        _cleanup_(json_object_putp) json_object *done = NULL, *recovered = NULL, *fresh = NULL;
        _cleanup_free_ char *sql = NULL;
        const SessionKey k = key(9);
        SessionKey ks;
        char hex[65] = "";
        History *h;

        for (size_t i = 0; i < sizeof k.bytes; i++)
                snprintf(hex + 2 * i, 3, "%02x", k.bytes[i]);
        sql_exec(dir, schema_v1);
        ASSERT_TRUE(
                asprintf(
                        &sql,
                        "INSERT INTO queries (id, session, status, question, answer, model, created_at, "
                        "finished_at, wiki_ms) VALUES ('%s', x'%s', 'succeeded', 'old', '42', 'm', 1000000, "
                        "2000000, 7);"
                        "INSERT INTO queries (id, session, status, question, created_at) VALUES "
                        "('%s', x'%s', 'running', 'cut', 1500000);",
                        qid(500),
                        hex,
                        qid(501),
                        hex) > 0);
        sql_exec(dir, sql);

        h = open_store(dir, 1);
        ASSERT_EQ_INT(sql_int(dir, "PRAGMA user_version"), 10);
        ks = sealed_key(dir, &k);
        done = get_record(h, qid(500), &ks);
        ASSERT_EQ_STR(get_str(done, "status"), "succeeded");
        ASSERT_EQ_STR(get_str(done, "answer"), "42");
        ASSERT_EQ_INT(get_int(get_key(done, "timings_ms"), "wiki"), 7);
        assert_null(done, "sandbox");
        ASSERT_EQ_INT(json_object_array_length(get_key(done, "citations")), 0);
        recovered = get_record(h, qid(501), &ks);
        ASSERT_EQ_STR(get_str(recovered, "status"), "failed");
        assert_null(recovered, "sandbox");
        /* Each old record is a conversation of its own. */
        assert_null(done, "follow_up");
        ASSERT_EQ_STR(get_str(done, "conversation"), qid(500));

        ASSERT_OK(history_begin(h, qid(502), &k, "new", 3000000));
        ASSERT_OK(history_finish(
                h,
                qid(502),
                &(HistoryOutcome){
                        .succeeded = true, .answer = "a", .sandbox = "unavailable", .finished_at = 4000000 }));
        fresh = get_record(h, qid(502), &k);
        ASSERT_EQ_STR(get_str(fresh, "sandbox"), "unavailable");
        h = history_free(h);

        /* Opened again: nothing more to do. */
        h = open_store(dir, 0);
        ASSERT_EQ_INT(sql_int(dir, "PRAGMA user_version"), 10);
        history_free(h);
}

/* A store of version 2 (with "sandbox") gains the column "citations" in
 * one transaction: its records say [], new records keep theirs. */
TEST(migrate_from_version_2) {
        _cleanup_(rm_rf_freep) char *dir = make_subdir("migrate2");
        _cleanup_(json_object_putp) json_object *old = NULL, *fresh = NULL;
        _cleanup_free_ char *sql = NULL, *v2 = NULL;
        const SessionKey k = key(9);
        SessionKey ks;
        char hex[65] = "";
        const char *end = strstr(schema_v1, "  finished_at INTEGER");
        History *h;

        ASSERT_TRUE(end);
        /* version 2 is version 1 with the column sandbox */
        ASSERT_TRUE(
                asprintf(
                        &v2,
                        "%.*s  finished_at INTEGER,  sandbox TEXT%s",
                        (int) (end - schema_v1),
                        schema_v1,
                        end + strlen("  finished_at INTEGER")) > 0);
        *strstr(v2, "user_version = 1") = 0;
        ASSERT_TRUE(asprintf(&sql, "%suser_version = 2;", v2) > 0);
        sql_exec(dir, sql);
        free(sql);
        sql = NULL;
        for (size_t i = 0; i < sizeof k.bytes; i++)
                snprintf(hex + 2 * i, 3, "%02x", k.bytes[i]);
        ASSERT_TRUE(
                asprintf(
                        &sql,
                        "INSERT INTO queries (id, session, status, question, answer, model, created_at, "
                        "finished_at, sandbox) VALUES ('%s', x'%s', 'succeeded', 'old', '42', 'm', 1000000, "
                        "2000000, 'offered');",
                        qid(600),
                        hex) > 0);
        sql_exec(dir, sql);

        h = open_store(dir, 0);
        ASSERT_EQ_INT(sql_int(dir, "PRAGMA user_version"), 10);
        ks = sealed_key(dir, &k);
        old = get_record(h, qid(600), &ks);
        ASSERT_EQ_STR(get_str(old, "sandbox"), "offered");
        ASSERT_EQ_INT(json_object_array_length(get_key(old, "citations")), 0);

        ASSERT_OK(history_begin(h, qid(601), &k, "new", 3000000));
        ASSERT_EQ_INT(
                history_finish(
                        h,
                        qid(601),
                        &(HistoryOutcome){ .succeeded = true, .answer = "a", .citations_json = "{\"n\": 1}" }),
                -EINVAL);
        ASSERT_OK(history_finish(
                h,
                qid(601),
                &(HistoryOutcome){ .succeeded = true,
                                   .answer = "a [1]",
                                   .citations_json = "[{\"n\":1,\"title\":\"Apple\",\"revision_id\":3,"
                                                     "\"quote\":\"q\",\"status\":\"verified\",\"url\":null,"
                                                     "\"section\":null}]",
                                   .finished_at = 4000000 }));
        fresh = get_record(h, qid(601), &k);
        ASSERT_EQ_INT(json_object_array_length(get_key(fresh, "citations")), 1);
        ASSERT_EQ_STR(get_str(json_object_array_get_idx(get_key(fresh, "citations"), 0), "status"), "verified");
        history_free(h);

        /* Back to version 3 (as a wikiwebd of that version left it: the
         * later columns and tables unknown), and opened again: the steps
         * to 4, 5 and 6 run, in order. */
        sql_exec(
                dir,
                "DROP INDEX queries_by_created; DROP INDEX queries_running; DROP INDEX queries_by_finished;"
                "DROP INDEX feedback_down;"
                "DROP TABLE shares; DROP INDEX queries_by_follow_up;"
                "ALTER TABLE queries DROP COLUMN follow_up; ALTER TABLE queries DROP COLUMN conversation;"
                "DROP TABLE feedback; DROP INDEX queries_by_wording;"
                "ALTER TABLE queries DROP COLUMN searches; ALTER TABLE queries DROP COLUMN wording_key;"
                "ALTER TABLE queries DROP COLUMN signals; ALTER TABLE queries DROP COLUMN given_titles;"
                "ALTER TABLE queries DROP COLUMN notes;"
                "DROP TABLE tokens;"
                "PRAGMA user_version = 3;");
        h = open_store(dir, 0);
        ASSERT_EQ_INT(sql_int(dir, "PRAGMA user_version"), 10);
        ASSERT_EQ_INT(sql_int(dir, "SELECT count(*) FROM queries WHERE conversation = id"), 2);
        ASSERT_EQ_INT(sql_int(dir, "SELECT count(*) FROM shares"), 0);
        ASSERT_EQ_INT(sql_int(dir, "SELECT count(*) FROM queries WHERE given_titles = '[]'"), 2);
        history_free(h);
}

/* Whether a file of dir holds the n bytes at b. */
static bool file_holds_bytes(const char *dir, const char *name, const void *b, size_t n) {
        _cleanup_free_ char *p = path_in(dir, name);
        _cleanup_free_ char *data = NULL;
        size_t size = 0;
        FILE *f = fopen(p, "re");

        if (!f)
                return false;
        data = malloc(1 << 22);
        ASSERT_TRUE(data);
        size = fread(data, 1, 1 << 22, f);
        fclose(f);
        return memmem(data, size, b, n) != NULL;
}

/* Schema step 9: a file whose records are keyed by the unsalted SHA-256 of
 * a person's name (version 7) is re-keyed when opened: the person's
 * records are theirs under the sealed key, the old key is in no file, and
 * the user key is made beside it (mode 0600). */
TEST(rekey_from_version_7) {
        _cleanup_(rm_rf_freep) char *dir = make_subdir("rekey");
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_free_ char *keyfile = path_in(dir, USER_KEY_FILE);
        SessionKey alice, bob, sealed;
        HistoryRecord *rec = NULL;
        struct stat st;
        History *h;

        ASSERT_OK(user_key_from_name("alice", &alice));
        ASSERT_OK(user_key_from_name("bob", &bob));
        /* What a wikiwebd of version 7 left: its records under the old keys. */
        h = open_store(dir, 0);
        ASSERT_OK(history_begin(h, qid(900), &alice, "alice's question", T0));
        finish_ok(h, qid(900), T0 + 1);
        ASSERT_OK(history_begin(h, qid(901), &bob, "bob's question", T0));
        finish_ok(h, qid(901), T0 + 1);
        h = history_free(h);
        sql_exec(
                dir,
                "DROP INDEX queries_by_created; DROP INDEX queries_running; DROP INDEX queries_by_finished;"
                "DROP INDEX feedback_down; DROP TABLE tokens; PRAGMA user_version = 7");
        ASSERT_TRUE(unlink(keyfile) == 0);
        ASSERT_TRUE(file_holds_bytes(dir, "history.sqlite3", alice.bytes, sizeof alice.bytes));

        h = open_store(dir, 0);
        ASSERT_EQ_INT(sql_int(dir, "PRAGMA user_version"), 10);
        ASSERT_TRUE(stat(keyfile, &st) == 0);
        ASSERT_EQ_INT(st.st_mode & 07777, 0600);
        ASSERT_EQ_INT(st.st_size, USER_KEY_SECRET_BYTES);
        /* The old key no longer finds them; the sealed one does. */
        ASSERT_EQ_INT(history_get_record(h, qid(900), &alice, &rec), -ENOENT);
        sealed = sealed_key(dir, &alice);
        o = get_record(h, qid(900), &sealed);
        ASSERT_EQ_STR(get_str(o, "question"), "alice's question");
        sealed = sealed_key(dir, &bob);
        ASSERT_EQ_INT(history_get_record(h, qid(900), &sealed, &rec), -ENOENT);
        for (const char *n = "history.sqlite3\0history.sqlite3-wal\0"; *n; n += strlen(n) + 1) {
                ASSERT_TRUE(!file_holds_bytes(dir, n, alice.bytes, sizeof alice.bytes));
                ASSERT_TRUE(!file_holds_bytes(dir, n, bob.bytes, sizeof bob.bytes));
        }
        h = history_free(h);

        /* The same key at the next start: nothing is re-keyed twice. */
        h = open_store(dir, 0);
        sealed = sealed_key(dir, &alice);
        json_object_put(TAKE_PTR(o));
        o = get_record(h, qid(900), &sealed);
        ASSERT_EQ_STR(get_str(o, "id"), qid(900));
        history_free(h);
}

/* Schema step 9 on a file of version 8: an access token's owner is
 * re-keyed with the records, and its sealed name is left as it was (the
 * store never reads it). */
TEST(rekey_tokens_from_version_8) {
        _cleanup_(rm_rf_freep) char *dir = make_subdir("rekey-tokens");
        _cleanup_free_ char *keyfile = path_in(dir, USER_KEY_FILE);
        uint8_t digest[HISTORY_TOKEN_DIGEST_SIZE], sealed[HISTORY_TOKEN_SEALED_USER_SIZE],
                found[HISTORY_TOKEN_SEALED_USER_SIZE];
        char id[HISTORY_TOKEN_ID_MAX];
        HistoryToken *list = NULL;
        SessionKey alice, key, sealed_alice;
        size_t n;
        History *h;

        ASSERT_OK(user_key_from_name("alice", &alice));
        memset(digest, 0x5a, sizeof digest);
        for (size_t i = 0; i < sizeof sealed; i++)
                sealed[i] = (uint8_t) i;
        h = open_store(dir, 0);
        ASSERT_OK(history_token_add(
                h, "tk_00000000000000000000000000000001", &alice, sealed, "laptop", digest, T0, UINT64_MAX / 2));
        h = history_free(h);
        sql_exec(dir, "PRAGMA user_version = 8");
        ASSERT_TRUE(unlink(keyfile) == 0);

        h = open_store(dir, 0);
        ASSERT_EQ_INT(sql_int(dir, "PRAGMA user_version"), 10);
        sealed_alice = sealed_key(dir, &alice);
        ASSERT_OK(history_tokens_list(h, &alice, &list, &n));
        ASSERT_EQ_INT(n, 0);
        history_tokens_free(list, n);
        ASSERT_OK(history_tokens_list(h, &sealed_alice, &list, &n));
        ASSERT_EQ_INT(n, 1);
        ASSERT_EQ_STR(list[0].name, "laptop");
        history_tokens_free(list, n);
        ASSERT_OK(history_token_find(h, digest, T0, id, &key, found));
        ASSERT_EQ_STR(id, "tk_00000000000000000000000000000001");
        ASSERT_TRUE(memcmp(key.bytes, sealed_alice.bytes, sizeof key.bytes) == 0);
        ASSERT_TRUE(memcmp(found, sealed, sizeof sealed) == 0);
        history_free(h);
}

TEST(refuse_newer_schema) {
        _cleanup_(rm_rf_freep) char *dir = make_subdir("newer");

        sql_exec(dir, "CREATE TABLE future (x); PRAGMA user_version = 99;");
        assert_refused_untouched(dir, -ENOTSUP);
        ASSERT_EQ_INT(sql_int(dir, "PRAGMA user_version"), 99);
        ASSERT_EQ_INT(sql_int(dir, "SELECT count(*) FROM sqlite_master WHERE name = 'queries'"), 0);
}

TEST(refuse_unrelated_database) {
        _cleanup_(rm_rf_freep) char *dir = make_subdir("unrelated");

        /* Version 0 but not empty: someone else's table named queries. */
        sql_exec(dir, "CREATE TABLE queries (x); INSERT INTO queries VALUES (1);");
        assert_refused_untouched(dir, -ENOTSUP);
        ASSERT_EQ_INT(sql_int(dir, "PRAGMA user_version"), 0);
        ASSERT_EQ_INT(sql_int(dir, "SELECT count(*) FROM queries"), 1);
        ASSERT_EQ_INT(sql_int(dir, "SELECT count(*) FROM sqlite_master WHERE name = 'artifacts'"), 0);
}

/* The statements are prepared once and reused: each call must reset its
 * statement, or a SELECT left at a row would hold a read transaction (the
 * store would keep reading an old snapshot and no checkpoint could empty
 * the WAL). Another connection changes the file between the calls while
 * the store stays open: every read sees the change, and a TRUNCATE
 * checkpoint is never blocked by a reader. */
static void assert_no_reader(const char *dir) {
        _cleanup_free_ char *p = path_in(dir, "history.sqlite3");
        sqlite3_stmt *s = NULL;
        sqlite3 *db = NULL;

        ASSERT_EQ_INT(sqlite3_open_v2(p, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
        ASSERT_EQ_INT(sqlite3_prepare_v2(db, "PRAGMA wal_checkpoint(TRUNCATE)", -1, &s, NULL), SQLITE_OK);
        ASSERT_EQ_INT(sqlite3_step(s), SQLITE_ROW);
        /* busy, WAL frames, frames checkpointed */
        ASSERT_EQ_INT(sqlite3_column_int(s, 0), 0);
        ASSERT_EQ_INT(sqlite3_column_int(s, 1), 0);
        ASSERT_EQ_INT(sqlite3_finalize(s), SQLITE_OK);
        ASSERT_EQ_INT(sqlite3_close(db), SQLITE_OK);
}

TEST(statements_reused_and_reset) {
        _cleanup_(history_fixture_done) HistoryFixture f = history_fixture_new("statements-reset");
        const SessionKey k = key(21), other = key(22);
        HistoryArtifact a = { 0 };

        for (unsigned i = 0; i < 50; i++) {
                _cleanup_(json_object_putp) json_object *o = NULL, *l = NULL;
                _cleanup_free_ char *sql = NULL, *q = NULL;

                ASSERT_TRUE(asprintf(&q, "question %u", i) > 0);
                ASSERT_OK(history_begin(f.h, qid(700 + i), &k, q, T0 + i));
                ASSERT_EQ_INT(history_begin(f.h, qid(700 + i), &k, q, T0 + i), -EEXIST);
                ASSERT_EQ_INT(history_is_running(f.h, qid(700 + i), &k), 1);
                ASSERT_EQ_INT(history_is_running(f.h, qid(700 + i), &other), 0);
                finish_ok(f.h, qid(700 + i), T0 + i + 1);
                ASSERT_EQ_INT(history_is_running(f.h, qid(700 + i), &k), 0);
                o = get_record(f.h, qid(700 + i), &k);
                ASSERT_EQ_STR(get_str(o, "question"), q);
                ASSERT_EQ_INT(get_json(f.h, qid(700 + i), &other, &l), -ENOENT);
                ASSERT_EQ_INT(
                        history_get_artifact(f.h, "af_00000000000000000000000000000001", &k, &a), -ENOENT);
                assert_no_reader(f.dir);

                /* Changed behind the store's back: the next read sees it. */
                ASSERT_TRUE(
                        asprintf(
                                &sql,
                                "UPDATE queries SET question = 'changed %u' WHERE id = '%s'",
                                i,
                                qid(700 + i)) > 0);
                sql_exec(f.dir, sql);
                json_object_put(o);
                o = get_record(f.h, qid(700 + i), &k);
                free(q);
                ASSERT_TRUE(asprintf(&q, "changed %u", i) > 0);
                ASSERT_EQ_STR(get_str(o, "question"), q);
                assert_no_reader(f.dir);
        }
        /* A listing stopped early (one more row than the page) is reset too. */
        {
                _cleanup_(json_object_putp) json_object *page = NULL;

                ASSERT_OK(list_json(f.h, &k, 3, NULL, &page));
                assert_no_reader(f.dir);
        }
        ASSERT_OK(history_delete(f.h, qid(700), &k));
        ASSERT_EQ_INT(history_delete(f.h, qid(700), &k), -ENOENT);
        assert_no_reader(f.dir);
}

/* The durable sync is an fdatasync() of the write-ahead log: the
 * descriptor is the WAL's, kept while the file is the same one; a record
 * completed without it is committed (another connection reads it). */
TEST(sync_fd_is_the_wal) {
        _cleanup_(history_fixture_done) HistoryFixture f = history_fixture_new("sync-fd");
        _cleanup_free_ char *wal = path_in(f.dir, "history.sqlite3-wal");
        const SessionKey k = key(23);
        HistoryOutcome out = { .succeeded = true, .answer = "a", .finished_at = T0 + 2 };
        struct stat a, b;
        int fd;

        ASSERT_OK(history_begin(f.h, qid(800), &k, "q", T0));
        ASSERT_OK(history_finish_nosync(f.h, qid(800), &out));
        ASSERT_EQ_INT(sql_int(f.dir, "SELECT count(*) FROM queries WHERE status = 'succeeded'"), 1);
        fd = history_sync_fd(f.h);
        ASSERT_TRUE(fd >= 0);
        ASSERT_TRUE(fstat(fd, &a) == 0 && stat(wal, &b) == 0);
        ASSERT_TRUE(a.st_dev == b.st_dev && a.st_ino == b.st_ino);
        ASSERT_EQ_INT(history_sync_fd(f.h), fd);
        ASSERT_OK(history_sync(f.h));
        ASSERT_EQ_INT(history_finish_nosync(f.h, qid(800), &out), -ENOENT);
}

/* The wait range's seed: claim to outcome (total less queue) of the most
 * recent finished records, newest first; running ones are left out. */
TEST(recent_durations) {
        _cleanup_(history_fixture_done) HistoryFixture f = history_fixture_new("recent-durations");
        const SessionKey k = key(1);
        double d[8];
        size_t n = 99;

        ASSERT_OK(history_recent_durations(f.h, ELEMENTSOF(d), d, &n));
        ASSERT_EQ_INT(n, 0);
        for (unsigned i = 1; i <= 5; i++) {
                HistoryOutcome out = {
                        .succeeded = true,
                        .answer = "a",
                        .model = "m",
                        .finished_at = T0 + i * USEC_PER_SEC,
                        .timings = { .queue_ms = 1000 * i, .total_ms = 1000 * i + 250 * i },
                };

                ASSERT_OK(history_begin(f.h, qid(900 + i), &k, "q", T0 + i));
                ASSERT_OK(history_finish(f.h, qid(900 + i), &out));
        }
        ASSERT_OK(history_begin(f.h, qid(999), &k, "still running", T0 + 10));
        ASSERT_OK(history_recent_durations(f.h, 3, d, &n));
        ASSERT_EQ_INT(n, 3);
        ASSERT_TRUE(d[0] == 1.25 && d[1] == 1.0 && d[2] == 0.75);
        ASSERT_OK(history_recent_durations(f.h, ELEMENTSOF(d), d, &n));
        ASSERT_EQ_INT(n, 5);
        ASSERT_TRUE(d[4] == 0.25);
}

/* A finished record with the given searches, sources and citations. */
static void finish_with(
        History *h,
        unsigned n,
        const SessionKey *k,
        const char *question,
        bool ok,
        const char *code,
        const char *searches,
        const char *sources,
        const char *citations,
        usec_t at) {
        ASSERT_OK(history_begin(h, qid(n), k, question, at));
        ASSERT_OK(history_finish(
                h,
                qid(n),
                &(HistoryOutcome){ .succeeded = ok,
                                   .answer = ok ? "a" : NULL,
                                   .error_code = code,
                                   .error_message = code ? "m" : NULL,
                                   .searches_json = searches,
                                   .sources_json = sources,
                                   .citations_json = citations,
                                   .finished_at = at + 1000 }));
}

#define SRC_APPLE "[{\"title\":\"Apple\",\"url\":\"http://w/index.php?oldid=3\",\"revision_id\":3}]"
#define CITE(st) "[{\"n\":1,\"title\":\"Apple\",\"revision_id\":3,\"quote\":\"q\",\"status\":\"" st "\"}]"
#define SEARCH(q, n) "[{\"query\":\"" q "\",\"results\":" #n "}]"

TEST(signals_feedback_report) {
        _cleanup_(history_fixture_done) HistoryFixture f = history_fixture_new("report");
        _cleanup_(report_freep) Report *rep = NULL;
        _cleanup_(json_object_putp) json_object *o = NULL;
        const SessionKey a = key(1), b = key(2);
        const usec_t t = 1700000000ULL * USEC_PER_SEC;

        /* No page read, the search found nothing: no_sources + unverified. */
        finish_with(f.h, 1, &a, "What is the parking policy?", true, NULL, SEARCH("parking", 0), NULL, NULL, t);
        finish_with(
                f.h, 2, &b, "Parking policy for visitors?", true, NULL, SEARCH("parking", 0), NULL, NULL, t + 1);
        /* Verified: no signal; rated up below, still not listed. */
        finish_with(f.h, 3, &a, "Where do apples grow?", true, NULL, NULL, SRC_APPLE, CITE("verified"), t + 2);
        /* Verified but a quote not found: unverified only. */
        finish_with(f.h, 4, &a, "Apple colours", true, NULL, NULL, SRC_APPLE, CITE("not_found"), t + 3);
        /* Failed after a search with a code that counts, and one that does not. */
        finish_with(
                f.h, 5, &b, "Travel policy?", false, "query_timeout", SEARCH("travel", 2), NULL, NULL, t + 4);
        finish_with(
                f.h, 6, &b, "Zebra height", false, "upstream_failed", SEARCH("zebra", 1), NULL, NULL, t + 5);
        /* execution_failed before any search or read: not the wiki's. */
        finish_with(f.h, 7, &b, "Not configured", false, "execution_failed", NULL, NULL, NULL, t + 6);
        /* Too old for the report. */
        finish_with(f.h, 8, &b, "Parking?", true, NULL, NULL, NULL, NULL, t - 10 * USEC_PER_SEC);

        ASSERT_EQ_INT(
                sql_int(f.dir, "SELECT signals FROM queries WHERE id = 'qr_00000000000000000000000000000001'"),
                3);
        ASSERT_EQ_INT(
                sql_int(f.dir, "SELECT signals FROM queries WHERE id = 'qr_00000000000000000000000000000003'"),
                0);
        ASSERT_EQ_INT(
                sql_int(f.dir, "SELECT signals FROM queries WHERE id = 'qr_00000000000000000000000000000004'"),
                2);
        ASSERT_EQ_INT(
                sql_int(f.dir, "SELECT signals FROM queries WHERE id = 'qr_00000000000000000000000000000005'"),
                4);
        ASSERT_EQ_INT(
                sql_int(f.dir, "SELECT signals FROM queries WHERE id = 'qr_00000000000000000000000000000006'"),
                0);
        ASSERT_EQ_INT(
                sql_int(f.dir, "SELECT signals FROM queries WHERE id = 'qr_00000000000000000000000000000007'"),
                0);

        /* Feedback: own records only, replaced, not on a running one. */
        ASSERT_EQ_INT(history_set_feedback(f.h, qid(1), &b, "down", NULL, NULL, t), -ENOENT);
        ASSERT_EQ_INT(history_set_feedback(f.h, qid(99), &a, "down", NULL, NULL, t), -ENOENT);
        ASSERT_EQ_INT(history_set_feedback(f.h, qid(1), &a, "sideways", NULL, NULL, t), -EINVAL);
        ASSERT_OK(history_set_feedback(f.h, qid(1), &a, "up", NULL, "fine", t));
        ASSERT_OK(history_set_feedback(f.h, qid(1), &a, "down", "wrong", "No visitors", t + 7));
        ASSERT_OK(history_set_feedback(f.h, qid(3), &a, "up", NULL, NULL, t));
        ASSERT_OK(history_begin(f.h, qid(10), &a, "running", t));
        ASSERT_EQ_INT(history_set_feedback(f.h, qid(10), &a, "up", NULL, NULL, t), -EBUSY);
        o = get_record(f.h, qid(1), &a);
        ASSERT_EQ_STR(get_str(get_key(o, "feedback"), "rating"), "down");
        ASSERT_EQ_STR(get_str(get_key(o, "feedback"), "reason"), "wrong");
        ASSERT_EQ_STR(get_str(get_key(o, "feedback"), "comment"), "No visitors");

        ASSERT_OK(report_unanswered(f.h, t - USEC_PER_SEC, &rep));
        ASSERT_EQ_INT(rep->n_groups, 3);
        ASSERT_EQ_INT(rep->n_records, 4);
        /* The two wordings of parking, most asked first. */
        ASSERT_EQ_INT(rep->groups[0].count, 2);
        ASSERT_EQ_INT(rep->groups[0].n_wordings, 2);
        ASSERT_EQ_INT(rep->groups[0].no_sources, 2);
        ASSERT_EQ_INT(rep->groups[0].unverified, 2);
        ASSERT_EQ_INT(rep->groups[0].negative_feedback, 1);
        ASSERT_EQ_INT(rep->groups[0].reasons[REPORT_REASON_WRONG], 1);
        ASSERT_EQ_INT(rep->groups[0].n_comments, 1);
        ASSERT_EQ_STR(rep->groups[0].comments[0], "No visitors");
        ASSERT_EQ_INT(rep->groups[0].n_searches, 1);
        ASSERT_EQ_STR(rep->groups[0].searches[0].text, "parking");
        ASSERT_EQ_INT(rep->groups[0].searches[0].n, 2);
        ASSERT_EQ_INT(rep->groups[0].searches[0].results, 0);
        ASSERT_TRUE(rep->groups[0].first_asked == t && rep->groups[0].last_asked == t + 1);
        /* Then the unverified apple and the timed-out travel, founding order. */
        ASSERT_EQ_STR(rep->groups[1].question, "Apple colours");
        ASSERT_EQ_INT(rep->groups[1].unverified, 1);
        ASSERT_EQ_INT(rep->groups[1].n_pages, 1);
        ASSERT_EQ_STR(rep->groups[1].pages[0].text, "Apple");
        ASSERT_EQ_STR(rep->groups[2].question, "Travel policy?");
        ASSERT_EQ_INT(rep->groups[2].failed, 1);
        ASSERT_EQ_STR(rep->groups[2].failed_codes[0].text, "query_timeout");
        {
                /* An editor's view in person mode: the pages they may not
                 * read are left out, and a title not asked about is too. */
                _cleanup_(strv_freep) char **titles = report_page_titles(rep);
                const bool no[] = { false }, yes[] = { true };

                ASSERT_TRUE(titles);
                ASSERT_EQ_INT(strv_length(titles), 1);
                ASSERT_EQ_STR(titles[0], "Apple");
                ASSERT_EQ_INT(report_keep_pages(rep, titles, yes), 0);
                ASSERT_EQ_INT(rep->groups[1].n_pages, 1);
                ASSERT_EQ_INT(report_keep_pages(rep, titles, no), 1);
                ASSERT_EQ_INT(rep->groups[1].n_pages, 0);
                ASSERT_EQ_INT(rep->groups[1].count, 1);
                ASSERT_EQ_INT(report_keep_pages(rep, NULL, NULL), 0);
        }
        rep = report_free(rep);

        /* Deleting a record deletes its feedback. */
        ASSERT_OK(history_delete(f.h, qid(1), &a));
        ASSERT_EQ_INT(sql_int(f.dir, "SELECT count(*) FROM feedback"), 1);
        ASSERT_OK(report_unanswered(f.h, t - USEC_PER_SEC, &rep));
        ASSERT_EQ_INT(rep->groups[0].count, 1);
        ASSERT_EQ_INT(rep->groups[0].negative_feedback, 0);
}

TEST(report_parse_days) {
        const char *msg = NULL;
        unsigned d = 0;

        ASSERT_OK(report_parse_days(NULL, &d, &msg));
        ASSERT_EQ_INT(d, 30);
        ASSERT_OK(report_parse_days("365", &d, &msg));
        ASSERT_EQ_INT(d, 365);
        ASSERT_OK(report_parse_days("1", &d, &msg));
        ASSERT_EQ_INT(d, 1);
        static const char *const bad[] = { "0",  "366", "01", "+1", "-1",
                                           " 1", "1 ",  "",   "x",  "99999999999999999999" };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                ASSERT_EQ_INT(report_parse_days(bad[i], &d, &msg), -EINVAL);
        ASSERT_EQ_STR(msg, "days must be an integer from 1 to 365");
}

/* ---- the store under faults ---- */

TEST(refuse_empty_file) {
        _cleanup_(rm_rf_freep) char *dir = make_subdir("empty-file");
        _cleanup_free_ char *p = path_in(dir, "history.sqlite3");
        struct stat st;
        History *h = NULL;

        /* An existing file of 0 bytes is no history: refused, left as it is. */
        write_file(p, "", 0);
        ASSERT_TRUE(history_open(dir, &h, NULL) < 0);
        ASSERT_TRUE(h == NULL);
        ASSERT_TRUE(stat(p, &st) == 0 && st.st_size == 0);

        /* Once it is removed, a fresh install creates its database. */
        ASSERT_TRUE(unlink(p) == 0);
        h = open_store(dir, 0);
        history_free(h);
}

static void begin(History *h, const char *id, const SessionKey *k) {
        ASSERT_OK(history_begin(h, id, k, "question?", 1000 * USEC_PER_SEC));
}

static HistoryOutcome answer_outcome(const char *answer) {
        return (HistoryOutcome){
                .succeeded = true,
                .answer = answer,
                .sources_json = "[{\"title\":\"Main Page\"}]",
                .model = "m",
                .timings = { .total_ms = 1234 },
                .finished_at = 1001 * USEC_PER_SEC,
        };
}

/* SQLITE_FULL on the outcome's write: the outcome is kept in memory, the
 * record reads as it will be stored, new records are refused, and the
 * retry lands it. */
TEST(full_outcome_kept_and_landed) {
        _cleanup_(history_fixture_done) HistoryFixture f = history_fixture_new("full-outcome");
        const SessionKey k = key(1);
        HistoryOutcome o = answer_outcome("the answer");
        HistoryStorage st;
        const char *cause = NULL;

        begin(f.h, qid(1), &k);
        history_set_test_write_fault(f.h, SQLITE_FULL, 1, 1);
        ASSERT_EQ_INT(history_finish_nosync(f.h, qid(1), &o), 1);

        /* Shown as it will be stored; not running. */
        assert_status(f.h, qid(1), &k, "succeeded");
        {
                _cleanup_(json_object_putp) json_object *r = get_record(f.h, qid(1), &k);

                ASSERT_EQ_STR(get_str(r, "answer"), "the answer");
        }
        ASSERT_EQ_INT(history_is_running(f.h, qid(1), &k), 0);

        history_get_storage(f.h, 0, &st);
        ASSERT_EQ_INT(st.state, HISTORY_STORAGE_DEGRADED);
        ASSERT_EQ_INT(st.fault, -ENOSPC);
        ASSERT_EQ_INT(st.n_pending, 1);
        ASSERT_EQ_INT(st.writes_failed, 1);
        ASSERT_TRUE(strstr(st.cause, "no space left on the state directory"));
        ASSERT_TRUE(strstr(st.cause, "1 answer waits to be stored"));
        ASSERT_EQ_INT(history_check_writable(f.h, &cause), -ENOSPC);
        ASSERT_TRUE(strstr(cause, "no space left"));
        ASSERT_TRUE(history_needs_retry(f.h));

        /* Space again: it lands, durably, and writes are taken again. */
        ASSERT_EQ_INT(history_retry(f.h), 0);
        ASSERT_TRUE(!history_needs_retry(f.h));
        ASSERT_EQ_INT(history_check_writable(f.h, NULL), 0);
        history_get_storage(f.h, 0, &st);
        ASSERT_EQ_INT(st.state, HISTORY_STORAGE_OK);
        ASSERT_TRUE(st.cause == NULL);
        ASSERT_EQ_INT(st.refused, 1);
        f.h = history_free(f.h);
        ASSERT_EQ_INT(
                sql_int(f.dir,
                        "SELECT count(*) FROM queries WHERE status = 'succeeded' AND answer = 'the answer'"),
                1);
        f.h = open_store(f.dir, 0);
}

/* SQLITE_IOERR on the n-th write: the new record is refused, the fault
 * is an I/O error, and with nothing waiting a probe write ends it. */
TEST(ioerr_on_nth_write) {
        _cleanup_(history_fixture_done) HistoryFixture f = history_fixture_new("ioerr");
        const SessionKey k = key(1);
        const char *cause = NULL;

        history_set_test_write_fault(f.h, SQLITE_IOERR, 2, 1);
        begin(f.h, qid(1), &k);
        ASSERT_EQ_INT(history_begin(f.h, qid(2), &k, "q", 1000 * USEC_PER_SEC), -EIO);
        ASSERT_EQ_INT(history_check_writable(f.h, &cause), -EIO);
        ASSERT_TRUE(strstr(cause, "I/O error"));
        ASSERT_EQ_INT(history_retry(f.h), 0);
        ASSERT_EQ_INT(history_check_writable(f.h, NULL), 0);
        begin(f.h, qid(2), &k);
}

/* The fault lasts past the stop: the record is lost to the stop, and the
 * next start marks it failed with a reason that is true. A fault that is
 * over by the stop: the outcome lands at the stop. */
TEST(pending_at_stop) {
        _cleanup_(history_fixture_done) HistoryFixture f = history_fixture_new("pending-stop");
        const SessionKey k = key(1);
        HistoryOutcome o = answer_outcome("lost to the disk");
        _cleanup_(json_object_putp) json_object *r = NULL;

        begin(f.h, qid(1), &k);
        history_set_test_write_fault(f.h, SQLITE_FULL, 1, 100);
        ASSERT_EQ_INT(history_finish(f.h, qid(1), &o), 1);
        f.h = history_free(f.h);
        f.h = open_store(f.dir, 1);
        r = get_record(f.h, qid(1), &k);
        ASSERT_EQ_STR(get_str(r, "status"), "failed");
        ASSERT_EQ_STR(
                get_str(get_key(r, "error"), "message"),
                "The service stopped before the query's outcome was stored");

        begin(f.h, qid(2), &k);
        history_set_test_write_fault(f.h, SQLITE_FULL, 1, 1);
        o.answer = "landed at the stop";
        ASSERT_EQ_INT(history_finish(f.h, qid(2), &o), 1);
        f.h = history_free(f.h);
        f.h = open_store(f.dir, 0);
        assert_status(f.h, qid(2), &k, "succeeded");
}

/* Deleting a record whose outcome waits lands it first, then deletes. */
TEST(delete_pending) {
        _cleanup_(history_fixture_done) HistoryFixture f = history_fixture_new("delete-pending");
        const SessionKey k = key(1);
        HistoryOutcome o = answer_outcome("a");

        begin(f.h, qid(1), &k);
        history_set_test_write_fault(f.h, SQLITE_FULL, 1, 2);
        ASSERT_EQ_INT(history_finish(f.h, qid(1), &o), 1);
        /* Still full: the delete cannot land it. */
        ASSERT_EQ_INT(history_delete(f.h, qid(1), &k), -EIO);
        ASSERT_OK(history_delete(f.h, qid(1), &k));
        ASSERT_EQ_INT(history_get_record(f.h, qid(1), &k, &(HistoryRecord *){ NULL }), -ENOENT);
        ASSERT_EQ_INT(history_retry(f.h), 0);
}

/* The bound of the outcomes waiting: past it, new records are refused. */
TEST(pending_bound) {
        _cleanup_(history_fixture_done) HistoryFixture f = history_fixture_new("pending-bound");
        const SessionKey k = key(1);
        HistoryOutcome o = answer_outcome("a");

        for (unsigned i = 1; i <= HISTORY_PENDING_MAX; i++)
                begin(f.h, qid(i), &k);
        history_set_test_write_fault(f.h, SQLITE_FULL, 1, HISTORY_PENDING_MAX);
        for (unsigned i = 1; i <= HISTORY_PENDING_MAX; i++)
                ASSERT_EQ_INT(history_finish_nosync(f.h, qid(i), &o), 1);
        ASSERT_EQ_INT(history_retry(f.h), 0);
        for (unsigned i = 1; i <= HISTORY_PENDING_MAX; i++)
                assert_status(f.h, qid(i), &k, "succeeded");
}

/* A damaged page of an index: the start goes on, quick_check finds it,
 * and the store is "failed" and refuses writes, naming the recovery. */
TEST(damaged_index_page) {
        _cleanup_(rm_rf_freep) char *dir = make_subdir("damaged-index");
        _cleanup_free_ char *p = path_in(dir, "history.sqlite3"), *problem = NULL;
        const SessionKey k = key(1);
        long long page, page_size;
        char junk[512];
        HistoryStorage st;
        History *h;
        int fd;

        h = open_store(dir, 0);
        for (unsigned i = 1; i <= 50; i++) {
                begin(h, qid(i), &k);
                finish_ok(h, qid(i), 1001 * USEC_PER_SEC);
        }
        history_free(h);
        sql_exec(dir, "PRAGMA wal_checkpoint(TRUNCATE)");
        page = sql_int(dir, "SELECT rootpage FROM sqlite_master WHERE name = 'queries_by_session'");
        page_size = sql_int(dir, "PRAGMA page_size");

        ASSERT_OK(history_quick_check_path(p, NULL, &problem));
        ASSERT_TRUE(problem == NULL);

        memset(junk, 0x5a, sizeof junk);
        fd = open(p, O_WRONLY | O_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        ASSERT_TRUE(pwrite(fd, junk, sizeof junk, (off_t) ((page - 1) * page_size)) == (ssize_t) sizeof junk);
        ASSERT_TRUE(close(fd) == 0);

        h = open_store(dir, 0);
        ASSERT_OK(history_quick_check_path(p, NULL, &problem));
        ASSERT_TRUE(problem != NULL);
        history_set_damaged(h, problem);
        history_get_storage(h, 0, &st);
        ASSERT_EQ_INT(st.state, HISTORY_STORAGE_FAILED);
        ASSERT_TRUE(st.damaged);
        ASSERT_TRUE(strstr(st.cause, "history.sqlite3 is damaged"));
        ASSERT_TRUE(strstr(st.cause, "When the database is damaged"));
        ASSERT_EQ_INT(history_check_writable(h, NULL), -EUCLEAN);
        ASSERT_TRUE(!history_needs_retry(h));
        history_free(h);
}

/* Another application's SQLite file with a schema version of ours. */
TEST(refuse_foreign_with_version) {
        _cleanup_(rm_rf_freep) char *dir = make_subdir("foreign-version");
        History *h = NULL;

        sql_exec(dir, "CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT); PRAGMA user_version = 3;");
        ASSERT_EQ_INT(history_open(dir, &h, NULL), -ENOTSUP);
        ASSERT_TRUE(h == NULL);
        ASSERT_EQ_INT(sql_int(dir, "PRAGMA user_version"), 3);
}

DEFINE_TEST_MAIN()
