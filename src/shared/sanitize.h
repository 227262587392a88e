/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

/* The error-message sanitizer of API.md section 2: every message that goes
 * into an error response, into history or into the log after coming from an
 * upstream or the sandbox passes through here first.
 *
 * In order: 0. invalid UTF-8 becomes U+FFFD (one per maximal subpart, as
 * Python's bytes.decode("utf-8", "replace")); 1. empty stays empty;
 * 2. "Bearer\s+[A-Za-z0-9_.-]+" (ASCII case-insensitive) becomes
 * "Bearer [REDACTED]"; 3. "\b[A-Za-z0-9_-]{32,}\b" becomes "[REDACTED]";
 * 4. CR and LF become a space; 5. the result is cut to at most
 * SANITIZE_MAX_BYTES bytes without splitting a character. Rules 2 and 3 have
 * exactly the semantics of Python's re.sub with re.ASCII.
 *
 * Time is linear in len and memory is constant apart from the result, so a
 * whole upstream body of megabytes may be passed. */

#define SANITIZE_MAX_BYTES 1024

/* Sanitize len bytes at msg (any bytes, may contain NUL and invalid UTF-8;
 * msg may be NULL when len is 0; borrowed).
 * Returns 0 and a newly allocated NUL-terminated string in *ret (the caller
 * frees it), or -ENOMEM (and *ret is untouched).
 * A U+0000 in the input is valid UTF-8 and is kept, as rule 0 says: a caller
 * that uses the result as a C string sees only the part before it, which is
 * still sanitized (any prefix of the output is). */
int sanitize_message(const char *msg, size_t len, char **ret);

/* As sanitize_message(), and also returns the length of the result in bytes
 * in *ret_len, for callers that keep embedded U+0000 characters. */
int sanitize_message_full(const char *msg, size_t len, char **ret, size_t *ret_len);
