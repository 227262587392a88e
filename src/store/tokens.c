/* SPDX-License-Identifier: MIT */
/* Personal access tokens (store/tokens.h), on the history's connection:
 * each statement is prepared at its call, as report.c's are; a token is
 * used at most once a request. */
#include <assert.h>
#include <sqlite3.h>
#include <stdio.h>

#include "shared/log.h"
#include "store/history-internal.h"
#include "store/tokens.h"

static int tokens_error(History *h, const char *what) {
        /* The statements carry only bound parameters: the message names
         * no secret and no person. */
        log_error("History store: cannot %s: %s", what, sqlite3_errmsg(history_database(h)));
        return -EIO;
}

static int tokens_prepare(History *h, const char *sql, sqlite3_stmt **ret) {
        if (sqlite3_prepare_v2(history_database(h), sql, -1, ret, NULL) != SQLITE_OK)
                return tokens_error(h, "prepare a statement of the tokens");
        return 0;
}

static void bind_key(sqlite3_stmt *s, int i, const SessionKey *key) {
        (void) sqlite3_bind_blob(s, i, key->bytes, sizeof(key->bytes), SQLITE_STATIC);
}

void history_tokens_free(HistoryToken *tokens, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(tokens[i].name);
        free(tokens);
}

int history_token_add(
        History *h,
        const char *id,
        const SessionKey *user_key,
        const uint8_t sealed_user[static HISTORY_TOKEN_SEALED_USER_SIZE],
        const char *name,
        const uint8_t digest[static HISTORY_TOKEN_DIGEST_SIZE],
        usec_t created_at,
        usec_t expires_at) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *s = NULL;
        int r;

        assert(h);
        assert(id);
        assert(user_key);
        assert(sealed_user);
        assert(name);
        assert(digest);

        /* One statement, so that the count and the insert cannot be
         * split by another writer: no row when the person holds the
         * most already. */
        r = tokens_prepare(
                h,
                "INSERT INTO tokens (id, user_key, user_sealed, name, token_sha256, created_at, expires_at)"
                " SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7"
                " WHERE (SELECT count(*) FROM tokens WHERE user_key = ?2) < ?8",
                &s);
        if (r < 0)
                return r;
        (void) sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
        bind_key(s, 2, user_key);
        (void) sqlite3_bind_blob(s, 3, sealed_user, HISTORY_TOKEN_SEALED_USER_SIZE, SQLITE_STATIC);
        (void) sqlite3_bind_text(s, 4, name, -1, SQLITE_STATIC);
        (void) sqlite3_bind_blob(s, 5, digest, HISTORY_TOKEN_DIGEST_SIZE, SQLITE_STATIC);
        (void) sqlite3_bind_int64(s, 6, (sqlite3_int64) created_at);
        (void) sqlite3_bind_int64(s, 7, (sqlite3_int64) expires_at);
        (void) sqlite3_bind_int(s, 8, HISTORY_TOKENS_MAX);
        if (sqlite3_step(s) != SQLITE_DONE)
                return tokens_error(h, "add a token");
        if (sqlite3_changes(history_database(h)) == 0)
                return -E2BIG;
        return history_sync(h);
}

int history_tokens_list(History *h, const SessionKey *user_key, HistoryToken **ret, size_t *ret_n) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *s = NULL;
        HistoryToken *list = NULL;
        size_t n = 0;
        int r;

        assert(h);
        assert(user_key);
        assert(ret);
        assert(ret_n);

        r = tokens_prepare(
                h,
                "SELECT id, name, created_at, expires_at, last_used_at FROM tokens"
                " WHERE user_key = ?1 ORDER BY seq LIMIT ?2",
                &s);
        if (r < 0)
                return r;
        bind_key(s, 1, user_key);
        /* Never more than one person may hold, whatever the file says. */
        (void) sqlite3_bind_int(s, 2, HISTORY_TOKENS_MAX);
        list = calloc(HISTORY_TOKENS_MAX, sizeof *list);
        if (!list)
                return -ENOMEM;
        while ((r = sqlite3_step(s)) == SQLITE_ROW) {
                HistoryToken *t = &list[n];
                const char *id = (const char *) sqlite3_column_text(s, 0);
                const char *name = (const char *) sqlite3_column_text(s, 1);

                if (!id || strlen(id) >= HISTORY_TOKEN_ID_MAX)
                        continue;
                snprintf(t->id, sizeof t->id, "%s", id);
                t->name = strdup(name ? name : "");
                if (!t->name) {
                        history_tokens_free(list, n);
                        return -ENOMEM;
                }
                t->created_at = (usec_t) sqlite3_column_int64(s, 2);
                t->expires_at = (usec_t) sqlite3_column_int64(s, 3);
                t->last_used_at = sqlite3_column_type(s, 4) == SQLITE_NULL ?
                        USEC_INFINITY :
                        (usec_t) sqlite3_column_int64(s, 4);
                n++;
        }
        if (r != SQLITE_DONE) {
                history_tokens_free(list, n);
                return tokens_error(h, "list the tokens");
        }
        *ret = list;
        *ret_n = n;
        return 0;
}

