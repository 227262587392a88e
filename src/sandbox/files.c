/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <sys/stat.h>

#include "sandbox/files.h"
#include "shared/log.h"
#include "shared/io-util.h"
#include "shared/json-util.h"
#include "shared/macro.h"
#include "shared/sha256.h"
#include "shared/strv.h"
#include "shared/utf8.h"
#include "shared/wiki-page.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);

/* Write len bytes to name in dir_fd atomically: a temporary file, then
 * rename. */
static int write_file_atomic(int dir_fd, const char *name, const void *data, size_t len) {
        _cleanup_free_ char *tmp = NULL;
        _cleanup_close_ int fd = -1;
        const uint8_t *p = data;

        if (asprintf(&tmp, ".#%s.tmp", name) < 0)
                return -ENOMEM;
        fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return negative_errno();
        while (len > 0) {
                ssize_t k = write(fd, p, len);
                if (k < 0) {
                        int r = negative_errno();
                        if (r == -EINTR)
                                continue;
                        (void) unlinkat(dir_fd, tmp, 0);
                        return r;
                }
                p += k;
                len -= (size_t) k;
        }
        if (renameat(dir_fd, tmp, dir_fd, name) < 0) {
                int r = negative_errno();
                (void) unlinkat(dir_fd, tmp, 0);
                return r;
        }
        return 0;
}

int sandbox_data_write_page(int dir_fd, const WikiPage *page, const WikiPage *entries, size_t n) {
        _cleanup_(json_object_putp) json_object *a = json_object_new_array();
        _cleanup_free_ char *file = NULL;
        const char *text;
        size_t text_len;
        int r;

        if (!a)
                return -ENOMEM;
        r = wiki_page_data_file_name(page->title, strlen(page->title), &file);
        if (r < 0)
                return r;
        r = write_file_atomic(dir_fd, file, page->content, page->content_size);
        if (r < 0)
                return r;

        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *f = NULL;
                json_object *o = json_object_new_object();

                if (!o || json_object_array_add(a, o) < 0) {
                        json_object_put(o);
                        return -ENOMEM;
                }
                r = wiki_page_data_file_name(entries[i].title, strlen(entries[i].title), &f);
                if (r < 0)
                        return r;
                json_object_object_add(o, "title", json_object_new_string(entries[i].title));
                json_object_object_add(o, "file", json_object_new_string(f));
                json_object_object_add(
                        o, "revision_id", json_object_new_int64((int64_t) entries[i].revision_id));
                json_object_object_add(o, "url", json_object_new_string(entries[i].url ? entries[i].url : ""));
        }
        text = json_object_to_json_string_length(a, JSON_C_TO_STRING_PLAIN, &text_len);
        if (!text)
                return -ENOMEM;
        return write_file_atomic(dir_fd, "pages.json", text, text_len);
}


int sandbox_artifact_name(const char *name, char **ret) {
        const unsigned char *p = (const unsigned char *) name;
        size_t len = strlen(name), o = 0;
        char *s = malloc(MIN(len, (size_t) NAME_MAX) + 2);

        if (!s)
                return -ENOMEM;
        for (size_t i = 0; i < len;) {
                size_t n = utf8_decode_no_c1(p + i, len - i);

                if (n == 1 && (p[i] < 0x20 || p[i] == 0x7f || p[i] == '/'))
                        n = 0;
                if (o + MAX(n, (size_t) 1) > NAME_MAX)
                        break;
                if (n == 0) {
                        s[o++] = '_';
                        i++;
                } else {
                        memcpy(s + o, p + i, n);
                        o += n;
                        i += n;
                }
        }
        s[o] = 0;
        if (o == 0 || streq(s, ".") || streq(s, "..")) {
                s[0] = '_';
                s[1] = 0;
        }
        *ret = s;
        return 0;
}

