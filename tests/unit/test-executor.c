/* SPDX-License-Identifier: MIT */
/* The executor with N slots, on its unconfigured path (no wiki, no model:
 * every job ends as execution_failed, from the loop, after the test delay):
 * up to WIKI_WEB_QUEUE_SLOTS jobs at once, the next one refused, each
 * reported exactly once through its handle, one aborted by its handle
 * without touching the others, a finished one's place taken by another, a
 * handle freed before its report cancelling it. */

#include <systemd/sd-event.h>

#include "query/executor.h"
#include "shared/config.h"
#include "shared/macro.h"
#include "tests.h"

typedef struct Reports {
        char ids[16][QUERY_ID_MAX];
        int errors[16];
        unsigned n;
} Reports;

static void on_done(QueryExecution *e, int error, const QueryOutcome *o, void *userdata) {
        Reports *r = userdata;

        ASSERT_TRUE(r->n < ELEMENTSOF(r->ids));
        ASSERT_TRUE(o->cleanup_confirmed);
        ASSERT_EQ_INT(o->api_error, API_ERROR_EXECUTION_FAILED);
        ASSERT_EQ_INT(error, o->error);
        /* The job is no longer running when it is reported. */
        ASSERT_TRUE(!query_execution_is_running(e));
        (void) snprintf(r->ids[r->n], sizeof(r->ids[r->n]), "%s", o->query_id);
        r->errors[r->n++] = error;
}

static QueryJob job(const char *id) {
        QueryJob j = { .question = "q" };

        (void) snprintf(j.id, sizeof(j.id), "%s", id);
        return j;
}

static void run_until(sd_event *e, Reports *r, unsigned n) {
        for (unsigned i = 0; i < 1000 && r->n < n; i++)
                ASSERT_OK(sd_event_run(e, 100 * USEC_PER_MSEC));
        ASSERT_EQ_INT(r->n, n);
}

TEST(slots) {
        Config c = { .queue_slots = 3 };
        sd_event *e = NULL;
        QueryExecutor *x = NULL;
        Reports r = { .n = 0 };
        QueryExecution *h[6] = { NULL };
        QueryJob j;

        ASSERT_OK(sd_event_new(&e));
        ASSERT_OK(query_executor_new(e, &c, &x));
        ASSERT_TRUE(!query_executor_is_configured(x));
        query_executor_set_test_delay(x, 200 * USEC_PER_MSEC);

        j = job("qr_1");
        ASSERT_OK(query_executor_start(x, &j, on_done, NULL, &r, &h[1]));
        /* The same id twice is refused. */
        ASSERT_EQ_INT(query_executor_start(x, &j, on_done, NULL, &r, &h[0]), -EBUSY);
        ASSERT_TRUE(!h[0]);
        j = job("qr_2");
        ASSERT_OK(query_executor_start(x, &j, on_done, NULL, &r, &h[2]));
        j = job("qr_3");
        ASSERT_OK(query_executor_start(x, &j, on_done, NULL, &r, &h[3]));
        ASSERT_EQ_INT(query_executor_n_running(x), 3);
        /* A fourth: every slot is taken. */
        j = job("qr_4");
        ASSERT_EQ_INT(query_executor_start(x, &j, on_done, NULL, &r, &h[0]), -EBUSY);
        /* Nothing is reported from inside start(). */
        ASSERT_EQ_INT(r.n, 0);

        /* Abort the second: reported from the loop, cancelled, alone. */
        ASSERT_OK(query_execution_abort(h[2], "Cancelled by an administrator"));
        ASSERT_EQ_INT(r.n, 0);
        run_until(e, &r, 1);
        ASSERT_EQ_STR(r.ids[0], "qr_2");
        ASSERT_EQ_INT(r.errors[0], -ECANCELED);
        ASSERT_EQ_INT(query_executor_n_running(x), 2);
        ASSERT_TRUE(query_execution_is_running(h[1]) && query_execution_is_running(h[3]));
        /* Reported: it cannot be aborted again. */
        ASSERT_TRUE(!query_execution_is_running(h[2]));
        ASSERT_EQ_INT(query_execution_abort(h[2], "again"), -ESRCH);
        h[2] = query_execution_free(h[2]);

        /* Its place is free again. */
        j = job("qr_4");
        ASSERT_OK(query_executor_start(x, &j, on_done, NULL, &r, &h[4]));
        ASSERT_EQ_INT(query_executor_n_running(x), 3);

        /* The others end on their own, each once. */
        run_until(e, &r, 4);
        for (unsigned i = 1; i < 4; i++)
                ASSERT_EQ_INT(r.errors[i], -EOPNOTSUPP);
        ASSERT_EQ_INT(query_executor_n_running(x), 0);
        for (unsigned i = 0; i < 20; i++)
                ASSERT_OK(sd_event_run(e, 10 * USEC_PER_MSEC));
        ASSERT_EQ_INT(r.n, 4);
        for (unsigned i = 0; i < ELEMENTSOF(h); i++)
                h[i] = query_execution_free(h[i]);

        /* A handle freed before its report cancels the job: it is not
         * reported, and its place is free at once. */
        j = job("qr_5");
        ASSERT_OK(query_executor_start(x, &j, on_done, NULL, &r, &h[5]));
        ASSERT_EQ_INT(query_executor_n_running(x), 1);
        h[5] = query_execution_free(h[5]);
        ASSERT_EQ_INT(query_executor_n_running(x), 0);
        for (unsigned i = 0; i < 30; i++)
                ASSERT_OK(sd_event_run(e, 10 * USEC_PER_MSEC));
        ASSERT_EQ_INT(r.n, 4);
        query_executor_free(x);
        for (unsigned i = 0; i < 5; i++)
                ASSERT_OK(sd_event_run(e, 10 * USEC_PER_MSEC));
        ASSERT_EQ_INT(r.n, 4);
        sd_event_unref(e);
}

DEFINE_TEST_MAIN()
