/* SPDX-License-Identifier: MIT */
/* The reply path of http/httpd.c under allocation failure, provoked for
 * real with the test-only switch WIKI_WEB_TEST_HTTP_OOM (honoured only with
 * WIKI_WEB_TEST_FAULTS=1): a real HttpServer in an sd-event loop on a
 * loopback socket, a client thread speaking HTTP/1.1 to it. Every request
 * gets the static 500, directly or after being suspended, or (when not even
 * that can be made) its connection closed at once: none is left waiting.
 * In a build without the test faults (-Dtest-faults=false), the switches
 * change nothing. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "http/httpd.h"
#include "shared/config.h"
#include "shared/macro.h"
#include "shared/time-util.h"
#include "tests.h"

#define OOM_BODY "{\"error\":{\"code\":\"internal_error\",\"message\":\"Internal error\"}}"
#define CLIENT_TIMEOUT_SEC 5

typedef struct Fixture {
        sd_event *event;
        Config config;
        HttpServer *server;
        uint16_t port;
        bool suspend; /* the handler suspends and answers from a defer */
        bool hold;    /* the handler suspends, never answers, and the server is freed */
        unsigned n_handled;
        int done_pipe[2];

        /* The client's view. */
        const char *request;
        char response[8192];
        size_t response_size;
        bool eof;       /* the server closed the connection */
        usec_t elapsed; /* from sending to EOF or timeout */
} Fixture;

static const char *empty_getenv(const char *name, void *userdata) {
        return NULL;
}

static int answer_later(sd_event_source *es, void *userdata) {
        HttpRequest *req = userdata;

        http_reply(req, 200, "{\"ok\":true}", NULL);
        sd_event_source_unref(es);
        return 0;
}

static int exit_loop(sd_event_source *es, void *userdata) {
        sd_event *e = sd_event_source_get_event(es);

        sd_event_source_unref(es);
        return sd_event_exit(e, 0);
}

static HttpHandlerResult handler(HttpRequest *req, void *userdata) {
        Fixture *f = userdata;
        sd_event_source *es = NULL;

        f->n_handled++;
        if (f->hold) {
                /* A query still running when the daemon stops. */
                http_request_suspend(req);
                ASSERT_OK(sd_event_add_defer(f->event, &es, exit_loop, NULL));
                return HTTP_SUSPENDED;
        }
        if (!f->suspend)
                return http_reply(req, 200, "{\"ok\":true}", NULL);
        http_request_suspend(req);
        ASSERT_OK(sd_event_add_defer(f->event, &es, answer_later, req));
        return HTTP_SUSPENDED;
}

static void *client(void *userdata) {
        Fixture *f = userdata;
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(f->port) };
        struct timeval tv = { .tv_sec = CLIENT_TIMEOUT_SEC };
        _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        usec_t start;

        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ASSERT_TRUE(fd >= 0);
        ASSERT_TRUE(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
        ASSERT_TRUE(connect(fd, (struct sockaddr *) &sa, sizeof sa) == 0);
        start = now(CLOCK_MONOTONIC);
        ASSERT_TRUE(send(fd, f->request, strlen(f->request), MSG_NOSIGNAL) == (ssize_t) strlen(f->request));
        for (;;) {
                ssize_t n = recv(
                        fd, f->response + f->response_size, sizeof f->response - 1 - f->response_size, 0);

                if (n == 0) {
                        f->eof = true;
                        break;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) /* the timeout: the server neither answered nor closed */
                        break;
                f->response_size += (size_t) n;
                ASSERT_TRUE(f->response_size < sizeof f->response - 1);
        }
        f->response[f->response_size] = 0;
        f->elapsed = now(CLOCK_MONOTONIC) - start;
        ASSERT_TRUE(write(f->done_pipe[1], "x", 1) == 1);
        return NULL;
}

static int on_client_done(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        return sd_event_exit(sd_event_source_get_event(es), 0);
}

/* One request through a fresh server started with the given fault
 * switches (NULL: unset); returns when the client has its answer. */
