/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <signal.h>
#include <sys/wait.h>

#include "sandbox/reaper.h"
#include "shared/log.h"
#include "shared/macro.h"

struct ReaperWatch {
        Reaper *reaper;
        pid_t pid;
        ReaperHandler handler;
        void *userdata;
        ReaperWatch *next;
};

struct Reaper {
        sd_event_source *signal;
        ReaperWatch *watches;
};

void reaper_reap(Reaper *r) {
        assert(r);

        for (;;) {
                ReaperWatch **p, *w = NULL;
                int status;
                pid_t pid = waitpid(-1, &status, WNOHANG);

                if (pid <= 0)
                        return; /* 0: none exited; ECHILD: no children */
                for (p = &r->watches; *p; p = &(*p)->next)
                        if ((*p)->pid == pid) {
                                w = *p;
                                *p = w->next;
                                break;
                        }
                if (!w) {
                        log_debug("Reaped process %d (an orphan or an unwatched helper).", (int) pid);
                        continue;
                }
                w->handler(pid, status, w->userdata);
                free(w);
        }
}

static int reaper_on_sigchld(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        reaper_reap(userdata);
        return 0;
}

int reaper_new(sd_event *event, Reaper **ret) {
        _cleanup_(reaper_freep) Reaper *r = calloc(1, sizeof *r);
        sigset_t mask;
        int q;

        assert(event);
        assert(ret);

        if (!r)
                return -ENOMEM;
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return negative_errno();
        q = sd_event_add_signal(event, &r->signal, SIGCHLD, reaper_on_sigchld, r);
        if (q < 0)
                return q;
        (void) sd_event_source_set_description(r->signal, "reaper-sigchld");
        *ret = TAKE_PTR(r);
        return 0;
}

Reaper *reaper_free(Reaper *r) {
        if (!r)
                return NULL;
        r->signal = sd_event_source_disable_unref(r->signal);
        while (r->watches) {
                ReaperWatch *w = r->watches;
                r->watches = w->next;
                free(w);
        }
        free(r);
        return NULL;
}

int reaper_watch(Reaper *r, pid_t pid, ReaperHandler handler, void *userdata, ReaperWatch **ret) {
        ReaperWatch *w = calloc(1, sizeof *w);

        assert(r);
        assert(handler);

        if (!w)
                return -ENOMEM;
        *w = (ReaperWatch){
                .reaper = r, .pid = pid, .handler = handler, .userdata = userdata, .next = r->watches
        };
        r->watches = w;
        if (ret)
                *ret = w;
        return 0;
}

void reaper_unwatch(ReaperWatch *w) {
        if (!w)
                return;
        for (ReaperWatch **p = &w->reaper->watches; *p; p = &(*p)->next)
                if (*p == w) {
                        *p = w->next;
                        free(w);
                        return;
                }
}
