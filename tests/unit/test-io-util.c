/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "shared/io-util.h"
#include "shared/macro.h"
#include "tests.h"

/* A source that is interrupted every other call and gives at most 3
 * bytes at a time, from a string. */
typedef struct Trickle {
        const char *data;
        size_t left;
        unsigned calls;
} Trickle;

static ssize_t trickle_read(void *buf, size_t n, void *userdata) {
        Trickle *t = userdata;

        if (t->calls++ % 2 == 0) {
                errno = EINTR;
                return -1;
        }
        n = MIN(n, t->left);
        n = MIN(n, (size_t) 3);
        memcpy(buf, t->data, n);
        t->data += n;
        t->left -= n;
        return (ssize_t) n;
}

static ssize_t failing_read(void *buf, size_t n, void *userdata) {
        errno = EACCES;
        return -1;
}

TEST(loop_read_exact) {
        Trickle t = { .data = "0123456789", .left = 10 };
        Trickle s = { .data = "0123", .left = 4 };
        char buf[11] = { 0 };

        ASSERT_OK(loop_read_exact(trickle_read, &t, buf, 10));
        ASSERT_EQ_STR(buf, "0123456789");
        /* The source ends first. */
        ASSERT_EQ_INT(loop_read_exact(trickle_read, &s, buf, 10), -EIO);
        ASSERT_EQ_INT(loop_read_exact(failing_read, NULL, buf, 1), -EACCES);
        ASSERT_OK(loop_read_exact(failing_read, NULL, buf, 0));
}

TEST(loop_pread_exact) {
        char path[] = "/tmp/test-io-util.XXXXXX", buf[5] = { 0 };
        int fd = mkstemp(path);

        ASSERT_TRUE(fd >= 0);
        (void) unlink(path);
        ASSERT_TRUE(write(fd, "abcdefgh", 8) == 8);
        ASSERT_OK(loop_pread_exact(fd, buf, 4, 2));
        ASSERT_EQ_STR(buf, "cdef");
        /* The file's own position is where write() left it. */
        ASSERT_EQ_INT(lseek(fd, 0, SEEK_CUR), 8);
        ASSERT_EQ_INT(loop_pread_exact(fd, buf, 4, 6), -EIO);
        close(fd);
}

DEFINE_TEST_MAIN()
