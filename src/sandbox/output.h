/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* A capped capture of one output stream of a sandbox run (stdout or
 * stderr). Everything written is counted, but only the first half of the
 * cap (the head) and the last half (the tail, a ring) are kept, so a 100 MB
 * flood costs cap bytes of memory and the model still sees how the output
 * began and how it ended (docs/SANDBOX.md: users of other sandboxes lose
 * the end of long output). Pure: no I/O. */

typedef struct OutputBuffer {
        size_t cap;    /* head + tail capacity, fixed at init */
        uint8_t *head; /* cap / 2 + cap % 2 bytes */
        size_t head_len;
        uint8_t *tail;     /* ring of cap / 2 bytes */
        size_t tail_len;   /* bytes in the ring, <= cap / 2 */
        size_t tail_start; /* index of the oldest byte in the ring */
        uint64_t total;    /* every byte ever appended */
} OutputBuffer;

/* cap: 2..1 GiB. Returns 0 or -ENOMEM/-EINVAL. */
int output_buffer_init(OutputBuffer *b, size_t cap);
void output_buffer_done(OutputBuffer *b);

void output_buffer_append(OutputBuffer *b, const void *data, size_t len);

/* Bytes that were appended but are kept neither in the head nor the tail. */
uint64_t output_buffer_dropped(const OutputBuffer *b);

/* The text handed to the model: head, then (if anything was dropped) a line
 * "[... N bytes omitted ...]", then the tail; made valid UTF-8 (each
 * invalid byte becomes U+FFFD) and without control characters other than
 * newline and tab (each becomes U+FFFD; CR LF becomes LF). The result is
 * NUL-terminated, owned by the caller, and at most
 * OUTPUT_RENDER_MAX(cap) bytes long. Returns 0 or -ENOMEM. */
int output_buffer_render(const OutputBuffer *b, char **ret, size_t *ret_len);

/* The omitted line at its longest:
 * "\n[... 18446744073709551615 bytes omitted ...]\n" and its NUL. */
#define OUTPUT_OMITTED_MAX 64
#define OUTPUT_RENDER_MAX(cap) (3 * ((size_t) (cap) + OUTPUT_OMITTED_MAX) + 1)

/* The sanitizing step of output_buffer_render() on its own: len bytes (any
 * bytes) to valid UTF-8 text as described there, at most 3 * len + 1
 * bytes. Untrusted input: fuzzed. Returns 0 or -ENOMEM. */
int output_sanitize(const uint8_t *data, size_t len, char **ret, size_t *ret_len);