int history_token_revoke(History *h, const SessionKey *user_key, const char *id) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *s = NULL;
        int r;

        assert(h);
        assert(user_key);
        assert(id);

        r = tokens_prepare(h, "DELETE FROM tokens WHERE id = ?1 AND user_key = ?2", &s);
        if (r < 0)
                return r;
        (void) sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
        bind_key(s, 2, user_key);
        if (sqlite3_step(s) != SQLITE_DONE)
                return tokens_error(h, "revoke a token");
        if (sqlite3_changes(history_database(h)) == 0)
                return -ENOENT;
        return history_sync(h);
}

int history_tokens_delete_user(History *h, const SessionKey *user_key) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *s = NULL;
        int r, n;

        assert(h);
        assert(user_key);

        r = tokens_prepare(h, "DELETE FROM tokens WHERE user_key = ?1", &s);
        if (r < 0)
                return r;
        bind_key(s, 1, user_key);
        if (sqlite3_step(s) != SQLITE_DONE)
                return tokens_error(h, "delete a person's tokens");
        n = sqlite3_changes(history_database(h));
        if (n > 0) {
                r = history_sync(h);
                if (r < 0)
                        return r;
        }
        return n;
}

/* Whether a and b are equal, in a time that does not depend on where they
 * differ. */
static bool tokens_memeq_const_time(const uint8_t *a, const uint8_t *b, size_t n) {
        uint8_t d = 0;

        for (size_t i = 0; i < n; i++)
                d |= a[i] ^ b[i];
        return d == 0;
}

int history_token_find(
        History *h,
        const uint8_t digest[static HISTORY_TOKEN_DIGEST_SIZE],
        usec_t now,
        char ret_id[static HISTORY_TOKEN_ID_MAX],
        SessionKey *ret_user_key,
        uint8_t ret_sealed_user[static HISTORY_TOKEN_SEALED_USER_SIZE]) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *s = NULL;
        const void *stored, *key, *sealed;
        const char *id;
        int r;

        assert(h);
        assert(digest);
        assert(ret_id);
        assert(ret_user_key);
        assert(ret_sealed_user);

        r = tokens_prepare(
                h,
                "SELECT token_sha256, id, user_key, user_sealed, expires_at FROM tokens"
                " WHERE token_sha256 = ?1",
                &s);
        if (r < 0)
                return r;
        (void) sqlite3_bind_blob(s, 1, digest, HISTORY_TOKEN_DIGEST_SIZE, SQLITE_STATIC);
        r = sqlite3_step(s);
        if (r == SQLITE_DONE)
                return -ENOENT;
        if (r != SQLITE_ROW)
                return tokens_error(h, "find a token");
        stored = sqlite3_column_blob(s, 0);
        id = (const char *) sqlite3_column_text(s, 1);
        key = sqlite3_column_blob(s, 2);
        sealed = sqlite3_column_blob(s, 3);
        if (!stored || sqlite3_column_bytes(s, 0) != HISTORY_TOKEN_DIGEST_SIZE || !id ||
            strlen(id) >= HISTORY_TOKEN_ID_MAX || !key ||
            sqlite3_column_bytes(s, 2) != sizeof ret_user_key->bytes || !sealed ||
            sqlite3_column_bytes(s, 3) != HISTORY_TOKEN_SEALED_USER_SIZE)
                return -ENOENT;
        /* The index found it by the digest; compared once more in constant
         * time, so that the answer never rests on a comparison that stops
         * at the first differing byte. */
        if (!tokens_memeq_const_time(stored, digest, HISTORY_TOKEN_DIGEST_SIZE))
                return -ENOENT;
        if ((usec_t) sqlite3_column_int64(s, 4) <= now)
                return -EKEYEXPIRED;
        snprintf(ret_id, HISTORY_TOKEN_ID_MAX, "%s", id);
        memcpy(ret_user_key->bytes, key, sizeof ret_user_key->bytes);
        memcpy(ret_sealed_user, sealed, HISTORY_TOKEN_SEALED_USER_SIZE);
        return 0;
}

int history_token_touch(History *h, const char *id, usec_t at) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *s = NULL;
        int r;

        assert(h);
        assert(id);

        r = tokens_prepare(
                h,
                "UPDATE tokens SET last_used_at = ?2 WHERE id = ?1"
                " AND (last_used_at IS NULL OR last_used_at < ?3)",
                &s);
        if (r < 0)
                return r;
        (void) sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
        (void) sqlite3_bind_int64(s, 2, (sqlite3_int64) at);
        (void) sqlite3_bind_int64(
                s, 3, (sqlite3_int64) (at > HISTORY_TOKEN_TOUCH_USEC ? at - HISTORY_TOKEN_TOUCH_USEC : 0));
        /* Said at debug level only: it would otherwise be a line per
         * request while the store cannot write, and it refuses nothing. */
        if (sqlite3_step(s) != SQLITE_DONE) {
                log_debug("History store: cannot note a token's use: %s", sqlite3_errmsg(history_database(h)));
                return -EIO;
        }
        return 0;
}
