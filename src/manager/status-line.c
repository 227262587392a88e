/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <systemd/sd-daemon.h>

#include "manager/status-line.h"
#include "shared/log.h"
#include "shared/strbuf.h"

struct StatusLine {
        Manager *manager; /* borrowed */
};

static void status_line_put_query(ManagerQuery *q, void *userdata) {
        StrBuf *b = userdata;

        if (b->len > 0 && b->data[b->len - 1] != ' ')
                strbuf_put_literal(b, ", ");
        strbuf_puts(b, manager_query_id(q));
}

char *status_line_format(Manager *m) {
        const Admission *a = manager_get_admission(m);
        usec_t avg = manager_average_usec(m);
        StrBuf b = { .failed = false };
        ManagerHealth h;
        char buf[64];

        assert(m);

        manager_get_health(m, &h);
        if (manager_is_stopping(m))
                strbuf_put_literal(&b, "Stopping; ");
        strbuf_puts(&b, admission_state_to_string(h.state));
        snprintf(buf, sizeof buf, "; waiting: %" PRIu64 "; running: ", admission_waiting_count(a));
        strbuf_puts(&b, buf);
        if (manager_n_queries(m) == 0)
                strbuf_put_literal(&b, "none");
        else
                manager_foreach_query(m, status_line_put_query, &b);
        if (avg > 0)
                snprintf(buf, sizeof buf, "; average query: %.1fs", (double) avg / USEC_PER_SEC);
        else
                snprintf(buf, sizeof buf, "; average query: n/a");
        strbuf_puts(&b, buf);
        if (h.degraded)
                strbuf_put_literal(&b, "; health: degraded");
        /* The store's state and cause (wikiwebd(8), "When the disk fills"). */
        if (h.storage != HISTORY_STORAGE_OK) {
                strbuf_put_literal(&b, "; storage: ");
                strbuf_puts(&b, history_storage_state_to_string(h.storage));
                if (h.storage_cause) {
                        strbuf_put_literal(&b, " (");
                        strbuf_puts(&b, h.storage_cause);
                        strbuf_put_literal(&b, ")");
                }
        }
        return strbuf_steal(&b);
}

static void status_line_send(StatusLine *s) {
        _cleanup_free_ char *line = status_line_format(s->manager);

        if (!line) {
                log_oom();
                return;
        }
        (void) sd_notifyf(false, "STATUS=%s", line);
}

static void status_line_on_manager_event(Manager *m, const ManagerEvent *ev, void *userdata) {
        if (IN_SET(ev->type, MANAGER_QUERY_EVENT, MANAGER_QUERY_PHASE))
                return;
        status_line_send(userdata);
}

int status_line_new(Manager *m, StatusLine **ret) {
        _cleanup_(status_line_freep) StatusLine *s = NULL;
        int r;

        assert(m);
        assert(ret);

        s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->manager = m;
        r = manager_subscribe(m, status_line_on_manager_event, s);
        if (r < 0)
                return r;
        status_line_send(s);
        *ret = TAKE_PTR(s);
        return 0;
}

StatusLine *status_line_free(StatusLine *s) {
        free(s);
        return NULL;
}
