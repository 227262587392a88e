/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <stdbool.h>

#include "sandbox/output.h"
#include "shared/macro.h"
#include "shared/utf8.h"

#define OUTPUT_CAP_MAX ((size_t) 1 << 30)

int output_buffer_init(OutputBuffer *b, size_t cap) {
        size_t head_cap = cap / 2 + cap % 2, tail_cap = cap / 2;

        assert(b);

        if (cap < 2 || cap > OUTPUT_CAP_MAX)
                return -EINVAL;
        *b = (OutputBuffer){ .cap = cap };
        b->head = malloc(head_cap);
        b->tail = malloc(tail_cap);
        if (!b->head || !b->tail) {
                output_buffer_done(b);
                return -ENOMEM;
        }
        return 0;
}

void output_buffer_done(OutputBuffer *b) {
        free(b->head);
        free(b->tail);
        *b = (OutputBuffer){ 0 };
}

void output_buffer_append(OutputBuffer *b, const void *data, size_t len) {
        const uint8_t *p = data;
        size_t head_cap = b->cap / 2 + b->cap % 2, tail_cap = b->cap / 2, n;

        assert(b);
        assert(data || len == 0);

        b->total += len;
        n = MIN(len, head_cap - b->head_len);
        memcpy(b->head + b->head_len, p, n);
        b->head_len += n;
        p += n;
        len -= n;
        if (len == 0 || tail_cap == 0)
                return;

        /* Only the last tail_cap bytes of this piece can survive. */
        if (len >= tail_cap) {
                memcpy(b->tail, p + len - tail_cap, tail_cap);
                b->tail_start = 0;
                b->tail_len = tail_cap;
                return;
        }
        while (len > 0) {
                size_t end = (b->tail_start + b->tail_len) % tail_cap, chunk;

                if (b->tail_len < tail_cap) {
                        chunk = MIN(len, tail_cap - b->tail_len);
                        chunk = MIN(chunk, tail_cap - end);
                        memcpy(b->tail + end, p, chunk);
                        b->tail_len += chunk;
                } else {
                        /* Full: overwrite the oldest bytes. */
                        chunk = MIN(len, tail_cap - b->tail_start);
                        memcpy(b->tail + b->tail_start, p, chunk);
                        b->tail_start = (b->tail_start + chunk) % tail_cap;
                }
                p += chunk;
                len -= chunk;
        }
}

uint64_t output_buffer_dropped(const OutputBuffer *b) {
        assert(b);
        return b->total - b->head_len - b->tail_len;
}


static const char replacement[] = "\xef\xbf\xbd";

int output_sanitize(const uint8_t *data, size_t len, char **ret, size_t *ret_len) {
        char *out;
        size_t o = 0;

        assert(data || len == 0);
        assert(ret);

        if (len > (SIZE_MAX - 1) / 3)
                return -ENOMEM;
        out = malloc(3 * len + 1);
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < len;) {
                uint8_t c = data[i];
                size_t n;

                if (c == '\r' && i + 1 < len && data[i + 1] == '\n') {
                        i++; /* CR LF: keep the LF only */
                        continue;
                }
                if (c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f)) {
                        out[o++] = (char) c;
                        i++;
                        continue;
                }
                n = c >= 0x80 ? utf8_decode_no_c1(data + i, len - i) : 0;
                if (n == 0) {
                        memcpy(out + o, replacement, 3);
                        o += 3;
                        i++;
                        continue;
                }
                memcpy(out + o, data + i, n);
                o += n;
                i += n;
        }
        out[o] = 0;
        *ret = out;
        if (ret_len)
                *ret_len = o;
        return 0;
}

int output_buffer_render(const OutputBuffer *b, char **ret, size_t *ret_len) {
        size_t tail_cap = b->cap / 2, n = 0, len;
        uint64_t dropped = output_buffer_dropped(b);
        _cleanup_free_ uint8_t *raw = malloc(b->head_len + b->tail_len + OUTPUT_OMITTED_MAX);
        char *text;
        int r;

        assert(b);
        assert(ret);

        if (!raw)
                return -ENOMEM;
        memcpy(raw, b->head, b->head_len);
        n = b->head_len;
        if (dropped > 0) {
                int k = snprintf(
                        (char *) raw + n, OUTPUT_OMITTED_MAX, "\n[... %" PRIu64 " bytes omitted ...]\n", dropped);
                n += (size_t) MAX(k, 0);
        }
        for (size_t i = 0; i < b->tail_len; i++)
                raw[n++] = b->tail[(b->tail_start + i) % tail_cap];

        r = output_sanitize(raw, n, &text, &len);
        if (r < 0)
                return r;
        *ret = text;
        if (ret_len)
                *ret_len = len;
        return 0;
}
