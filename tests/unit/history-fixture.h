/* SPDX-License-Identifier: MIT */
#pragma once

/* What the store's unit tests share (test-history, test-history-worker,
 * test-export-zip): record ids and session keys, a fresh directory under
 * /tmp with a store open in it, finished records. Compiled into each of
 * them (tests/unit/meson.build). Every check aborts (tests.h). */

#include <stdint.h>

#include "shared/ids.h"
#include "shared/time-util.h"
#include "store/history.h"

/* The session key of 32 bytes n. */
SessionKey key(uint8_t n);

/* The query id of n ("qr_" and 32 hex digits), in one of 8 buffers used
 * in turn: valid until the 8th call after. */
const char *qid(unsigned n);

/* dir/name; the caller frees it. */
char *path_in(const char *dir, const char *name);

/* Remove dir and everything in it, subdirectories included. */
void rm_rf(const char *dir);

/* A fresh directory of its own for one case: /tmp/test-history-NAME-XXXXXX,
 * freed by the caller. Declared _cleanup_(rm_rf_freep), it goes with
 * everything in it. */
char *make_subdir(const char *name);
void rm_rf_freep(char **dir);

/* The store in dir, opened, and its recovery of expected_recovered
 * records that were running; the caller frees it. */
History *open_store(const char *dir, unsigned expected_recovered);

/* A case on a store of its own, open in a fresh directory. Declared
 * _cleanup_(history_fixture_done), the store is closed and the directory
 * removed. */
typedef struct HistoryFixture {
        char *dir;
        History *h;
} HistoryFixture;

HistoryFixture history_fixture_new(const char *name);
void history_fixture_done(HistoryFixture *f);

/* Record n of session k, "A question?" asked at asked_at and answered
 * "An answer." a second later (committed, not synced). follows (NULL:
 * none) is the record it follows up, the first of its conversation. */
void add_record(History *h, unsigned n, const SessionKey *k, usec_t asked_at, const char *follows);
