/* SPDX-License-Identifier: MIT */
#pragma once

#include <sqlite3.h>

#include "shared/macro.h"
#include "store/history.h"

/* _cleanup_(sqlite3_finalizep): a statement of the store's own, finalized
 * at the end of its scope. */
DEFINE_TRIVIAL_CLEANUP_FUNC(sqlite3_stmt *, sqlite3_finalize);

/* For the store's own modules (report.c): the connection of h, borrowed,
 * valid until history_free(). Statements prepared on it are the caller's
 * to finalize. */
sqlite3 *history_database(History *h);

/* The wording key (store/wording.h) of the record id's question: 0 and a
 * new string in *ret_key (NULL when there is no such record), -ENOMEM,
 * -EIO. */
int history_question_of(History *h, const char *id, char **ret_key);
