/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <errno.h>
#include <unistd.h>

#include "shared/io-util.h"
#include "shared/macro.h"

int loop_read_exact(LoopReadFunc f, void *userdata, void *buf, size_t n) {
        uint8_t *p = buf;

        assert(f);
        assert(buf || n == 0);

        while (n > 0) {
                ssize_t k = f(p, n, userdata);

                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (k == 0)
                        return -EIO;
                p += k;
                n -= (size_t) k;
        }
        return 0;
}

typedef struct LoopPread {
        int fd;
        uint64_t offset;
} LoopPread;

static ssize_t loop_pread_read(void *buf, size_t n, void *userdata) {
        LoopPread *s = userdata;
        ssize_t k = pread(s->fd, buf, n, (off_t) s->offset);

        if (k > 0)
                s->offset += (uint64_t) k;
        return k;
}

int loop_pread_exact(int fd, void *buf, size_t n, uint64_t offset) {
        LoopPread s = { .fd = fd, .offset = offset };

        return loop_read_exact(loop_pread_read, &s, buf, n);
}
