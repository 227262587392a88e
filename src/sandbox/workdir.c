/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/files.h"
#include "sandbox/sandbox-internal.h"
#include "shared/log.h"
#include "shared/macro.h"

static int write_small_file(int dir_fd, const char *name, const char *content) {
        _cleanup_close_ int fd = openat(
                dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        size_t len = strlen(content);

        if (fd < 0)
                return negative_errno();
        return write(fd, content, len) == (ssize_t) len ? 0 : -EIO;
}

/* The default rootfs: a 56 KB skeleton whose /usr is the host's, bound read
 * only (test-environment.md). */
int sandbox_workdir_make_skeleton(const char *dir) {
        static const char *const dirs[] = { "etc", "usr", "tmp", "data", "out", "proc",
                                            "dev", "sys", "run", "var",  NULL };
        static const char *const links[][2] = {
                { "bin", "usr/bin" },
                { "sbin", "usr/sbin" },
                { "lib", "usr/lib" },
                { "lib64", "usr/lib64" },
        };
        _cleanup_close_ int fd = -1, etc = -1;
        int r;

        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                return negative_errno();
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        for (const char *const *d = dirs; *d; d++)
                if (mkdirat(fd, *d, 0755) < 0 && errno != EEXIST)
                        return negative_errno();
        for (size_t i = 0; i < ELEMENTSOF(links); i++)
                if (symlinkat(links[i][1], fd, links[i][0]) < 0 && errno != EEXIST)
                        return negative_errno();
        etc = openat(fd, "etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (etc < 0)
                return negative_errno();
        static const char *const files[][2] = {
                { "passwd",
                  "root:x:0:0:root:/tmp:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n" },
                { "group", "root:x:0:\nnogroup:x:65534:\n" },
                { "hosts", "127.0.0.1 localhost sandbox\n::1 localhost\n" },
                { "hostname", "sandbox\n" },
                { "resolv.conf", "" },
        };
        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                r = write_small_file(etc, files[i][0], files[i][1]);
                if (r < 0)
                        return r;
        }
        return 0;
}

int sandbox_workdir_mkdir_p(const char *path, mode_t mode) {
        _cleanup_free_ char *p = strdup(path);

        if (!p)
                return -ENOMEM;
        for (char *c = p + 1; *c; c++)
                if (*c == '/') {
                        *c = 0;
                        if (mkdir(p, mode) < 0 && errno != EEXIST)
                                return negative_errno();
                        *c = '/';
                }
        if (mkdir(p, mode) < 0 && errno != EEXIST)
                return negative_errno();
        return 0;
}

/* Remove every leftover query directory (not the rootfs or the runtime's
 * state). */
void sandbox_workdir_sweep(const char *work_dir) {
        _cleanup_close_ int fd = open(work_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d;
        struct dirent *de;

        if (fd < 0)
                return;
        d = fdopendir(fcntl(fd, F_DUPFD_CLOEXEC, 3));
        if (!d)
                return;
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, "..") && !streq(de->d_name, "rootfs") &&
                    !streq(de->d_name, "runtime")) {
                        int r = sandbox_rm_rf(fd, de->d_name);
                        if (r < 0)
                                log_warning_errno(
                                        r, "Cannot remove the leftover directory %s/%s", work_dir, de->d_name);
                        else
                                log_info("Removed the leftover query directory %s.", de->d_name);
                }
        closedir(d);
}

/* The run's /out, copied out by its init into out-next, becomes the
 * query's out directory; the previous one is removed. */
int sandbox_workdir_take_out_next(SandboxQuery *q) {
        int fd;

        if (renameat2(q->dir_fd, SANDBOX_OUT_NEXT_DIR, q->dir_fd, SANDBOX_OUT_DIR, RENAME_EXCHANGE) < 0) {
                if (errno != EINVAL && errno != ENOSYS)
                        return negative_errno();
                /* A file system without the exchange: two renames. */
                (void) sandbox_rm_rf(q->dir_fd, SANDBOX_OUT_OLD_DIR);
                if (renameat(q->dir_fd, SANDBOX_OUT_DIR, q->dir_fd, SANDBOX_OUT_OLD_DIR) < 0)
                        return negative_errno();
                if (renameat(q->dir_fd, SANDBOX_OUT_NEXT_DIR, q->dir_fd, SANDBOX_OUT_DIR) < 0) {
                        int r = negative_errno();
                        (void) renameat(q->dir_fd, SANDBOX_OUT_OLD_DIR, q->dir_fd, SANDBOX_OUT_DIR);
                        return r;
                }
                (void) renameat(q->dir_fd, SANDBOX_OUT_OLD_DIR, q->dir_fd, SANDBOX_OUT_NEXT_DIR);
        }
        fd = openat(q->dir_fd, SANDBOX_OUT_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return negative_errno();
        (void) close(q->out_fd);
        q->out_fd = fd;
        return 0;
}

static int sandbox_workdir_close(int fd) {
        if (fd >= 0)
                (void) close(fd);
        return -1;
}

/* An open directory below dir_fd, never through a link. */
static int sandbox_workdir_open(int dir_fd, const char *name) {
        int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);

        return fd < 0 ? negative_errno() : fd;
}

int sandbox_workdir_make_query(SandboxQuery *q) {
        int r;

        assert(q);

        r = sandbox_rm_rf(AT_FDCWD, q->dir);
        if (r < 0)
                return r;
        if (mkdir(q->dir, 0700) < 0)
                return negative_errno();
        q->dir_fd = sandbox_workdir_open(AT_FDCWD, q->dir);
        if (q->dir_fd < 0)
                return q->dir_fd;
        if (mkdirat(q->dir_fd, "data", 0700) < 0 || mkdirat(q->dir_fd, SANDBOX_OUT_DIR, 0700) < 0)
                return negative_errno();
        q->data_fd = sandbox_workdir_open(q->dir_fd, "data");
        if (q->data_fd < 0)
                return q->data_fd;
        q->out_fd = sandbox_workdir_open(q->dir_fd, SANDBOX_OUT_DIR);
        if (q->out_fd < 0)
                return q->out_fd;
        return 0;
}

void sandbox_workdir_remove_query(SandboxQuery *q) {
        int r;

        assert(q);

        q->data_fd = sandbox_workdir_close(q->data_fd);
        q->out_fd = sandbox_workdir_close(q->out_fd);
        q->dir_fd = sandbox_workdir_close(q->dir_fd);
        if (!q->dir)
                return;
        r = sandbox_rm_rf(AT_FDCWD, q->dir);
        if (r < 0)
                log_warning_errno(r, "Cannot remove %s", q->dir);
}
