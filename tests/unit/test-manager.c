/* SPDX-License-Identifier: MIT */
/* The Manager with its real parts (admission, history on a temporary
 * state directory, the sync worker, the executor, the sandbox) on a real
 * event loop, with query execution not configured: every query fails with
 * execution_failed from the loop, which is enough to see a query's whole
 * life through the Manager's interface: its announcements, once each and
 * in order, the record, busy, cancel, health and the stop. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-event.h>

#include "manager/manager-ops.h"
#include "manager/manager.h"
#include "manager/status-line.h"
#include "query/executor.h"
#include "sandbox/files.h"
#include "shared/config.h"
#include "shared/macro.h"
#include "shared/strv.h"
#include "shared/user-key.h"
#include "store/history.h"
#include "tests.h"

#define LOG_MAX 32

typedef struct Seen {
        ManagerEventType type;
        char id[QUERY_ID_MAX];
} Seen;

typedef struct Log {
        Seen seen[LOG_MAX];
        size_t n;
        bool inside; /* a call into the Manager that must not announce is running */
        /* The last MANAGER_QUERY_DURABLE's outcome. */
        bool succeeded, cleanup_confirmed;
        ApiError api_error;
        char message[256];
        /* At MANAGER_QUERY_CLEANUP_CONFIRMED: the slot was given up (the
         * query no longer listed, the controller idle). */
        bool released_at_confirmed;
        unsigned stopping_seen;
} Log;

static const char *no_env(const char *name, void *userdata) {
        return NULL;
}

static void on_event(Manager *m, const ManagerEvent *ev, void *userdata) {
        Log *l = userdata;
        Seen *s;

        ASSERT_TRUE(!l->inside);
        /* Health, the admission controller's events and the stop are not a
         * query's. */
        if (ev->type == MANAGER_STOPPING)
                l->stopping_seen++;
        if (IN_SET(ev->type, MANAGER_HEALTH_CHANGED, MANAGER_ADMISSION, MANAGER_STOPPING))
                return;
        ASSERT_TRUE(ev->query);
        ASSERT_TRUE(l->n < LOG_MAX);
        s = &l->seen[l->n++];
        s->type = ev->type;
        snprintf(s->id, sizeof s->id, "%s", manager_query_id(ev->query));

        if (ev->type == MANAGER_QUERY_DURABLE) {
                ASSERT_TRUE(ev->outcome);
                l->succeeded = ev->outcome->succeeded;
                l->cleanup_confirmed = ev->outcome->cleanup_confirmed;
                l->api_error = ev->outcome->api_error;
                snprintf(l->message, sizeof l->message, "%s", ev->outcome->message);
        }
        if (ev->type == MANAGER_QUERY_CLEANUP_CONFIRMED) {
                ManagerHealth h;

                manager_get_health(m, &h);
                l->released_at_confirmed = !manager_get_query(m, manager_query_id(ev->query)) &&
                        !manager_query_awaiting_cleanup(ev->query) && h.state == ADMISSION_IDLE;
        }
}

typedef struct Fixture {
        char *dir;
        Config config;
        sd_event *event;
        Manager *manager;
        Log log;
} Fixture;

/* A Manager on a temporary state directory: no wiki and no model
 * configured (execution_failed), no container runtime (the sandbox is
 * unavailable for good, so no sweep touches the user manager). */
static void fixture_start(Fixture *f) {
        _cleanup_free_ char *cfg_error = NULL;

        *f = (Fixture){ .dir = strdup("/tmp/test-manager-XXXXXX") };
        ASSERT_TRUE(f->dir && mkdtemp(f->dir));
        ASSERT_OK(config_load(&f->config, no_env, NULL, &cfg_error));
        free(f->config.state_directory);
        f->config.state_directory = strdup(f->dir);
        free(f->config.sandbox_runtime);
        f->config.sandbox_runtime = strdup("/nonexistent/crun");
        ASSERT_TRUE(f->config.state_directory && f->config.sandbox_runtime);
        ASSERT_OK(sd_event_new(&f->event));
        ASSERT_OK(manager_new(f->event, &f->config, &f->manager));
        ASSERT_OK(manager_subscribe(f->manager, on_event, &f->log));
}

static void fixture_stop(Fixture *f) {
        f->manager = manager_free(f->manager);
        f->event = sd_event_unref(f->event);
        config_done(&f->config);
        ASSERT_OK(sandbox_rm_rf(AT_FDCWD, f->dir));
        free(f->dir);
}

/* Run the loop until n query announcements were seen, at most 10 s. */
static void run_until(Fixture *f, size_t n) {
        usec_t end = usec_add(now(CLOCK_MONOTONIC), 10 * USEC_PER_SEC);

        while (f->log.n < n && now(CLOCK_MONOTONIC) < end)
                ASSERT_OK(sd_event_run(f->event, 10 * USEC_PER_MSEC));
        ASSERT_EQ_INT(f->log.n, n);
}

/* An anonymous query of session s. */
static int start(Fixture *f, const SessionKey *s, const char *question, ManagerQuery **ret) {
        return manager_start_query(
                f->manager, &(ManagerQueryRequest){ .session = s, .question = question }, ret);
}

static SessionKey session(uint8_t b) {
        SessionKey k;

        memset(k.bytes, b, sizeof k.bytes);
        return k;
}

/* The announcements of id from index i on, in order, with no other
 * query's in between. */
static void expect(const Fixture *f, size_t i, const char *id, const ManagerEventType *types, size_t n) {
        ASSERT_EQ_INT(f->log.n, i + n);
        for (size_t k = 0; k < n; k++) {
                ASSERT_EQ_INT(f->log.seen[i + k].type, types[k]);
                ASSERT_EQ_STR(f->log.seen[i + k].id, id);
        }
}

static void expect_record(Fixture *f, const char *id, const SessionKey *s, const char *status, const char *code) {
        _cleanup_(history_record_freep) HistoryRecord *r = NULL;

        ASSERT_OK(history_get_record(manager_get_history(f->manager), id, s, &r));
        ASSERT_EQ_STR(r->status, status);
        if (code)
                ASSERT_EQ_STR(r->error_code, code);
        else
                ASSERT_TRUE(!r->error_code);
}

TEST(health_not_configured) {
        Fixture f;
        ManagerHealth h;

        fixture_start(&f);
        manager_get_health(f.manager, &h);
        ASSERT_TRUE(!h.execution_configured);
        ASSERT_TRUE(h.missing_settings[0]);
        ASSERT_TRUE(!h.degraded);
        ASSERT_TRUE(!h.draining);
        ASSERT_EQ_INT(h.state, ADMISSION_IDLE);
        ASSERT_EQ_INT(h.sandbox, MANAGER_SANDBOX_UNAVAILABLE);
        ASSERT_EQ_INT(manager_n_queries(f.manager), 0);
        ASSERT_TRUE(!manager_oldest_query(f.manager));
        ASSERT_TRUE(!manager_busy(f.manager));
        fixture_stop(&f);
}

/* One query's life: STARTED before manager_start_query() returns; then,
 * from the loop, DURABLE with its outcome (the record already says so),
 * and CLEANUP_CONFIRMED, after which the Manager no longer holds it. No
 * phase announcement: the pipeline never ran. */
