/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Reading a known number of bytes, whatever the source: the one loop that
 * retries on EINTR and on short reads. */

/* A source with read(2)'s contract: up to n bytes into buf; the count, 0
 * at the end, or -1 with errno set. */
typedef ssize_t (*LoopReadFunc)(void *buf, size_t n, void *userdata);

/* Exactly n bytes from f into buf. Returns 0, -EIO when the source ends
 * first, or the source's -errno; buf is then unspecified. */
int loop_read_exact(LoopReadFunc f, void *userdata, void *buf, size_t n);

/* Exactly n bytes of fd from offset on (pread(2): fd's own position is
 * left as it is). Returns as loop_read_exact(). */
int loop_pread_exact(int fd, void *buf, size_t n, uint64_t offset);
