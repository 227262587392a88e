/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <stdarg.h>

#include "query/wiki-client.h"
#include "shared/log.h"
#include "shared/macro.h"
#include "shared/strbuf.h"
#include "shared/strv.h"

struct WikiClient {
        Upstream *upstream;
        char *api_url;
        char *username;
        char *password;
        usec_t deadline;
        const WikiUserMap *user_map;
        UpstreamJar *jar;
        bool logged_in;
        unsigned logins;
        WikiOperation *current; /* the one operation in flight */
};

typedef enum WikiKind {
        WIKI_SEARCH,
        WIKI_READ,
        WIKI_REVISIONS,
        WIKI_READCHECK,
} WikiKind;

typedef enum WikiState {
        WIKI_STATE_LOGIN_TOKEN,
        WIKI_STATE_LOGIN,
        WIKI_STATE_REQUEST,
        WIKI_STATE_WAIT,
        WIKI_STATE_DONE,
} WikiState;

struct WikiOperation {
        WikiClient *client;
        WikiKind kind;
        char *arg;     /* query, title, or the wiki user name of WIKI_READCHECK ("": none) */
        char *email;   /* WIKI_READCHECK by e-mail address; NULL: by name */
        char **titles; /* WIKI_REVISIONS, WIKI_READCHECK */
        unsigned limit;
        WikiDone done;
        void *userdata;

        WikiState state;
        WikiState after_wait; /* the state to repeat after a Retry-After */
        bool relogged;
        unsigned retries;
        UpstreamOperation *upstream_op;
        sd_event_source *timer;
        sd_event_source *defer;
        WikiResult result;
};

void wiki_result_done(WikiResult *r) {
        if (!r)
                return;
        free(r->message);
        free(r->readable);
        free(r->reader);
        mediawiki_search_hits_free(r->hits, r->n_hits);
        wiki_page_done(&r->page);
        mediawiki_revisions_free(r->revisions, r->n_revisions);
        *r = (WikiResult){ .api_error = _API_ERROR_INVALID };
}

static void wipe_free(char *s) {
        if (!s)
                return;
        explicit_bzero(s, strlen(s));
        free(s);
}

int wiki_client_new(Upstream *u, const WikiClientSettings *s, WikiClient **ret) {
        _cleanup_(wiki_client_freep) WikiClient *c = NULL;
        int r;

        assert(u);
        assert(s);
        assert(ret);

        if (!s->api_url || (s->username && !s->password))
                return -EINVAL;
        c = calloc(1, sizeof *c);
        if (!c)
                return -ENOMEM;
        c->upstream = u;
        c->deadline = s->deadline;
        c->user_map = s->user_map;
        c->api_url = strdup(s->api_url);
        if (!c->api_url)
                return -ENOMEM;
        if (s->username) {
                c->username = strdup(s->username);
                c->password = strdup(s->password);
                if (!c->username || !c->password)
                        return -ENOMEM;
        }
        r = upstream_jar_new(u, &c->jar);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(c);
        return 0;
}

WikiClient *wiki_client_free(WikiClient *c) {
        if (!c)
                return NULL;
        assert(!c->current);
        upstream_jar_free(c->jar);
        free(c->api_url);
        free(c->username);
        wipe_free(c->password);
        free(c);
        return NULL;
}

unsigned wiki_client_logins(const WikiClient *c) {
        assert(c);
        return c->logins;
}

WikiOperation *wiki_operation_free(WikiOperation *op) {
        if (!op)
                return NULL;
        upstream_operation_free(op->upstream_op);
        sd_event_source_disable_unref(op->timer);
        sd_event_source_disable_unref(op->defer);
        if (op->client && op->client->current == op)
                op->client->current = NULL;
        free(op->arg);
        free(op->email);
        strv_free(op->titles);
        wiki_result_done(&op->result);
        free(op);
        return NULL;
}

static int wiki_on_defer(sd_event_source *s, void *userdata) {
        WikiOperation *op = userdata;

        (void) sd_event_source_set_enabled(op->defer, SD_EVENT_OFF);
        op->client->current = NULL; /* the next operation may start from the callback */
        op->done(op, op->result.error, &op->result, op->userdata);
        return 0;
}

/* End the operation: error 0, or a negative errno and the API error;
 * message raw (sanitized here), NULL: the API error's default. */
static void wiki_finish(WikiOperation *op, int error, ApiError api_error, const char *message) {
        op->state = WIKI_STATE_DONE;
        upstream_complete(
                op->defer, error, api_error, message, &op->result.error, &op->result.api_error, &op->result.message);
        /* Only now: message may point into the upstream response. */
        op->upstream_op = upstream_operation_free(op->upstream_op);
}