TEST(query_life) {
        static const ManagerEventType life[] = {
                MANAGER_QUERY_STARTED,
                MANAGER_QUERY_DURABLE,
                MANAGER_QUERY_CLEANUP_CONFIRMED,
        };
        Fixture f;
        SessionKey a = session(1), b = session(2);
        ManagerQuery *q = NULL, *q2 = NULL;
        char id[QUERY_ID_MAX], id2[QUERY_ID_MAX];
        ManagerHealth h;

        fixture_start(&f);
        ASSERT_OK(start(&f, &a, "How many apples?", &q));
        ASSERT_TRUE(q);
        snprintf(id, sizeof id, "%s", manager_query_id(q));
        ASSERT_TRUE(strncmp(id, "qr_", 3) == 0 && strlen(id) == 35);
        expect(&f, 0, id, life, 1);

        /* Running: findable by id and by session, the record is running,
         * the controller is running. */
        ASSERT_TRUE(manager_get_query(f.manager, id) == q);
        ASSERT_TRUE(manager_get_query_by_session(f.manager, &a) == q);
        ASSERT_TRUE(!manager_get_query_by_session(f.manager, &b));
        ASSERT_TRUE(manager_oldest_query(f.manager) == q);
        ASSERT_EQ_INT(manager_n_queries(f.manager), 1);
        ASSERT_TRUE(manager_query_executing(q));
        ASSERT_TRUE(!manager_query_awaiting_cleanup(q));
        ASSERT_TRUE(memcmp(manager_query_session(q), &a, sizeof a) == 0);
        ASSERT_TRUE(manager_busy(f.manager));
        manager_get_health(f.manager, &h);
        ASSERT_EQ_INT(h.state, ADMISSION_RUNNING);
        expect_record(&f, id, &a, "running", NULL);
        /* Another session's record is not found. */
        {
                HistoryRecord *r = NULL;
                ASSERT_EQ_INT(history_get_record(manager_get_history(f.manager), id, &b, &r), -ENOENT);
        }

        /* One slot, and it runs: busy for the same session and for another,
         * and nothing is announced or started. */
        f.log.inside = true;
        ASSERT_EQ_INT(start(&f, &a, "Again?", &q2), -EBUSY);
        ASSERT_EQ_INT(start(&f, &b, "Me too?", &q2), -EBUSY);
        ASSERT_TRUE(!q2);
        /* Cancel: an unknown id, a malformed one. */
        ASSERT_EQ_INT(manager_cancel_query(f.manager, "qr_00000000000000000000000000000000", "x"), -ESRCH);
        ASSERT_EQ_INT(manager_cancel_query(f.manager, "", "x"), -ESRCH);
        f.log.inside = false;
        ASSERT_EQ_INT(manager_n_queries(f.manager), 1);

        run_until(&f, 3);
        expect(&f, 0, id, life, 3);
        ASSERT_TRUE(!f.log.succeeded);
        ASSERT_TRUE(f.log.cleanup_confirmed);
        ASSERT_EQ_INT(f.log.api_error, API_ERROR_EXECUTION_FAILED);
        ASSERT_TRUE(strstr(f.log.message, "not configured"));
        ASSERT_TRUE(f.log.released_at_confirmed);

        /* Gone, the slot given up, the record failed. */
        ASSERT_TRUE(!manager_get_query(f.manager, id));
        ASSERT_EQ_INT(manager_n_queries(f.manager), 0);
        ASSERT_TRUE(!manager_busy(f.manager));
        ASSERT_EQ_INT(manager_cancel_query(f.manager, id, "x"), -ESRCH);
        manager_get_health(f.manager, &h);
        ASSERT_EQ_INT(h.state, ADMISSION_IDLE);
        ASSERT_TRUE(!h.degraded);
        expect_record(&f, id, &a, "failed", "execution_failed");

        /* Nothing more comes. */
        ASSERT_OK(sd_event_run(f.event, 50 * USEC_PER_MSEC));
        ASSERT_EQ_INT(f.log.n, 3);

        /* The slot is free again: the other session's query starts. */
        ASSERT_OK(start(&f, &b, "Me too?", &q2));
        ASSERT_TRUE(q2);
        snprintf(id2, sizeof id2, "%s", manager_query_id(q2));
        ASSERT_TRUE(!streq(id2, id));
        run_until(&f, 6);
        expect(&f, 3, id2, life, 3);
        expect_record(&f, id2, &b, "failed", "execution_failed");
        fixture_stop(&f);
}

/* A query's waiters: each answered once, when its record is durable,
 * after every subscriber has heard MANAGER_QUERY_DURABLE, in the order
 * they subscribed to it; the query is FINISHED then (its cleanup needed
 * nothing) and freed after. */
typedef struct Waiting {
        ManagerQueryWaiter waiter;
        Log *log;
        unsigned *order; /* the next number to take */
        unsigned took;   /* 0: not answered */
        bool saw_durable;
        ManagerQueryState state;
        ApiError api_error;
} Waiting;

static void on_query_done(ManagerQuery *q, const ManagerOutcome *o, void *userdata) {
        Waiting *w = userdata;

        ASSERT_TRUE(w->took == 0);
        w->took = ++*w->order;
        w->saw_durable = w->log->n > 0 && w->log->seen[w->log->n - 1].type == MANAGER_QUERY_DURABLE &&
                streq(w->log->seen[w->log->n - 1].id, manager_query_id(q));
        w->state = manager_query_state(q);
        w->api_error = o->api_error;
}

TEST(query_waiters) {
        Fixture f;
        SessionKey a = session(1);
        ManagerQuery *q = NULL;
        unsigned order = 0;
        Waiting first = { .log = &f.log, .order = &order }, second = { .log = &f.log, .order = &order };

        fixture_start(&f);
        ASSERT_OK(start(&f, &a, "Who waits?", &q));
        ASSERT_EQ_INT(manager_query_state(q), MANAGER_QUERY_STATE_EXECUTING);
        manager_query_wait(q, &first.waiter, on_query_done, &first);
        manager_query_wait(q, &second.waiter, on_query_done, &second);

        run_until(&f, 3);
        ASSERT_EQ_INT(first.took, 1);
        ASSERT_EQ_INT(second.took, 2);
        ASSERT_TRUE(first.saw_durable && second.saw_durable);
        ASSERT_EQ_INT(first.state, MANAGER_QUERY_STATE_FINISHED);
        ASSERT_EQ_INT(second.api_error, API_ERROR_EXECUTION_FAILED);
        ASSERT_EQ_INT(manager_n_queries(f.manager), 0);
        fixture_stop(&f);
}

/* An administrator's cancel while the query runs (before the loop has
 * let the executor report): execution_failed with the reason as its
 * message instead of the executor's own, announced once; a second cancel
 * finds nothing to cancel. */
TEST(cancel) {
        static const ManagerEventType life[] = {
                MANAGER_QUERY_STARTED,
                MANAGER_QUERY_DURABLE,
                MANAGER_QUERY_CLEANUP_CONFIRMED,
        };
        Fixture f;
        SessionKey a = session(3);
        ManagerQuery *q = NULL;
        char id[QUERY_ID_MAX];

        fixture_start(&f);
        ASSERT_OK(start(&f, &a, "Slow?", &q));
        snprintf(id, sizeof id, "%s", manager_query_id(q));
        ASSERT_TRUE(manager_query_executing(q));

        f.log.inside = true;
        ASSERT_OK(manager_cancel_query(f.manager, id, "Cancelled by the test"));
        f.log.inside = false;
        run_until(&f, 3);
        expect(&f, 0, id, life, 3);
        ASSERT_EQ_INT(f.log.api_error, API_ERROR_EXECUTION_FAILED);
        ASSERT_EQ_STR(f.log.message, "Cancelled by the test");
        ASSERT_EQ_INT(manager_cancel_query(f.manager, id, "again"), -ESRCH);
        expect_record(&f, id, &a, "failed", "execution_failed");
        {
                _cleanup_(history_record_freep) HistoryRecord *r = NULL;

                ASSERT_OK(history_get_record(manager_get_history(f.manager), id, &a, &r));
                ASSERT_EQ_STR(r->error_message, "Cancelled by the test");
        }
        fixture_stop(&f);
}

