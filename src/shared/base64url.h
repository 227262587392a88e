/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* base64url (RFC 4648 section 5) without padding, encode only: session
 * tokens are the only user. */

/* The number of characters base64url_encode() writes for n bytes (without
 * the NUL): ceil(4n/3) without padding. */
size_t base64url_encoded_len(size_t n);

/* Encode n bytes at data; ret must hold base64url_encoded_len(n) + 1 bytes
 * and receives a NUL-terminated string. */
void base64url_encode(const uint8_t *data, size_t n, char *ret);

/* True for A-Z a-z 0-9 - _ (never '=', '+', '/'). */
bool base64url_char_is_valid(char c);
