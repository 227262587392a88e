/* SPDX-License-Identifier: MIT */
/* Personal access tokens (API.md "Access tokens"): made, listed and
 * revoked for the person a trusted proxy named, and the one check of a
 * token a request carries. A token is 256 random bits, given once; only
 * its SHA-256 is kept (store/tokens.h), with the person's name sealed
 * under the token itself, so that only a request presenting it can read
 * whom it acts for. Nothing here logs a token or its digest; the journal
 * lines name the token's id. */
#include <assert.h>
#include <stdio.h>

#include "manager/manager-ops.h"
#include "shared/base64url.h"
#include "shared/log.h"
#include "shared/random-util.h"
#include "shared/sha256.h"
#include "shared/time-util.h"
#include "shared/user-key.h"

#define USEC_PER_DAY (24 * 3600 * USEC_PER_SEC)

/* A token as the daemon hands them out: "wwp_" and 43 base64url
 * characters. Anything else is no token of ours, without a look-up. */
static bool manager_token_is_well_formed(const char *token) {
        size_t l = strlen(MANAGER_TOKEN_PREFIX);

        if (!strneq(token, MANAGER_TOKEN_PREFIX, l))
                return false;
        for (size_t i = 0; i < MANAGER_TOKEN_MAX - 1 - l; i++)
                if (!base64url_char_is_valid(token[l + i]))
                        return false; /* also stops at the NUL */
        return token[MANAGER_TOKEN_MAX - 1] == '\0';
}

/* The key stream a person's name is sealed with: block i (from 0) is
 * HMAC-SHA-256(token, "wikiweb-token-name", a NUL, i as 4 bytes big
 * endian). Only the token's SHA-256 is in the database, so the stream is
 * not: the sealed name is read with the token in hand or not at all. Each
 * token seals one name once, so a stream is never used twice. */
#define TOKEN_NAME_DOMAIN "wikiweb-token-name"
static int token_name_stream(const char *token, uint8_t ret[static HISTORY_TOKEN_SEALED_USER_SIZE]) {
        _Static_assert(HISTORY_TOKEN_SEALED_USER_SIZE % SHA256_DIGEST_SIZE == 0, "whole blocks");
        uint8_t block[sizeof TOKEN_NAME_DOMAIN + 4];
        int r;

        memcpy(block, TOKEN_NAME_DOMAIN, sizeof TOKEN_NAME_DOMAIN); /* with its NUL */
        for (uint32_t i = 0; i < HISTORY_TOKEN_SEALED_USER_SIZE / SHA256_DIGEST_SIZE; i++) {
                uint8_t *c = block + sizeof TOKEN_NAME_DOMAIN;

                c[0] = (uint8_t) (i >> 24);
                c[1] = (uint8_t) (i >> 16);
                c[2] = (uint8_t) (i >> 8);
                c[3] = (uint8_t) i;
                r = hmac_sha256(token, strlen(token), block, sizeof block, ret + i * SHA256_DIGEST_SIZE);
                if (r < 0) {
                        explicit_bzero(ret, HISTORY_TOKEN_SEALED_USER_SIZE);
                        return r;
                }
        }
        return 0;
}

/* The name, padded with NULs to HISTORY_TOKEN_SEALED_USER_SIZE bytes
 * (a name holds no NUL, and its length is not told either), XORed with
 * the token's stream. */
static int token_seal_user(
        const char *token, const char *user, uint8_t ret[static HISTORY_TOKEN_SEALED_USER_SIZE]) {
        size_t l = strlen(user);
        int r;

        _Static_assert(HISTORY_TOKEN_SEALED_USER_SIZE == USER_NAME_MAX_BYTES, "every name fits");
        if (l > HISTORY_TOKEN_SEALED_USER_SIZE)
                return -EINVAL;
        r = token_name_stream(token, ret);
        if (r < 0)
                return r;
        for (size_t i = 0; i < l; i++)
                ret[i] ^= (uint8_t) user[i];
        return 0;
}

/* The name a sealed one holds under token, as a new string: 0, -EBADMSG
 * when what comes out is not a valid name followed by NULs only (the
 * sealed bytes were changed, or sealed under another token), -ENOMEM,
 * -EIO. */