/* The stop: no new query (-ESHUTDOWN), nothing announced. */
typedef struct Readable {
        unsigned calls;
        bool failed;
        ApiError api_error;
        char message[512];
        size_t n;
        size_t n_readable;
        bool readable[256];
} Readable;

static void on_readable(
        ManagerReadableCheck *c, const ManagerError *error, const ManagerReadable *result, void *userdata) {
        Readable *r = userdata;

        r->calls++;
        r->failed = error != NULL;
        ASSERT_TRUE(!error != !result);
        if (error) {
                r->api_error = error->api_error;
                snprintf(r->message, sizeof r->message, "%s", error->message ? error->message : "");
                return;
        }
        r->n = result->n;
        r->n_readable = 0;
        for (size_t i = 0; i < result->n && i < ELEMENTSOF(r->readable); i++) {
                r->readable[i] = result->readable[i];
                r->n_readable += result->readable[i];
        }
}

static void run_until_called(Fixture *f, const unsigned *calls, unsigned n) {
        usec_t end = usec_add(now(CLOCK_MONOTONIC), 20 * USEC_PER_SEC);

        while (*calls < n && now(CLOCK_MONOTONIC) < end)
                ASSERT_OK(sd_event_run(f->event, 10 * USEC_PER_MSEC));
        ASSERT_EQ_INT(*calls, n);
}

/* A write of the history (on the store's worker), run to its end. */
typedef struct Written {
        unsigned calls;
        ManagerError error;
        bool failed;
        char token[MANAGER_SHARE_TOKEN_MAX];
} Written;

static void on_written(ManagerWrite *w, const ManagerError *error, const ManagerWritten *result, void *userdata) {
        Written *c = userdata;

        c->calls++;
        c->failed = error;
        if (error)
                c->error = *error;
        if (result && result->token)
                snprintf(c->token, sizeof c->token, "%s", result->token);
}

/* The write started (r), awaited: 0, or its refusal as -ENOENT
 * (query_not_found), -EBUSY (busy) or -EIO, its error in *e. Never from
 * inside the call that started it. */
static int written(Fixture *f, int r, ManagerWrite **w, Written *c, ManagerError *e) {
        if (r < 0)
                return r;
        ASSERT_EQ_INT(c->calls, 0);
        run_until_called(f, &c->calls, 1);
        *w = manager_write_free(*w);
        if (!c->failed)
                return 0;
        *e = c->error;
        return c->error.api_error == API_ERROR_QUERY_NOT_FOUND ? -ENOENT :
                c->error.api_error == API_ERROR_BUSY           ? -EBUSY :
                                                                 -EIO;
}

static int delete_record(Fixture *f, const SessionKey *k, const char *id, ManagerError *e) {
        Written c = { 0 };
        ManagerWrite *w = NULL;

        return written(f, manager_delete_record(f->manager, k, id, on_written, &c, &w, e), &w, &c, e);
}

static int feedback(
        Fixture *f,
        const SessionKey *k,
        const char *id,
        const char *rating,
        const char *reason,
        const char *comment,
        ManagerError *e) {
        Written c = { 0 };
        ManagerWrite *w = NULL;

        return written(
                f,
                manager_set_feedback(f->manager, k, id, rating, reason, comment, on_written, &c, &w, e),
                &w,
                &c,
                e);
}

static int share_revoke(Fixture *f, const SessionKey *k, const char *id, ManagerError *e) {
        Written c = { 0 };
        ManagerWrite *w = NULL;

        return written(f, manager_share_revoke(f->manager, k, id, on_written, &c, &w, e), &w, &c, e);
}

static int share_create(Fixture *f, const SessionKey *k, const char *id, char *token, ManagerError *e) {
        Written c = { 0 };
        ManagerWrite *w = NULL;
        int r;

        r = written(f, manager_share_create(f->manager, k, id, on_written, &c, &w, e), &w, &c, e);
        if (r >= 0)
                snprintf(token, MANAGER_SHARE_TOKEN_MAX, "%s", c.token);
        return r;
}

/* manager_check_readable() in service mode: any number of titles, every
 * valid one readable and an invalid one never, from the loop and never
 * inside the call; no titles: an empty result; a check freed before it
 * reports never reports. */
TEST(check_readable) {
        char *titles[] = { (char *) "Apple", (char *) "A|B", (char *) "Payroll:Salaries", NULL };
        char *none[] = { NULL };
        _cleanup_(strv_freep) char **many = NULL;
        ManagerReadableCheck *c = NULL, *d = NULL, *e = NULL;
        Readable r = { 0 }, q = { 0 }, z = { 0 }, w = { 0 };
        ManagerError err;
        size_t n_many = 0;
        Fixture f;

        fixture_start(&f);
        ASSERT_OK(manager_check_readable(f.manager, "Alice", titles, on_readable, &r, &c, &err));
        ASSERT_OK(manager_check_readable(f.manager, NULL, titles, on_readable, &q, &d, &err));
        ASSERT_OK(manager_check_readable(f.manager, NULL, none, on_readable, &z, &e, &err));
        ASSERT_EQ_INT(r.calls, 0);
        d = manager_readable_check_free(d);
        run_until_called(&f, &r.calls, 1);
        run_until_called(&f, &z.calls, 1);
        ASSERT_TRUE(!r.failed);
        ASSERT_EQ_INT(r.n, 3);
        ASSERT_TRUE(r.readable[0] && !r.readable[1] && r.readable[2]);
        ASSERT_TRUE(!z.failed);
        ASSERT_EQ_INT(z.n, 0);
        ASSERT_EQ_INT(q.calls, 0);
        c = manager_readable_check_free(c);
        e = manager_readable_check_free(e);

        /* More than one batch's worth: all answered, in order. */
        for (unsigned i = 0; i < 120; i++) {
                char t[32];

                snprintf(t, sizeof t, "Page %u", i);
                ASSERT_OK(strv_extend_unique(&many, &n_many, t));
        }
        ASSERT_OK(manager_check_readable(f.manager, "Alice", many, on_readable, &w, &c, &err));
        run_until_called(&f, &w.calls, 1);
        ASSERT_EQ_INT(w.n, 120);
        ASSERT_EQ_INT(w.n_readable, 120);
        c = manager_readable_check_free(c);
        fixture_stop(&f);
}

/* ---- the read check against a wiki that fails in each way ---- */

typedef enum FakeMode {
        FAKE_OK,       /* every title readable, none in a request that names Payroll */
        FAKE_UNLOADED, /* the extension is missing: unknown action */
        FAKE_REVOKED,  /* the service account lacks the right */
        FAKE_SILENT,   /* never answers: the check times out */
        FAKE_GARBAGE,  /* a reply that does not parse */
        FAKE_SHORT,    /* one page fewer than asked */
        _FAKE_MODE_MAX,
} FakeMode;

/* A wiki on 127.0.0.1 that answers action=wikiwebreadcheck and
 * prop=info, one request per connection. */
typedef struct FakeWiki {
        int fd;
        uint16_t port;
        sd_event_source *listen;
        FakeMode mode;
        unsigned requests, readchecks;
        int conns[16];
        sd_event_source *conn_sources[16];
} FakeWiki;

/* How many titles a request's titles= names (they are joined by %7C). */
static size_t fake_count_titles(const char *req) {
        const char *t = strstr(req, "titles=");
        size_t n = 1;

        if (!t)
                return 0;
        for (const char *p = t; *p && *p != '&' && *p != ' '; p++)
                if (strncmp(p, "%7C", 3) == 0)
                        n++;
        return n;
}

