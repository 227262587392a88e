/* SPDX-License-Identifier: MIT */
/* Test helper for sanitize_diff.py, not installed.
 *
 *   sanitize-filter           sanitizes all of stdin to stdout (no newline added)
 *   sanitize-filter --batch   reads records of a 4-byte big-endian length and
 *                             that many bytes until EOF, and writes each
 *                             sanitized message back in the same framing
 *
 * Exit status 0 on success, 1 on a read/write error or a malformed record,
 * 2 on bad usage. */

#include <stdint.h>

#include "shared/macro.h"
#include "shared/sanitize.h"

/* A record larger than this is malformed: the tests send less. */
#define RECORD_MAX_BYTES ((size_t) 256 * 1024 * 1024)

static int read_all(FILE *f, char **ret, size_t *ret_len) {
        _cleanup_free_ char *buf = NULL;
        size_t len = 0, size = 0;

        for (;;) {
                size_t n;

                if (len == size) {
                        size_t new_size = size ? size * 2 : 65536;
                        char *p;

                        if (new_size > RECORD_MAX_BYTES)
                                return -EFBIG;
                        p = realloc(buf, new_size);
                        if (!p)
                                return -ENOMEM;
                        buf = p;
                        size = new_size;
                }
                n = fread(buf + len, 1, size - len, f);
                len += n;
                if (n == 0) {
                        if (ferror(f))
                                return -EIO;
                        break;
                }
        }
        *ret = TAKE_PTR(buf);
        *ret_len = len;
        return 0;
}

static int write_record(FILE *f, const char *p, size_t n) {
        uint8_t hdr[4] = { (uint8_t) (n >> 24), (uint8_t) (n >> 16), (uint8_t) (n >> 8), (uint8_t) n };

        if (fwrite(hdr, 1, sizeof(hdr), f) != sizeof(hdr) || fwrite(p, 1, n, f) != n)
                return -EIO;
        return 0;
}

static int run_batch(void) {
        for (;;) {
                _cleanup_free_ char *msg = NULL, *out = NULL;
                uint8_t hdr[4];
                size_t n, out_len, got;
                int r;

                got = fread(hdr, 1, sizeof(hdr), stdin);
                if (got == 0 && feof(stdin))
                        return 0;
                if (got != sizeof(hdr))
                        return -EIO;
                n = (size_t) hdr[0] << 24 | (size_t) hdr[1] << 16 | (size_t) hdr[2] << 8 | hdr[3];
                if (n > RECORD_MAX_BYTES)
                        return -EFBIG;
                msg = malloc(MAX(n, (size_t) 1));
                if (!msg)
                        return -ENOMEM;
                if (fread(msg, 1, n, stdin) != n)
                        return -EIO;

                r = sanitize_message_full(msg, n, &out, &out_len);
                if (r < 0)
                        return r;
                r = write_record(stdout, out, out_len);
                if (r < 0)
                        return r;
        }
}

static int run_once(void) {
        _cleanup_free_ char *msg = NULL, *out = NULL;
        size_t n, out_len;
        int r;

        r = read_all(stdin, &msg, &n);
        if (r < 0)
                return r;
        r = sanitize_message_full(msg, n, &out, &out_len);
        if (r < 0)
                return r;
        if (fwrite(out, 1, out_len, stdout) != out_len)
                return -EIO;
        return 0;
}

int main(int argc, char *argv[]) {
        int r;

        if (argc > 2 || (argc == 2 && !streq(argv[1], "--batch"))) {
                fprintf(stderr, "usage: %s [--batch]\n", argv[0]);
                return 2;
        }
        r = argc == 2 ? run_batch() : run_once();
        if (r >= 0 && fflush(stdout) != 0)
                r = -EIO;
        if (r < 0) {
                fprintf(stderr, "sanitize-filter: %s\n", strerror(-r));
                return EXIT_FAILURE;
        }
        return EXIT_SUCCESS;
}