static void wiki_finish_error(WikiOperation *op, int error, ApiError api_error, const char *format, ...)
        _printf_(4, 5);
static void wiki_finish_error(WikiOperation *op, int error, ApiError api_error, const char *format, ...) {
        _cleanup_free_ char *m = NULL;
        va_list ap;

        va_start(ap, format);
        m = strdup_vprintf(format, ap);
        va_end(ap);
        wiki_finish(op, error, api_error, m);
}

static void wiki_advance(WikiOperation *op);
static void wiki_on_upstream(UpstreamOperation *uop, int error, const UpstreamResponse *r, void *userdata);
static int wiki_parse_readcheck(WikiOperation *op, const UpstreamResponse *r, MediaWikiError *e);

static int wiki_start_get(WikiOperation *op, const char *query) {
        _cleanup_free_ char *url = NULL;
        UpstreamRequest req;
        int r;

        r = mediawiki_url(op->client->api_url, query, &url);
        if (r < 0)
                return r;
        req = (UpstreamRequest){
                .method = "GET",
                .url = url,
                .deadline = op->client->deadline,
                .jar = op->client->jar,
        };
        return upstream_start(op->client->upstream, &req, wiki_on_upstream, op, &op->upstream_op);
}

static int wiki_start_login(WikiOperation *op, const char *token) {
        _cleanup_free_ char *body = NULL;
        UpstreamRequest req;
        int r;

        r = mediawiki_build_login(op->client->username, op->client->password, token, &body);
        if (r < 0)
                return r;
        req = (UpstreamRequest){
                .method = "POST",
                .url = op->client->api_url,
                .body = body,
                .body_size = strlen(body),
                .content_type = "application/x-www-form-urlencoded",
                .deadline = op->client->deadline,
                .jar = op->client->jar,
        };
        r = upstream_start(op->client->upstream, &req, wiki_on_upstream, op, &op->upstream_op);
        explicit_bzero(body, strlen(body));
        return r;
}

/* Start the request of the current state. */
static void wiki_advance(WikiOperation *op) {
        _cleanup_free_ char *q = NULL;
        bool assert_user = op->client->username != NULL;
        int r;

        switch (op->state) {
        case WIKI_STATE_LOGIN_TOKEN:
                r = mediawiki_build_login_token(&q);
                break;
        case WIKI_STATE_REQUEST:
                if (op->kind == WIKI_SEARCH)
                        r = mediawiki_build_search(op->arg, op->limit, assert_user, &q);
                else if (op->kind == WIKI_REVISIONS)
                        r = mediawiki_build_revisions(
                                (const char *const *) op->titles, strv_length(op->titles), assert_user, &q);
                else if (op->kind == WIKI_READCHECK)
                        r = mediawiki_build_readcheck(
                                op->arg,
                                op->email,
                                (const char *const *) op->titles,
                                strv_length(op->titles),
                                assert_user,
                                &q);
                else
                        r = mediawiki_build_read(op->arg, assert_user, &q);
                break;
        default:
                r = -EINVAL;
        }
        if (r < 0) {
                wiki_finish_error(
                        op, r, API_ERROR_INTERNAL_ERROR, "Wiki request could not be built: %s", strerror(-r));
                return;
        }
        r = wiki_start_get(op, q);
        if (r < 0)
                wiki_finish_error(
                        op, r, API_ERROR_INTERNAL_ERROR, "Wiki request could not be started: %s", strerror(-r));
}

static int wiki_on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        WikiOperation *op = userdata;

        op->timer = sd_event_source_disable_unref(op->timer);
        op->state = op->after_wait;
        wiki_advance(op);
        return 0;
}

