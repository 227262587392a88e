/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shared/ids.h"

/* A person as the daemon knows them (API.md "Identity"): the identity name
 * a trusted proxy gives, and the key their queue, running queries and
 * history are kept under. Shared by the HTTP transport (who asks), the
 * Manager (an administrator's erasure) and the D-Bus face (its argument).
 * Only user_key_secret_load() logs. */

/* The secret of the installation that keys the history's column of who a
 * record belongs to (wikiwebd(8) "Backups"): with it, a key is
 * HMAC-SHA-256(secret, K) of the key K of the session (the SHA-256 of a
 * session token, or of a user below), so that the database alone (a
 * copy, a backup) does not tell whether a given person ever asked: that
 * takes the secret too. */
#define USER_KEY_SECRET_BYTES 32
typedef struct UserKeySecret {
        uint8_t bytes[USER_KEY_SECRET_BYTES];
} UserKeySecret;

/* The file in the state directory, and the systemd credential
 * ($CREDENTIALS_DIRECTORY/user-key) that takes its place when given. */
#define USER_KEY_FILE "user-key"
#define USER_KEY_CREDENTIAL "user-key"
/* A credential's bytes: at least 32 (its SHA-256 is the secret), at most 4096. */
#define USER_KEY_CREDENTIAL_MIN 32
#define USER_KEY_CREDENTIAL_MAX 4096

/* The secret: from the credential when credentials_directory (NULL: none)
 * has one, else from state_directory/user-key (exactly 32 bytes), made
 * there on first use from the kernel's random source, mode 0600, atomically
 * (written and synced under a temporary name, then linked: a second
 * daemon racing reads the winner's). *ret_source is "credential",
 * "file" or "new" (may be NULL). Returns 0, -EINVAL (a credential or file
 * of the wrong size, not a regular file), or the errno of the failed
 * step; logs why. */
int user_key_secret_load(
        const char *state_directory,
        const char *credentials_directory,
        UserKeySecret *ret,
        const char **ret_source);

/* The stored key of a session key: HMAC-SHA-256(secret, key). in and ret
 * may be the same. Returns 0 or -EIO. */
int user_key_seal(const UserKeySecret *secret, const SessionKey *key, SessionKey *ret);

/* A user name: 1 to USER_NAME_MAX_BYTES bytes of valid UTF-8 (shortest
 * form, no surrogates) without a control character (C0, DEL, C1).
 * Anything else is refused, never repaired. Reads at most len bytes. */
#define USER_NAME_MAX_BYTES 256
bool user_name_is_valid(const char *s, size_t len);

/* The key of a user: SHA-256 of "wikiweb-user", a NUL and the name.
 * Every session of that user has this key, so the queue, the running
 * query, the history and the streams are the person's, across browsers
 * and devices. It never equals the key of a session token (the digest of
 * 43 base64url characters, which contain no NUL). The caller passes a
 * valid name. Returns 0, or -ENOMEM / -EIO with *ret untouched. */
int user_key_from_name(const char *user, SessionKey *ret);
