/* SPDX-License-Identifier: MIT */
#include <assert.h>

#include "http/pool.h"

size_t http_pool_used(const HttpPoolUse *u) {
        size_t n;

        assert(u);

        n = HTTP_POOL_ROUND(u->head_bytes + HTTP_POOL_UNSEEN_BYTES);
        n += u->n_records * HTTP_POOL_RECORD_BYTES;
        if (u->has_cookie)
                n += HTTP_POOL_ROUND(u->cookie_size + 1);
        return n;
}

bool http_pool_fits(const HttpPoolUse *u, size_t response_head_bytes, size_t pool_bytes) {
        size_t used = http_pool_used(u);

        /* + 1: MHD checks for room for the Date field's terminating NUL. */
        return used <= pool_bytes && response_head_bytes + 1 <= pool_bytes - used;
}