static void fake_reply(int fd, const char *body) {
        char head[256];
        int n = snprintf(
                head,
                sizeof head,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                "Connection: close\r\n\r\n",
                strlen(body));

        ASSERT_TRUE(write(fd, head, (size_t) n) == n);
        ASSERT_TRUE(write(fd, body, strlen(body)) == (ssize_t) strlen(body));
}

static int fake_on_conn(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        FakeWiki *w = userdata;
        char req[65536] = "";
        ssize_t k = read(fd, req, sizeof req - 1);
        _cleanup_free_ char *body = NULL;
        size_t n;

        if (k <= 0 || !strstr(req, "\r\n\r\n"))
                goto done;
        req[k] = 0;
        w->requests++;
        if (strstr(req, "list=search")) {
                fake_reply(
                        fd,
                        "{\"query\":{\"search\":[{\"title\":\"Payroll:Salaries\",\"snippet\":\"s\"},"
                        "{\"title\":\"Apple\",\"snippet\":\"a\"},{\"title\":\"Pear\",\"snippet\":\"p\"}]}}");
                goto done;
        }
        if (!strstr(req, "wikiwebreadcheck")) {
                /* prop=info: every title missing (enough for the sources). */
                fake_reply(fd, "{\"batchcomplete\":true,\"query\":{\"pages\":[]}}");
                goto done;
        }
        w->readchecks++;
        n = fake_count_titles(req);
        ASSERT_TRUE(n >= 1);
        switch (w->mode) {
        case FAKE_OK:
        case FAKE_SHORT: {
                size_t len = 64 + n * 64;
                size_t m = w->mode == FAKE_SHORT ? n - 1 : n;
                const char *t = strstr(req, "titles=") + strlen("titles=");
                char *b = malloc(len);
                size_t at = 0;

                ASSERT_TRUE(b);
                at += (size_t) snprintf(
                        b + at, len - at, "{\"wikiwebreadcheck\":{\"user\":\"\",\"anonymous\":true,\"pages\":[");
                for (size_t i = 0; i < m; i++) {
                        const char *end = strstr(t, "%7C"), *stop = t + strcspn(t, "& ");
                        bool payroll;

                        if (!end || end > stop)
                                end = stop;
                        payroll = memmem(t, (size_t) (end - t), "Payroll", 7) != NULL;
                        at += (size_t) snprintf(
                                b + at,
                                len - at,
                                "%s{\"title\":\"T%zu\",\"readable\":%s}",
                                i ? "," : "",
                                i,
                                payroll ? "false" : "true");
                        t = end + 3;
                }
                snprintf(b + at, len - at, "]}}");
                body = b;
                fake_reply(fd, body);
                break;
        }
        case FAKE_UNLOADED:
                fake_reply(
                        fd,
                        "{\"error\":{\"code\":\"badvalue\",\"info\":\"Unrecognized value for parameter \\\"action\\\": wikiwebreadcheck.\"}}");
                break;
        case FAKE_REVOKED:
                fake_reply(
                        fd,
                        "{\"error\":{\"code\":\"permissiondenied\",\"info\":\"You don't have permission.\"}}");
                break;
        case FAKE_SILENT:
                return 0; /* kept open, never answered */
        case FAKE_GARBAGE:
                fake_reply(fd, "<html>Payroll:Salaries is secret</html>");
                break;
        default:
                break;
        }
done:
        for (size_t i = 0; i < ELEMENTSOF(w->conns); i++)
                if (w->conn_sources[i] == s) {
                        w->conn_sources[i] = sd_event_source_disable_unref(s);
                        close(w->conns[i]);
                        w->conns[i] = -1;
                }
        return 0;
}

static int fake_on_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        FakeWiki *w = userdata;
        int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);

        if (c < 0)
                return 0;
        for (size_t i = 0; i < ELEMENTSOF(w->conns); i++)
                if (!w->conn_sources[i]) {
                        w->conns[i] = c;
                        ASSERT_OK(sd_event_add_io(
                                sd_event_source_get_event(s), &w->conn_sources[i], c, EPOLLIN, fake_on_conn, w));
                        return 0;
                }
        close(c);
        return 0;
}

static void fake_wiki_start(FakeWiki *w, sd_event *e) {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof a;

        *w = (FakeWiki){ .fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0) };
        ASSERT_TRUE(w->fd >= 0);
        ASSERT_OK(bind(w->fd, (struct sockaddr *) &a, sizeof a));
        ASSERT_OK(listen(w->fd, 16));
        ASSERT_OK(getsockname(w->fd, (struct sockaddr *) &a, &len));
        w->port = ntohs(a.sin_port);
        ASSERT_OK(sd_event_add_io(e, &w->listen, w->fd, EPOLLIN, fake_on_accept, w));
}

static void fake_wiki_stop(FakeWiki *w) {
        for (size_t i = 0; i < ELEMENTSOF(w->conns); i++)
                if (w->conn_sources[i]) {
                        sd_event_source_disable_unref(w->conn_sources[i]);
                        close(w->conns[i]);
                }
        sd_event_source_disable_unref(w->listen);
        close(w->fd);
}

/* A Manager in person mode whose wiki is w (and a model nobody asks). */
static void fixture_start_person(Fixture *f, FakeWiki *w) {
        fixture_start(f);
        fake_wiki_start(w, f->event);
        f->manager = manager_free(f->manager);
        ASSERT_TRUE(asprintf(&f->config.wiki_api_url, "http://127.0.0.1:%u/api.php", w->port) > 0);
        f->config.llm_url = strdup("http://127.0.0.1:1/v1");
        f->config.llm_model = strdup("test");
        ASSERT_TRUE(f->config.llm_url && f->config.llm_model);
        f->config.wiki_read_as = CONFIG_READ_AS_PERSON;
        strv_free(f->config.editors);
        f->config.editors = calloc(2, sizeof(char *));
        ASSERT_TRUE(f->config.editors && (f->config.editors[0] = strdup("Eve")));
        ASSERT_OK(manager_new(f->event, &f->config, &f->manager));
        ASSERT_OK(manager_subscribe(f->manager, on_event, &f->log));
        query_executor_set_test_check_timeout(manager_get_executor(f->manager), 300 * USEC_PER_MSEC);
}

/* Every caller of the read check sees one outcome of a failed check. */
typedef struct Caller {
        unsigned calls;
        bool failed;
        ApiError api_error;
        char message[512];
} Caller;

static void caller_note(Caller *c, const ManagerError *error) {
        c->calls++;
        c->failed = error != NULL;
        if (error) {
                c->api_error = error->api_error;
                snprintf(c->message, sizeof c->message, "%s", error->message ? error->message : "");
        }
}

static void on_share(ManagerShareOpen *o, const ManagerError *error, const ManagerShared *result, void *userdata) {
        caller_note(userdata, error);
}

static void on_report(ManagerReportCheck *c, const ManagerError *error, const Report *result, void *userdata) {
        caller_note(userdata, error);
}

static void on_sources(
        ManagerSourcesCheck *c, const ManagerError *error, const ManagerSources *result, void *userdata) {
        caller_note(userdata, error);
}

/* The turns a follow-up's model is given: "N FOLLOWED NOTE" ("-": no note). */
static void on_follow_up(
        ManagerPreparedFollowUp *p, const ManagerError *error, const ManagerFollowUp *result, void *userdata) {
        Caller *c = userdata;

        caller_note(c, error);
        if (result)
                snprintf(
                        c->message,
                        sizeof c->message,
                        "%zu %s %s",
                        result->n_turns,
                        result->follow_up,
                        result->notes && result->notes[0] ? result->notes[0] : "-");
}

/* A finished record of session k with one source, following follows (NULL:
 * nothing) in conversation: unverified, so in the unanswered report with
 * its page. */