static int token_open_user(
        const char *token, const uint8_t sealed[static HISTORY_TOKEN_SEALED_USER_SIZE], char **ret) {
        uint8_t plain[HISTORY_TOKEN_SEALED_USER_SIZE];
        uint8_t pad = 0;
        size_t l;
        char *s;
        int r;

        r = token_name_stream(token, plain);
        if (r < 0)
                return r;
        for (size_t i = 0; i < sizeof plain; i++)
                plain[i] ^= sealed[i];
        l = strnlen((const char *) plain, sizeof plain);
        for (size_t i = l; i < sizeof plain; i++)
                pad |= plain[i];
        if (pad != 0 || !user_name_is_valid((const char *) plain, l)) {
                explicit_bzero(plain, sizeof plain);
                return -EBADMSG;
        }
        s = strndup((const char *) plain, l);
        explicit_bzero(plain, sizeof plain);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

/* Whether a and b are equal, in a time that does not depend on where they
 * differ. */
static bool keys_equal(const SessionKey *a, const SessionKey *b) {
        uint8_t d = 0;

        for (size_t i = 0; i < sizeof a->bytes; i++)
                d |= a->bytes[i] ^ b->bytes[i];
        return d == 0;
}

static int manager_tokens_error(Manager *m, int r, ManagerError *ret_error) {
        if (r == -ENOENT)
                *ret_error = (ManagerError){ API_ERROR_NOT_FOUND, "No such token" };
        else if (r == -E2BIG)
                *ret_error = (ManagerError){ API_ERROR_INVALID_INPUT,
                                             "At most 50 tokens at once: revoke one first" };
        else if (!manager_storage_refusal(m, ret_error))
                *ret_error = (ManagerError){ API_ERROR_INTERNAL_ERROR, NULL };
        return r;
}

static int manager_tokens_key(Manager *m, const char *user, SessionKey *ret, ManagerError *ret_error) {
        int r;

        r = manager_user_key(m, user, ret);
        if (r < 0)
                *ret_error = (ManagerError){ API_ERROR_INTERNAL_ERROR, NULL };
        return r;
}

int manager_token_create(
        Manager *m,
        const char *user,
        const char *name,
        unsigned expires_in_days,
        ManagerTokenCreated *ret,
        ManagerError *ret_error) {
        uint8_t secret[MANAGER_TOKEN_SECRET_BYTES], digest[HISTORY_TOKEN_DIGEST_SIZE],
                sealed[HISTORY_TOKEN_SEALED_USER_SIZE];
        uint64_t max_days = manager_get_config(m)->token_max_days;
        ManagerTokenCreated t = { .created_at = 0 };
        SessionKey key;
        int r;

        assert(m);
        assert(user);
        assert(name);
        assert(ret);
        assert(ret_error);
        _Static_assert(
                4 + 43 + 1 == MANAGER_TOKEN_MAX && 43 == (4 * MANAGER_TOKEN_SECRET_BYTES + 2) / 3,
                "token size");

        if (expires_in_days > max_days) {
                *ret_error = (ManagerError){ API_ERROR_INVALID_INPUT,
                                             "expires_in_days: more than this daemon allows "
                                             "(WIKI_WEB_TOKEN_MAX_DAYS)" };
                return -ERANGE;
        }
        if (expires_in_days == 0)
                expires_in_days = (unsigned) max_days;
        r = manager_tokens_key(m, user, &key, ret_error);
        if (r < 0)
                return r;

        r = random_bytes(secret, sizeof secret);
        if (r >= 0)
                r = random_id("tk_", t.id, sizeof t.id);
        if (r >= 0) {
                memcpy(t.token, MANAGER_TOKEN_PREFIX, strlen(MANAGER_TOKEN_PREFIX));
                base64url_encode(secret, sizeof secret, t.token + strlen(MANAGER_TOKEN_PREFIX));
                explicit_bzero(secret, sizeof secret);
                r = sha256(t.token, strlen(t.token), digest);
        }
        if (r >= 0)
                r = token_seal_user(t.token, user, sealed);
        if (r < 0) {
                explicit_bzero(&t, sizeof t);
                *ret_error = (ManagerError){ API_ERROR_INTERNAL_ERROR, NULL };
                return r;
        }
        t.created_at = now(CLOCK_REALTIME);
        t.expires_at = usec_add(t.created_at, expires_in_days * USEC_PER_DAY);
        r = history_token_add(
                manager_get_history(m), t.id, &key, sealed, name, digest, t.created_at, t.expires_at);
        if (r < 0) {
                explicit_bzero(&t, sizeof t);
                return manager_tokens_error(m, r, ret_error);
        }
        log_info(
                "Access token %s created, valid for %u %s.",
                t.id,
                expires_in_days,
                expires_in_days == 1 ? "day" : "days");
        *ret = t;
        explicit_bzero(&t, sizeof t);
        return 0;
}

int manager_tokens_list(Manager *m, const char *user, HistoryToken **ret, size_t *ret_n, ManagerError *ret_error) {
        SessionKey key;
        int r;

        assert(m);
        assert(user);
        assert(ret);
        assert(ret_n);
        assert(ret_error);

        r = manager_tokens_key(m, user, &key, ret_error);
        if (r < 0)
                return r;
        r = history_tokens_list(manager_get_history(m), &key, ret, ret_n);
        if (r < 0)
                return manager_tokens_error(m, r, ret_error);
        return 0;
}

int manager_token_revoke(Manager *m, const char *user, const char *id, ManagerError *ret_error) {
        SessionKey key;
        int r;

        assert(m);
        assert(user);
        assert(id);
        assert(ret_error);

        r = manager_tokens_key(m, user, &key, ret_error);
        if (r < 0)
                return r;
        r = history_token_revoke(manager_get_history(m), &key, id);
        if (r < 0)
                return manager_tokens_error(m, r, ret_error);
        log_info("Access token %s revoked.", id);
        return 0;
}

int manager_tokens_revoke_user(Manager *m, const char *user, ManagerError *ret_error) {
        SessionKey key;
        int r;

        assert(m);
        assert(user);
        assert(ret_error);

        r = manager_tokens_key(m, user, &key, ret_error);
        if (r < 0)
                return r;
        r = history_tokens_delete_user(manager_get_history(m), &key);
        if (r < 0)
                return manager_tokens_error(m, r, ret_error);
        log_info("Revoked %i access token(s) of a person.", r);
        return r;
}

int manager_token_authenticate(Manager *m, const char *token, char **ret_user) {
        uint8_t digest[HISTORY_TOKEN_DIGEST_SIZE], sealed[HISTORY_TOKEN_SEALED_USER_SIZE];
        char id[HISTORY_TOKEN_ID_MAX];
        usec_t t = now(CLOCK_REALTIME);
        _cleanup_free_ char *user = NULL;
        SessionKey stored, key;
        int r;

        assert(m);
        assert(token);
        assert(ret_user);

        if (!manager_token_is_well_formed(token))
                return -EACCES;
        r = sha256(token, strlen(token), digest);
        if (r < 0)
                return r;
        r = history_token_find(manager_get_history(m), digest, t, id, &stored, sealed);
        if (IN_SET(r, -ENOENT, -EKEYEXPIRED))
                return -EACCES;
        if (r < 0)
                return r;
        /* The name the token was made for, read with the token, and only
         * if it is a name whose key is the one the token is kept under:
         * sealed bytes changed, or a token restored beside another
         * installation's user key, act as nobody. */
        r = token_open_user(token, sealed, &user);
        if (r == -EBADMSG) {
                log_warning("Access token %s: its sealed name does not open; refused.", id);
                return -EACCES;
        }
        if (r < 0)
                return r;
        r = manager_user_key(m, user, &key);
        if (r == -EOPNOTSUPP)
                return -EACCES;
        if (r < 0)
                return r;
        if (!keys_equal(&key, &stored)) {
                log_warning("Access token %s: its name is not its person's; refused.", id);
                explicit_bzero(user, strlen(user));
                return -EACCES;
        }
        /* A last use not noted is no reason to refuse the request. */
        (void) history_token_touch(manager_get_history(m), id, t);
        *ret_user = TAKE_PTR(user);
        return 0;
}
