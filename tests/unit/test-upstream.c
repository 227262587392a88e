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
        int error;
        ApiError api_error;
        char *message;
        const char *denied_by;
} Seen;

static void on_done(UpstreamOperation *op, int error, const UpstreamResponse *r, void *userdata) {
        Seen *s = userdata;

        ASSERT_TRUE(!s->starting); /* never from inside upstream_start() */
        ASSERT_EQ_INT(error, r->error);
        s->calls++;
        s->error = error;
        s->api_error = r->api_error;
        free(s->message);
        s->message = r->message ? strdup(r->message) : NULL;
        s->denied_by = r->denied_by;
        ASSERT_TRUE(upstream_operation_response(op) == r);
}

static void on_wiki(WikiOperation *op, int error, const WikiResult *r, void *userdata) {
        unsigned *calls = userdata;

        (*calls)++;
        ASSERT_EQ_INT(error, r->error);
        ASSERT_EQ_INT(error, -EPERM);
        ASSERT_EQ_INT(r->api_error, API_ERROR_DESTINATION_DENIED);
        ASSERT_TRUE(r->message != NULL);
}

static void run(sd_event *e) {
        /* Run until nothing is pending (a few iterations suffice). */
        for (int i = 0; i < 10; i++)
                ASSERT_OK(sd_event_run(e, 10 * USEC_PER_MSEC));
}

/* A fresh loop, policy (only "allowed.invalid" named) and Upstream. */
typedef struct Fixture {
        sd_event *e;
        DestinationPolicy *p;
        Upstream *u;
        UpstreamOperation *op;
        Seen s;
} Fixture;

static void fixture_init(Fixture *f) {
        char *extra[] = { (char *) "allowed.invalid", NULL };

        *f = (Fixture){ .e = NULL };
        ASSERT_OK(sd_event_new(&f->e));
        ASSERT_OK(destination_policy_new(NULL, NULL, extra, &f->p));
        ASSERT_OK(upstream_new(f->e, f->p, 4096, &f->u));
}

static void fixture_done(Fixture *f) {
        upstream_operation_free(f->op);
        free(f->s.message);
        upstream_free(f->u);
        destination_policy_free(f->p);
        sd_event_unref(f->e);
}

TEST(user_agent) {
        Fixture f;

        fixture_init(&f);
        ASSERT_TRUE(strneq(upstream_user_agent(f.u), "wikiweb/", 8));
        ASSERT_TRUE(strstr(upstream_user_agent(f.u), " libcurl/"));
        /* No contact: the project only, nothing that pretends to be a URL. */
        ASSERT_TRUE(!strchr(upstream_user_agent(f.u), '('));
        ASSERT_OK(upstream_set_user_agent_contact(f.u, "wiki-admin@example.org"));
        ASSERT_TRUE(strneq(upstream_user_agent(f.u), "wikiweb/", 8));
        ASSERT_TRUE(strstr(upstream_user_agent(f.u), " (+wiki-admin@example.org) libcurl/"));
        fixture_done(&f);
}

TEST(refused_arguments) {
        /* Refused arguments: programming errors, no operation. */
        const char *crlf[] = { "X-A: 1\r\nX-B: 2", NULL };
        const char *nocolon[] = { "X-A 1", NULL };
        UpstreamRequest r1 = { .method = "DELETE", .url = "http://allowed.invalid/" };
        UpstreamRequest r2 = { .url = "http://allowed.invalid/", .headers = crlf };
        UpstreamRequest r3 = { .url = "http://allowed.invalid/", .headers = nocolon };
        UpstreamRequest r4 = { .url = "http://allowed.invalid/", .content_type = "a\nb" };
        UpstreamRequest r5 = { .url = NULL };
        Fixture f;

        fixture_init(&f);
        ASSERT_EQ_INT(upstream_start(f.u, &r1, on_done, &f.s, &f.op), -EINVAL);
        ASSERT_EQ_INT(upstream_start(f.u, &r2, on_done, &f.s, &f.op), -EINVAL);
        ASSERT_EQ_INT(upstream_start(f.u, &r3, on_done, &f.s, &f.op), -EINVAL);
        ASSERT_EQ_INT(upstream_start(f.u, &r4, on_done, &f.s, &f.op), -EINVAL);
        ASSERT_EQ_INT(upstream_start(f.u, &r5, on_done, &f.s, &f.op), -EINVAL);
        ASSERT_TRUE(f.op == NULL);
        fixture_done(&f);
}

