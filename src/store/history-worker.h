/* SPDX-License-Identifier: MIT */
#pragma once

#include <systemd/sd-event.h>

#include "shared/macro.h"
#include "store/history.h"

/* The store's worker: one thread with a connection of its own to the
 * history (history_open_worker()) that runs jobs one after the other, in
 * the order they were submitted, and hands each result back to the event
 * loop (an eventfd). The store's one thread mechanism: SyncWorker is a
 * second worker of this kind, without a connection, whose jobs are the
 * fdatasync() of a query's record (history_worker_new_unconnected()). What may
 * take longer than a request should wait runs here: a person's delete
 * and its checkpoint, the retention's and a person's erasure's batches, feedback and share links
 * with their sync, the unanswered report, the retries of the outcomes
 * waiting. The loop's own connection keeps a query's two short writes and
 * the reads of a record or a page.
 *
 * Both connections write the one file: SQLite lets one writer at a time
 * into the write-ahead log, readers never wait. A job's transaction is
 * short (a batch), so the loop's writes, which wait for it (busy_timeout),
 * wait briefly; the worker's connection waits up to 30 s for the loop's.
 *
 * A job is a function run on the thread with the worker's connection and
 * the job's data, nothing else: run(h, data) touches h and data only (no
 * event loop, no Manager, no log of secrets). Its return (0 or a negative
 * errno) goes to done(job, error, data, userdata), called on the loop in a
 * later iteration; data is then the loop's again, to read the result
 * from. The thread blocks every signal. */

typedef struct HistoryWorker HistoryWorker;
typedef struct HistoryJob HistoryJob;

/* On the worker's thread. h: the worker's connection. */
typedef int (*HistoryJobRun)(History *h, void *data);
/* On the loop: error is run()'s return. The job is freed by the worker
 * after this returns (its pointer is not to be kept), then data by the
 * free_data given to history_worker_submit(). */
typedef void (*HistoryJobDone)(HistoryJob *j, int error, void *data, void *userdata);

/* Start the thread on a connection of its own to main's store (borrowed;
 * it outlives the worker). Returns 0, or a negative errno (no connection,
 * no eventfd, no thread). */
int history_worker_new(sd_event *event, History *main, HistoryWorker **ret);

/* A worker without a connection (run() is given h = NULL) for jobs that
 * need none, kept apart from the store's worker so that they never wait
 * behind its batches: SyncWorker's fdatasync(). Its thread keeps the
 * loop's nice value (a sync holds a query's slot until it is done), and
 * at stop the jobs still queued run before the thread ends, done not
 * called (what was committed is durable once the worker is freed).
 * description names the event source of the hand-back. Returns 0, or a
 * negative errno (no eventfd, no thread). */
int history_worker_new_unconnected(sd_event *event, const char *description, HistoryWorker **ret);

/* Stop the thread: the job running is completed (a batch commits or
 * rolls back as a whole), the jobs queued are dropped (an unconnected
 * worker's run first); no callback is called, each data freed. */
HistoryWorker *history_worker_free(HistoryWorker *w);
DEFINE_TRIVIAL_CLEANUP_FUNC(HistoryWorker *, history_worker_free);

/* Queue run(h, data) on the thread, then done(job, error, data, userdata)
 * on the loop. data is taken over: freed with free_data (NULL: not freed)
 * when the job ends, also when it is cancelled or dropped, and on error.
 * *ret (may be NULL) is the job, to cancel it. Returns 0, -ENOMEM, or
 * -ESHUTDOWN once the worker stops. */
int history_worker_submit(
        HistoryWorker *w,
        HistoryJobRun run,
        void *data,
        void (*free_data)(void *data),
        HistoryJobDone done,
        void *userdata,
        HistoryJob **ret);

/* Cancel the job: its done is not called. A job not yet started does
 * not run; one running completes on the thread (its data freed then).
 * Safe from inside its own done. Returns NULL. */
HistoryJob *history_job_cancel(HistoryJob *j);

/* The jobs queued or running, for the tests and the metrics. */
size_t history_worker_queued(HistoryWorker *w);