static void run_full(
        Fixture *f, const char *faults, const char *oom, bool suspend, bool hold, const char *request) {
        struct sockaddr_in sa = { .sin_family = AF_INET };
        socklen_t sl = sizeof sa;
        _cleanup_free_ char *error = NULL;
        sd_event_source *done = NULL;
        pthread_t thread;
        int fd;

        *f = (Fixture){ .suspend = suspend, .hold = hold, .request = request };
        ASSERT_OK(config_load(&f->config, empty_getenv, NULL, &error));
        ASSERT_OK(sd_event_new(&f->event));
        ASSERT_TRUE(pipe2(f->done_pipe, O_CLOEXEC) == 0);

        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        ASSERT_TRUE(fd >= 0);
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ASSERT_TRUE(bind(fd, (struct sockaddr *) &sa, sizeof sa) == 0);
        ASSERT_TRUE(listen(fd, 16) == 0);
        ASSERT_TRUE(getsockname(fd, (struct sockaddr *) &sa, &sl) == 0);
        f->port = ntohs(sa.sin_port);

        if (faults)
                ASSERT_TRUE(setenv("WIKI_WEB_TEST_FAULTS", faults, 1) == 0);
        if (oom)
                ASSERT_TRUE(setenv("WIKI_WEB_TEST_HTTP_OOM", oom, 1) == 0);
        ASSERT_OK(http_server_new(f->event, fd, &f->config, handler, f, &f->server));
        ASSERT_TRUE(unsetenv("WIKI_WEB_TEST_FAULTS") == 0);
        ASSERT_TRUE(unsetenv("WIKI_WEB_TEST_HTTP_OOM") == 0);

        ASSERT_OK(sd_event_add_io(f->event, &done, f->done_pipe[0], EPOLLIN, on_client_done, f));
        ASSERT_TRUE(pthread_create(&thread, NULL, client, f) == 0);
        ASSERT_OK(sd_event_loop(f->event));
        if (hold) {
                /* Freed with the request suspended: the client's
                 * connection is closed, not left open. */
                ASSERT_EQ_INT(http_server_active_count(f->server), 1);
                f->server = http_server_free(f->server);
        }
        ASSERT_TRUE(pthread_join(thread, NULL) == 0);

        /* Nothing is left behind: no request is still alive. */
        ASSERT_EQ_INT(http_server_active_count(f->server), 0);

        sd_event_source_disable_unref(done);
        f->server = http_server_free(f->server);
        (void) close(f->done_pipe[0]);
        (void) close(f->done_pipe[1]);
        f->event = sd_event_unref(f->event);
        config_done(&f->config);
}

static void run(Fixture *f, const char *faults, const char *oom, bool suspend, const char *request) {
        run_full(f, faults, oom, suspend, false, request);
}

#define GET_HEALTH "GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
/* For the answers that keep the connection: the client reads to the end. */
#define GET_HEALTH_CLOSE "GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
#define POST_QUERY                                                                             \
        "POST /api/v1/query HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" \
        "Content-Length: 20\r\n\r\n{\"question\":\"why?\"}"

static bool body_is(const Fixture *f, const char *body) {
        const char *b = strstr(f->response, "\r\n\r\n");

        return b && streq(b + 4, body);
}

TEST(no_fault_answers) {
        Fixture f;

        /* The fixture works: without the switch, the handler's answer. */
        run(&f, NULL, NULL, false, GET_HEALTH_CLOSE);
        ASSERT_TRUE(strneq(f.response, "HTTP/1.1 200 ", STRLEN("HTTP/1.1 200 ")));
        ASSERT_TRUE(body_is(&f, "{\"ok\":true}"));
        ASSERT_EQ_INT(f.n_handled, 1);

        run(&f, NULL, NULL, true, GET_HEALTH_CLOSE);
        ASSERT_TRUE(strneq(f.response, "HTTP/1.1 200 ", STRLEN("HTTP/1.1 200 ")));
        ASSERT_TRUE(body_is(&f, "{\"ok\":true}"));
}

