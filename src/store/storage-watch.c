/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include "shared/log.h"
#include "shared/macro.h"
#include "store/storage-watch.h"

/* The quick_check thread's nice value (the loop's is the service's). */
#define CHECK_NICE 10

/* The back-off of the retries: from the first to the last, doubling. */
#define RETRY_FIRST_USEC (1 * USEC_PER_SEC)
#define RETRY_MAX_USEC (30 * USEC_PER_SEC)
/* How often the free space is looked at while all is well. */
#define POLL_USEC (30 * USEC_PER_SEC)

struct StorageWatch {
        sd_event *event;
        History *history;      /* borrowed */
        HistoryWorker *worker; /* borrowed, NULL: retries on the loop */
        HistoryJob *retry;     /* the retry on the worker, in flight */
        uint64_t min_free_bytes;
        StorageWatchChanged changed;
        void *userdata;

        sd_event_source *timer;
        usec_t backoff;
        HistoryStorageState last_state;
        size_t last_pending;

        /* The integrity check's thread: it writes its result under lock,
         * then one event on efd. */
        pthread_t thread;
        bool thread_started;
        int efd;
        sd_event_source *check_source;
        char *check_path;
        pthread_mutex_t lock;
        int check_error;
        char *check_problem;
        HistoryQuickCheck *check; /* stopped by the free: the check ends at once */
};

static void storage_watch_arm(StorageWatch *w, usec_t delay);

/* Tell the owner when what health shows of the store changed. */
static void storage_watch_maybe_changed(StorageWatch *w) {
        HistoryStorage st;

        history_get_storage(w->history, w->min_free_bytes, &st);
        if (st.state == w->last_state && st.n_pending == w->last_pending)
                return;
        w->last_state = st.state;
        w->last_pending = st.n_pending;
        if (w->changed)
                w->changed(w, w->userdata);
}

/* After a retry (or none): the back-off doubled while it is needed, the
 * owner told, the timer armed. */
static void storage_watch_after_retry(StorageWatch *w, bool tried) {
        if (tried && history_needs_retry(w->history))
                w->backoff = MIN(w->backoff * 2, RETRY_MAX_USEC);
        storage_watch_maybe_changed(w);
        if (!history_needs_retry(w->history))
                w->backoff = RETRY_FIRST_USEC;
        storage_watch_arm(w, history_needs_retry(w->history) ? w->backoff : POLL_USEC);
}

/* On the worker's thread. */
static int storage_watch_retry_run(History *h, void *data) {
        return history_retry(h);
}

static void storage_watch_on_retried(HistoryJob *j, int error, void *data, void *userdata) {
        StorageWatch *w = userdata;

        w->retry = NULL;
        storage_watch_after_retry(w, true);
}

static int storage_watch_on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        StorageWatch *w = userdata;

        if (w->retry)
                return 0; /* its end arms the timer */
        if (!history_needs_retry(w->history)) {
                storage_watch_after_retry(w, false);
                return 0;
        }
        /* The outcomes land on the worker's connection: a sync of the
         * log for each, which the loop does not wait for. */
        if (w->worker &&
            history_worker_submit(
                    w->worker, storage_watch_retry_run, NULL, NULL, storage_watch_on_retried, w, &w->retry) >=
                    0)
                return 0;
        (void) history_retry(w->history);
        storage_watch_after_retry(w, true);
        return 0;
}

static void storage_watch_arm(StorageWatch *w, usec_t delay) {
        int r;

        r = sd_event_source_set_time_relative(w->timer, delay);
        if (r >= 0)
                r = sd_event_source_set_enabled(w->timer, SD_EVENT_ONESHOT);
        if (r < 0)
                log_warning_errno(r, "History store: the retry timer could not be armed");
}

void storage_watch_poke(StorageWatch *w) {
        if (!w)
                return;
        storage_watch_maybe_changed(w);
        if (history_needs_retry(w->history) && !w->retry)
                storage_watch_arm(w, w->backoff);
}

static void *storage_watch_thread(void *p) {
        StorageWatch *w = p;
        char *problem = NULL;
        uint64_t one = 1;
        int r;

        /* Below the loop, as the store's worker: the check reads the whole
         * file, and on a machine with few CPUs the loop's requests win the
         * CPU from it (Linux: the calling thread only). */
        (void) setpriority(PRIO_PROCESS, 0, CHECK_NICE);
        r = history_quick_check_path(w->check_path, w->check, &problem);
        pthread_mutex_lock(&w->lock);
        w->check_error = r;
        w->check_problem = problem;
        pthread_mutex_unlock(&w->lock);
        (void) write(w->efd, &one, sizeof one);
        return NULL;
}

