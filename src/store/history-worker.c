/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include "shared/log.h"
#include "shared/macro.h"
#include "store/history-worker.h"

/* The store's worker thread's nice value (the loop's is the service's). */
#define WORKER_NICE 10

typedef enum HistoryJobState {
        HISTORY_JOB_QUEUED,      /* in the queue, not started */
        HISTORY_JOB_RUNNING,     /* on the thread */
        HISTORY_JOB_FINISHED,    /* in the finished list, done not yet called */
        HISTORY_JOB_DISPATCHING, /* its done is being called */
} HistoryJobState;

struct HistoryJob {
        HistoryWorker *worker;
        HistoryJobState state; /* under the worker's lock */
        bool cancelled;        /* loop side */
        HistoryJobRun run;
        void *data;
        void (*free_data)(void *data);
        HistoryJobDone done;
        void *userdata;
        int result;
        HistoryJob *jobs_next, *jobs_prev; /* in the queue or the finished list */
};

struct HistoryWorker {
        History *history; /* the worker's own connection, used by the thread only; or NULL */
        sd_event_source *done_source;
        int efd;
        pthread_t thread;
        bool thread_started;
        int nice;          /* the thread's nice value, set by the thread; 0: the loop's */
        bool finish_queue; /* at stop, the jobs queued run instead of being dropped */

        pthread_mutex_t lock;
        pthread_cond_t cond;
        /* Under lock: the queue (oldest first), the finished jobs, quit. */
        HistoryJob *queue, *queue_tail;
        HistoryJob *finished, *finished_tail;
        HistoryJob *running;
        size_t n_jobs; /* queued, running or finished */
        bool quit;
};

static void history_job_destroy(HistoryJob *j) {
        if (j->free_data)
                j->free_data(j->data);
        free(j);
}

/* Append j to a list given by its head and tail. */
static void job_append(HistoryJob **head, HistoryJob **tail, HistoryJob *j) {
        j->jobs_next = NULL;
        j->jobs_prev = *tail;
        if (*tail)
                (*tail)->jobs_next = j;
        else
                *head = j;
        *tail = j;
}

static void job_unlink(HistoryJob **head, HistoryJob **tail, HistoryJob *j) {
        if (j->jobs_prev)
                j->jobs_prev->jobs_next = j->jobs_next;
        else
                *head = j->jobs_next;
        if (j->jobs_next)
                j->jobs_next->jobs_prev = j->jobs_prev;
        else
                *tail = j->jobs_prev;
        j->jobs_next = j->jobs_prev = NULL;
}

static void *history_worker_thread(void *p) {
        HistoryWorker *w = p;

        /* The store's worker is below the loop: on a machine with few
         * CPUs the loop's requests win the CPU from a batch (Linux: the
         * calling thread only). */
        if (w->nice != 0)
                (void) setpriority(PRIO_PROCESS, 0, w->nice);

        pthread_mutex_lock(&w->lock);
        for (;;) {
                HistoryJob *j;
                uint64_t one = 1;
                int r;

                while (!w->queue && !w->quit)
                        pthread_cond_wait(&w->cond, &w->lock);
                if (w->quit && !(w->finish_queue && w->queue))
                        break;
                j = w->queue;
                job_unlink(&w->queue, &w->queue_tail, j);
                j->state = HISTORY_JOB_RUNNING;
                w->running = j;
                pthread_mutex_unlock(&w->lock);

                r = j->run(w->history, j->data);

                pthread_mutex_lock(&w->lock);
                w->running = NULL;
                j->result = r;
                j->state = HISTORY_JOB_FINISHED;
                job_append(&w->finished, &w->finished_tail, j);
                /* Cannot fail short of a counter at 2^64-1. */
                (void) write(w->efd, &one, sizeof one);
        }
        pthread_mutex_unlock(&w->lock);
        return NULL;
}

/* The finished jobs, each done called once, in the order they ran. */
static int history_worker_on_done(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        HistoryWorker *w = userdata;
        uint64_t n;

        if (read(w->efd, &n, sizeof n) < 0)
                return 0; /* EAGAIN: nothing yet */

        for (;;) {
                HistoryJob *j;

                pthread_mutex_lock(&w->lock);
                j = w->finished;
                if (j) {
                        job_unlink(&w->finished, &w->finished_tail, j);
                        j->state = HISTORY_JOB_DISPATCHING;
                        w->n_jobs--;
                }
                pthread_mutex_unlock(&w->lock);
                if (!j)
                        break;
                if (!j->cancelled && j->done)
                        j->done(j, j->result, j->data, j->userdata);
                history_job_destroy(j);
        }
        return 0;
}

/* The one constructor: main (borrowed) gives the thread a connection of
 * its own, NULL none; description names the eventfd's event source. */
