/* SPDX-License-Identifier: MIT */
#include <sqlite3.h>
#include <sys/stat.h>

#include "api/render.h"
#include "shared/json-util.h"
#include "shared/macro.h"
#include "store/history.h"
#include "tests.h"

/* The JSON of API.md 9 (src/api/render.c) from records the store returns,
 * byte for byte on this data set, field order and escaping included. */

#define T0 ((usec_t) 1763805600123456ULL)
#define Q1 "qr_0123456789abcdef0123456789abcdef"
#define Q2 "qr_00000000000000000000000000000002"
#define Q3 "qr_00000000000000000000000000000003"
#define Q4 "qr_00000000000000000000000000000004"

static const char expected_failed[] =
        "{\"id\":\"qr_0123456789abcdef0123456789abcdef\",\"status\":\"failed\",\"question\":\"Wie"
        " hoch ist der \\\"Zugspitze\\\"-Gipfel? \xe2\x9b\xb0 'x' \\\\ \\/ ;--\",\"answer\":null,"
        "\"sources\":[{\"title\":\"B\xc3\xa4r \\/ \\\"x\\\"\",\"url\":\"https:\\/\\/de.wikipedia."
        "org\\/wiki\\/B%C3%A4r\",\"revision_id\":9007199254740993},{\"title\":\"Tab\\there\\u0001"
        "\",\"url\":\"https:\\/\\/x.example\\/a\\/b\",\"revision_id\":null}],\"citations\":[],\"artifacts\":[{\"id\":\"af_0123456789abcdef0123456789abc"
        "def\",\"name\":\"Gr\xc3\xb6\xc3\x9f"
        "e Tabelle \xe2\x82\xac \\\"1\\\".csv\",\"media_type\""
        ":\"text\\/csv; charset=utf-8\",\"size_bytes\":11,\"sha256\":\"00000000000000000000000000"
        "00000000000000000000000000000000000001\",\"download_url\":\"\\/api\\/v1\\/artifacts\\/af"
        "_0123456789abcdef0123456789abcdef\"},{\"id\":\"af_fedcba9876543210fedcba9876543210\",\"n"
        "ame\":\"empty.bin\",\"media_type\":\"application\\/octet-stream\",\"size_bytes\":0,\"sha"
        "256\":\"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\",\"download_ur"
        "l\":\"\\/api\\/v1\\/artifacts\\/af_fedcba9876543210fedcba9876543210\"}],\"error\":{\"cod"
        "e\":\"execution_failed\",\"message\":\"The code failed: \\\"x\\\" \\/ line 3\\n\\ttab \xe2"
        "\x82\xac\"},\"timings_ms\":{\"queue\":12,\"wiki\":3400,\"model\":5600,\"sandbox\":7800,\""
        "cleanup\":90,\"total\":17000},\"usage\":{\"model\":\"gpt-test\\/1\",\"prompt_tokens\":12"
        "34,\"completion_tokens\":9007199254740993},\"sandbox\":\"starting\",\"created_at\":\"202"
        "5-11-22T10:00:00.123Z\",\"finished_at\":\"2025-11-22T10:00:17.124Z\",\"feedback\":null,\"follow_up\":null,\"conversation\":\"qr_0123456789abcdef0123456789abcdef\",\"notes\":[]}";

static const char expected_succeeded[] =
        "{\"id\":\"qr_00000000000000000000000000000002\",\"status\":\"succeeded\",\"question\":\""
        "q2\",\"answer\":\"Apples are \\\"pomes\\\" \\/ fruit.\\nSecond line: \xc3\xa4\xc3\xb6\xc3"
        "\xbc \\u0001\x7f \\\\ end\",\"sources\":[],\"citations\":[{\"n\":1,\"title\":\"Apple\",\""
        "revision_id\":7,\"quote\":\"Apples are \\\"pomes\\\" \\/ fruit.\",\"status\":\"verified\""
        ",\"url\":\"http:\\/\\/w.example\\/index.php?oldid=7#:~:text=x\",\"section\":null},{\"n\""
        ":2,\"title\":\"Nope\",\"revision_id\":null,\"quote\":\"\\u0001 \xe2\x82\xac\",\"status\""
        ":\"not_read\",\"url\":null,\"section\":null}],\"artifacts\":[],\"error\":null,\"timings_"
        "ms\":{\"queue\":0,\"wiki\":1,\"model\":2,\"sandbox\":3,\"cleanup\":4,\"total\":10},\"usa"
        "ge\":{\"model\":\"m\",\"prompt_tokens\":0,\"completion_tokens\":1},\"sandbox\":\"offered"
        "\",\"created_at\":\"2025-11-22T10:00:01.123Z\",\"finished_at\":\"2025-11-22T10:01:00.123"
        "Z\",\"feedback\":null,\"follow_up\":null,\"conversation\":\"qr_00000000000000000000000000000002\",\"notes\":[]}";