TEST(switch_needs_test_faults) {
        Fixture f;

        /* WIKI_WEB_TEST_HTTP_OOM alone does nothing. */
        run(&f, NULL, "all", false, GET_HEALTH_CLOSE);
        ASSERT_TRUE(body_is(&f, "{\"ok\":true}"));
        run(&f, "0", "all", false, GET_HEALTH_CLOSE);
        ASSERT_TRUE(body_is(&f, "{\"ok\":true}"));
}

#if ENABLE_TEST_FAULTS
static void assert_static_500(const Fixture *f) {
        ASSERT_TRUE(strneq(f->response, "HTTP/1.1 500 ", STRLEN("HTTP/1.1 500 ")));
        ASSERT_TRUE(body_is(f, OOM_BODY));
        ASSERT_TRUE(strcasestr(f->response, "\r\nConnection: close\r\n"));
        ASSERT_TRUE(strcasestr(f->response, "\r\nContent-Type: application/json; charset=utf-8\r\n"));
        ASSERT_TRUE(strcasestr(f->response, "\r\nCache-Control: no-store\r\n"));
        /* ... and then the connection is closed, not left open. */
        ASSERT_TRUE(f->eof);
}

TEST(oom_reply_direct) {
        Fixture f;

        run(&f, "1", "reply", false, GET_HEALTH);
        ASSERT_EQ_INT(f.n_handled, 1);
        assert_static_500(&f);
}

TEST(oom_reply_suspended) {
        Fixture f;

        /* The handler suspended the request; its later answer cannot be
         * made: the static 500 resumes it. */
        run(&f, "1", "reply", true, GET_HEALTH);
        ASSERT_EQ_INT(f.n_handled, 1);
        assert_static_500(&f);
}

TEST(oom_reply_early_error) {
        Fixture f;

        /* An error the server makes itself (404 here) takes the same way. */
        run(&f, "1", "reply", false, "GET /api/v1/nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
        ASSERT_EQ_INT(f.n_handled, 0);
        assert_static_500(&f);
}

TEST(oom_all_closes) {
        Fixture f;

        /* Not even the static 500: the connection is closed at once, with
         * nothing sent, rather than left open. */
        run(&f, "1", "all", false, GET_HEALTH);
        ASSERT_TRUE(f.eof);
        ASSERT_EQ_INT(f.response_size, 0);
        ASSERT_TRUE(f.elapsed < 2 * USEC_PER_SEC);

        run(&f, "1", "all", true, GET_HEALTH);
        ASSERT_EQ_INT(f.n_handled, 1);
        ASSERT_TRUE(f.eof);
        ASSERT_EQ_INT(f.response_size, 0);
        ASSERT_TRUE(f.elapsed < 2 * USEC_PER_SEC);
}

TEST(oom_request_object) {
        Fixture f;

        /* The request object itself cannot be made: the static 500,
         * without the handler. */
        run(&f, "1", "request", false, GET_HEALTH);
        ASSERT_EQ_INT(f.n_handled, 0);
        assert_static_500(&f);

        run(&f, "1", "request", false, POST_QUERY);
        ASSERT_EQ_INT(f.n_handled, 0);
        assert_static_500(&f);
}

#else
TEST(switches_compiled_out) {
        Fixture f;

        /* A build without the test faults: the switches are not even read. */
        run(&f, "1", "all", false, GET_HEALTH_CLOSE);
        ASSERT_TRUE(strneq(f.response, "HTTP/1.1 200 ", STRLEN("HTTP/1.1 200 ")));
        ASSERT_TRUE(body_is(&f, "{\"ok\":true}"));
        run(&f, "1", "request", true, GET_HEALTH_CLOSE);
        ASSERT_TRUE(body_is(&f, "{\"ok\":true}"));
        ASSERT_EQ_INT(f.n_handled, 1);
}
#endif

TEST(free_with_suspended_request) {
        Fixture f;

        run_full(&f, NULL, NULL, false, true, GET_HEALTH);
        ASSERT_EQ_INT(f.n_handled, 1);
        ASSERT_TRUE(f.eof);
        ASSERT_EQ_INT(f.response_size, 0);
        ASSERT_TRUE(f.elapsed < 2 * USEC_PER_SEC);
}

DEFINE_TEST_MAIN()
