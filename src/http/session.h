/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shared/ids.h"

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

/* The Set-Cookie header value
 *   "wikiweb_session=<token>; Path=/; HttpOnly; SameSite=Lax; Max-Age=<n>[; Secure]"
 * newly allocated into *ret (the caller frees). Returns 0, -EINVAL when
 * token is not a valid token (so nothing can be injected into the header),
 * -ENOMEM. */
int session_set_cookie_header(const char *token, uint64_t max_age_seconds, bool secure, char **ret);
