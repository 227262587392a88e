/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Small UTF-8 helpers for text that came from an upstream (RFC 3629:
 * shortest form only, no surrogates, nothing above U+10FFFF). All borrow
 * their input and allocate nothing. */

/* Decode the sequence at s (n > 0 bytes available): its length and the
 * code point in *ret_cp (may be NULL), or 0 when it is malformed. */
size_t utf8_decode(const uint8_t *s, size_t n, uint32_t *ret_cp);

/* As utf8_decode(), but 0 also for a C1 control (U+0080..U+009F): the
 * length of the valid, non-C1 sequence at s, 0 when there is none. */
size_t utf8_decode_no_c1(const uint8_t *s, size_t n);

/* Whether the n bytes at s are valid UTF-8 (a NUL byte is valid). */
bool utf8_is_valid(const char *s, size_t n);

/* The number of code points in n bytes of valid UTF-8. */
size_t utf8_count(const char *s, size_t n);

/* The largest length <= max at which n bytes of valid UTF-8 can be cut
 * without splitting a character (max >= n: n). */
size_t utf8_cut(const char *s, size_t n, size_t max);

/* A copy of n bytes at s with each byte that starts no valid sequence replaced by U+FFFD and
 * each NUL byte by U+FFFD too, so the result is valid UTF-8 and a C string
 * that holds all of it. Returns 0, the copy in *ret (NUL-terminated, the
 * caller frees) and its length in *ret_len (may be NULL); -ENOMEM. */
int utf8_make_valid(const char *s, size_t n, char **ret, size_t *ret_len);
