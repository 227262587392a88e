/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shared/macro.h"
#include "store/sync-worker.h"
#include "tests.h"

typedef struct Result {
        unsigned calls;
        int error;
} Result;

static bool in_start;

static void on_done(SyncWorker *w, int error, void *userdata) {
        Result *r = userdata;

        ASSERT_TRUE(!in_start);
        r->calls++;
        r->error = error;
}

static int start(SyncWorker *w, int fd, Result *r) {
        int k;

        in_start = true;
        k = sync_worker_start(w, fd, on_done, r);
        in_start = false;
        return k;
}

/* Run the loop until the callback came (or 10 s). */
static void wait_done(sd_event *e, const Result *r) {
        for (unsigned i = 0; i < 1000 && r->calls == 0; i++)
                ASSERT_TRUE(sd_event_run(e, 10 * 1000) >= 0);
        ASSERT_EQ_INT(r->calls, 1);
}

static int temp_file(void) {
        char path[] = "/tmp/test-sync-worker-XXXXXX";
        int fd = mkostemp(path, O_CLOEXEC);

        ASSERT_TRUE(fd >= 0);
        ASSERT_TRUE(unlink(path) == 0);
        ASSERT_TRUE(write(fd, "data", 4) == 4);
        return fd;
}

static unsigned open_fds(void) {
        DIR *d = opendir("/proc/self/fd");
        unsigned n = 0;

        ASSERT_TRUE(d);
        while (readdir(d))
                n++;
        ASSERT_TRUE(closedir(d) == 0);
        return n;
}

TEST(syncs_a_file_and_reports_on_the_loop) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        _cleanup_(sync_worker_freep) SyncWorker *w = NULL;
        Result r = { 0 }, r2 = { 0 };
        int fd;

        ASSERT_OK(sd_event_new(&e));
        ASSERT_OK(sync_worker_new(e, &w));
        ASSERT_TRUE(!sync_worker_busy(w));
        fd = temp_file();
        ASSERT_OK(start(w, fd, &r));
        ASSERT_TRUE(sync_worker_busy(w));
        /* One at a time. */
        ASSERT_EQ_INT(start(w, fd, &r2), -EBUSY);
        /* The worker has a copy: the caller's may go at once. */
        ASSERT_TRUE(close(fd) == 0);
        ASSERT_EQ_INT(r.calls, 0);
        wait_done(e, &r);
        ASSERT_EQ_INT(r.error, 0);
        ASSERT_TRUE(!sync_worker_busy(w));
        ASSERT_EQ_INT(r2.calls, 0);

        /* And again, many times: each reported once, nothing leaks. */
        fd = temp_file();
        for (unsigned i = 0; i < 200; i++) {
                Result k = { 0 };
                unsigned before = open_fds();

                ASSERT_OK(start(w, fd, &k));
                wait_done(e, &k);
                ASSERT_EQ_INT(k.error, 0);
                ASSERT_EQ_INT(open_fds(), before);
        }
        ASSERT_TRUE(close(fd) == 0);
        /* Nothing more comes. */
        ASSERT_TRUE(sd_event_run(e, 50 * 1000) >= 0);
        ASSERT_EQ_INT(r.calls, 1);
}

TEST(errors) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        _cleanup_(sync_worker_freep) SyncWorker *w = NULL;
        Result r = { 0 };
        int p[2];

        ASSERT_OK(sd_event_new(&e));
        ASSERT_OK(sync_worker_new(e, &w));
        ASSERT_EQ_INT(start(w, -1, &r), -EBADF);
        ASSERT_EQ_INT(start(w, 1000000, &r), -EBADF);
        ASSERT_TRUE(!sync_worker_busy(w));

        /* fdatasync() of a pipe fails (EINVAL): reported, not lost. */
        ASSERT_TRUE(pipe2(p, O_CLOEXEC) == 0);
        ASSERT_OK(start(w, p[0], &r));
        wait_done(e, &r);
        ASSERT_EQ_INT(r.error, -EINVAL);
        ASSERT_TRUE(close(p[0]) == 0 && close(p[1]) == 0);
}

TEST(free_while_in_flight) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        SyncWorker *w = NULL;
        Result r = { 0 };
        unsigned before;
        int fd;

        ASSERT_OK(sd_event_new(&e));
        before = open_fds();
        ASSERT_OK(sync_worker_new(e, &w));
        fd = temp_file();
        ASSERT_OK(start(w, fd, &r));
        /* Completed (joined), not reported. */
        w = sync_worker_free(w);
        ASSERT_TRUE(sd_event_run(e, 20 * 1000) >= 0);
        ASSERT_EQ_INT(r.calls, 0);
        ASSERT_TRUE(close(fd) == 0);
        ASSERT_EQ_INT(open_fds(), before);
}

DEFINE_TEST_MAIN()
