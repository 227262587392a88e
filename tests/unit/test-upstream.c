/* SPDX-License-Identifier: MIT */
/* upstream_start()'s contract without any network: refused arguments, a
 * URL the policy refuses reported through the callback from the event loop
 * (never from inside upstream_start()), a passed deadline, and a freed
 * operation that gets no callback. No traffic is sent anywhere: every URL
 * here is refused before a connection. */
#include <systemd/sd-event.h>

#include "query/upstream.h"
#include "query/wiki-client.h"
#include "shared/macro.h"
#include "tests.h"

typedef struct Seen {
        bool starting;
        unsigned calls;
        ApiError error;
        char *message;
        const char *denied_by;
} Seen;

static void on_done(UpstreamOperation *op, const UpstreamResponse *r, void *userdata) {
        Seen *s = userdata;

        ASSERT_TRUE(!s->starting); /* never from inside upstream_start() */
        s->calls++;
        s->error = r->error;
        free(s->message);
        s->message = r->message ? strdup(r->message) : NULL;
        s->denied_by = r->denied_by;
        ASSERT_TRUE(upstream_operation_response(op) == r);
}

static void on_wiki(WikiOperation *op, const WikiResult *r, void *userdata) {
        unsigned *calls = userdata;

        (*calls)++;
        ASSERT_EQ_INT(r->error, API_ERROR_DESTINATION_DENIED);
        ASSERT_TRUE(r->message != NULL);
}

static void run(sd_event *e) {
        /* Run until nothing is pending (a few iterations suffice). */
        for (int i = 0; i < 10; i++)
                ASSERT_OK(sd_event_run(e, 10 * USEC_PER_MSEC));
}

int main(void) {
        sd_event *e = NULL;
        DestinationPolicy *p = NULL;
        Upstream *u = NULL;
        UpstreamOperation *op = NULL;
        Seen s = { 0 };
        char *extra[] = { (char *) "allowed.invalid", NULL };

        ASSERT_OK(sd_event_new(&e));
        ASSERT_OK(destination_policy_new(NULL, NULL, extra, &p));
        ASSERT_OK(upstream_new(e, p, 4096, &u));
        ASSERT_TRUE(strneq(upstream_user_agent(u), "wikiweb/", 8));
        ASSERT_TRUE(strstr(upstream_user_agent(u), " libcurl/"));

        /* Refused arguments: programming errors, no operation. */
        {
                const char *crlf[] = { "X-A: 1\r\nX-B: 2", NULL };
                const char *nocolon[] = { "X-A 1", NULL };
                UpstreamRequest r1 = { .method = "DELETE", .url = "http://allowed.invalid/" };
                UpstreamRequest r2 = { .url = "http://allowed.invalid/", .headers = crlf };
                UpstreamRequest r3 = { .url = "http://allowed.invalid/", .headers = nocolon };
                UpstreamRequest r4 = { .url = "http://allowed.invalid/", .content_type = "a\nb" };
                UpstreamRequest r5 = { .url = NULL };

                ASSERT_EQ_INT(upstream_start(u, &r1, on_done, &s, &op), -EINVAL);
                ASSERT_EQ_INT(upstream_start(u, &r2, on_done, &s, &op), -EINVAL);
                ASSERT_EQ_INT(upstream_start(u, &r3, on_done, &s, &op), -EINVAL);
                ASSERT_EQ_INT(upstream_start(u, &r4, on_done, &s, &op), -EINVAL);
                ASSERT_EQ_INT(upstream_start(u, &r5, on_done, &s, &op), -EINVAL);
                ASSERT_TRUE(op == NULL);
        }

        /* A host that is not named: destination_denied from the loop. */
        {
                UpstreamRequest r = { .url = "http://127.0.0.1:9/" };

                s.starting = true;
                ASSERT_OK(upstream_start(u, &r, on_done, &s, &op));
                s.starting = false;
                ASSERT_EQ_INT(s.calls, 0);
                ASSERT_TRUE(upstream_operation_response(op) != NULL || s.calls == 0);
                run(e);
                ASSERT_EQ_INT(s.calls, 1);
                ASSERT_EQ_INT(s.error, API_ERROR_DESTINATION_DENIED);
                ASSERT_EQ_STR(s.denied_by, "url");
                ASSERT_EQ_STR(s.message, "Destination denied by policy");
                op = upstream_operation_free(op);
        }

        /* Schemes and hostile URLs. */
        static const char *const bad[] = {
                "ftp://allowed.invalid/",       "file:///etc/passwd", "http://user@allowed.invalid/",
                "http://allowed.invalid.evil/", "http://2130706433/", "gopher://allowed.invalid/",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                UpstreamRequest r = { .url = bad[i] };
                s.calls = 0;
                ASSERT_OK(upstream_start(u, &r, on_done, &s, &op));
                run(e);
                ASSERT_EQ_INT(s.calls, 1);
                ASSERT_EQ_INT(s.error, API_ERROR_DESTINATION_DENIED);
                op = upstream_operation_free(op);
        }

        /* A deadline already passed: query_timeout, no request. */
        {
                UpstreamRequest r = { .url = "http://allowed.invalid/", .deadline = 1 };
                s.calls = 0;
                ASSERT_OK(upstream_start(u, &r, on_done, &s, &op));
                run(e);
                ASSERT_EQ_INT(s.calls, 1);
                ASSERT_EQ_INT(s.error, API_ERROR_QUERY_TIMEOUT);
                op = upstream_operation_free(op);
        }

        /* Freed before the loop ran: no callback, ever. */
        {
                UpstreamRequest r = { .url = "http://127.0.0.1:9/" };
                s.calls = 0;
                ASSERT_OK(upstream_start(u, &r, on_done, &s, &op));
                op = upstream_operation_free(op);
                run(e);
                ASSERT_EQ_INT(s.calls, 0);
        }

        /* The wiki client: one operation at a time, arguments checked. */
        {
                WikiClient *c = NULL;
                WikiOperation *w1 = NULL, *w2 = NULL;
                WikiClientSettings no_password = { .api_url = "http://127.0.0.1:9/api.php", .username = "U@a" };
                WikiClientSettings ok = { .api_url = "http://127.0.0.1:9/api.php" };
                unsigned calls = 0;

                ASSERT_EQ_INT(wiki_client_new(u, &no_password, &c), -EINVAL); /* a username needs a password */
                ASSERT_OK(wiki_client_new(u, &ok, &c));
                ASSERT_EQ_INT(wiki_client_read(c, "A|B", on_wiki, &calls, &w1), -EINVAL);
                ASSERT_EQ_INT(wiki_client_read(c, "", on_wiki, &calls, &w1), -EINVAL);
                ASSERT_EQ_INT(wiki_client_search(c, "q", 0, on_wiki, &calls, &w1), -EINVAL);
                ASSERT_OK(wiki_client_read(c, "Apple", on_wiki, &calls, &w1));
                ASSERT_EQ_INT(wiki_client_search(c, "q", 5, on_wiki, &calls, &w2), -EBUSY);
                run(e);
                ASSERT_EQ_INT(calls, 1); /* 127.0.0.1 is not named: denied, from the loop */
                w1 = wiki_operation_free(w1);
                ASSERT_OK(wiki_client_search(c, "q", 5, on_wiki, &calls, &w2));
                w2 = wiki_operation_free(w2); /* freed before it ran: no callback */
                run(e);
                ASSERT_EQ_INT(calls, 1);
                wiki_client_free(c);
        }

        free(s.message);
        upstream_free(u);
        destination_policy_free(p);
        sd_event_unref(e);
        return 0;
}