static void add_turn(
        Fixture *f,
        const SessionKey *k,
        const char *id,
        const char *follows,
        const char *conversation,
        const char *title) {
        _cleanup_free_ char *sources = NULL;
        History *h = manager_get_history(f->manager);

        ASSERT_TRUE(
                asprintf(&sources, "[{\"title\":\"%s\",\"url\":\"http://w/x\",\"revision_id\":1}]", title) > 0);
        ASSERT_OK(history_begin_follow_up(
                h, id, k, "Where is the salary?", follows, conversation, NULL, now(CLOCK_REALTIME)));
        ASSERT_OK(history_finish(
                h,
                id,
                &(HistoryOutcome){ .succeeded = true,
                                   .answer = "Somewhere.",
                                   .sources_json = sources,
                                   .finished_at = now(CLOCK_REALTIME) }));
}

static void add_record(Fixture *f, const SessionKey *k, const char *id, const char *title) {
        add_turn(f, k, id, NULL, NULL, title);
}

/* The one read check through each failure: the share, the report, the
 * sources check and a follow-up's preparation each fail closed with the same
 * API error and message, and nothing of the wiki's own reply shows. */
TEST(read_check_fails_closed_alike) {
        static const FakeMode failures[] = { FAKE_UNLOADED, FAKE_REVOKED, FAKE_SILENT, FAKE_GARBAGE, FAKE_SHORT };
        static const char *const names[] = {
                [FAKE_UNLOADED] = "WikiwebReadCheck",    [FAKE_REVOKED] = "wikiweb-readcheck",
                [FAKE_SILENT] = "WIKI_WEB_WIKI_READ_AS", [FAKE_GARBAGE] = "WIKI_WEB_WIKI_READ_AS",
                [FAKE_SHORT] = "WIKI_WEB_WIKI_READ_AS",
        };
        char *titles[] = { (char *) "Apple", NULL };
        SessionKey k = session(7);
        char token[MANAGER_SHARE_TOKEN_MAX];
        ManagerError e;
        FakeWiki w;
        Fixture f;

        fixture_start_person(&f, &w);
        add_record(&f, &k, "qr_00000000000000000000000000000001", "Apple");
        ASSERT_OK(share_create(&f, &k, "qr_00000000000000000000000000000001", token, &e));

        for (size_t i = 0; i < ELEMENTSOF(failures); i++) {
                Caller share = { 0 }, report = { 0 }, sources = { 0 }, follow = { 0 };
                ManagerShareOpen *o = NULL;
                ManagerReportCheck *r = NULL;
                ManagerSourcesCheck *c = NULL;
                ManagerPreparedFollowUp *p = NULL;

                w.mode = failures[i];
                ASSERT_OK(manager_share_open(f.manager, "Bob", token, on_share, &share, &o, &e));
                ASSERT_OK(manager_report_unanswered(f.manager, "Eve", 0, on_report, &report, &r, &e));
                ASSERT_OK(manager_check_sources(f.manager, "Bob", titles, on_sources, &sources, &c, &e));
                ASSERT_OK(manager_prepare_follow_up(
                        f.manager, &k, "Bob", "qr_00000000000000000000000000000001", on_follow_up, &follow, &p, &e));
                run_until_called(&f, &share.calls, 1);
                run_until_called(&f, &report.calls, 1);
                run_until_called(&f, &sources.calls, 1);
                run_until_called(&f, &follow.calls, 1);
                ASSERT_TRUE(share.failed && report.failed && sources.failed && follow.failed);
                ASSERT_EQ_INT(follow.api_error, API_ERROR_WIKI_AUTH_FAILED);
                ASSERT_EQ_STR(share.message, follow.message);
                ASSERT_EQ_INT(share.api_error, API_ERROR_WIKI_AUTH_FAILED);
                ASSERT_EQ_INT(report.api_error, API_ERROR_WIKI_AUTH_FAILED);
                ASSERT_EQ_INT(sources.api_error, API_ERROR_WIKI_AUTH_FAILED);
                ASSERT_EQ_STR(share.message, report.message);
                ASSERT_EQ_STR(share.message, sources.message);
                ASSERT_TRUE(strstr(share.message, names[failures[i]]));
                ASSERT_TRUE(!strstr(share.message, "Payroll") && !strstr(share.message, "html"));
                o = manager_share_open_free(o);
                r = manager_report_check_free(r);
                c = manager_sources_check_free(c);
                p = manager_follow_up_free(p);
        }
        fixture_stop(&f);
        fake_wiki_stop(&w);
}

static void on_search_titles(
        ManagerWikiOperation *o, const ManagerError *error, const ManagerWikiHits *result, void *userdata) {
        Caller *c = userdata;

        caller_note(c, error);
        for (size_t i = 0; result && i < result->n; i++) {
                size_t at = strlen(c->message);

                snprintf(c->message + at, sizeof c->message - at, "%s;", result->hits[i].title);
        }
}

/* Person mode with a wiki that answers: more than one batch, in order,
 * the unreadable ones withheld; the share of a record whose source the
 * reader may not read is not_found, and readable for one who may. */
TEST(read_check_person) {
        _cleanup_(strv_freep) char **many = NULL;
        ManagerReadableCheck *c = NULL;
        SessionKey k = session(8);
        char token[MANAGER_SHARE_TOKEN_MAX];
        Readable r = { 0 };
        Caller share = { 0 };
        ManagerShareOpen *o = NULL;
        ManagerError e;
        size_t n = 0;
        FakeWiki w;
        Fixture f;

        fixture_start_person(&f, &w);
        for (unsigned i = 0; i < 120; i++) {
                char t[32];

                snprintf(t, sizeof t, "Page %u", i);
                ASSERT_OK(strv_extend_unique(&many, &n, t));
        }
        ASSERT_OK(strv_extend_unique(&many, &n, "A|B"));
        /* The health probe's own check at start, first. */
        for (unsigned i = 0; i < 200 && streq(manager_read_check_health(f.manager), "unknown"); i++)
                ASSERT_OK(sd_event_run(f.event, 10 * USEC_PER_MSEC));
        ASSERT_EQ_INT(w.readchecks, 1);
        ASSERT_EQ_STR(manager_read_check_health(f.manager), "ok");
        ASSERT_OK(manager_check_readable(f.manager, "Bob", many, on_readable, &r, &c, &e));
        run_until_called(&f, &r.calls, 1);
        ASSERT_TRUE(!r.failed);
        ASSERT_EQ_INT(r.n, 121);
        ASSERT_EQ_INT(r.n_readable, 120);
        ASSERT_TRUE(!r.readable[120]);
        ASSERT_EQ_INT(w.readchecks, 1 + 3); /* 50, 50, 20; the invalid title not asked */
        c = manager_readable_check_free(c);

        add_record(&f, &k, "qr_00000000000000000000000000000002", "Payroll:Salaries");
        ASSERT_OK(share_create(&f, &k, "qr_00000000000000000000000000000002", token, &e));
        ASSERT_OK(manager_share_open(f.manager, "Bob", token, on_share, &share, &o, &e));
        run_until_called(&f, &share.calls, 1);
        ASSERT_TRUE(share.failed);
        ASSERT_EQ_INT(share.api_error, API_ERROR_NOT_FOUND);
        o = manager_share_open_free(o);
        /* A search for a person: the withheld hit left out, the limit kept. */
        {
                ManagerWikiOperation *wo = NULL;
                Caller found = { 0 };

                ASSERT_OK(manager_wiki_search(
                        f.manager, "Bob", "salary", 1, on_search_titles, &found, &wo, &e));
                run_until_called(&f, &found.calls, 1);
                ASSERT_TRUE(!found.failed);
                ASSERT_EQ_STR(found.message, "Apple;");
                wo = manager_wiki_operation_free(wo);
        }
        /* A follow-up is checked like a read: the turn that read what Bob
         * may not read, and the one after it that was given it, are left
         * out, and the note says how many (never which). */
        {
                const char *a = "qr_00000000000000000000000000000003",
                           *b = "qr_00000000000000000000000000000004",
                           *c3 = "qr_00000000000000000000000000000005";
                ManagerPreparedFollowUp *p = NULL;
                Caller follow = { 0 };

                add_turn(&f, &k, a, NULL, NULL, "Apple");
                add_turn(&f, &k, b, a, a, "Payroll:Salaries");
                add_turn(&f, &k, c3, b, a, "Apple");
                ASSERT_OK(manager_prepare_follow_up(f.manager, &k, "Bob", c3, on_follow_up, &follow, &p, &e));
                ASSERT_EQ_INT(follow.calls, 0);
                run_until_called(&f, &follow.calls, 1);
                ASSERT_TRUE(!follow.failed);
                ASSERT_TRUE(
                        strstr(follow.message, "1 qr_00000000000000000000000000000005 2 earlier turns") ==
                        follow.message);
                ASSERT_TRUE(!strstr(follow.message, "Payroll"));
                p = manager_follow_up_free(p);
                /* All readable: every turn, no note. */
                follow = (Caller){ 0 };
                ASSERT_OK(manager_prepare_follow_up(f.manager, &k, "Bob", a, on_follow_up, &follow, &p, &e));
                run_until_called(&f, &follow.calls, 1);
                ASSERT_EQ_STR(follow.message, "1 qr_00000000000000000000000000000003 -");
                p = manager_follow_up_free(p);
        }
        /* A wrong token: the same, without asking the wiki. */
        ASSERT_EQ_INT(manager_share_open(f.manager, "Bob", "sh_00", on_share, &share, &o, &e), -ENOENT);
        ASSERT_EQ_INT(e.api_error, API_ERROR_NOT_FOUND);
        fixture_stop(&f);
        fake_wiki_stop(&w);
}