/* Wait as the wiki asked and repeat the current state, within the deadline. */
static void wiki_retry_later(WikiOperation *op, const UpstreamResponse *r, const char *why) {
        usec_t delay = WIKI_RETRY_DEFAULT_USEC, n = now(CLOCK_MONOTONIC);
        int k;

        if (r->retry_after && upstream_parse_retry_after(r->retry_after, now(CLOCK_REALTIME), &delay) < 0)
                delay = WIKI_RETRY_DEFAULT_USEC;
        if (op->retries >= WIKI_RETRY_MAX) {
                wiki_finish_error(
                        op,
                        -EBUSY,
                        API_ERROR_UPSTREAM_FAILED,
                        "Wiki still busy (%s) after %u retries",
                        why,
                        op->retries);
                return;
        }
        if (op->client->deadline != 0 && op->client->deadline != USEC_INFINITY &&
            n + delay >= op->client->deadline) {
                wiki_finish_error(
                        op,
                        -ETIMEDOUT,
                        API_ERROR_QUERY_TIMEOUT,
                        "Wiki asked to retry after %" PRIu64 " s (%s), beyond the query deadline",
                        delay / USEC_PER_SEC,
                        why);
                return;
        }
        op->retries++;
        op->after_wait = op->state;
        op->state = WIKI_STATE_WAIT;
        op->upstream_op = upstream_operation_free(op->upstream_op);
        log_info("wiki: asked to wait (%s), retrying in %" PRIu64 " ms", why, delay / USEC_PER_MSEC);
        k = sd_event_add_time(
                upstream_get_event(op->client->upstream),
                &op->timer,
                CLOCK_MONOTONIC,
                n + delay,
                1,
                wiki_on_timer,
                op);
        if (k < 0)
                wiki_finish(op, k, API_ERROR_INTERNAL_ERROR, NULL);
        else
                (void) sd_event_source_set_description(op->timer, "wiki-retry");
}

/* Handle an API error reply: log in again, wait and retry, or fail. */
static void wiki_api_error(WikiOperation *op, const UpstreamResponse *r, const MediaWikiError *e) {
        if (streq(e->code, "assertuserfailed") && op->client->username) {
                op->client->logged_in = false;
                if (op->relogged) {
                        wiki_finish(
                                op,
                                -EACCES,
                                API_ERROR_WIKI_AUTH_FAILED,
                                "Wiki session lost again after a new login");
                        return;
                }
                op->relogged = true;
                log_info("wiki: the session was lost (assertuserfailed), logging in again");
                op->state = WIKI_STATE_LOGIN_TOKEN;
                op->upstream_op = upstream_operation_free(op->upstream_op);
                wiki_advance(op);
                return;
        }
        if (op->kind == WIKI_READ && streq(e->code, "accessdenied")) {
                /* The service's own account may not read this page: to the
                 * model it is a page it cannot have, like a missing one. */
                wiki_page_done(&op->result.page);
                op->result.page = (WikiPage){ .missing = true, .title = strdup(op->arg) };
                if (!op->result.page.title)
                        wiki_finish(op, -ENOMEM, API_ERROR_INTERNAL_ERROR, NULL);
                else
                        wiki_finish(op, 0, _API_ERROR_INVALID, NULL);
                return;
        }
        if (op->kind == WIKI_READCHECK &&
            (streq(e->code, "badvalue") || streq(e->code, "unknown_action") ||
             streq(e->code, "permissiondenied"))) {
                bool right = streq(e->code, "permissiondenied");

                wiki_finish_error(
                        op,
                        -EACCES,
                        API_ERROR_WIKI_AUTH_FAILED,
                        "The wiki cannot say what this person may read (%s): %s; or set "
                        "WIKI_WEB_WIKI_READ_AS=service",
                        e->code,
                        right ? "grant the right wikiweb-readcheck to the service account's group" :
                                "load the MediaWiki extension WikiwebReadCheck");
                return;
        }
        if (streq(e->code, "readapidenied") || streq(e->code, "assertuserfailed") ||
            streq(e->code, "permissiondenied") || streq(e->code, "mwoauth-invalid-authorization")) {
                wiki_finish_error(op, -EACCES, API_ERROR_WIKI_AUTH_FAILED, "Wiki denied access: %s", e->code);
                return;
        }
        if (streq(e->code, "maxlag")) {
                wiki_retry_later(op, r, "maxlag");
                return;
        }
        wiki_finish_error(
                op,
                -EREMOTEIO,
                API_ERROR_UPSTREAM_FAILED,
                "Wiki API error %s: %s",
                e->code,
                e->info ? e->info : "");
}

