/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "shared/log.h"
#include "shared/macro.h"
#include "store/sync-worker.h"

struct SyncWorker {
        sd_event_source *done_source; /* the eventfd, on the loop */
        int efd;
        pthread_t thread;
        bool thread_started;

        pthread_mutex_t lock;
        pthread_cond_t cond;
        /* Under lock: the descriptor to sync (a duplicate, the thread closes
         * it), -1 when none; the result of the last sync; stop. */
        int request_fd;
        int result;
        bool quit;

        /* Loop side only. */
        bool in_flight;
        SyncWorkerDone done;
        void *userdata;
};

int datasync(int fd) {
        for (;;) {
                if (fdatasync(fd) >= 0)
                        return 0;
                if (errno != EINTR)
                        return -errno;
        }
}

static void *sync_worker_thread(void *p) {
        SyncWorker *w = p;

        pthread_mutex_lock(&w->lock);
        for (;;) {
                uint64_t one = 1;
                int fd, r;

                while (w->request_fd < 0 && !w->quit)
                        pthread_cond_wait(&w->cond, &w->lock);
                /* A request still pending is done before stopping. */
                if (w->request_fd < 0)
                        break;
                fd = w->request_fd;
                pthread_mutex_unlock(&w->lock);

                r = datasync(fd);
                (void) close(fd);

                pthread_mutex_lock(&w->lock);
                w->request_fd = -1;
                w->result = r;
                /* Cannot fail short of a counter at 2^64-1: one write per
                 * sync, and the loop reads it back before the next. */
                if (write(w->efd, &one, sizeof one) < 0)
                        w->result = -errno;
        }
        pthread_mutex_unlock(&w->lock);
        return NULL;
}

static int sync_worker_on_done(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        SyncWorker *w = userdata;
        SyncWorkerDone done;
        uint64_t n;
        int r;

        if (read(w->efd, &n, sizeof n) < 0)
                return 0; /* EAGAIN: nothing yet */

        pthread_mutex_lock(&w->lock);
        r = w->result;
        pthread_mutex_unlock(&w->lock);

        if (!w->in_flight)
                return 0;
        w->in_flight = false;
        done = TAKE_PTR(w->done);
        if (done)
                done(w, r, w->userdata);
        return 0;
}

int sync_worker_new(sd_event *event, SyncWorker **ret) {
        _cleanup_(sync_worker_freep) SyncWorker *w = NULL;
        sigset_t all, saved;
        int r;

        assert(event);
        assert(ret);

        w = calloc(1, sizeof *w);
        if (!w)
                return -ENOMEM;
        w->efd = -1;
        w->request_fd = -1;
        pthread_mutex_init(&w->lock, NULL);
        pthread_cond_init(&w->cond, NULL);

        w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (w->efd < 0)
                return -errno;
        r = sd_event_add_io(event, &w->done_source, w->efd, EPOLLIN, sync_worker_on_done, w);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(w->done_source, "sync-worker-done");

        /* The thread takes no signal: they are the loop's (signalfd). */
        (void) sigfillset(&all);
        r = -pthread_sigmask(SIG_SETMASK, &all, &saved);
        if (r < 0)
                return r;
        r = -pthread_create(&w->thread, NULL, sync_worker_thread, w);
        (void) pthread_sigmask(SIG_SETMASK, &saved, NULL);
        if (r < 0)
                return r;
        w->thread_started = true;

        *ret = TAKE_PTR(w);
        return 0;
}

SyncWorker *sync_worker_free(SyncWorker *w) {
        if (!w)
                return NULL;
        if (w->thread_started) {
                pthread_mutex_lock(&w->lock);
                w->quit = true;
                pthread_cond_signal(&w->cond);
                pthread_mutex_unlock(&w->lock);
                (void) pthread_join(w->thread, NULL);
        }
        w->done_source = sd_event_source_disable_unref(w->done_source);
        if (w->efd >= 0)
                (void) close(w->efd);
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->lock);
        free(w);
        return NULL;
}

int sync_worker_start(SyncWorker *w, int fd, SyncWorkerDone done, void *userdata) {
        int copy;

        assert(w);

        if (w->in_flight)
                return -EBUSY;
        if (fd < 0)
                return -EBADF;
        copy = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (copy < 0)
                return -errno;

        pthread_mutex_lock(&w->lock);
        assert(w->request_fd < 0);
        w->request_fd = copy;
        pthread_cond_signal(&w->cond);
        pthread_mutex_unlock(&w->lock);

        w->in_flight = true;
        w->done = done;
        w->userdata = userdata;
        return 0;
}

bool sync_worker_busy(const SyncWorker *w) {
        return w && w->in_flight;
}
