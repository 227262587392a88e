/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "history-fixture.h"
#include "shared/macro.h"
#include "tests.h"

SessionKey key(uint8_t n) {
        SessionKey k;

        memset(k.bytes, n, sizeof(k.bytes));
        return k;
}

const char *qid(unsigned n) {
        static char buf[8][40];
        static unsigned i;
        char *b = buf[i++ % ELEMENTSOF(buf)];

        (void) snprintf(b, sizeof(buf[0]), "qr_%032x", n);
        return b;
}

char *path_in(const char *dir, const char *name) {
        char *p;

        ASSERT_TRUE(asprintf(&p, "%s/%s", dir, name) >= 0);
        return p;
}

void rm_rf(const char *dir) {
        DIR *d = opendir(dir);
        struct dirent *de;

        ASSERT_TRUE(d);
        while ((de = readdir(d))) {
                _cleanup_free_ char *p = NULL;
                struct stat st;

                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                p = path_in(dir, de->d_name);
                ASSERT_TRUE(lstat(p, &st) == 0);
                if (S_ISDIR(st.st_mode))
                        rm_rf(p);
                else
                        ASSERT_TRUE(unlink(p) == 0);
        }
        closedir(d);
        ASSERT_TRUE(rmdir(dir) == 0);
}

char *make_subdir(const char *name) {
        char *p;

        ASSERT_TRUE(asprintf(&p, "/tmp/test-history-%s-XXXXXX", name) >= 0);
        ASSERT_TRUE(mkdtemp(p));
        return p;
}

void rm_rf_freep(char **dir) {
        if (!*dir)
                return;
        rm_rf(*dir);
        free(*dir);
}

History *open_store(const char *dir, unsigned expected_recovered) {
        History *h = NULL;
        unsigned recovered = 12345;

        ASSERT_OK(history_open(dir, &h, &recovered));
        ASSERT_TRUE(h);
        ASSERT_EQ_INT(recovered, expected_recovered);
        return h;
}

HistoryFixture history_fixture_new(const char *name) {
        HistoryFixture f = { .dir = make_subdir(name) };

        f.h = open_store(f.dir, 0);
        return f;
}

void history_fixture_done(HistoryFixture *f) {
        f->h = history_free(f->h);
        rm_rf_freep(&f->dir);
}

void add_record(History *h, unsigned n, const SessionKey *k, usec_t asked_at, const char *follows) {
        HistoryOutcome o = {
                .succeeded = true,
                .answer = "An answer.",
                .finished_at = asked_at + USEC_PER_SEC,
        };

        if (follows)
                ASSERT_OK(history_begin_follow_up(
                        h, qid(n), k, "A question?", follows, follows, NULL, asked_at));
        else
                ASSERT_OK(history_begin(h, qid(n), k, "A question?", asked_at));
        ASSERT_OK(history_finish_nosync(h, qid(n), &o));
}
