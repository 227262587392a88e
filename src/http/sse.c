/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "http/sse.h"
#include "shared/macro.h"

/* U+2028 and U+2029 in UTF-8: E2 80 A8 and E2 80 A9. */
static bool is_line_separator(const char *p, size_t left) {
        return left >= 3 && (unsigned char) p[0] == 0xe2 && (unsigned char) p[1] == 0x80 &&
                ((unsigned char) p[2] == 0xa8 || (unsigned char) p[2] == 0xa9);
}

/* The data line's payload: the JSON text with CR and LF as spaces and the
 * two separators escaped. Writes into buf when it is not NULL; returns the
 * size either way, so that sizing and writing cannot disagree. */
static size_t sse_data(char *buf, const char *json, size_t json_size) {
        size_t n = 0;

        for (size_t i = 0; i < json_size; i++) {
                if (json[i] == '\r' || json[i] == '\n') {
                        if (buf)
                                buf[n] = ' ';
                        n++;
                } else if (is_line_separator(json + i, json_size - i)) {
                        if (buf)
                                memcpy(buf + n, (unsigned char) json[i + 2] == 0xa8 ? "\\u2028" : "\\u2029", 6);
                        n += 6;
                        i += 2;
                } else {
                        if (buf)
                                buf[n] = json[i];
                        n++;
                }
        }
        return n;
}

/* "id: N\nevent: NAME\ndata: " then the data, then "\n\n". */
static size_t sse_event(char *buf, uint64_t id, const char *event, const char *json, size_t json_size) {
        char head[STRLEN("id: ") + 20 + STRLEN("\nevent: ") + 1];
        size_t n, k, e;

        assert(event);
        assert(json || json_size == 0);

        k = (size_t) snprintf(head, sizeof head, "id: %" PRIu64 "\nevent: ", id);
        e = strlen(event);
        n = k + e + STRLEN("\ndata: ");
        if (buf) {
                memcpy(buf, head, k);
                memcpy(buf + k, event, e);
                memcpy(buf + k + e, "\ndata: ", STRLEN("\ndata: "));
        }
        n += sse_data(buf ? buf + n : NULL, json, json_size);
        if (buf)
                memcpy(buf + n, "\n\n", 2);
        return n + 2;
}

size_t sse_event_size(uint64_t id, const char *event, const char *json, size_t json_size) {
        return sse_event(NULL, id, event, json, json_size);
}

size_t sse_event_write(char *buf, uint64_t id, const char *event, const char *json, size_t json_size) {
        assert(buf);
        return sse_event(buf, id, event, json, json_size);
}