TEST(unnamed_host_denied) {
        /* A host that is not named: destination_denied from the loop. */
        UpstreamRequest r = { .url = "http://127.0.0.1:9/" };
        Fixture f;

        fixture_init(&f);
        f.s.starting = true;
        ASSERT_OK(upstream_start(f.u, &r, on_done, &f.s, &f.op));
        f.s.starting = false;
        ASSERT_EQ_INT(f.s.calls, 0);
        ASSERT_TRUE(upstream_operation_response(f.op) != NULL || f.s.calls == 0);
        run(f.e);
        ASSERT_EQ_INT(f.s.calls, 1);
        ASSERT_EQ_INT(f.s.error, -EPERM);
        ASSERT_EQ_INT(f.s.api_error, API_ERROR_DESTINATION_DENIED);
        ASSERT_EQ_STR(f.s.denied_by, "url");
        ASSERT_EQ_STR(f.s.message, "Destination denied by policy");
        fixture_done(&f);
}

TEST(hostile_urls) {
        /* Schemes and hostile URLs. */
        static const char *const bad[] = {
                "ftp://allowed.invalid/",       "file:///etc/passwd", "http://user@allowed.invalid/",
                "http://allowed.invalid.evil/", "http://2130706433/", "gopher://allowed.invalid/",
        };
        Fixture f;

        fixture_init(&f);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                UpstreamRequest r = { .url = bad[i] };
                f.s.calls = 0;
                ASSERT_OK(upstream_start(f.u, &r, on_done, &f.s, &f.op));
                run(f.e);
                ASSERT_EQ_INT(f.s.calls, 1);
                ASSERT_TRUE(f.s.error < 0);
                ASSERT_EQ_INT(f.s.api_error, API_ERROR_DESTINATION_DENIED);
                f.op = upstream_operation_free(f.op);
        }
        fixture_done(&f);
}

TEST(deadline_passed) {
        /* A deadline already passed: query_timeout, no request. */
        UpstreamRequest r = { .url = "http://allowed.invalid/", .deadline = 1 };
        Fixture f;

        fixture_init(&f);
        ASSERT_OK(upstream_start(f.u, &r, on_done, &f.s, &f.op));
        run(f.e);
        ASSERT_EQ_INT(f.s.calls, 1);
        ASSERT_EQ_INT(f.s.error, -ETIMEDOUT);
        ASSERT_EQ_INT(f.s.api_error, API_ERROR_QUERY_TIMEOUT);
        fixture_done(&f);
}

TEST(freed_before_the_loop) {
        /* Freed before the loop ran: no callback, ever. */
        UpstreamRequest r = { .url = "http://127.0.0.1:9/" };
        Fixture f;

        fixture_init(&f);
        ASSERT_OK(upstream_start(f.u, &r, on_done, &f.s, &f.op));
        f.op = upstream_operation_free(f.op);
        run(f.e);
        ASSERT_EQ_INT(f.s.calls, 0);
        fixture_done(&f);
}

TEST(wiki_client) {
        /* The wiki client: one operation at a time, arguments checked. */
        WikiClient *c = NULL;
        WikiOperation *w1 = NULL, *w2 = NULL;
        WikiClientSettings no_password = { .api_url = "http://127.0.0.1:9/api.php", .username = "U@a" };
        WikiClientSettings ok = { .api_url = "http://127.0.0.1:9/api.php" };
        unsigned calls = 0;
        Fixture f;

        fixture_init(&f);
        ASSERT_EQ_INT(wiki_client_new(f.u, &no_password, &c), -EINVAL); /* a username needs a password */
        ASSERT_OK(wiki_client_new(f.u, &ok, &c));
        ASSERT_EQ_INT(wiki_client_read(c, "A|B", on_wiki, &calls, &w1), -EINVAL);
        ASSERT_EQ_INT(wiki_client_read(c, "", on_wiki, &calls, &w1), -EINVAL);
        ASSERT_EQ_INT(wiki_client_search(c, "q", 0, on_wiki, &calls, &w1), -EINVAL);
        ASSERT_OK(wiki_client_read(c, "Apple", on_wiki, &calls, &w1));
        ASSERT_EQ_INT(wiki_client_search(c, "q", 5, on_wiki, &calls, &w2), -EBUSY);
        run(f.e);
        ASSERT_EQ_INT(calls, 1); /* 127.0.0.1 is not named: denied, from the loop */
        w1 = wiki_operation_free(w1);
        ASSERT_OK(wiki_client_search(c, "q", 5, on_wiki, &calls, &w2));
        w2 = wiki_operation_free(w2); /* freed before it ran: no callback */
        run(f.e);
        ASSERT_EQ_INT(calls, 1);
        wiki_client_free(c);
        fixture_done(&f);
}

DEFINE_TEST_MAIN()
