/* SPDX-License-Identifier: MIT */
/* The "wiki" command of wikiweb-upstream-tool: one WikiClient (one query's
 * wiki session) performing commands one at a time, each printed as a JSON
 * line. Commands come from the command line ("search:QUERY",
 * "search:QUERY:LIMIT" is not parsed: LIMIT comes from --limit,
 * "read:TITLE"), or, with "-", one per line from stdin ("search QUERY",
 * "read TITLE"), read through an IO source of the same event loop, so a
 * test can change the wiki between two commands of one session. */

#include <json-c/json.h>
#include <systemd/sd-event.h>

#include "query/wiki-client.h"
#include "shared/macro.h"
#include "tools.h"

typedef struct WikiTool {
        sd_event *event;
        WikiClient *client;
        WikiOperation *op;
        char **argv; /* remaining commands from the command line */
        int argc;
        bool from_stdin;
        char line[4096];
        size_t line_len;
        sd_event_source *stdin_source;
        bool eof;
        usec_t started;
        unsigned failures;
} WikiTool;

static void wiki_tool_next(WikiTool *t);

static void wiki_tool_on_done(WikiOperation *op, int error, const WikiResult *r, void *userdata) {
        WikiTool *t = userdata;
        json_object *o = json_object_new_object();

        json_object_object_add(o, "ok", json_object_new_boolean(error >= 0));
        json_object_object_add(
                o, "error", error >= 0 ? NULL : json_object_new_string(api_error_to_string(r->api_error)));
        json_object_object_add(o, "message", r->message ? json_object_new_string(r->message) : NULL);
        json_object_object_add(o, "logins", json_object_new_int((int) wiki_client_logins(t->client)));
        json_object_object_add(
                o, "elapsed_ms", json_object_new_double((double) (now(CLOCK_MONOTONIC) - t->started) / 1000.0));
        if (error >= 0 && r->hits) {
                json_object *a = json_object_new_array();
                for (size_t i = 0; i < r->n_hits; i++) {
                        json_object *h = json_object_new_object();
                        json_object_object_add(h, "title", json_object_new_string(r->hits[i].title));
                        json_object_object_add(h, "snippet", json_object_new_string(r->hits[i].snippet));
                        json_object_array_add(a, h);
                }
                json_object_object_add(o, "results", a);
        } else if (error >= 0 && (r->page.title || r->page.missing)) {
                json_object_object_add(o, "missing", json_object_new_boolean(r->page.missing));
                json_object_object_add(
                        o, "title", r->page.title ? json_object_new_string(r->page.title) : NULL);
                json_object_object_add(
                        o,
                        "redirected_from",
                        r->page.redirected_from ? json_object_new_string(r->page.redirected_from) : NULL);
                json_object_object_add(o, "revision_id", json_object_new_int64((int64_t) r->page.revision_id));
                json_object_object_add(o, "url", r->page.url ? json_object_new_string(r->page.url) : NULL);
                json_object_object_add(
                        o,
                        "content",
                        r->page.content ?
                                json_object_new_string_len(r->page.content, (int) r->page.content_size) :
                                NULL);
        } else if (error >= 0)
                json_object_object_add(o, "results", json_object_new_array());
        tool_print_json(o);
        json_object_put(o);
        if (error < 0)
                t->failures++;
        t->op = wiki_operation_free(t->op);
        wiki_tool_next(t);
}

static int wiki_tool_run(WikiTool *t, const char *cmd) {
        const char *arg;
        int r;

        t->started = now(CLOCK_MONOTONIC);
        if ((arg = tool_startswith(cmd, "search:")) || (arg = tool_startswith(cmd, "search ")))
                r = wiki_client_search(t->client, arg, tool_limit(), wiki_tool_on_done, t, &t->op);
        else if ((arg = tool_startswith(cmd, "read:")) || (arg = tool_startswith(cmd, "read ")))
                r = wiki_client_read(t->client, arg, wiki_tool_on_done, t, &t->op);
        else
                r = -EINVAL;
        if (r < 0) {
                json_object *o = json_object_new_object();
                json_object_object_add(o, "ok", json_object_new_boolean(false));
                json_object_object_add(o, "start_error", json_object_new_string(strerror(-r)));
                tool_print_json(o);
                json_object_put(o);
                t->failures++;
        }
        return r;
}

/* Run the next command, or end the loop when there is none. */
static void wiki_tool_next(WikiTool *t) {
        for (;;) {
                if (t->op)
                        return;
                if (!t->from_stdin) {
                        if (t->argc == 0) {
                                (void) sd_event_exit(t->event, t->failures ? 3 : 0);
                                return;
                        }
                        t->argc--;
                        (void) wiki_tool_run(t, *t->argv++);
                        continue;
                }
                /* One complete line from the buffer, if there is one. */
                char *nl = memchr(t->line, '\n', t->line_len);
                if (!nl) {
                        if (t->eof)
                                (void) sd_event_exit(t->event, t->failures ? 3 : 0);
                        return;
                }
                *nl = 0;
                {
                        _cleanup_free_ char *cmd = strdup(t->line);
                        size_t used = (size_t) (nl + 1 - t->line);
                        memmove(t->line, nl + 1, t->line_len - used);
                        t->line_len -= used;
                        if (cmd && *cmd)
                                (void) wiki_tool_run(t, cmd);
                }
        }
}

static int wiki_tool_on_stdin(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        WikiTool *t = userdata;
        ssize_t n;

        if (t->line_len >= sizeof t->line - 1) {
                t->eof = true; /* an overlong line: stop */
                t->stdin_source = sd_event_source_disable_unref(t->stdin_source);
                wiki_tool_next(t);
                return 0;
        }
        n = read(fd, t->line + t->line_len, sizeof t->line - 1 - t->line_len);
        if (n <= 0) {
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        return 0;
                t->eof = true;
                t->stdin_source = sd_event_source_disable_unref(t->stdin_source);
        } else
                t->line_len += (size_t) n;
        wiki_tool_next(t);
        return 0;
}

int wiki_main(Upstream *u, sd_event *e, int argc, char **argv, const WikiClientSettings *settings) {
        WikiTool t = { .event = e, .argv = argv, .argc = argc };
        int r;

        r = wiki_client_new(u, settings, &t.client);
        if (r < 0)
                return r;
        if (argc == 1 && streq(argv[0], "-")) {
                t.from_stdin = true;
                r = sd_event_add_io(e, &t.stdin_source, STDIN_FILENO, EPOLLIN, wiki_tool_on_stdin, &t);
                if (r < 0)
                        goto out;
                (void) sd_event_source_set_description(t.stdin_source, "wiki-tool-stdin");
        }
        wiki_tool_next(&t);
        r = sd_event_loop(e);
out:
        wiki_operation_free(t.op);
        sd_event_source_disable_unref(t.stdin_source);
        wiki_client_free(t.client);
        return r;
}
