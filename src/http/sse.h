/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* The wire format of Server-Sent Events (WHATWG HTML 9.2; API.md 11), pure:
 * bytes in, bytes out.
 *
 * An event is exactly three fields and the empty line that dispatches it:
 *
 *     id: 7
 *     event: status
 *     data: {"state":"idle",...}
 *
 * The data is one line: a JSON text. Inside a valid JSON text a CR or LF
 * can only be whitespace between tokens (in a string they are escaped), so
 * each becomes a space, which parses the same. U+2028 and U+2029 (valid raw
 * in a JSON string, but line terminators to older JavaScript parsers) become
 * \u2028 and \u2029, which in a valid JSON text can only be inside a
 * string, where the escape means the same character. */

/* The comment a stream sends after HTTP_STREAM_KEEPALIVE_USEC without an
 * event (API.md 11), with the empty line that ends it. */
#define SSE_KEEPALIVE ": keep-alive\n\n"

/* The bytes of the event: at most sse_event_size() of them, exact. event
 * is a name of the contract (ASCII letters and '_'); json is json_size
 * bytes (NUL bytes are not expected in a JSON text and are passed on). */
size_t sse_event_size(uint64_t id, const char *event, const char *json, size_t json_size);

/* Write the event into buf, which has room for sse_event_size() bytes.
 * Returns the number of bytes written (no NUL is added). */
size_t sse_event_write(char *buf, uint64_t id, const char *event, const char *json, size_t json_size);
