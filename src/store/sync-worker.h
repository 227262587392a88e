/* SPDX-License-Identifier: MIT */
#pragma once

#include <systemd/sd-event.h>

#include "shared/macro.h"

/* fdatasync() off the event loop: one worker thread that syncs a file
 * while the loop goes on serving requests, and reports back on the loop
 * (an eventfd). The history's durable commit of a completed query goes
 * through it: a sync of the write-ahead log takes milliseconds on a disk,
 * during which a status request would otherwise wait (bench-pipeline).
 * systemd's journal-file offline thread is the precedent.
 *
 * One sync at a time, as a job of the store's thread mechanism
 * (store/history-worker.h) on a worker of its own, without a connection
 * and at the loop's nice value, so that a sync never waits behind the
 * store worker's batches. The thread only ever calls fdatasync() and
 * close() on a duplicate of the descriptor it is given, it touches
 * nothing else. The thread blocks every signal (the loop handles them). */

typedef struct SyncWorker SyncWorker;

/* fdatasync(fd), again when interrupted: 0 or a negative errno. */
int datasync(int fd);

/* w: the worker, which is free for the next sync from the callback on.
 * error: 0, or the negative errno of fdatasync(). */
typedef void (*SyncWorkerDone)(SyncWorker *w, int error, void *userdata);

/* Start the thread. Returns 0, or a negative errno (no eventfd, no
 * thread). */
int sync_worker_new(sd_event *event, SyncWorker **ret);

/* Stop the thread. A sync in progress is completed first (so what was
 * committed is durable when this returns), but its callback is not
 * called. */
SyncWorker *sync_worker_free(SyncWorker *w);
DEFINE_TRIVIAL_CLEANUP_FUNC(SyncWorker *, sync_worker_free);

/* fdatasync(fd) on the thread, then done(w, error, userdata) from the
 * loop, in a later iteration. fd stays the caller's (the worker syncs a
 * duplicate of it). Returns 0, -EBUSY while a sync is in flight, -EBADF,
 * or another negative errno (nothing started, callback not called). */
int sync_worker_start(SyncWorker *w, int fd, SyncWorkerDone done, void *userdata);

/* Whether a sync is in flight (its callback is still to come). */
bool sync_worker_busy(const SyncWorker *w);