static int worker_new(
        sd_event *event, History *main, const char *description, int nice, bool finish_queue, HistoryWorker **ret) {
        _cleanup_(history_worker_freep) HistoryWorker *w = NULL;
        sigset_t all, saved;
        int r;

        assert(event);
        assert(description);
        assert(ret);

        w = calloc(1, sizeof *w);
        if (!w)
                return -ENOMEM;
        w->efd = -1;
        w->nice = nice;
        w->finish_queue = finish_queue;
        pthread_mutex_init(&w->lock, NULL);
        pthread_cond_init(&w->cond, NULL);

        if (main) {
                r = history_open_worker(main, &w->history);
                if (r < 0)
                        return r;
        }
        w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (w->efd < 0)
                return -errno;
        r = sd_event_add_io(event, &w->done_source, w->efd, EPOLLIN, history_worker_on_done, w);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(w->done_source, description);

        /* The thread takes no signal: they are the loop's (signalfd). */
        (void) sigfillset(&all);
        r = -pthread_sigmask(SIG_SETMASK, &all, &saved);
        if (r < 0)
                return r;
        r = -pthread_create(&w->thread, NULL, history_worker_thread, w);
        (void) pthread_sigmask(SIG_SETMASK, &saved, NULL);
        if (r < 0)
                return r;
        w->thread_started = true;

        *ret = TAKE_PTR(w);
        return 0;
}

int history_worker_new(sd_event *event, History *main, HistoryWorker **ret) {
        assert(main);
        return worker_new(event, main, "history-worker-done", WORKER_NICE, /* finish_queue= */ false, ret);
}

int history_worker_new_unconnected(sd_event *event, const char *description, HistoryWorker **ret) {
        return worker_new(event, NULL, description, /* nice= */ 0, /* finish_queue= */ true, ret);
}

/* Free every job of a list (their done is not called). */
static void job_list_destroy(HistoryJob **head, HistoryJob **tail) {
        HistoryJob *j;

        while ((j = *head)) {
                job_unlink(head, tail, j);
                history_job_destroy(j);
        }
}

HistoryWorker *history_worker_free(HistoryWorker *w) {
        if (!w)
                return NULL;
        if (w->thread_started) {
                pthread_mutex_lock(&w->lock);
                w->quit = true;
                pthread_cond_signal(&w->cond);
                pthread_mutex_unlock(&w->lock);
                (void) pthread_join(w->thread, NULL);
        }
        /* The thread is gone: nothing else touches the lists (the queue
         * is empty here when the jobs queued were to run). */
        job_list_destroy(&w->queue, &w->queue_tail);
        job_list_destroy(&w->finished, &w->finished_tail);
        w->done_source = sd_event_source_disable_unref(w->done_source);
        if (w->efd >= 0)
                (void) close(w->efd);
        w->history = history_free(w->history);
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->lock);
        free(w);
        return NULL;
}

int history_worker_submit(
        HistoryWorker *w,
        HistoryJobRun run,
        void *data,
        void (*free_data)(void *data),
        HistoryJobDone done,
        void *userdata,
        HistoryJob **ret) {
        HistoryJob *j;

        assert(w);
        assert(run);

        j = calloc(1, sizeof *j);
        if (!j) {
                if (free_data)
                        free_data(data);
                return -ENOMEM;
        }
        *j = (HistoryJob){
                .worker = w,
                .run = run,
                .data = data,
                .free_data = free_data,
                .done = done,
                .userdata = userdata,
        };
        pthread_mutex_lock(&w->lock);
        if (w->quit) {
                pthread_mutex_unlock(&w->lock);
                history_job_destroy(j);
                return -ESHUTDOWN;
        }
        job_append(&w->queue, &w->queue_tail, j);
        w->n_jobs++;
        pthread_cond_signal(&w->cond);
        pthread_mutex_unlock(&w->lock);
        if (ret)
                *ret = j;
        return 0;
}

HistoryJob *history_job_cancel(HistoryJob *j) {
        HistoryWorker *w;
        bool destroy = false;

        if (!j)
                return NULL;
        w = j->worker;
        pthread_mutex_lock(&w->lock);
        if (j->state == HISTORY_JOB_QUEUED) {
                job_unlink(&w->queue, &w->queue_tail, j);
                w->n_jobs--;
                destroy = true;
        } else
                j->cancelled = true;
        pthread_mutex_unlock(&w->lock);
        if (destroy)
                history_job_destroy(j);
        return NULL;
}

size_t history_worker_queued(HistoryWorker *w) {
        size_t n;

        assert(w);
        pthread_mutex_lock(&w->lock);
        n = w->n_jobs;
        pthread_mutex_unlock(&w->lock);
        return n;
}