static void wiki_on_upstream(UpstreamOperation *uop, int error, const UpstreamResponse *r, void *userdata) {
        WikiOperation *op = userdata;
        MediaWikiError e = { 0 };
        int k;

        if (r->status == 401 || r->status == 403) {
                wiki_finish_error(op, -EACCES, API_ERROR_WIKI_AUTH_FAILED, "Wiki answered HTTP %ld", r->status);
                return;
        }
        if ((r->status == 429 || r->status == 503) && r->retry_after) {
                char why[32];
                (void) snprintf(why, sizeof why, "HTTP %ld", r->status);
                wiki_retry_later(op, r, why);
                return;
        }
        if (error < 0) {
                /* A MediaWiki error may still come with a non-2xx status. */
                if (r->status > 0 && mediawiki_parse_error(r->body, r->body_size, &e) == -EREMOTEIO) {
                        wiki_api_error(op, r, &e);
                        mediawiki_error_done(&e);
                        return;
                }
                /* already sanitized; sanitizing again is harmless */
                wiki_finish(op, error, r->api_error, r->message);
                return;
        }

        switch (op->state) {
        case WIKI_STATE_LOGIN_TOKEN: {
                _cleanup_free_ char *token = NULL;

                k = mediawiki_parse_login_token(r->body, r->body_size, &token, &e);
                if (k >= 0) {
                        op->upstream_op = upstream_operation_free(op->upstream_op);
                        op->state = WIKI_STATE_LOGIN;
                        k = wiki_start_login(op, token);
                        if (k < 0)
                                wiki_finish_error(
                                        op, k, API_ERROR_INTERNAL_ERROR, "Wiki login could not be sent");
                        return;
                }
                break;
        }
        case WIKI_STATE_LOGIN: {
                MediaWikiLoginResult res;
                _cleanup_free_ char *reason = NULL;

                k = mediawiki_parse_login(r->body, r->body_size, &res, &reason, &e);
                if (k >= 0) {
                        if (res != MEDIAWIKI_LOGIN_SUCCESS) {
                                wiki_finish_error(
                                        op,
                                        -EACCES,
                                        API_ERROR_WIKI_AUTH_FAILED,
                                        "Wiki login failed: %s%s%s",
                                        mediawiki_login_result_to_string(res),
                                        reason ? ": " : "",
                                        reason ? reason : "");
                                return;
                        }
                        op->client->logged_in = true;
                        op->client->logins++;
                        op->upstream_op = upstream_operation_free(op->upstream_op);
                        op->state = WIKI_STATE_REQUEST;
                        wiki_advance(op);
                        return;
                }
                break;
        }
        case WIKI_STATE_REQUEST:
                if (op->kind == WIKI_SEARCH)
                        k = mediawiki_parse_search(
                                r->body, r->body_size, &op->result.hits, &op->result.n_hits, &e);
                else if (op->kind == WIKI_REVISIONS)
                        k = mediawiki_parse_revisions(
                                r->body, r->body_size, &op->result.revisions, &op->result.n_revisions, &e);
                else if (op->kind == WIKI_READCHECK) {
                        k = wiki_parse_readcheck(op, r, &e);
                        if (k > 0)
                                return; /* finished */
                } else
                        k = mediawiki_parse_page(r->body, r->body_size, &op->result.page, &e);
                if (k >= 0) {
                        wiki_finish(op, 0, _API_ERROR_INVALID, NULL);
                        return;
                }
                break;
        default:
                assert(false);
                return;
        }

        if (k == -EREMOTEIO) {
                wiki_api_error(op, r, &e);
                mediawiki_error_done(&e);
        } else if (k == -ENOMEM)
                wiki_finish(op, k, API_ERROR_INTERNAL_ERROR, NULL);
        else
                wiki_finish(op, k, API_ERROR_UPSTREAM_FAILED, "Wiki reply could not be understood");
}

/* A read check's reply: its pages and its reader. 1: the operation was
 * finished here (an address of several accounts); 0; or as the parsers. */
static int wiki_parse_readcheck(WikiOperation *op, const UpstreamResponse *r, MediaWikiError *e) {
        _cleanup_(mediawiki_reader_done) MediaWikiReader reader = { 0 };
        size_t n = strv_length(op->titles);
        int k;

        k = mediawiki_parse_readcheck(r->body, r->body_size, n, &op->result.readable, e);
        if (k < 0)
                return k;
        op->result.n_readable = n;
        k = mediawiki_parse_reader(r->body, r->body_size, op->email != NULL, &reader, NULL);
        if (k == -EBADMSG && op->email)
                /* An extension that ignored the address: it checked nobody. */
                k = -EPROTO;
        if (k < 0) {
                free(op->result.readable);
                op->result.readable = NULL;
                op->result.n_readable = 0;
                if (k == -EPROTO) {
                        wiki_finish(
                                op,
                                -EACCES,
                                API_ERROR_WIKI_AUTH_FAILED,
                                "The wiki cannot say which account holds this person's e-mail address: "
                                "update the MediaWiki extension WikiwebReadCheck; or set "
                                "WIKI_WEB_WIKI_USER_FROM=name");
                        return 1;
                }
                return k;
        }
        if (reader.accounts == MEDIAWIKI_ACCOUNTS_SEVERAL) {
                /* Nobody's permissions are known: never name the accounts,
                 * nor the address (it is the person's). */
                log_warning(
                        "wiki: the sign-on's e-mail address names more than one wiki account; failing closed");
                free(op->result.readable);
                op->result.readable = NULL;
                op->result.n_readable = 0;
                wiki_finish(
                        op,
                        -EACCES,
                        API_ERROR_WIKI_AUTH_FAILED,
                        "The sign-on's e-mail address names more than one wiki account, so the wiki cannot "
                        "say whose permissions count: it must be confirmed on one account only "
                        "(WIKI_WEB_WIKI_USER_FROM=email)");
                return 1;
        }
        op->result.reader = TAKE_PTR(reader.user);
        return 0;
}