static void on_share_ok(
        ManagerShareOpen *o, const ManagerError *error, const ManagerShared *result, void *userdata) {
        Caller *c = userdata;

        caller_note(c, error);
        if (result)
                snprintf(
                        c->message,
                        sizeof c->message,
                        "%zu %s",
                        result->n_turns,
                        result->turns[result->n_turns - 1].id);
}

static void on_report_ok(ManagerReportCheck *rc, const ManagerError *error, const Report *result, void *userdata) {
        Caller *c = userdata;

        caller_note(c, error);
        if (result)
                snprintf(c->message, sizeof c->message, "%zu", result->n_groups);
}

static void on_search(
        ManagerWikiOperation *o, const ManagerError *error, const ManagerWikiHits *result, void *userdata) {
        caller_note(userdata, error);
}

static void on_read(ManagerWikiOperation *o, const ManagerError *error, const WikiPage *result, void *userdata) {
        caller_note(userdata, error);
}

/* The history's operations in service mode: delete, feedback, the
 * follow-up's preparation, shares, the report; each refusal with its API
 * error; and the wiki's tools refusing what they cannot ask. */
TEST(history_operations) {
        const char *a = "qr_00000000000000000000000000000011", *b = "qr_00000000000000000000000000000012";
        _cleanup_(manager_follow_up_freep) ManagerPreparedFollowUp *p = NULL;
        char token[MANAGER_SHARE_TOKEN_MAX], token2[MANAGER_SHARE_TOKEN_MAX];
        SessionKey k = session(9), other = session(10);
        Caller share = { 0 }, report = { 0 }, follow = { 0 };
        ManagerShareOpen *o = NULL;
        ManagerReportCheck *rc = NULL;
        ManagerWikiOperation *wo = NULL;
        ManagerError e;
        Fixture f;

        fixture_start(&f);
        add_record(&f, &k, a, "Apple");
        ASSERT_OK(history_begin_follow_up(
                manager_get_history(f.manager), b, &k, "And then?", a, a, NULL, now(CLOCK_REALTIME)));

        /* The follow-up of a running record: busy; of another's: not found;
         * of its own ended one: every turn (service mode), from a defer. */
        ASSERT_EQ_INT(manager_prepare_follow_up(f.manager, &k, NULL, b, on_follow_up, &follow, &p, &e), -EBUSY);
        ASSERT_EQ_INT(e.api_error, API_ERROR_BUSY);
        ASSERT_EQ_INT(
                manager_prepare_follow_up(f.manager, &other, NULL, a, on_follow_up, &follow, &p, &e), -ENOENT);
        ASSERT_EQ_INT(e.api_error, API_ERROR_QUERY_NOT_FOUND);
        ASSERT_OK(manager_prepare_follow_up(f.manager, &k, NULL, a, on_follow_up, &follow, &p, &e));
        ASSERT_EQ_INT(follow.calls, 0);
        run_until_called(&f, &follow.calls, 1);
        ASSERT_TRUE(!follow.failed);
        ASSERT_EQ_STR(follow.message, "1 qr_00000000000000000000000000000011 -");

        /* Feedback: not yet on a running one, never on another's. */
        ASSERT_EQ_INT(feedback(&f, &k, b, "up", NULL, NULL, &e), -EBUSY);
        ASSERT_EQ_INT(e.api_error, API_ERROR_BUSY);
        ASSERT_EQ_INT(feedback(&f, &other, a, "up", NULL, NULL, &e), -ENOENT);
        ASSERT_OK(feedback(&f, &k, a, "down", "wrong", "No.", &e));

        /* Shares: made, opened by anyone (service mode), revoked. */
        ASSERT_EQ_INT(share_create(&f, &other, a, token, &e), -ENOENT);
        ASSERT_EQ_INT(share_create(&f, &k, b, token, &e), -EBUSY);
        ASSERT_OK(share_create(&f, &k, a, token, &e));
        ASSERT_OK(share_create(&f, &k, a, token2, &e));
        ASSERT_TRUE(strneq(token, "sh_", 3) && strlen(token) == 67 && !streq(token, token2));
        ASSERT_OK(manager_share_open(f.manager, NULL, token, on_share_ok, &share, &o, &e));
        ASSERT_EQ_INT(share.calls, 0); /* from the loop, never inside the call */
        run_until_called(&f, &share.calls, 1);
        ASSERT_TRUE(!share.failed);
        ASSERT_EQ_STR(share.message, "1 qr_00000000000000000000000000000011");
        o = manager_share_open_free(o);
        ASSERT_EQ_INT(share_revoke(&f, &other, a, &e), -ENOENT);
        ASSERT_OK(share_revoke(&f, &k, a, &e));
        ASSERT_EQ_INT(manager_share_open(f.manager, NULL, token2, on_share_ok, &share, &o, &e), -ENOENT);
        ASSERT_EQ_INT(e.api_error, API_ERROR_NOT_FOUND);

        /* The report: for editors only; in service mode the whole of it. */
        ASSERT_EQ_INT(manager_report_unanswered(f.manager, "Eve", 0, on_report_ok, &report, &rc, &e), -EPERM);
        ASSERT_EQ_INT(e.api_error, API_ERROR_ORIGIN_DENIED);
        strv_free(f.config.editors);
        f.config.editors = calloc(2, sizeof(char *));
        ASSERT_TRUE(f.config.editors && (f.config.editors[0] = strdup("Eve")));
        ASSERT_OK(manager_report_unanswered(f.manager, "Eve", 0, on_report_ok, &report, &rc, &e));
        run_until_called(&f, &report.calls, 1);
        ASSERT_TRUE(!report.failed);
        ASSERT_EQ_STR(report.message, "1");
        rc = manager_report_check_free(rc);

        /* Delete: not another's, not a running one; then gone. */
        ASSERT_EQ_INT(delete_record(&f, &other, a, &e), -ENOENT);
        ASSERT_EQ_INT(delete_record(&f, &k, b, &e), -EBUSY);
        ASSERT_OK(delete_record(&f, &k, a, &e));
        ASSERT_EQ_INT(delete_record(&f, &k, a, &e), -ENOENT);
        ASSERT_EQ_INT(e.api_error, API_ERROR_QUERY_NOT_FOUND);

        /* The wiki's tools: refused arguments, and no wiki to ask. */
        ASSERT_EQ_INT(manager_wiki_search(f.manager, NULL, "apple", 0, on_search, &share, &wo, &e), -EINVAL);
        ASSERT_EQ_INT(e.api_error, API_ERROR_INVALID_INPUT);
        ASSERT_EQ_INT(manager_wiki_read(f.manager, NULL, "A|B", on_read, &share, &wo, &e), -EINVAL);
        ASSERT_EQ_INT(manager_wiki_read(f.manager, NULL, "Apple", on_read, &share, &wo, &e), -EOPNOTSUPP);
        ASSERT_EQ_INT(e.api_error, API_ERROR_EXECUTION_FAILED);
        ASSERT_TRUE(!wo);
        fixture_stop(&f);
}

