/* SPDX-License-Identifier: MIT */
#pragma once

#include <systemd/sd-event.h>

#include "shared/macro.h"
#include "store/history-worker.h"
#include "store/history.h"

/* The store's condition on the event loop: the retries of what could not
 * be written (history_retry() on the store's worker, with back-off from
 * 1 s to 30 s while a fault lasts or an outcome waits), a look at the free space every 30 s,
 * and, once after start, PRAGMA quick_check on a thread of its own (at nice 10), which
 * start-up does not wait for. changed() is called when the storage state
 * or the number of outcomes waiting changed (health follows). */

typedef struct StorageWatch StorageWatch;

typedef void (*StorageWatchChanged)(StorageWatch *w, void *userdata);

/* history and worker are borrowed and outlive the watch (worker NULL:
 * the retries run on the loop). check: run quick_check. */
int storage_watch_new(
        sd_event *event,
        History *history,
        HistoryWorker *worker,
        uint64_t min_free_bytes,
        bool check,
        StorageWatchChanged changed,
        void *userdata,
        StorageWatch **ret);
StorageWatch *storage_watch_free(StorageWatch *w);
DEFINE_TRIVIAL_CLEANUP_FUNC(StorageWatch *, storage_watch_free);

/* After a write failed or an outcome was kept: retry soon, and tell. */
void storage_watch_poke(StorageWatch *w);

/* history_get_storage() with the watch's threshold. */
void storage_watch_get(StorageWatch *w, HistoryStorage *ret);
