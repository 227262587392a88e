/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>

/* Types shared by several modules (admission, http, store, bus, query):
 * who a request belongs to and the ids the API hands out. */

/* A session as the daemon knows it: the SHA-256 of the session token,
 * never the token itself (API.md 3). */
typedef struct SessionKey {
        uint8_t bytes[32];
} SessionKey;

/* "tk_" + 32 lowercase hex digits + NUL */
#define TICKET_ID_MAX 40
/* "qr_" + 32 lowercase hex digits + NUL */
#define QUERY_ID_MAX 40