static const char expected_running[] =
        "{\"id\":\"qr_00000000000000000000000000000004\",\"status\":\"running\",\"question\":\"no"
        "w running: \xe2\x82\xac \\/ \\\"x\\\"\",\"answer\":null,\"sources\":[],\"citations\":[],"
        "\"artifacts\":[],\"error\":null,\"timings_ms\":{\"queue\":0,\"wiki\":0,\"model\":0,\"san"
        "dbox\":0,\"cleanup\":0,\"total\":0},\"usage\":{\"model\":\"\",\"prompt_tokens\":0,\"comp"
        "letion_tokens\":0},\"sandbox\":null,\"created_at\":\"2025-11-22T10:01:10.123Z\",\"finish"
        "ed_at\":null,\"feedback\":null,\"follow_up\":null,\"conversation\":\"qr_00000000000000000000000000000004\",\"notes\":[]}";

static const char expected_recovered[] =
        "{\"id\":\"qr_00000000000000000000000000000003\",\"status\":\"failed\",\"question\":\"sti"
        "ll running\",\"answer\":null,\"sources\":[],\"citations\":[],\"artifacts\":[],\"error\":"
        "{\"code\":\"execution_failed\",\"message\":\"The service stopped before the query's outcome was stored\"},"
        "\"timings_ms\":{\"queue\":0,\"wiki\":0,\"model\":0,\"sandbox\":0,\"cleanup\":0,\"total\""
        ":58000},\"usage\":{\"model\":\"\",\"prompt_tokens\":0,\"completion_tokens\":0},\"sandbox"
        "\":null,\"created_at\":\"2025-11-22T10:00:02.123Z\",\"finished_at\":\"2025-11-22T10:01:0"
        "0.123Z\",\"feedback\":null,\"follow_up\":null,\"conversation\":\"qr_00000000000000000000000000000003\",\"notes\":[]}";

static const char expected_page1[] =
        "{\"items\":[{\"id\":\"qr_00000000000000000000000000000004\",\"status\":\"running\",\"que"
        "stion\":\"now running: \xe2\x82\xac \\/ \\\"x\\\"\",\"answer\":null,\"sources\":[],\"cit"
        "ations\":[],\"artifacts\":[],\"error\":null,\"timings_ms\":{\"queue\":0,\"wiki\":0,\"mod"
        "el\":0,\"sandbox\":0,\"cleanup\":0,\"total\":0},\"usage\":{\"model\":\"\",\"prompt_token"
        "s\":0,\"completion_tokens\":0},\"sandbox\":null,\"created_at\":\"2025-11-22T10:01:10.123"
        "Z\",\"finished_at\":null,\"feedback\":null,\"follow_up\":null,\"conversation\":\"qr_00000000000000000000000000000004\",\"notes\":[]},{\"id\":\"qr_00000000000000000000000000000003\",\"status\":\"f"
        "ailed\",\"question\":\"still running\",\"answer\":null,\"sources\":[],\"citations\":[],\""
        "artifacts\":[],\"error\":{\"code\":\"execution_failed\",\"message\":\"The service stoppe"
        "d before the query's outcome was stored\"},\"timings_ms\":{\"queue\":0,\"wiki\":0,\"model\":0,\"sandbox\":"
        "0,\"cleanup\":0,\"total\":58000},\"usage\":{\"model\":\"\",\"prompt_tokens\":0,\"complet"
        "ion_tokens\":0},\"sandbox\":null,\"created_at\":\"2025-11-22T10:00:02.123Z\",\"finished_"
        "at\":\"2025-11-22T10:01:00.123Z\",\"feedback\":null,\"follow_up\":null,\"conversation\":\"qr_00000000000000000000000000000003\",\"notes\":[]}],\"next_cursor\":\"3\"}";