TEST(stop) {
        Fixture f;
        SessionKey a = session(4);
        ManagerQuery *q = NULL;

        fixture_start(&f);
        manager_stop(f.manager, USEC_PER_SEC, "stopping");
        f.log.inside = true;
        ASSERT_EQ_INT(start(&f, &a, "Now?", &q), -ESHUTDOWN);
        f.log.inside = false;
        ASSERT_TRUE(!q);
        ASSERT_OK(sd_event_run(f.event, 50 * USEC_PER_MSEC));
        ASSERT_EQ_INT(f.log.n, 0);
        /* Announced once; the STATUS= line says it. */
        ASSERT_EQ_INT(f.log.stopping_seen, 1);
        ASSERT_TRUE(manager_is_stopping(f.manager));
        manager_stop(f.manager, USEC_PER_SEC, "again");
        ASSERT_EQ_INT(f.log.stopping_seen, 1);
        {
                _cleanup_free_ char *line = status_line_format(f.manager);

                ASSERT_EQ_STR(line, "Stopping; idle; waiting: 0; running: none; average query: n/a");
        }
        ASSERT_TRUE(!manager_busy(f.manager));
        fixture_stop(&f);
}

/* What the record holds, as manager_foreach_query() walks it. */
typedef struct Walked {
        char ids[4][QUERY_ID_MAX];
        char users[4][16];
        unsigned slots[4];
        size_t n;
} Walked;

static void walk_one(ManagerQuery *q, void *userdata) {
        Walked *w = userdata;

        ASSERT_TRUE(w->n < ELEMENTSOF(w->ids));
        snprintf(w->ids[w->n], sizeof w->ids[0], "%s", manager_query_id(q));
        snprintf(w->users[w->n], sizeof w->users[0], "%s", manager_query_user(q) ? manager_query_user(q) : "-");
        w->slots[w->n] = manager_query_slot(q);
        w->n++;
}

/* Two slots, two running queries: the Manager's one record of each (its
 * session, its user: the caller's or its ticket's, its slot, phase and
 * step) is what manager_foreach_query(), manager_status() and the STATUS=
 * line show; a third session is busy; once they end, their durations are
 * the wait range's, which is known after ten. */
TEST(record_and_status_two_slots) {
        Fixture f;
        SessionKey a = session(5), b = session(6), c = session(7);
        ManagerQuery *qa = NULL, *qb = NULL, *qc = NULL;
        char ida[QUERY_ID_MAX], idb[QUERY_ID_MAX];
        ManagerStatus st;
        Walked w = { .n = 0 };

        fixture_start(&f);
        manager_free(f.manager);
        f.config.queue_slots = 2;
        ASSERT_OK(manager_new(f.event, &f.config, &f.manager));
        ASSERT_OK(manager_subscribe(f.manager, on_event, &f.log));

        /* A joins with a name: the ticket holds it until the claim. */
        ASSERT_EQ_INT(manager_join(f.manager, &a, "alice", now(CLOCK_MONOTONIC)), 1);
        manager_status(f.manager, &a, now(CLOCK_MONOTONIC), &st);
        ASSERT_TRUE(st.admission.has_ticket);
        ASSERT_EQ_STR(st.admission.ticket.user, "alice");
        ASSERT_TRUE(!st.has_query);
        ASSERT_EQ_INT(st.admission.slots.total, 2);
        ASSERT_EQ_INT(st.reservation_seconds, f.config.queue_reservation_seconds);
        ASSERT_EQ_INT(st.heartbeat_seconds, f.config.queue_heartbeat_seconds);
        ASSERT_TRUE(!st.range_known);

        /* A claims without a name of its own: its ticket's is the query's.
         * B, without a ticket, claims the other slot with its own name. */
        ASSERT_OK(start(&f, &a, "Apples?", &qa));
        ASSERT_OK(manager_start_query(
                f.manager, &(ManagerQueryRequest){ .session = &b, .user = "bob", .question = "Pears?" }, &qb));
        snprintf(ida, sizeof ida, "%s", manager_query_id(qa));
        snprintf(idb, sizeof idb, "%s", manager_query_id(qb));
        ASSERT_EQ_INT(start(&f, &c, "Plums?", &qc), -EBUSY);
        ASSERT_EQ_INT(manager_n_queries(f.manager), 2);

        manager_foreach_query(f.manager, walk_one, &w);
        ASSERT_EQ_INT(w.n, 2);
        ASSERT_EQ_STR(w.ids[0], ida);
        ASSERT_EQ_STR(w.ids[1], idb);
        ASSERT_EQ_STR(w.users[0], "alice");
        ASSERT_EQ_STR(w.users[1], "bob");
        ASSERT_TRUE(w.slots[0] != w.slots[1]);
        ASSERT_TRUE(manager_oldest_query(f.manager) == qa);
        ASSERT_EQ_STR(manager_query_phase(qa), "model");
        ASSERT_EQ_INT(manager_query_step(qb), 0);
        ASSERT_TRUE(manager_query_since(qa) <= manager_query_since(qb));
        /* The name went with the ticket: the admission keeps none. */
        ASSERT_EQ_INT(manager_join(f.manager, &a, NULL, now(CLOCK_MONOTONIC)), 1);
        manager_status(f.manager, &a, now(CLOCK_MONOTONIC), &st);
        ASSERT_TRUE(st.admission.has_ticket && !st.admission.ticket.user);
        ASSERT_OK(manager_leave(f.manager, &a, now(CLOCK_MONOTONIC)));

        /* Each session sees its own query, the slots both running. */
        manager_status(f.manager, &a, now(CLOCK_MONOTONIC), &st);
        ASSERT_TRUE(st.has_query);
        ASSERT_EQ_STR(st.query.id, ida);
        ASSERT_EQ_STR(st.query.phase, "model");
        ASSERT_EQ_INT(st.admission.slots.running, 2);
        manager_status(f.manager, &b, now(CLOCK_MONOTONIC), &st);
        ASSERT_TRUE(st.has_query);
        ASSERT_EQ_STR(st.query.id, idb);
        manager_status(f.manager, &c, now(CLOCK_MONOTONIC), &st);
        ASSERT_TRUE(!st.has_query && !st.admission.has_ticket);
        manager_status(f.manager, NULL, now(CLOCK_MONOTONIC), &st);
        ASSERT_TRUE(!st.has_query);

        /* STATUS= names both. */
        {
                _cleanup_free_ char *line = status_line_format(f.manager), *want = NULL;

                ASSERT_TRUE(
                        asprintf(&want, "running; waiting: 0; running: %s, %s; average query: n/a", ida, idb) >
                        0);
                ASSERT_EQ_STR(line, want);
        }

        /* Both end (execution is not configured); the record goes. */
        run_until(&f, 6);
        ASSERT_EQ_INT(manager_n_queries(f.manager), 0);
        ASSERT_TRUE(!manager_get_query_by_session(f.manager, &a));
        {
                _cleanup_free_ char *line = status_line_format(f.manager);

                ASSERT_TRUE(strstr(line, "idle; waiting: 0; running: none; average query: "));
        }
        ASSERT_TRUE(!manager_wait_known(f.manager));

        /* Eight more: ten durations, and the wait range is known. */
        for (unsigned i = 0; i < 8; i++) {
                ASSERT_OK(start(&f, &c, "Again?", &qc));
                run_until(&f, 9 + 3 * i);
        }
        ASSERT_TRUE(manager_wait_known(f.manager));
        manager_status(f.manager, &c, now(CLOCK_MONOTONIC), &st);
        ASSERT_TRUE(st.range_known);
        ASSERT_TRUE(st.range.p10 <= st.range.p50 && st.range.p50 <= st.range.p90);
        fixture_stop(&f);
}

