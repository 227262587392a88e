/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "shared/ids.h"

/* A person as the daemon knows them (API.md "Identity"): the identity name
 * a trusted proxy gives, and the key their queue, running queries and
 * history are kept under. Shared by the HTTP transport (who asks), the
 * Manager (an administrator's erasure) and the D-Bus face (its argument).
 * Nothing here logs. */

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