static const char expected_page2[] =
        "{\"items\":[{\"id\":\"qr_00000000000000000000000000000002\",\"status\":\"succeeded\",\"q"
        "uestion\":\"q2\",\"answer\":\"Apples are \\\"pomes\\\" \\/ fruit.\\nSecond line: \xc3\xa4"
        "\xc3\xb6\xc3\xbc \\u0001\x7f \\\\ end\",\"sources\":[],\"citations\":[{\"n\":1,\"title\""
        ":\"Apple\",\"revision_id\":7,\"quote\":\"Apples are \\\"pomes\\\" \\/ fruit.\",\"status\""
        ":\"verified\",\"url\":\"http:\\/\\/w.example\\/index.php?oldid=7#:~:text=x\",\"section\""
        ":null},{\"n\":2,\"title\":\"Nope\",\"revision_id\":null,\"quote\":\"\\u0001 \xe2\x82\xac"
        "\",\"status\":\"not_read\",\"url\":null,\"section\":null}],\"artifacts\":[],\"error\":nu"
        "ll,\"timings_ms\":{\"queue\":0,\"wiki\":1,\"model\":2,\"sandbox\":3,\"cleanup\":4,\"tota"
        "l\":10},\"usage\":{\"model\":\"m\",\"prompt_tokens\":0,\"completion_tokens\":1},\"sandbo"
        "x\":\"offered\",\"created_at\":\"2025-11-22T10:00:01.123Z\",\"finished_at\":\"2025-11-22"
        "T10:01:00.123Z\",\"feedback\":null,\"follow_up\":null,\"conversation\":\"qr_00000000000000000000000000000002\",\"notes\":[]},{\"id\":\"qr_0123456789abcdef0123456789abcdef\",\"status\":\"failed\","
        "\"question\":\"Wie hoch ist der \\\"Zugspitze\\\"-Gipfel? \xe2\x9b\xb0 'x' \\\\ \\/ ;--\""
        ",\"answer\":null,\"sources\":[{\"title\":\"B\xc3\xa4r \\/ \\\"x\\\"\",\"url\":\"https:\\"
        "/\\/de.wikipedia.org\\/wiki\\/B%C3%A4r\",\"revision_id\":9007199254740993},{\"title\":\""
        "Tab\\there\\u0001\",\"url\":\"https:\\/\\/x.example\\/a\\/b\",\"revision_id\":null}],\"citations\":[],\"artifacts\":[{\"id\":\"af_0123456789ab"
        "cdef0123456789abcdef\",\"name\":\"Gr\xc3\xb6\xc3\x9f"
        "e Tabelle \xe2\x82\xac \\\"1\\\".csv"
        "\",\"media_type\":\"text\\/csv; charset=utf-8\",\"size_bytes\":11,\"sha256\":\"000000000"
        "0000000000000000000000000000000000000000000000000000001\",\"download_url\":\"\\/api\\/v1"
        "\\/artifacts\\/af_0123456789abcdef0123456789abcdef\"},{\"id\":\"af_fedcba9876543210fedcb"
        "a9876543210\",\"name\":\"empty.bin\",\"media_type\":\"application\\/octet-stream\",\"siz"
        "e_bytes\":0,\"sha256\":\"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85"
        "5\",\"download_url\":\"\\/api\\/v1\\/artifacts\\/af_fedcba9876543210fedcba9876543210\"}]"
        ",\"error\":{\"code\":\"execution_failed\",\"message\":\"The code failed: \\\"x\\\" \\/ l"
        "ine 3\\n\\ttab \xe2\x82\xac\"},\"timings_ms\":{\"queue\":12,\"wiki\":3400,\"model\":5600"
        ",\"sandbox\":7800,\"cleanup\":90,\"total\":17000},\"usage\":{\"model\":\"gpt-test\\/1\","
        "\"prompt_tokens\":1234,\"completion_tokens\":9007199254740993},\"sandbox\":\"starting\","
        "\"created_at\":\"2025-11-22T10:00:00.123Z\",\"finished_at\":\"2025-11-22T10:00:17.124Z\""
        ",\"feedback\":null,\"follow_up\":null,\"conversation\":\"qr_0123456789abcdef0123456789abcdef\",\"notes\":[]}],\"next_cursor\":null}";

static const char expected_empty[] = "{\"items\":[],\"next_cursor\":null}";

/* As stored, spaced out; the second has a revision id that is no integer
 * and a key no source has: the record shows the source's own keys only
 * (shared/source.h), that id as null. */