static int storage_watch_on_checked(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        StorageWatch *w = userdata;
        char *problem;
        uint64_t n;
        int r;

        if (read(w->efd, &n, sizeof n) < 0)
                return 0;
        (void) pthread_join(w->thread, NULL);
        w->thread_started = false;
        w->check_source = sd_event_source_disable_unref(w->check_source);

        pthread_mutex_lock(&w->lock);
        r = w->check_error;
        problem = TAKE_PTR(w->check_problem);
        pthread_mutex_unlock(&w->lock);

        if (r == -ECANCELED)
                log_debug("History store: PRAGMA quick_check of %s stopped.", w->check_path);
        else if (r < 0)
                log_warning_errno(r, "History store: PRAGMA quick_check of %s could not run", w->check_path);
        else if (problem)
                history_set_damaged(w->history, problem);
        else
                log_debug("History store: PRAGMA quick_check of %s: ok.", w->check_path);
        free(problem);
        storage_watch_maybe_changed(w);
        return 0;
}

/* PRAGMA quick_check on a thread of its own: it reads the whole file,
 * which start-up does not wait for. */
static int storage_watch_start_check(StorageWatch *w) {
        sigset_t all, saved;
        int r;

        w->check_path = strdup(history_path(w->history));
        if (!w->check_path)
                return -ENOMEM;
        r = history_quick_check_new(&w->check);
        if (r < 0)
                return r;
        w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (w->efd < 0)
                return -errno;
        r = sd_event_add_io(w->event, &w->check_source, w->efd, EPOLLIN, storage_watch_on_checked, w);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(w->check_source, "history-quick-check");

        (void) sigfillset(&all);
        r = -pthread_sigmask(SIG_SETMASK, &all, &saved);
        if (r < 0)
                return r;
        r = -pthread_create(&w->thread, NULL, storage_watch_thread, w);
        (void) pthread_sigmask(SIG_SETMASK, &saved, NULL);
        if (r < 0)
                return r;
        w->thread_started = true;
        return 0;
}

int storage_watch_new(
        sd_event *event,
        History *history,
        HistoryWorker *worker,
        uint64_t min_free_bytes,
        bool check,
        StorageWatchChanged changed,
        void *userdata,
        StorageWatch **ret) {
        _cleanup_(storage_watch_freep) StorageWatch *w = NULL;
        int r;

        assert(event);
        assert(history);
        assert(ret);

        w = calloc(1, sizeof *w);
        if (!w)
                return -ENOMEM;
        w->event = event;
        w->history = history;
        w->worker = worker;
        w->min_free_bytes = min_free_bytes;
        w->changed = changed;
        w->userdata = userdata;
        w->backoff = RETRY_FIRST_USEC;
        w->efd = -1;
        pthread_mutex_init(&w->lock, NULL);

        r = sd_event_add_time_relative(
                event, &w->timer, CLOCK_MONOTONIC, POLL_USEC, USEC_PER_SEC / 10, storage_watch_on_timer, w);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(w->timer, "history-retry");
        if (check) {
                r = storage_watch_start_check(w);
                if (r < 0)
                        log_warning_errno(r, "History store: PRAGMA quick_check could not be started");
        }
        *ret = TAKE_PTR(w);
        return 0;
}

StorageWatch *storage_watch_free(StorageWatch *w) {
        if (!w)
                return NULL;
        /* The check reads the whole file (minutes at 10^6 records): told
         * to stop, it ends within SQLite's next 10,000 steps. */
        history_quick_check_stop(w->check);
        if (w->thread_started)
                (void) pthread_join(w->thread, NULL);
        w->check = history_quick_check_free(w->check);
        w->retry = history_job_cancel(w->retry);
        w->timer = sd_event_source_disable_unref(w->timer);
        w->check_source = sd_event_source_disable_unref(w->check_source);
        if (w->efd >= 0)
                (void) close(w->efd);
        free(w->check_problem);
        free(w->check_path);
        pthread_mutex_destroy(&w->lock);
        free(w);
        return NULL;
}

void storage_watch_get(StorageWatch *w, HistoryStorage *ret) {
        assert(w);
        history_get_storage(w->history, w->min_free_bytes, ret);
}