const char *sandbox_media_type(const char *name) {
        static const struct {
                const char *ext, *type;
        } table[] = {
                { "csv", "text/csv" },
                { "txt", "text/plain" },
                { "md", "text/markdown" },
                { "json", "application/json" },
                { "png", "image/png" },
                { "jpg", "image/jpeg" },
                { "jpeg", "image/jpeg" },
                { "gif", "image/gif" },
                { "svg", "image/svg+xml" },
                { "pdf", "application/pdf" },
                { "html", "text/html" },
                { "htm", "text/html" },
                { "tsv", "text/tab-separated-values" },
                { "xml", "application/xml" },
                { "wiki", "text/plain" },
                { "log", "text/plain" },
        };
        const char *dot = strrchr(name, '.');

        if (!dot || dot == name || !dot[1])
                return "application/octet-stream";
        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (strcasecmp(dot + 1, table[i].ext) == 0)
                        return table[i].type;
        return "application/octet-stream";
}

void sandbox_artifacts_done(SandboxArtifacts *a) {
        for (size_t i = 0; i < a->n; i++)
                artifact_done(&a->items[i]);
        free(a->items);
        *a = (SandboxArtifacts){ 0 };
}

static int cmp_strp(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Hash exactly size bytes of fd; -EIO if the file is shorter now. */
static int hash_fd(int fd, uint64_t size, char ret[static 65]) {
        uint8_t buf[65536], d[SHA256_DIGEST_SIZE];
        uint64_t left = size;
        _cleanup_(sha256_done) Sha256Ctx ctx = { 0 };
        int r;

        r = sha256_init(&ctx);
        if (r < 0)
                return r;
        while (left > 0) {
                size_t k = (size_t) MIN(left, (uint64_t) sizeof buf);

                r = loop_pread_exact(fd, buf, k, size - left);
                if (r < 0)
                        return r;
                r = sha256_update(&ctx, buf, k);
                if (r < 0)
                        return r;
                left -= k;
        }
        r = sha256_final(&ctx, d);
        if (r < 0)
                return r;
        sha256_to_hex(d, ret);
        return 0;
}

/* A DIR of its own on dir_fd's directory (dir_fd stays the caller's), from
 * the start. */
static int opendir_dup(int dir_fd, DIR **ret) {
        int fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3), r;
        DIR *d;

        if (fd < 0)
                return negative_errno();
        d = fdopendir(fd);
        if (!d) {
                r = negative_errno();
                (void) close(fd);
                return r;
        }
        rewinddir(d);
        *ret = d;
        return 0;
}

/* Logging a hostile tree must not cost a line per file: a few per reason. */
#define SKIP_LOG_MAX 5

static void log_skip(size_t *count, const char *name, const char *why) {
        _cleanup_free_ char *safe = NULL;

        (*count)++;
        if (*count > SKIP_LOG_MAX)
                return;
        if (sandbox_artifact_name(name, &safe) < 0)
                return;
        log_info(
                "Not keeping /out/%s as an artifact: %s%s.",
                safe,
                why,
                *count == SKIP_LOG_MAX ? " (further such files are not logged)" : "");
}

