/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

/* Randomness from the kernel (getrandom(2)), for session tokens and ids. */

/* Fill n bytes at buf. Blocks until the kernel's pool is initialised (once
 * per boot), retries on EINTR and short reads. Returns 0, or -errno (e.g.
 * -ENOSYS on a kernel without getrandom); buf is then unspecified. */
int random_bytes(void *buf, size_t n);

/* prefix ("tk_", "qr_", "af_", ...) followed by 32 lowercase hex digits
 * from 16 random bytes, NUL-terminated, into ret (ret_size bytes).
 * Returns 0, -EINVAL for a NULL prefix, -ENOBUFS when ret is too small
 * (strlen(prefix) + 33 bytes are needed), or an error of random_bytes(). */
int random_id(const char *prefix, char *ret, size_t ret_size);

/* Bytes of random material in a random_id(). */
#define RANDOM_ID_BYTES 16
