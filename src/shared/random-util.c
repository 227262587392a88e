/* SPDX-License-Identifier: MIT */
#include <sys/random.h>

#include "shared/io-util.h"
#include "shared/macro.h"
#include "shared/random-util.h"

/* Flags 0: the blocking pool semantics of getrandom(2), which only ever
 * blocks before the pool is initialised. Reads of up to 256 bytes are never
 * short once it is, but larger ones may be, and any read may be
 * interrupted by a signal: loop_read_exact() loops. */
static ssize_t random_getrandom(void *buf, size_t n, void *userdata) {
        return getrandom(buf, n, 0);
}

int random_bytes(void *buf, size_t n) {
        return loop_read_exact(random_getrandom, NULL, buf, n);
}

int random_id(const char *prefix, char *ret, size_t ret_size) {
        static const char hex[] = "0123456789abcdef";
        uint8_t bytes[RANDOM_ID_BYTES];
        size_t l;
        int r;

        if (!prefix || !ret)
                return -EINVAL;

        l = strlen(prefix);
        if (ret_size < l + 2 * RANDOM_ID_BYTES + 1)
                return -ENOBUFS;

        r = random_bytes(bytes, sizeof bytes);
        if (r < 0)
                return r;

        memcpy(ret, prefix, l);
        for (size_t i = 0; i < RANDOM_ID_BYTES; i++) {
                ret[l + 2 * i] = hex[bytes[i] >> 4];
                ret[l + 2 * i + 1] = hex[bytes[i] & 0xf];
        }
        ret[l + 2 * RANDOM_ID_BYTES] = '\0';
        return 0;
}