static int wiki_start(
        WikiClient *c,
        WikiKind kind,
        const char *arg,
        const char *email,
        char **titles,
        unsigned limit,
        WikiDone done,
        void *userdata,
        WikiOperation **ret) {
        _cleanup_(wiki_operation_freep) WikiOperation *op = NULL;
        int r;

        assert(c);
        assert(done);
        assert(ret);

        if (c->current)
                return -EBUSY;
        op = calloc(1, sizeof *op);
        if (!op)
                return -ENOMEM;
        op->kind = kind;
        op->limit = limit;
        op->done = done;
        op->userdata = userdata;
        op->result.api_error = _API_ERROR_INVALID;
        op->arg = strdup(arg);
        if (!op->arg)
                return -ENOMEM;
        if (email) {
                op->email = strdup(email);
                if (!op->email)
                        return -ENOMEM;
        }
        if (titles) {
                op->titles = strv_copy(titles);
                if (!op->titles)
                        return -ENOMEM;
        }

        r = upstream_completion_new(
                upstream_get_event(c->upstream), wiki_on_defer, op, "wiki-defer", &op->defer);
        if (r < 0)
                return r;

        op->client = c;
        c->current = op;
        op->state = c->username && !c->logged_in ? WIKI_STATE_LOGIN_TOKEN : WIKI_STATE_REQUEST;
        wiki_advance(op);
        *ret = TAKE_PTR(op);
        return 0;
}

int wiki_client_search(
        WikiClient *c, const char *query, unsigned limit, WikiDone done, void *userdata, WikiOperation **ret) {
        if (!mediawiki_query_is_valid(query) || limit < 1 || limit > MEDIAWIKI_SEARCH_MAX)
                return -EINVAL;
        return wiki_start(c, WIKI_SEARCH, query, NULL, NULL, limit, done, userdata, ret);
}

int wiki_client_read(WikiClient *c, const char *title, WikiDone done, void *userdata, WikiOperation **ret) {
        if (!mediawiki_title_is_valid(title))
                return -EINVAL;
        return wiki_start(c, WIKI_READ, title, NULL, NULL, 0, done, userdata, ret);
}

void wiki_operation_take_result(WikiOperation *op, WikiResult *ret) {
        assert(op);
        assert(ret);

        *ret = op->result;
        op->result = (WikiResult){ .error = ret->error, .api_error = ret->api_error };
}

int wiki_client_readcheck(
        WikiClient *c, const char *identity, char **titles, WikiDone done, void *userdata, WikiOperation **ret) {
        _cleanup_free_ char *name = NULL, *email = NULL;
        size_t n = strv_length(titles);
        int r;

        if (n < 1 || n > MEDIAWIKI_TITLES_MAX)
                return -EINVAL;
        for (size_t i = 0; i < n; i++)
                if (!mediawiki_title_is_valid(titles[i]))
                        return -EINVAL;
        r = wiki_user_resolve(c->user_map, identity, &name, &email);
        if (r < 0)
                return r;
        return wiki_start(c, WIKI_READCHECK, name ? name : "", email, titles, 0, done, userdata, ret);
}

int wiki_client_revisions(WikiClient *c, char **titles, WikiDone done, void *userdata, WikiOperation **ret) {
        size_t n = strv_length(titles);

        if (n < 1 || n > MEDIAWIKI_TITLES_MAX)
                return -EINVAL;
        for (size_t i = 0; i < n; i++)
                if (!mediawiki_title_is_valid(titles[i]))
                        return -EINVAL;
        return wiki_start(c, WIKI_REVISIONS, "", NULL, titles, 0, done, userdata, ret);
}