typedef struct Erased {
        unsigned calls;
        bool failed;
        ApiError api_error;
        ManagerErased result;
} Erased;

static void on_erased(ManagerErasure *e, const ManagerError *error, const ManagerErased *result, void *userdata) {
        Erased *x = userdata;

        x->calls++;
        ASSERT_TRUE(!error != !result);
        x->failed = error != NULL;
        if (error)
                x->api_error = error->api_error;
        else
                x->result = *result;
}

/* A person's erasure: their own (busy while a query of theirs runs, then
 * every record), and an administrator's (their running query cancelled
 * and awaited, their records gone, the other person's kept), under the
 * sealed key of their name; a bad name refused before anything; a second
 * erasure of a person while one is under way refused as busy; the
 * batches on the store's worker, done never from inside the call. */
TEST(erase_user) {
        _cleanup_(manager_erasure_freep) ManagerErasure *e = NULL, *e2 = NULL;
        SessionKey alice, bob, plain;
        ManagerQuery *q = NULL;
        ManagerError err;
        Erased x = { 0 }, y = { 0 };
        Fixture f;

        fixture_start(&f);
        manager_set_user_key_function(f.manager, user_key_from_name);
        ASSERT_OK(manager_user_key(f.manager, "alice", &alice));
        ASSERT_OK(manager_user_key(f.manager, "bob", &bob));
        ASSERT_OK(user_key_from_name("alice", &plain));
        ASSERT_TRUE(memcmp(&alice, &plain, sizeof plain) != 0);
        add_record(&f, &alice, "qr_000000000000000000000000000000a1", "Apple");
        add_record(&f, &alice, "qr_000000000000000000000000000000a2", "Apple");
        add_record(&f, &bob, "qr_000000000000000000000000000000b1", "Apple");

        ASSERT_OK(start(&f, &alice, "Slow?", &q));
        ASSERT_EQ_INT(manager_erase_session(f.manager, &alice, on_erased, &y, &e2, &err), -EBUSY);
        ASSERT_EQ_INT(err.api_error, API_ERROR_BUSY);
        ASSERT_EQ_INT(
                manager_erase_user(f.manager, "bad\001name", "uid 0 (root)", on_erased, &x, &e, &err),
                -EINVAL);
        ASSERT_EQ_INT(err.api_error, API_ERROR_INVALID_INPUT);

        ASSERT_OK(manager_erase_user(f.manager, "alice", "uid 0 (root)", on_erased, &x, &e, &err));
        ASSERT_EQ_INT(x.calls, 0); /* never from inside the call */
        /* One at a time: the second of either kind is busy. */
        ASSERT_EQ_INT(manager_erase_user(f.manager, "alice", "uid 0 (root)", on_erased, &y, &e2, &err), -EBUSY);
        ASSERT_EQ_INT(err.api_error, API_ERROR_BUSY);
        ASSERT_EQ_INT(manager_erase_session(f.manager, &alice, on_erased, &y, &e2, &err), -EBUSY);
        ASSERT_EQ_INT(err.api_error, API_ERROR_BUSY);
        run_until_called(&f, &x.calls, 1);
        ASSERT_TRUE(!x.failed);
        ASSERT_EQ_INT(x.result.records, 3);
        ASSERT_EQ_INT(x.result.cancelled, 1);
        ASSERT_EQ_STR(x.result.user, "alice");
        ASSERT_EQ_INT(history_session_running(manager_get_history(f.manager), &alice), 0);
        expect_record(&f, "qr_000000000000000000000000000000b1", &bob, "succeeded", NULL);

        ASSERT_EQ_INT(y.calls, 0);
        e = manager_erasure_free(e);

        ASSERT_OK(manager_erase_session(f.manager, &bob, on_erased, &y, &e, &err));
        ASSERT_EQ_INT(y.calls, 0);
        run_until_called(&f, &y.calls, 1);
        ASSERT_TRUE(!y.failed);
        ASSERT_EQ_INT(y.result.records, 1);
        ASSERT_TRUE(!y.result.user);
        e = manager_erasure_free(e);
        ASSERT_OK(manager_erase_session(f.manager, &bob, on_erased, &y, &e, &err));
        run_until_called(&f, &y.calls, 2);
        ASSERT_TRUE(!y.failed);
        ASSERT_EQ_INT(y.result.records, 0);
        e = manager_erasure_free(e);
        fixture_stop(&f);
}

/* An administrator's erasure freed while it waits for the person's
 * query (its caller gone): the query's end is announced after, to no
 * erasure (ASan would see one freed), and nothing is erased. */
TEST(erase_user_freed_while_waiting) {
        _cleanup_(manager_erasure_freep) ManagerErasure *e = NULL;
        char id[QUERY_ID_MAX];
        SessionKey alice;
        ManagerQuery *q = NULL;
        ManagerError err;
        Erased x = { 0 };
        size_t seen;
        Fixture f;

        fixture_start(&f);
        manager_set_user_key_function(f.manager, user_key_from_name);
        ASSERT_OK(manager_user_key(f.manager, "alice", &alice));
        add_record(&f, &alice, "qr_000000000000000000000000000000a1", "Apple");

        ASSERT_OK(start(&f, &alice, "Slow?", &q));
        snprintf(id, sizeof id, "%s", manager_query_id(q));
        ASSERT_OK(manager_erase_user(f.manager, "alice", "uid 0 (root)", on_erased, &x, &e, &err));
        e = manager_erasure_free(e);
        seen = f.log.n;
        run_until(&f, seen + 2); /* its record durable, its slot given up */
        ASSERT_EQ_INT(x.calls, 0);
        expect_record(&f, id, &alice, "failed", "execution_failed");
        expect_record(&f, "qr_000000000000000000000000000000a1", &alice, "succeeded", NULL);

        /* And the next erasure of the person is not refused as under way. */
        ASSERT_OK(manager_erase_user(f.manager, "alice", "uid 0 (root)", on_erased, &x, &e, &err));
        run_until_called(&f, &x.calls, 1);
        ASSERT_TRUE(!x.failed);
        ASSERT_EQ_INT(x.result.records, 2);
        ASSERT_EQ_INT(x.result.cancelled, 0);
        e = manager_erasure_free(e);
        fixture_stop(&f);
}

DEFINE_TEST_MAIN()