static const char sources[] =
        " [ {\"title\" : \"B\\u00e4r / \\\"x\\\"\", \"url\":\"https://de.wikipedia.org/wiki/B%C3%A4r\","
        "\"revision_id\":9007199254740993},\n {\"title\":\"Tab\\there\\u0001\",\"url\":\"https://x.example/a/b\","
        "\"revision_id\":1.5e3,\"extra\":[true,false,null,-0,{}]} ]\n";

typedef struct Fixture {
        char dir[64];
        History *h;
        SessionKey k, other;
} Fixture;

static void sql_exec(const char *dir, const char *sql) {
        _cleanup_free_ char *p = NULL;
        sqlite3 *db = NULL;

        ASSERT_TRUE(asprintf(&p, "%s/history.sqlite3", dir) >= 0);
        ASSERT_EQ_INT(sqlite3_open_v2(p, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
        ASSERT_EQ_INT(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
        ASSERT_EQ_INT(sqlite3_close(db), SQLITE_OK);
}

/* A fresh store: Q1 failed with every field (sources, two artifacts, an
 * error), Q2 succeeded, Q3 recovered as failed, Q4 running. */
static void fixture_setup(Fixture *f) {
        HistoryOutcome failed = {
                .timings = { 12, 3400, 5600, 7800, 90, 17000 },
                .error_code = "execution_failed",
                .finished_at = T0 + 17 * USEC_PER_SEC + 999,
                .error_message = "The code failed: \"x\" / line 3\n\ttab \xe2\x82\xac",
                .completion_tokens = 9007199254740993ULL,
                .sources_json = sources,
                .prompt_tokens = 1234,
                .model = "gpt-test/1",
                .sandbox = "starting",
        };
        HistoryOutcome ok = {
                .succeeded = true,
                .answer = "Apples are \"pomes\" / fruit.\nSecond line: \xc3\xa4\xc3\xb6\xc3\xbc \x01\x7f \\ end",
                .timings = { 0, 1, 2, 3, 4, 10 },
                .model = "m",
                .completion_tokens = 1,
                .finished_at = T0 + 60 * USEC_PER_SEC,
                .sandbox = "offered",
                .citations_json =
                        "[{\"n\":1,\"title\":\"Apple\",\"revision_id\":7,\"quote\":\"Apples are \\\"pomes\\\" / fruit.\",\"status\":\"verified\",\"url\":\"http://w.example/index.php?oldid=7#:~:text=x\",\"section\":null},{\"n\":2,\"title\":\"Nope\",\"revision_id\":null,\"quote\":\"\\u0001 \xe2\x82\xac\",\"status\":\"not_read\",\"url\":null,\"section\":null}]",
        };

        *f = (Fixture){ .dir = "/tmp/test-render-XXXXXX" };
        memset(f->k.bytes, 7, sizeof f->k.bytes);
        memset(f->other.bytes, 8, sizeof f->other.bytes);
        ASSERT_TRUE(mkdtemp(f->dir));

        ASSERT_OK(history_open(f->dir, &f->h, NULL));
        ASSERT_OK(history_begin(
                f->h, Q1, &f->k, "Wie hoch ist der \"Zugspitze\"-Gipfel? \xe2\x9b\xb0 'x' \\ / ;--", T0));
        ASSERT_OK(history_finish(f->h, Q1, &failed));
        ASSERT_OK(history_begin(f->h, Q2, &f->k, "q2", T0 + USEC_PER_SEC));
        ASSERT_OK(history_finish(f->h, Q2, &ok));
        ASSERT_OK(history_begin(f->h, Q3, &f->k, "still running", T0 + 2 * USEC_PER_SEC));
        f->h = history_free(f->h);
        sql_exec(
                f->dir,
                "INSERT INTO artifacts (id, query_id, name, media_type, size_bytes, sha256, data) VALUES"
                " ('af_0123456789abcdef0123456789abcdef', '" Q1
                "', 'Gr\xc3\xb6\xc3\x9f"
                "e Tabelle \xe2\x82\xac \"1\".csv', 'text/csv; charset=utf-8', 11,"
                " '0000000000000000000000000000000000000000000000000000000000000001',"
                " X'0061006200006300ff0a5a'),"
                " ('af_fedcba9876543210fedcba9876543210', '" Q1
                "', 'empty.bin', 'application/octet-stream', 0,"
                " 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855', zeroblob(0))");
        /* Q3 was running when the store closed: it is recovered as failed. */
        ASSERT_OK(history_open(f->dir, &f->h, NULL));
        ASSERT_OK(history_begin(f->h, Q4, &f->k, "now running: \xe2\x82\xac / \"x\"", T0 + 70 * USEC_PER_SEC));
}

static void fixture_done(Fixture *f) {
        f->h = history_free(f->h);
        /* The store's file and what SQLite keeps beside it. */
        for (const char *const *n = (const char *const[]){ "", "-wal", "-shm", NULL }; *n; n++) {
                _cleanup_free_ char *p = NULL;

                ASSERT_TRUE(asprintf(&p, "%s/history.sqlite3%s", f->dir, *n) >= 0);
                ASSERT_TRUE(unlink(p) == 0 || errno == ENOENT);
        }
        {
                _cleanup_free_ char *p = NULL;

                ASSERT_TRUE(asprintf(&p, "%s/user-key", f->dir) >= 0);
                ASSERT_TRUE(unlink(p) == 0 || errno == ENOENT);
        }
        ASSERT_TRUE(rmdir(f->dir) == 0);
}

static void assert_record(Fixture *f, const char *id, const char *expected) {
        _cleanup_(history_record_freep) HistoryRecord *rec = NULL;
        _cleanup_(json_object_putp) json_object *o = NULL;

        ASSERT_OK(history_get_record(f->h, id, &f->k, &rec));
        o = render_history_record(rec);
        ASSERT_TRUE(o);
        ASSERT_EQ_STR(render_body(o), expected);
}

static void assert_page(
        Fixture *f, const SessionKey *k, unsigned limit, const char *cursor, const char *expected) {
        _cleanup_(history_page_freep) HistoryPage *page = NULL;
        _cleanup_(json_object_putp) json_object *o = NULL;

        ASSERT_OK(history_list_records(f->h, k, limit, cursor, &page));
        o = render_history_page(page);
        ASSERT_TRUE(o);
        ASSERT_EQ_STR(render_body(o), expected);
}

TEST(record_every_field) {
        _cleanup_(history_record_freep) HistoryRecord *rec = NULL;
        Fixture f;

        fixture_setup(&f);
        assert_record(&f, Q1, expected_failed);

        /* The struct under it: a failure has no answer, its error, the
         * sources as parsed, the artifacts in order. */
        ASSERT_OK(history_get_record(f.h, Q1, &f.k, &rec));
        ASSERT_EQ_STR(rec->status, "failed");
        ASSERT_TRUE(rec->answer == NULL);
        ASSERT_EQ_STR(rec->error_code, "execution_failed");
        ASSERT_EQ_INT(rec->n_sources, 2);
        ASSERT_EQ_STR(rec->sources[0].title, "B\xc3\xa4r / \"x\"");
        ASSERT_EQ_STR(rec->sources[0].url, "https://de.wikipedia.org/wiki/B%C3%A4r");
        ASSERT_TRUE(rec->sources[0].has_revision_id);
        ASSERT_EQ_INT(rec->sources[0].revision_id, 9007199254740993LL);
        ASSERT_TRUE(!rec->sources[1].has_revision_id);
        ASSERT_EQ_INT(rec->n_citations, 0);
        ASSERT_EQ_INT(rec->n_artifacts, 2);
        ASSERT_EQ_STR(rec->artifacts[0].id, "af_0123456789abcdef0123456789abcdef");
        ASSERT_EQ_INT(rec->artifacts[0].size_bytes, 11);
        ASSERT_EQ_STR(rec->artifacts[1].name, "empty.bin");
        ASSERT_EQ_INT(rec->timings.sandbox_ms, 7800);
        ASSERT_EQ_INT(rec->completion_tokens, 9007199254740993LL);
        ASSERT_EQ_INT(rec->finished_at, T0 + 17 * USEC_PER_SEC + 999);
        fixture_done(&f);
}

TEST(record_succeeded_running_recovered) {
        Fixture f;

        fixture_setup(&f);
        assert_record(&f, Q2, expected_succeeded);
        assert_record(&f, Q3, expected_recovered);
        assert_record(&f, Q4, expected_running);
        {
                _cleanup_(history_record_freep) HistoryRecord *rec = NULL;

                ASSERT_OK(history_get_record(f.h, Q4, &f.k, &rec));
                ASSERT_TRUE(rec->finished_at == USEC_INFINITY);
                ASSERT_TRUE(rec->error_code == NULL && rec->error_message == NULL && rec->answer == NULL);
                ASSERT_TRUE(rec->sources == NULL && rec->n_sources == 0);
                ASSERT_TRUE(rec->citations == NULL && rec->n_citations == 0);
                ASSERT_EQ_INT(rec->n_artifacts, 0);
        }
        fixture_done(&f);
}

TEST(pages) {
        Fixture f;

        fixture_setup(&f);
        assert_page(&f, &f.k, 2, NULL, expected_page1);
        assert_page(&f, &f.k, 2, "3", expected_page2);
        assert_page(&f, &f.other, 20, NULL, expected_empty);
        fixture_done(&f);
}

/* Sources or citations that are not an array (only a file changed behind
 * the store's back) are rendered as []. */
TEST(sources_not_an_array) {
        static const char *const bad[] = { "{}", "nope", "", "1", "[1] x", "[" };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_(history_record_freep) HistoryRecord *rec = NULL;
                _cleanup_(json_object_putp) json_object *o = NULL;
                _cleanup_free_ char *sql = NULL;
                Fixture f;

                fixture_setup(&f);
                f.h = history_free(f.h);
                ASSERT_TRUE(
                        asprintf(
                                &sql,
                                "UPDATE queries SET sources = '%s', citations = '%s' WHERE id = '" Q2 "'",
                                bad[i],
                                bad[ELEMENTSOF(bad) - 1 - i]) >= 0);
                sql_exec(f.dir, sql);
                ASSERT_OK(history_open(f.dir, &f.h, NULL));
                ASSERT_OK(history_get_record(f.h, Q2, &f.k, &rec));
                ASSERT_TRUE(rec->n_sources == 0 && rec->n_citations == 0);
                o = render_history_record(rec);
                ASSERT_TRUE(o);
                ASSERT_TRUE(strstr(render_body(o), "\"sources\":[],\"citations\":[],\"artifacts\":[]"));
                fixture_done(&f);
        }
}

/* The feedback of API.md 9.1, pinned. */
TEST(record_feedback) {
        HistoryRecord rec = {
                .id = (char *) "qr_x",
                .status = (char *) "succeeded",
                .question = (char *) "q",
                .answer = (char *) "a",
                .model = (char *) "m",
                .created_at = 0,
                .finished_at = USEC_INFINITY,
                .feedback_rating = (char *) "down",
                .feedback_reason = (char *) "wrong",
                .feedback_comment = (char *) "a \"b\" </x>",
                .feedback_at = 1000,
        };
        _cleanup_(json_object_putp) json_object *o = render_history_record(&rec);

        ASSERT_TRUE(o);
        ASSERT_EQ_STR(
                render_body(o),
                "{\"id\":\"qr_x\",\"status\":\"succeeded\",\"question\":\"q\",\"answer\":\"a\","
                "\"sources\":[],\"citations\":[],\"artifacts\":[],\"error\":null,\"timings_ms\":{\"queue\":0,"
                "\"wiki\":0,\"model\":0,\"sandbox\":0,\"cleanup\":0,\"total\":0},\"usage\":{"
                "\"model\":\"m\",\"prompt_tokens\":0,\"completion_tokens\":0},\"sandbox\":null,\"created_at\":"
                "\"1970-01-01T00:00:00.000Z\",\"finished_at\":null,\"feedback\":{\"rating\":\"down\","
                "\"reason\":\"wrong\",\"comment\":\"a \\\"b\\\" <\\/x>\",\"rated_at\":"
                "\"1970-01-01T00:00:00.001Z\"},\"follow_up\":null,\"conversation\":\"qr_x\",\"notes\":[]}");
}

/* The status object of API.md 6, written by hand (render_status_text()):
 * the bytes json-c wrote for it before, escaping ('/' too) and field
 * order included. */
TEST(status_bytes) {
        usec_t mono = now(CLOCK_MONOTONIC);
        char hb[RFC3339_MS_MAX], res[RFC3339_MS_MAX], *want = NULL;
        AdmissionStatus st = {
                .state = ADMISSION_RUNNING,
                .queue_length = 3,
                .max_length = 1000,
                .has_ticket = true,
                .ticket = {
                        .id = "tk_0123456789abcdef",
                        .status = TICKET_RESERVED,
                        .position = 0,
                        .joined = USEC_INFINITY,
                        .heartbeat_deadline = mono + 30 * USEC_PER_SEC,
                        .reservation_deadline = mono + 60 * USEC_PER_SEC,
                },
                .estimate_known = true,
                .estimated_wait_seconds = 84.0,
                .average_known = true,
                .average_query_seconds = 12.3456,
                .slots = { .total = 4, .idle = 0, .reserved = 1, .running = 3 },
        };
        ManagerStatus view = {
                .has_query = true,
                .query = { .id = "qr_1", .step = 2, .phase = "model/\"x\"" },
                .range_known = true,
                .range = { .p10 = 0.0004, .p50 = 61.25, .p90 = 1e15 },
                .reservation_seconds = 60,
                .heartbeat_seconds = 2,
        };
        _cleanup_free_ char *text = NULL, *idle = NULL;

        format_rfc3339_ms(hb, monotonic_to_wallclock(st.ticket.heartbeat_deadline));
        format_rfc3339_ms(res, monotonic_to_wallclock(st.ticket.reservation_deadline));
        ASSERT_TRUE(
                asprintf(
                        &want,
                        "{\"state\":\"running\",\"queue_length\":3,\"max_length\":1000,\"ticket\":{\"id\":"
                        "\"tk_0123456789abcdef\",\"status\":\"reserved\",\"position\":0,\"joined_at\":null,"
                        "\"heartbeat_expires_at\":\"%s\",\"reservation_expires_at\":\"%s\"},"
                        "\"estimated_wait_seconds\":84.0,\"average_query_seconds\":12.346,"
                        "\"reservation_seconds\":60,\"heartbeat_seconds\":2,\"poll_after_seconds\":1,"
                        "\"slots\":{\"total\":4,\"idle\":0,\"reserved\":1,\"running\":3},\"running_query\":"
                        "{\"id\":\"qr_1\",\"step\":2,\"phase\":\"model\\/\\\"x\\\"\"},\"user\":"
                        "\"a\\\\b\\n\\t\\u0001\\u001f\x7f \xc3\xa9\",\"estimated_wait_range_seconds\":"
                        "{\"p10\":0.0,\"p50\":61.25,\"p90\":1000000000000.0},\"wait_known\":true}",
                        hb,
                        res) > 0);
        view.admission = st;
        text = render_status_text(&view, "a\\b\n\t\x01\x1f\x7f \xc3\xa9");
        ASSERT_EQ_STR(text, want);
        free(want);

        st = (AdmissionStatus){ .state = ADMISSION_IDLE, .max_length = 5, .slots = { .total = 1, .idle = 1 } };
        view = (ManagerStatus){ .admission = st, .reservation_seconds = 60, .heartbeat_seconds = 30 };
        idle = render_status_text(&view, NULL);
        ASSERT_EQ_STR(
                idle,
                "{\"state\":\"idle\",\"queue_length\":0,\"max_length\":5,\"ticket\":null,"
                "\"estimated_wait_seconds\":null,\"average_query_seconds\":null,\"reservation_seconds\":60,"
                "\"heartbeat_seconds\":30,\"poll_after_seconds\":10,\"slots\":{\"total\":1,\"idle\":1,"
                "\"reserved\":0,\"running\":0},\"running_query\":null,\"user\":null,"
                "\"estimated_wait_range_seconds\":null,\"wait_known\":false}");
}

/* Any user name (every byte but NUL) comes back whole from a JSON parser. */
TEST(status_user_round_trip) {
        ManagerStatus view = {
                .admission = { .state = ADMISSION_IDLE, .slots = { .total = 1, .idle = 1 } },
                .reservation_seconds = 1,
                .heartbeat_seconds = 1,
        };
        uint64_t x = 0x2545f4914f6cdd1dULL;

        for (int i = 0; i < 20000; i++) {
                char user[64];
                size_t n = (size_t) (i % 63);
                _cleanup_free_ char *text = NULL;
                _cleanup_(json_object_putp) json_object *o = NULL;

                for (size_t k = 0; k < n; k++) {
                        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                        user[k] = (char) (1 + x % 127); /* ASCII: json-c checks UTF-8 */
                }
                user[n] = 0;
                text = render_status_text(&view, user);
                ASSERT_TRUE(text);
                o = json_tokener_parse(text);
                ASSERT_TRUE(o);
                ASSERT_EQ_STR(json_object_get_string(json_object_object_get(o, "user")), user);
                ASSERT_TRUE(json_object_object_length(o) == 14);
        }
}

DEFINE_TEST_MAIN()
