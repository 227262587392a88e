/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "shared/ids.h"
#include "shared/macro.h"
#include "shared/time-util.h"
#include "store/history.h"

/* Personal access tokens in the history's database (API.md "Access
 * tokens"; the table of schema step 8). A token is kept as the SHA-256 of
 * its secret, never the secret, with the key of the person it acts for
 * (user_key: the SessionKey their records are kept under) and their
 * name sealed under the token (user_sealed, manager-tokens.c): the
 * store neither makes nor reads it, and without the token it is
 * HISTORY_TOKEN_SEALED_USER_SIZE bytes that say nothing, not even the
 * name's length. Times are CLOCK_REALTIME microseconds. Calls are
 * synchronous, from the event loop, as the rest of the store's. */

#define HISTORY_TOKEN_DIGEST_SIZE 32
/* "tk_", 32 hex digits and the NUL. */
#define HISTORY_TOKEN_ID_MAX (3 + 32 + 1)
/* A sealed name: as long as the longest name (USER_NAME_MAX_BYTES). */
#define HISTORY_TOKEN_SEALED_USER_SIZE 256
/* Tokens one person may hold at once. */
#define HISTORY_TOKENS_MAX 50

typedef struct HistoryToken {
        char id[HISTORY_TOKEN_ID_MAX];
        char *name; /* owned */
        usec_t created_at;
        usec_t expires_at;
        usec_t last_used_at; /* USEC_INFINITY: never used */
} HistoryToken;

/* Free n tokens of a list and the list. */
void history_tokens_free(HistoryToken *tokens, size_t n);

/* Add a token (durable when it returns 0). -E2BIG: the person holds
 * HISTORY_TOKENS_MAX already; -EIO. All arguments are copied. */
int history_token_add(
        History *h,
        const char *id,
        const SessionKey *user_key,
        const uint8_t sealed_user[static HISTORY_TOKEN_SEALED_USER_SIZE],
        const char *name,
        const uint8_t digest[static HISTORY_TOKEN_DIGEST_SIZE],
        usec_t created_at,
        usec_t expires_at);

/* The person's tokens, oldest first, in *ret (the caller frees with
 * history_tokens_free()) and their number in *ret_n. No secret and no
 * digest is read. 0, -ENOMEM, -EIO. */
int history_tokens_list(History *h, const SessionKey *user_key, HistoryToken **ret, size_t *ret_n);

/* Revoke (delete) the person's token id: 0; -ENOENT when it is not
 * theirs or gone; -EIO. Durable when it returns. */
int history_token_revoke(History *h, const SessionKey *user_key, const char *id);

/* Delete every token of the person (an admin's revoke-tokens, and the
 * erasure of a person): the number deleted (>= 0), or -EIO. Durable when
 * it returns. */
int history_tokens_delete_user(History *h, const SessionKey *user_key);

/* The token whose secret has this digest, valid at now: 0 with its id
 * in ret_id, its person's key in *ret_user_key and their sealed name in
 * ret_sealed_user; -ENOENT (no such token: wrong or revoked),
 * -EKEYEXPIRED (expired), -EIO. The digest is compared in constant time. */
int history_token_find(
        History *h,
        const uint8_t digest[static HISTORY_TOKEN_DIGEST_SIZE],
        usec_t now,
        char ret_id[static HISTORY_TOKEN_ID_MAX],
        SessionKey *ret_user_key,
        uint8_t ret_sealed_user[static HISTORY_TOKEN_SEALED_USER_SIZE]);

/* Note that token id was used at at: written when the last use noted is
 * older than HISTORY_TOKEN_TOUCH_USEC (not synced: a last use lost to a
 * power cut costs nothing). 0 or -EIO. */
#define HISTORY_TOKEN_TOUCH_USEC (60 * USEC_PER_SEC)
int history_token_touch(History *h, const char *id, usec_t at);
