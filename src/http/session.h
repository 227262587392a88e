/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shared/ids.h"
#include "shared/user-key.h"

/* Sessions (API.md 3): a cookie holding 43 base64url characters (32 random
 * bytes). The daemon keeps no session table; it only ever stores or keys by
 * the SHA-256 of the token (a SessionKey). Nothing here logs. */

#define SESSION_COOKIE_NAME "wikiweb_session"
#define SESSION_TOKEN_BYTES 32
#define SESSION_TOKEN_LEN 43

/* True when s[0..len) is exactly 43 base64url characters (A-Z a-z 0-9 - _).
 * Reads at most len bytes; an embedded NUL makes it false. */
bool session_token_is_valid(const char *s, size_t len);

/* Parse a raw Cookie request header (may be NULL, may be hostile: any bytes
 * up to the NUL, any length). Returns 1 and copies the value (NUL-terminated)
 * into ret when the FIRST cookie named exactly wikiweb_session has a
 * well-formed value; 0 when there is no such cookie or its value is
 * malformed (the caller then makes a fresh session). ret is untouched when
 * 0 is returned. Never reads past the NUL. */
int session_cookie_parse(const char *header, char ret[static SESSION_TOKEN_LEN + 1]);
/* The same, telling "no such cookie" (-ENOENT) from "malformed" (0), for a
 * caller that looks through several Cookie header fields in order: the
 * first field that has a wikiweb_session pair decides. */
int session_cookie_find(const char *header, char ret[static SESSION_TOKEN_LEN + 1]);

/* A fresh token from 32 random bytes: 0, or an error of random_bytes(). */
int session_token_new(char ret[static SESSION_TOKEN_LEN + 1]);

/* The SessionKey of a token: SHA-256 of its 43 characters (no NUL). The
 * caller passes a valid token (from session_cookie_parse() or
 * session_token_new()); only the first 43 bytes are read. Returns 0, or
 * -ENOMEM from the digest with *ret untouched. */
int session_key_from_token(const char *token, SessionKey *ret);

/* Identity (API.md "Identity"). A user name from a trusted proxy's
 * header: 1 to SESSION_USER_MAX_BYTES bytes of valid UTF-8 (shortest form,
 * no surrogates) without a control character (C0, DEL, C1). Anything
 * else is refused, never repaired. */
#define SESSION_USER_MAX_BYTES USER_NAME_MAX_BYTES
bool session_user_is_valid(const char *s, size_t len);

/* The SessionKey of a user (user_key_from_name()): SHA-256 of
 * "wikiweb-user", a NUL and the name. Every session of that user has this key, so the queue, the
 * running query, the history and the streams are the person's, across
 * browsers and devices. It never equals the key of a token (that is the
 * digest of 43 base64url characters, which contain no NUL). The caller
 * passes a valid user. Returns 0, or -ENOMEM / -EIO with *ret untouched. */
int session_key_from_user(const char *user, SessionKey *ret);

/* The cookie token issued to user: base64url of SHA-256 over a secret of
 * the running daemon (SESSION_SECRET_BYTES random bytes), "wikiweb-cookie",
 * a NUL and the name. A cookie presented with an identity is that
 * identity's only if it is this token: a cookie issued to A is not B's
 * session. Returns 0 or -ENOMEM / -EIO. */
#define SESSION_SECRET_BYTES 32
int session_token_for_user(
        const uint8_t secret[static SESSION_SECRET_BYTES],
        const char *user,
        char ret[static SESSION_TOKEN_LEN + 1]);

/* The Set-Cookie header value
 *   "wikiweb_session=<token>; Path=/; HttpOnly; SameSite=Lax; Max-Age=<n>[; Secure]"
 * newly allocated into *ret (the caller frees). Returns 0, -EINVAL when
 * token is not a valid token (so nothing can be injected into the header),
 * -ENOMEM. */
int session_set_cookie_header(const char *token, uint64_t max_age_seconds, bool secure, char **ret);
