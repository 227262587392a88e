/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "shared/macro.h"
#include "store/history-worker.h"
#include "store/sync-worker.h"

/* A job of the store's thread mechanism (store/history-worker.h) on a
 * worker of its own, without a connection: its thread runs nothing but
 * these syncs, one at a time. */
struct SyncWorker {
        HistoryWorker *worker;

        /* Loop side only. */
        HistoryJob *job; /* the sync in flight, NULL when none */
        SyncWorkerDone done;
        void *userdata;
};

/* One sync: a duplicate of the caller's descriptor, closed by the thread
 * once synced (or with the job, if it never ran). */
typedef struct SyncJob {
        int fd;
} SyncJob;

int datasync(int fd) {
        for (;;) {
                if (fdatasync(fd) >= 0)
                        return 0;
                if (errno != EINTR)
                        return -errno;
        }
}

static void sync_job_free(void *data) {
        SyncJob *s = data;

        if (s->fd >= 0)
                (void) close(s->fd);
        free(s);
}

/* On the thread: h is NULL (an unconnected worker). */
static int sync_job_run(History *h, void *data) {
        SyncJob *s = data;
        int r;

        r = datasync(s->fd);
        (void) close(s->fd);
        s->fd = -1;
        return r;
}

static void sync_worker_on_job(HistoryJob *j, int error, void *data, void *userdata) {
        SyncWorker *w = userdata;
        SyncWorkerDone done;

        assert(w->job == j);
        w->job = NULL;
        done = TAKE_PTR(w->done);
        if (done)
                done(w, error, w->userdata);
}

int sync_worker_new(sd_event *event, SyncWorker **ret) {
        _cleanup_(sync_worker_freep) SyncWorker *w = NULL;
        int r;

        assert(event);
        assert(ret);

        w = calloc(1, sizeof *w);
        if (!w)
                return -ENOMEM;
        r = history_worker_new_unconnected(event, "sync-worker-done", &w->worker);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(w);
        return 0;
}

SyncWorker *sync_worker_free(SyncWorker *w) {
        if (!w)
                return NULL;
        /* A sync queued or running is completed (joined), not reported. */
        w->worker = history_worker_free(w->worker);
        free(w);
        return NULL;
}

int sync_worker_start(SyncWorker *w, int fd, SyncWorkerDone done, void *userdata) {
        SyncJob *s;
        int r;

        assert(w);

        if (w->job)
                return -EBUSY;
        if (fd < 0)
                return -EBADF;
        s = calloc(1, sizeof *s);
        if (!s)
                return -ENOMEM;
        s->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (s->fd < 0) {
                r = -errno;
                free(s);
                return r;
        }
        /* s is the worker's from here, also on error. */
        r = history_worker_submit(w->worker, sync_job_run, s, sync_job_free, sync_worker_on_job, w, &w->job);
        if (r < 0)
                return r;
        w->done = done;
        w->userdata = userdata;
        return 0;
}

bool sync_worker_busy(const SyncWorker *w) {
        return w && w->job;
}
