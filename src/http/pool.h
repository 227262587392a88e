/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* libmicrohttpd's per-connection memory pool, as version 0.9.75 uses it
 * (connection.c, memorypool.c): pure arithmetic, so that a request is
 * refused (431) before its handler runs when the response head would not
 * fit next to what the request already holds. MHD builds the response
 * head only after the handler returned; when the head does not fit it
 * closes the connection without a byte, and whatever the handler did is
 * done: a request executed and never answered.
 *
 * What the pool holds when the head is built:
 *   - from its start, the head as received (MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE:
 *     request line, fields with their whitespace and line ends, the empty
 *     line), then any bytes received and not yet consumed (a pipelined
 *     next request), the sum rounded up to HTTP_POOL_ALIGN;
 *   - from its end, one record (struct MHD_HTTP_Header, seven words) per
 *     header field, cookie, query argument and trailer field, and a copy
 *     of the first Cookie field's value with its NUL, each rounded up;
 *   - between the two, the write buffer, which gets all that is left: the
 *     response head must fit there (MHD's Date check wants one more byte).
 * The read buffer's unused part is given back before the head is built. */

#define HTTP_POOL_ALIGN (2 * sizeof(void *))
#define HTTP_POOL_RECORD_BYTES HTTP_POOL_ROUND(7 * sizeof(void *))
#define HTTP_POOL_ROUND(n) (((n) + HTTP_POOL_ALIGN - 1) / HTTP_POOL_ALIGN * HTTP_POOL_ALIGN)

/* Bytes wikiwebd cannot see and still allows for: empty lines before the
 * request line, which MHD skips but keeps in the pool (RFC 9112 2.2 asks
 * a server to ignore at least one), or the start of a pipelined request. */
#define HTTP_POOL_UNSEEN_BYTES 16

typedef struct HttpPoolUse {
        size_t head_bytes;  /* the head as received */
        size_t n_records;   /* header fields + cookies + query arguments + trailer fields */
        bool has_cookie;    /* a Cookie field is present: MHD copies the first one */
        size_t cookie_size; /* that field's value, in bytes */
} HttpPoolUse;

/* The pool bytes the request holds, with HTTP_POOL_UNSEEN_BYTES. */
size_t http_pool_used(const HttpPoolUse *u);

/* Whether a response head of response_head_bytes fits in a pool of
 * pool_bytes next to what the request holds. */
bool http_pool_fits(const HttpPoolUse *u, size_t response_head_bytes, size_t pool_bytes);
