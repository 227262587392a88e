/* SPDX-License-Identifier: MIT */
/* Share links of a conversation (API.md 9 "Share"): made and revoked by
 * their owner, opened by anyone who may read everything they show. */
#include <assert.h>
#include <stdio.h>

#include "manager/manager-ops.h"
#include "shared/log.h"
#include "shared/random-util.h"
#include "shared/sha256.h"
#include "shared/strv.h"
#include "shared/time-util.h"

#define SHARE_TOKEN_BYTES 32

/* The digest a share token is kept as. */
static int share_digest(const char *token, uint8_t ret[static HISTORY_SHARE_DIGEST_SIZE]) {
        return sha256(token, strlen(token), ret);
}

int manager_share_create(
        Manager *m,
        const SessionKey *session,
        const char *id,
        ManagerWriteDone done,
        void *userdata,
        ManagerWrite **ret,
        ManagerError *ret_error) {
        uint8_t bytes[SHARE_TOKEN_BYTES], digest[HISTORY_SHARE_DIGEST_SIZE];
        char token[MANAGER_SHARE_TOKEN_MAX] = "sh_";
        int r;

        assert(m);
        assert(session);
        assert(id);
        assert(ret_error);
        _Static_assert(3 + 2 * SHARE_TOKEN_BYTES + 1 == MANAGER_SHARE_TOKEN_MAX, "token size");

        /* 256 random bits; only their digest is kept. */
        r = random_bytes(bytes, sizeof bytes);
        if (r >= 0) {
                for (size_t i = 0; i < sizeof bytes; i++)
                        snprintf(token + 3 + 2 * i, 3, "%02x", bytes[i]);
                r = share_digest(token, digest);
        }
        if (r < 0) {
                *ret_error = (ManagerError){ API_ERROR_INTERNAL_ERROR, NULL };
                return r;
        }
        return manager_write_share(m, session, id, digest, token, done, userdata, ret, ret_error);
}

int manager_share_revoke(
        Manager *m,
        const SessionKey *session,
        const char *id,
        ManagerWriteDone done,
        void *userdata,
        ManagerWrite **ret,
        ManagerError *ret_error) {
        return manager_write_share(m, session, id, NULL, NULL, done, userdata, ret, ret_error);
}

struct ManagerShareOpen {
        HistoryRecord *turns;
        size_t n_turns;
        SessionKey owner;
        ManagerReadableCheck *readable;
        ManagerShareOpenDone done;
        void *userdata;
};

ManagerShareOpen *manager_share_open_free(ManagerShareOpen *o) {
        if (!o)
                return NULL;
        manager_readable_check_free(o->readable);
        history_conversation_free_records(o->turns, o->n_turns);
        free(o);
        return NULL;
}

/* Every source readable: the conversation; else not_found, as for a wrong
 * token. */
static void manager_share_on_readable(
        ManagerReadableCheck *c, const ManagerError *error, const ManagerReadable *result, void *userdata) {
        ManagerShareOpen *o = userdata;

        if (error) {
                o->done(o, error, NULL, o->userdata);
                return;
        }
        for (size_t i = 0; i < result->n; i++)
                if (!result->readable[i]) {
                        o->done(o, &(ManagerError){ API_ERROR_NOT_FOUND, NULL }, NULL, o->userdata);
                        return;
                }
        o->done(o,
                NULL,
                &(ManagerShared){ .turns = o->turns, .n_turns = o->n_turns, .owner = &o->owner },
                o->userdata);
}

int manager_share_open(
        Manager *m,
        const char *user,
        const char *token,
        ManagerShareOpenDone done,
        void *userdata,
        ManagerShareOpen **ret,
        ManagerError *ret_error) {
        _cleanup_(manager_share_open_freep) ManagerShareOpen *o = NULL;
        _cleanup_(strv_freep) char **titles = NULL;
        uint8_t digest[HISTORY_SHARE_DIGEST_SIZE];
        char id[QUERY_ID_MAX];
        int r;

        assert(m);
        assert(token);
        assert(done);
        assert(ret);
        assert(ret_error);

        /* Before the token is looked at, so that this says nothing of it. */
        if (config_identity_enabled(manager_get_config(m)) && !user) {
                *ret_error = (ManagerError){ API_ERROR_ORIGIN_DENIED, "Sign in to read a shared conversation" };
                return -EACCES;
        }
        o = calloc(1, sizeof *o);
        if (!o) {
                *ret_error = (ManagerError){ API_ERROR_INTERNAL_ERROR, NULL };
                return -ENOMEM;
        }
        o->done = done;
        o->userdata = userdata;
        r = share_digest(token, digest);
        if (r >= 0)
                r = history_share_find(manager_get_history(m), digest, id, &o->owner);
        if (r >= 0)
                r = history_get_conversation(
                        manager_get_history(m),
                        id,
                        &o->owner,
                        HISTORY_CONVERSATION_MAX_TURNS,
                        &o->turns,
                        &o->n_turns);
        if (r == -ENOENT) {
                *ret_error = (ManagerError){ API_ERROR_NOT_FOUND, NULL };
                return r;
        }
        if (r < 0) {
                *ret_error = (ManagerError){ API_ERROR_INTERNAL_ERROR, NULL };
                return r;
        }
        /* Every title that reached the model of a turn shown, also from
         * turns it was given that are deleted or beyond those shown. The
         * files of a turn are served only through this check too. */
        titles = manager_records_titles(o->turns, o->n_turns);
        if (!titles) {
                *ret_error = (ManagerError){ API_ERROR_INTERNAL_ERROR, NULL };
                return -ENOMEM;
        }
        r = manager_check_readable(m, user, titles, manager_share_on_readable, o, &o->readable, ret_error);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(o);
        return 0;
}