int sandbox_collect_artifacts(int dir_fd, uint64_t max_files, uint64_t max_bytes, SandboxArtifacts *ret) {
        _cleanup_(sandbox_artifacts_done) SandboxArtifacts a = { 0 };
        _cleanup_(closedirp) DIR *d = NULL;
        _cleanup_(strv_freep) char **names = NULL; /* NULL-terminated */
        size_t n_names = 0, cap_names = 0;
        uint64_t used = 0;
        struct dirent *de;
        int r = 0;

        r = opendir_dup(dir_fd, &d);
        if (r < 0)
                return r;
        /* Names first, so the order (and which files win the caps) does not
         * depend on the directory's hash order. */
        errno = 0;
        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (n_names == cap_names) {
                        size_t nc = cap_names ? cap_names * 2 : 64;
                        char **nn = reallocarray(names, nc + 1, sizeof *names);
                        if (!nn)
                                return -ENOMEM;
                        names = nn;
                        cap_names = nc;
                }
                names[n_names] = strdup(de->d_name);
                if (!names[n_names])
                        return -ENOMEM;
                names[++n_names] = NULL;
                errno = 0;
        }
        if (errno != 0)
                return negative_errno();
        if (n_names > 0)
                qsort(names, n_names, sizeof *names, cmp_strp);

        for (size_t i = 0; i < n_names; i++) {
                _cleanup_close_ int f = -1;
                struct stat st;
                Artifact *x;

                /* O_NONBLOCK: opening a FIFO must not wait for a writer;
                 * O_NOFOLLOW: a link is refused here, not followed. */
                f = openat(dir_fd, names[i], O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
                if (f < 0) {
                        if (errno == ELOOP || errno == ENXIO || errno == EISDIR)
                                log_skip(&a.skipped_not_regular, names[i], "not a regular file");
                        else
                                log_skip(&a.skipped_unreadable, names[i], "cannot be opened");
                        continue;
                }
                if (fstat(f, &st) < 0) {
                        log_skip(&a.skipped_unreadable, names[i], "cannot be read");
                        continue;
                }
                if (!S_ISREG(st.st_mode)) {
                        log_skip(&a.skipped_not_regular, names[i], "not a regular file");
                        continue;
                }
                if (a.n >= max_files) {
                        log_skip(&a.skipped_too_many, names[i], "too many files");
                        continue;
                }
                if ((uint64_t) st.st_size > max_bytes - used) {
                        log_skip(&a.skipped_too_large, names[i], "the artifacts' size limit is reached");
                        continue;
                }
                if (!a.items) {
                        a.items = calloc((size_t) MIN(max_files, (uint64_t) n_names), sizeof *a.items);
                        if (!a.items)
                                return -ENOMEM;
                }
                x = &a.items[a.n];
                *x = (Artifact){ .fd = -1, .size_bytes = (uint64_t) st.st_size };
                if (hash_fd(f, x->size_bytes, x->sha256) < 0 ||
                    (fstat(f, &st) == 0 && (uint64_t) st.st_size != x->size_bytes)) {
                        log_skip(&a.skipped_unreadable, names[i], "it changed or failed while read");
                        continue;
                }
                r = sandbox_artifact_name(names[i], &x->name);
                if (r < 0)
                        return r;
                x->media_type = sandbox_media_type(x->name);
                x->fd = TAKE_FD(f);
                used += x->size_bytes;
                a.n++;
        }
        if (a.skipped_not_regular + a.skipped_too_large + a.skipped_too_many + a.skipped_unreadable > 0)
                log_info(
                        "Artifacts: kept %zu; left out %zu not regular, %zu over the size limit, %zu over the "
                        "count limit, %zu unreadable.",
                        a.n,
                        a.skipped_not_regular,
                        a.skipped_too_large,
                        a.skipped_too_many,
                        a.skipped_unreadable);
        *ret = a;
        a = (SandboxArtifacts){ 0 };
        return 0;
}

int sandbox_rm_rf_children(int dir_fd) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int r = 0;

        r = opendir_dup(dir_fd, &d);
        if (r < 0)
                return r;
        while ((de = readdir(d))) {
                struct stat st;

                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (fstatat(dir_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (S_ISDIR(st.st_mode)) {
                        _cleanup_close_ int sub = -1;
                        int q;

                        /* Code may leave a mode-000 directory: it is ours. */
                        (void) fchmodat(dir_fd, de->d_name, 0700, 0);
                        sub = openat(dir_fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (sub >= 0) {
                                q = sandbox_rm_rf_children(sub);
                                if (q < 0 && r == 0)
                                        r = q;
                        }
                        if (unlinkat(dir_fd, de->d_name, AT_REMOVEDIR) < 0 && r == 0)
                                r = negative_errno();
                } else if (unlinkat(dir_fd, de->d_name, 0) < 0 && errno != ENOENT && r == 0)
                        r = negative_errno();
        }
        return r;
}

int sandbox_rm_rf(int at_fd, const char *path) {
        _cleanup_close_ int fd = -1;
        int r;

        (void) fchmodat(at_fd, path, 0700, 0);
        fd = openat(at_fd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                if (errno == ENOENT)
                        return 0;
                if (errno == ENOTDIR || errno == ELOOP)
                        return unlinkat(at_fd, path, 0) < 0 ? negative_errno() : 0;
                return negative_errno();
        }
        r = sandbox_rm_rf_children(fd);
        if (unlinkat(at_fd, path, AT_REMOVEDIR) < 0 && errno != ENOENT && r == 0)
                r = negative_errno();
        return r;
}
