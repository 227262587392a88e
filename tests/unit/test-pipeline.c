/* SPDX-License-Identifier: MIT */
/* The pure decisions of src/query/pipeline.c: how long a query waits for
 * a starting sandbox, and what it does about run_python with the sandbox
 * in each state. The pipeline itself runs in the e2e and system suites. */

#include "query/pipeline.h"
#include "tests.h"

#define S (USEC_PER_SEC)

TEST(wait_until) {
        /* QUERY_SANDBOX_WAIT_MAX_USEC after the start... */
        ASSERT_EQ_INT(QUERY_SANDBOX_WAIT_MAX_USEC, 10 * S);
        ASSERT_EQ_INT(query_sandbox_wait_until(100 * S, 220 * S), 110 * S);
        /* ...never past the deadline (WIKI_WEB_QUERY_TIMEOUT_SECONDS=3). */
        ASSERT_EQ_INT(query_sandbox_wait_until(100 * S, 103 * S), 103 * S);
        ASSERT_EQ_INT(query_sandbox_wait_until(100 * S, 110 * S), 110 * S);
        /* No overflow near the end of time. */
        ASSERT_EQ_INT(query_sandbox_wait_until(USEC_INFINITY - S, USEC_INFINITY), USEC_INFINITY);
}

TEST(decide) {
        const usec_t until = 110 * S;
        QuerySandbox q = _QUERY_SANDBOX_INVALID;

        /* Available: offered at once, also past the bound. */
        ASSERT_TRUE(query_sandbox_decide(SANDBOX_AVAILABLE, 100 * S, until, &q));
        ASSERT_EQ_INT(q, QUERY_SANDBOX_OFFERED);
        ASSERT_TRUE(query_sandbox_decide(SANDBOX_AVAILABLE, 200 * S, until, &q));
        ASSERT_EQ_INT(q, QUERY_SANDBOX_OFFERED);

        /* Unavailable (for good, or no user manager): no wait at all. */
        q = _QUERY_SANDBOX_INVALID;
        ASSERT_TRUE(query_sandbox_decide(SANDBOX_UNAVAILABLE, 100 * S, until, &q));
        ASSERT_EQ_INT(q, QUERY_SANDBOX_UNAVAILABLE);

        /* Starting: wait until the bound, then give up. */
        q = _QUERY_SANDBOX_INVALID;
        ASSERT_TRUE(!query_sandbox_decide(SANDBOX_STARTING, 100 * S, until, &q));
        ASSERT_TRUE(!query_sandbox_decide(SANDBOX_STARTING, until - 1, until, &q));
        ASSERT_EQ_INT(q, _QUERY_SANDBOX_INVALID); /* untouched while waiting */
        ASSERT_TRUE(query_sandbox_decide(SANDBOX_STARTING, until, until, &q));
        ASSERT_EQ_INT(q, QUERY_SANDBOX_STARTING);
        ASSERT_TRUE(query_sandbox_decide(SANDBOX_STARTING, until + S, until, &q));
        ASSERT_EQ_INT(q, QUERY_SANDBOX_STARTING);

        /* The wait ends as soon as the state does: available or not. */
        ASSERT_TRUE(query_sandbox_decide(SANDBOX_AVAILABLE, 100 * S + 1, until, &q));
        ASSERT_EQ_INT(q, QUERY_SANDBOX_OFFERED);
        ASSERT_TRUE(query_sandbox_decide(SANDBOX_UNAVAILABLE, 100 * S + 1, until, &q));
        ASSERT_EQ_INT(q, QUERY_SANDBOX_UNAVAILABLE);
}

DEFINE_TEST_MAIN()
