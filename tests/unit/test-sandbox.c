/* SPDX-License-Identifier: MIT */
/* The pure parts of src/sandbox/: the config.json generator (a golden file
 * and invariants), the /data writer, artifact
 * names and media types, the artifact collector on hostile /out trees, the
 * capped output buffer against a reference, rm -rf, the command lines,
 * the result JSON, and the Sandbox's state (the rule, and its
 * announcement from the loop). The runs themselves are in the system
 * suite. */

#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>

#include "sandbox/files.h"
#include "sandbox/output.h"
#include "sandbox/runtime.h"
#include "sandbox/sandbox-internal.h"
#include "sandbox/sandbox.h"
#include "sandbox/scope.h"
#include "shared/config.h"
#include "shared/json-util.h"
#include "shared/macro.h"
#include "shared/strv.h"
#include "shared/sha256.h"
#include "store/history.h"
#include "tests.h"


static char *make_tmpdir(void) {
        char *d = strdup("/tmp/test-sandbox-XXXXXX");
        ASSERT_TRUE(d && mkdtemp(d));
        return d;
}

/* ---- config.json ---- */

static const RuntimeSpec golden_spec = {
        .rootfs = "/var/lib/wikiweb/sandbox/rootfs",
        .usr = "/usr",
        .data_dir = "/var/lib/wikiweb/sandbox/qr_0/data",
        .uid = 994,
        .gid = 993,
        .memory_max_bytes = 536870912,
        .tasks_max = 64,
        .cpu_seconds = 30,
        .file_max_bytes = 67108864,
        .tmp_max_bytes = RUNTIME_TMP_MAX_BYTES,
        .out_max_bytes = 67108864,
        .seccomp = true,
};

static json_object *key(json_object *o, const char *k) {
        json_object *v = NULL;
        ASSERT_TRUE(json_object_object_get_ex(o, k, &v));
        return v;
}

static bool array_has_string(json_object *a, const char *s) {
        for (size_t i = 0; i < json_object_array_length(a); i++)
                if (streq(json_object_get_string(json_object_array_get_idx(a, i)), s))
                        return true;
        return false;
}

TEST(config_golden) {
        _cleanup_free_ char *text = NULL, *path = NULL, *golden = NULL;
        FILE *f;
        size_t n;

        ASSERT_OK(runtime_config_render(&golden_spec, &text));
        ASSERT_TRUE(asprintf(&path, "%s/sandbox-config.json", test_data_dir()) > 0);
        if (getenv("WIKIWEB_UPDATE_GOLDEN")) {
                f = fopen(path, "we");
                ASSERT_TRUE(f);
                fputs(text, f);
                fputc('\n', f);
                fclose(f);
        }
        golden = test_read_file(path, &n);
        ASSERT_TRUE(n > 0 && golden[n - 1] == '\n');
        golden[n - 1] = 0;
        ASSERT_EQ_STR(text, golden);
}

static void check_config_invariants(const RuntimeSpec *spec) {
        _cleanup_free_ char *text = NULL;
        _cleanup_(json_object_putp) json_object *c = NULL;
        json_object *process, *caps, *ns, *mounts, *linux_, *rl, *maps;
        bool seen_net = false;
        unsigned n_out = 0;

        ASSERT_OK(runtime_config_render(spec, &text));
        c = json_tokener_parse(text);
        ASSERT_TRUE(c);
        process = key(c, "process");
        ASSERT_TRUE(json_object_get_boolean(key(process, "noNewPrivileges")));
        ASSERT_TRUE(!json_object_get_boolean(key(process, "terminal")));
        ASSERT_EQ_INT(json_object_get_int(key(key(process, "user"), "uid")), 0);
        /* No capability at all, in any set. */
        caps = key(process, "capabilities");
        json_object_object_foreach(caps, k, v) {
                (void) k;
                ASSERT_EQ_INT(json_object_array_length(v), 0);
        }
        ASSERT_EQ_INT(json_object_object_length(caps), 5);
        /* Every rlimit the notes need, CORE 0. */
        rl = key(process, "rlimits");
        for (const char *const *t = (const char *const[]){ "RLIMIT_NPROC",
                                                           "RLIMIT_DATA",
                                                           "RLIMIT_CPU",
                                                           "RLIMIT_FSIZE",
                                                           "RLIMIT_NOFILE",
                                                           "RLIMIT_CORE",
                                                           NULL };
             *t;
             t++) {
                bool found = false;
                for (size_t i = 0; i < json_object_array_length(rl); i++) {
                        json_object *l = json_object_array_get_idx(rl, i);
                        if (!streq(json_object_get_string(key(l, "type")), *t))
                                continue;
                        found = true;
                        ASSERT_TRUE(
                                json_object_get_uint64(key(l, "hard")) ==
                                json_object_get_uint64(key(l, "soft")));
                        if (streq(*t, "RLIMIT_CORE"))
                                ASSERT_EQ_INT(json_object_get_uint64(key(l, "hard")), 0);
                        if (streq(*t, "RLIMIT_NPROC"))
                                ASSERT_EQ_INT(json_object_get_uint64(key(l, "hard")), spec->tasks_max);
                        if (streq(*t, "RLIMIT_DATA"))
                                ASSERT_EQ_INT(json_object_get_uint64(key(l, "hard")), spec->memory_max_bytes);
                }
                ASSERT_TRUE(found);
        }
        ASSERT_TRUE(json_object_get_boolean(key(key(c, "root"), "readonly")));

        linux_ = key(c, "linux");
        ns = key(linux_, "namespaces");
        static const char *const want_ns[] = { "pid",   "network", "ipc",    "uts",
                                               "mount", "user",    "cgroup", NULL };
        for (const char *const *t = want_ns; *t; t++) {
                bool found = false;
                for (size_t i = 0; i < json_object_array_length(ns); i++) {
                        json_object *n = json_object_array_get_idx(ns, i);
                        if (streq(json_object_get_string(key(n, "type")), *t)) {
                                found = true;
                                /* A path would join an existing namespace. */
                                ASSERT_TRUE(!json_object_object_get_ex(n, "path", NULL));
                        }
                }
                ASSERT_TRUE(found);
                if (streq(*t, "network"))
                        seen_net = true;
        }
        ASSERT_TRUE(seen_net);
        /* One mapping each, container 0 = the daemon's ids, size 1. */
        for (int i = 0; i < 2; i++) {
                json_object *m;
                maps = key(linux_, i == 0 ? "uidMappings" : "gidMappings");
                ASSERT_EQ_INT(json_object_array_length(maps), 1);
                m = json_object_array_get_idx(maps, 0);
                ASSERT_EQ_INT(json_object_get_int(key(m, "containerID")), 0);
                ASSERT_EQ_INT(json_object_get_uint64(key(m, "hostID")), i == 0 ? spec->uid : spec->gid);
                ASSERT_EQ_INT(json_object_get_int(key(m, "size")), 1);
        }
        ASSERT_TRUE(array_has_string(key(linux_, "maskedPaths"), "/proc/kcore"));
        ASSERT_TRUE(array_has_string(key(linux_, "readonlyPaths"), "/proc/sys"));
        if (spec->seccomp) {
                json_object *sc = key(linux_, "seccomp"), *calls = key(sc, "syscalls"), *denied;
                ASSERT_EQ_STR(json_object_get_string(key(sc, "defaultAction")), "SCMP_ACT_ALLOW");
                denied = key(json_object_array_get_idx(calls, 0), "names");
                for (const char *const *t = (const char *const[]){ "unshare",
                                                                   "setns",
                                                                   "mount",
                                                                   "keyctl",
                                                                   "io_uring_setup",
                                                                   "io_uring_enter",
                                                                   "userfaultfd",
                                                                   "ptrace",
                                                                   "bpf",
                                                                   "shmget",
                                                                   "msgget",
                                                                   "semget",
                                                                   "mq_open",
                                                                   NULL };
                     *t;
                     t++)
                        ASSERT_TRUE(array_has_string(denied, *t));
        }

        /* Every bind of a host path is read-only; /out and /tmp are
         * tmpfs (as /dev, /dev/shm: none of them a host path), /out of
         * exactly the cap rounded down to a page, and at most
         * RUNTIME_OUT_MAX_ENTRIES entries (only the root under a page). */
        mounts = key(c, "mounts");
        for (size_t i = 0; i < json_object_array_length(mounts); i++) {
                json_object *m = json_object_array_get_idx(mounts, i), *opts = key(m, "options");
                const char *dest = json_object_get_string(key(m, "destination"));
                const char *type = json_object_get_string(key(m, "type"));

                ASSERT_TRUE(array_has_string(opts, "nosuid"));
                if (streq(type, "bind")) {
                        ASSERT_TRUE(array_has_string(opts, "ro") && !array_has_string(opts, "rw"));
                        ASSERT_TRUE(streq(dest, "/usr") || streq(dest, "/data"));
                } else
                        ASSERT_TRUE(streq(type, "tmpfs") || streq(type, "proc") || streq(type, "devpts"));
                if (streq(dest, "/tmp"))
                        ASSERT_TRUE(streq(type, "tmpfs"));
                if (streq(dest, "/out")) {
                        uint64_t size = spec->out_max_bytes / RUNTIME_PAGE_SIZE * RUNTIME_PAGE_SIZE;
                        _cleanup_free_ char *size_opt = NULL, *inodes_opt = NULL;

                        ASSERT_TRUE(asprintf(&size_opt, "size=%" PRIu64, MAX(size, RUNTIME_PAGE_SIZE)) > 0);
                        ASSERT_TRUE(
                                asprintf(&inodes_opt, "nr_inodes=%u", size > 0 ? RUNTIME_OUT_MAX_ENTRIES + 1 : 1) >
                                0);
                        ASSERT_TRUE(streq(type, "tmpfs"));
                        ASSERT_TRUE(array_has_string(opts, size_opt));
                        ASSERT_TRUE(array_has_string(opts, inodes_opt));
                        ASSERT_TRUE(array_has_string(opts, "noexec") && array_has_string(opts, "nodev"));
                        n_out++;
                }
                /* No /sys at all. */
                ASSERT_TRUE(!strneq(dest, "/sys", 4));
        }
        ASSERT_EQ_INT(n_out, 1);
        /* The init is told the cap and the entry limit (it copies /out
         * out within them). */
        {
                json_object *args = key(key(c, "process"), "args");
                _cleanup_free_ char *cap = NULL;

                ASSERT_EQ_INT(json_object_array_length(args), 5);
                ASSERT_TRUE(asprintf(&cap, "%" PRIu64, spec->out_max_bytes) > 0);
                ASSERT_EQ_STR(json_object_get_string(json_object_array_get_idx(args, 3)), cap);
        }
}

TEST(config_invariants) {
        RuntimeSpec s = golden_spec;

        check_config_invariants(&s);
        s.usr = NULL;
        s.seccomp = false;
        s.uid = 0;
        check_config_invariants(&s);
        /* Caps that are not whole pages, and none at all. */
        s.out_max_bytes = 1000000;
        check_config_invariants(&s);
        s.out_max_bytes = 4095;
        check_config_invariants(&s);
        s.out_max_bytes = 0;
        check_config_invariants(&s);
        s.data_dir = NULL;
        {
                char *t = NULL;
                ASSERT_EQ_INT(runtime_config_render(&s, &t), -EINVAL);
        }
}

TEST(data_write) {
        _cleanup_free_ char *dir = make_tmpdir();
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        WikiPage pages[2] = {
                { .title = (char *) "Apple",
                  .revision_id = 7,
                  .url = (char *) "https://w/Apple",
                  .content = (char *) "red",
                  .content_size = 3 },
                { .title = (char *) "../x",
                  .revision_id = 9,
                  .url = (char *) "https://w/x",
                  .content = (char *) "",
                  .content_size = 0 },
        };
        char buf[512];
        ssize_t k;
        int f;

        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(sandbox_data_write_page(fd, &pages[0], pages, 1));
        ASSERT_OK(sandbox_data_write_page(fd, &pages[1], pages, 2));
        f = openat(fd, "pages.json", O_RDONLY | O_CLOEXEC);
        ASSERT_TRUE(f >= 0);
        k = read(f, buf, sizeof buf - 1);
        close(f);
        ASSERT_TRUE(k > 0);
        buf[k] = 0;
        ASSERT_EQ_STR(
                buf,
                "[{\"title\":\"Apple\",\"file\":\"Apple.wiki\",\"revision_id\":7,\"url\":\"https:\\/\\/w\\/Apple\"},"
                "{\"title\":\"..\\/x\",\"file\":\"..%2Fx.wiki\",\"revision_id\":9,\"url\":\"https:\\/\\/w\\/x\"}]");
        f = openat(fd, "Apple.wiki", O_RDONLY | O_CLOEXEC);
        ASSERT_TRUE(f >= 0);
        ASSERT_EQ_INT(read(f, buf, sizeof buf), 3);
        close(f);
        ASSERT_TRUE(faccessat(fd, "..%2Fx.wiki", F_OK, 0) == 0);
        ASSERT_OK(sandbox_rm_rf(AT_FDCWD, dir));
}

/* ---- artifact names and media types ---- */

TEST(artifact_names) {
        static const struct {
                const char *in, *out;
        } cases[] = {
                { "table.csv", "table.csv" },
                { "line\nbreak.txt", "line_break.txt" },
                { "bad\xff\xfe.bin", "bad__.bin" },
                { "tab\there", "tab_here" },
                { "del\x7f", "del_" },
                { "c1\xc2\x85x", "c1__x" },
                { "caf\xc3\xa9.md", "caf\xc3\xa9.md" },
                { "a/b", "a_b" },
                { ".", "_" },
                { "..", "_" },
                { "", "_" },
                { "\xe2\x82", "__" },
        };
        char long_name[600];
        _cleanup_free_ char *n = NULL;

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *x = NULL;
                ASSERT_OK(sandbox_artifact_name(cases[i].in, &x));
                ASSERT_EQ_STR(x, cases[i].out);
        }
        /* 300 two-byte characters: cut on a character boundary. */
        for (size_t i = 0; i < 600; i += 2) {
                long_name[i] = (char) 0xc3;
                long_name[i + 1] = (char) 0xa9;
        }
        long_name[599] = 0;
        ASSERT_OK(sandbox_artifact_name(long_name, &n));
        ASSERT_TRUE(strlen(n) <= NAME_MAX && strlen(n) >= NAME_MAX - 1);
        ASSERT_TRUE(strlen(n) % 2 == 0);

        ASSERT_EQ_STR(sandbox_media_type("a.csv"), "text/csv");
        ASSERT_EQ_STR(sandbox_media_type("a.CSV"), "text/csv");
        ASSERT_EQ_STR(sandbox_media_type("plot.png"), "image/png");
        ASSERT_EQ_STR(sandbox_media_type("x.svg"), "image/svg+xml");
        ASSERT_EQ_STR(sandbox_media_type("x.html"), "text/html");
        ASSERT_EQ_STR(sandbox_media_type("x.pdf"), "application/pdf");
        ASSERT_EQ_STR(sandbox_media_type("x.json"), "application/json");
        ASSERT_EQ_STR(sandbox_media_type("x.exe"), "application/octet-stream");
        ASSERT_EQ_STR(sandbox_media_type(".csv"), "application/octet-stream");
        ASSERT_EQ_STR(sandbox_media_type("csv"), "application/octet-stream");
        ASSERT_EQ_STR(sandbox_media_type("x."), "application/octet-stream");
}

/* ---- the collector on hostile trees ---- */

static void write_at(int dir, const char *name, const char *content) {
        int f = openat(dir, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ASSERT_TRUE(f >= 0);
        ASSERT_EQ_INT(write(f, content, strlen(content)), (long long) strlen(content));
        close(f);
}

TEST(collector_hostile) {
        _cleanup_free_ char *dir = make_tmpdir();
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        SandboxArtifacts a = { 0 };
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char hex[65];
        uint8_t d[SHA256_DIGEST_SIZE];
        int f, sock;
        bool have_dev;

        ASSERT_TRUE(fd >= 0);
        write_at(fd, "b-table.csv", "a,b\n1,2\n");
        write_at(fd, "c-name\nwith newline.txt", "nl");
        write_at(fd, "d-bad\xff.bin", "ff");
        ASSERT_TRUE(symlinkat("/etc/shadow", fd, "a-shadow-link") == 0);
        ASSERT_TRUE(symlinkat("b-table.csv", fd, "a-relative-link.csv") == 0);
        ASSERT_TRUE(mkfifoat(fd, "e-fifo", 0644) == 0);
        ASSERT_TRUE(mkdirat(fd, "f-directory", 0755) == 0);
        write_at(fd, "f-directory/inner.txt", "not top level");
        /* 10 GB, sparse: skipped by its size, never read. */
        f = openat(fd, "g-sparse.bin", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        ASSERT_TRUE(f >= 0);
        ASSERT_TRUE(ftruncate(f, (off_t) 10 << 30) == 0);
        close(f);
        ASSERT_TRUE(
                (size_t) snprintf(sa.sun_path, sizeof sa.sun_path, "%s/h-socket", dir) < sizeof sa.sun_path);
        sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ASSERT_TRUE(sock >= 0 && bind(sock, (struct sockaddr *) &sa, sizeof sa) == 0);
        close(sock);
        have_dev = mknodat(fd, "i-device", S_IFCHR | 0644, makedev(1, 3)) == 0; /* /dev/null's numbers */

        ASSERT_OK(sandbox_collect_artifacts(fd, 16, 64 << 20, &a));
        ASSERT_EQ_INT(a.n, 3);
        ASSERT_EQ_STR(a.items[0].name, "b-table.csv");
        ASSERT_EQ_STR(a.items[0].media_type, "text/csv");
        ASSERT_EQ_INT(a.items[0].size_bytes, 8);
        sha256("a,b\n1,2\n", 8, d);
        sha256_to_hex(d, hex);
        ASSERT_EQ_STR(a.items[0].sha256, hex);
        ASSERT_TRUE(a.items[0].fd >= 0);
        ASSERT_EQ_STR(a.items[1].name, "c-name_with newline.txt");
        ASSERT_EQ_STR(a.items[2].name, "d-bad_.bin");
        ASSERT_EQ_INT(a.skipped_not_regular, 5 + (have_dev ? 1 : 0)); /* 2 links, fifo, dir, socket, device */
        ASSERT_EQ_INT(a.skipped_too_large, 1);
        ASSERT_EQ_INT(a.skipped_too_many, 0);
        sandbox_artifacts_done(&a);

        /* Count and byte caps: the first files by name win. */
        ASSERT_OK(sandbox_collect_artifacts(fd, 2, 64 << 20, &a));
        ASSERT_EQ_INT(a.n, 2);
        ASSERT_EQ_INT(a.skipped_too_many, 2); /* d-bad_.bin, and g-sparse.bin: the count is checked first */
        sandbox_artifacts_done(&a);
        ASSERT_OK(sandbox_collect_artifacts(fd, 16, 9, &a)); /* 8 bytes fit, then 2 don't... */
        ASSERT_EQ_INT(a.n, 1);
        ASSERT_EQ_INT(a.skipped_too_large, 3);
        sandbox_artifacts_done(&a);
        ASSERT_OK(sandbox_collect_artifacts(fd, 0, 64 << 20, &a));
        ASSERT_EQ_INT(a.n, 0);
        sandbox_artifacts_done(&a);

        ASSERT_OK(sandbox_rm_rf(AT_FDCWD, dir));
        ASSERT_TRUE(access(dir, F_OK) < 0 && errno == ENOENT);
        ASSERT_TRUE(access("/etc/shadow", F_OK) == 0 || errno == ENOENT); /* the link's target is untouched */
}

TEST(collector_many) {
        _cleanup_free_ char *dir = make_tmpdir();
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        SandboxArtifacts a = { 0 };

        ASSERT_TRUE(fd >= 0);
        for (int i = 0; i < 10000; i++) {
                char name[32];
                snprintf(name, sizeof name, "f%05d.txt", i);
                write_at(fd, name, "x");
        }
        ASSERT_OK(sandbox_collect_artifacts(fd, 16, 64 << 20, &a));
        ASSERT_EQ_INT(a.n, 16);
        ASSERT_EQ_STR(a.items[0].name, "f00000.txt");
        ASSERT_EQ_STR(a.items[15].name, "f00015.txt");
        ASSERT_EQ_INT(a.skipped_too_many, 10000 - 16);
        sandbox_artifacts_done(&a);
        ASSERT_OK(sandbox_collect_artifacts(fd, 1000, 64 << 20, &a));
        ASSERT_EQ_INT(a.n, 1000);
        sandbox_artifacts_done(&a);
        ASSERT_OK(sandbox_rm_rf(AT_FDCWD, dir));
}

TEST(rm_rf_hostile) {
        _cleanup_free_ char *dir = make_tmpdir(), *outside = make_tmpdir(), *victim = NULL;
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        ASSERT_TRUE(asprintf(&victim, "%s/keep", outside) > 0);
        ASSERT_TRUE(close(open(victim, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) == 0);
        ASSERT_TRUE(mkdirat(fd, "locked", 0700) == 0);
        write_at(fd, "locked/f", "x");
        ASSERT_TRUE(mkdirat(fd, "locked/deeper", 0700) == 0);
        ASSERT_TRUE(fchmodat(fd, "locked/deeper", 0, 0) == 0);
        ASSERT_TRUE(fchmodat(fd, "locked", 0, 0) == 0);
        ASSERT_TRUE(symlinkat(outside, fd, "link-to-outside") == 0);
        ASSERT_OK(sandbox_rm_rf(AT_FDCWD, dir));
        ASSERT_TRUE(access(dir, F_OK) < 0);
        ASSERT_TRUE(access(victim, F_OK) == 0); /* not followed */
        ASSERT_OK(sandbox_rm_rf(AT_FDCWD, outside));
        ASSERT_OK(sandbox_rm_rf(AT_FDCWD, outside)); /* missing: fine */
}

/* ---- output ---- */

TEST(output_reference) {
        srand(12);
        for (int round = 0; round < 300; round++) {
                size_t cap = 2 + (size_t) rand() % 200, total = 0, head_cap = cap / 2 + cap % 2,
                       tail_cap = cap / 2;
                uint8_t *all = malloc(20000);
                OutputBuffer b;
                int pieces = rand() % 30;

                ASSERT_TRUE(all);
                ASSERT_OK(output_buffer_init(&b, cap));
                for (int i = 0; i < pieces; i++) {
                        size_t len = (size_t) rand() % (rand() % 2 ? 10 : 500);
                        if (total + len > 20000)
                                break;
                        for (size_t j = 0; j < len; j++)
                                all[total + j] = (uint8_t) ('a' + rand() % 26);
                        output_buffer_append(&b, all + total, len);
                        total += len;
                }
                ASSERT_EQ_INT(b.total, total);
                {
                        size_t want = MIN(total, head_cap);
                        ASSERT_EQ_INT(b.head_len, want);
                }
                ASSERT_TRUE(memcmp(b.head, all, b.head_len) == 0);
                {
                        size_t after = total - b.head_len, tl = MIN(after, tail_cap);
                        ASSERT_EQ_INT(b.tail_len, tl);
                        for (size_t j = 0; j < tl; j++)
                                ASSERT_EQ_INT(b.tail[(b.tail_start + j) % tail_cap], all[total - tl + j]);
                        ASSERT_EQ_INT(output_buffer_dropped(&b), after - tl);
                }
                {
                        _cleanup_free_ char *text = NULL;
                        size_t len;
                        ASSERT_OK(output_buffer_render(&b, &text, &len));
                        ASSERT_TRUE(len <= OUTPUT_RENDER_MAX(cap));
                        if (output_buffer_dropped(&b) == 0) {
                                ASSERT_EQ_INT(len, total);
                                ASSERT_TRUE(memcmp(text, all, total) == 0);
                        } else
                                ASSERT_TRUE(strstr(text, " bytes omitted ...]\n"));
                }
                output_buffer_done(&b);
                free(all);
        }
}

TEST(output_sanitize) {
        static const struct {
                const char *in;
                size_t len;
                const char *out;
        } cases[] = {
                { "plain\ttext\n", 11, "plain\ttext\n" },
                { "crlf\r\nline", 10, "crlf\nline" },
                { "lone\rcr",
                  7,
                  "lone\xef\xbf\xbd"
                  "cr" },
                { "nul\0byte",
                  8,
                  "nul\xef\xbf\xbd"
                  "byte" },
                { "esc\x1b[31m", 8, "esc\xef\xbf\xbd[31m" },
                { "bad\xff", 4, "bad\xef\xbf\xbd" },
                { "cut\xe2\x82", 5, "cut\xef\xbf\xbd\xef\xbf\xbd" },
                { "ok \xe2\x82\xac \xf0\x9f\x98\x80", 11, "ok \xe2\x82\xac \xf0\x9f\x98\x80" },
                { "overlong \xc0\xaf", 11, "overlong \xef\xbf\xbd\xef\xbf\xbd" },
                { "surrogate \xed\xa0\x80", 13, "surrogate \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
                { "c1 \xc2\x9b", 5, "c1 \xef\xbf\xbd\xef\xbf\xbd" },
                { "del\x7f", 4, "del\xef\xbf\xbd" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *o = NULL;
                size_t len;
                ASSERT_OK(output_sanitize((const uint8_t *) cases[i].in, cases[i].len, &o, &len));
                ASSERT_EQ_STR(o, cases[i].out);
                ASSERT_EQ_INT(len, strlen(cases[i].out));
        }
        {
                OutputBuffer b;
                ASSERT_EQ_INT(output_buffer_init(&b, 1), -EINVAL);
        }
}

/* ---- names, command lines, results ---- */

TEST(scope_names) {
        char *n = NULL;

        ASSERT_OK(scope_name("qr_0123abcd", 3, &n));
        ASSERT_EQ_STR(n, "wikiweb-q-qr_0123abcd-3.scope");
        free(n);
        ASSERT_EQ_INT(scope_name("qr-1", 1, &n), -EINVAL);
        ASSERT_EQ_INT(scope_name("qr/../1", 1, &n), -EINVAL);
        ASSERT_EQ_INT(scope_name("", 1, &n), -EINVAL);
        ASSERT_EQ_INT(scope_name("a b", 1, &n), -EINVAL);
}

TEST(runtime_argv) {
        char **a = NULL;

        ASSERT_OK(runtime_argv(
                RUNTIME_CRUN, "/usr/bin/crun", "/run/wikiweb/runtime", RUNTIME_RUN, "wikiweb-q-x-1", "/b", &a));
        ASSERT_EQ_STR(a[1], "--root");
        ASSERT_EQ_STR(a[2], "/run/wikiweb/runtime");
        ASSERT_EQ_STR(a[3], "--cgroup-manager=disabled");
        ASSERT_EQ_STR(a[4], "run");
        ASSERT_EQ_STR(a[5], "--no-new-keyring");
        ASSERT_EQ_STR(a[6], "--preserve-fds=3");
        ASSERT_EQ_STR(a[10], "/b/container.pid");
        ASSERT_EQ_STR(a[11], "wikiweb-q-x-1");
        ASSERT_TRUE(!a[12]);
        strv_free(a);
        ASSERT_OK(runtime_argv(RUNTIME_RUNC, "/usr/sbin/runc", "/r", RUNTIME_RUN, "id", "/b", &a));
        ASSERT_EQ_STR(a[3], "run"); /* no cgroup-manager switch for runc */
        strv_free(a);
        ASSERT_OK(runtime_argv(RUNTIME_CRUN, "/usr/bin/crun", "/r", RUNTIME_DELETE, "id", NULL, &a));
        ASSERT_EQ_STR(a[3], "delete");
        ASSERT_EQ_STR(a[4], "-f");
        strv_free(a);
        ASSERT_EQ_INT(runtime_argv(RUNTIME_CRUN, "/c", "/r", RUNTIME_STATE, NULL, NULL, &a), -EINVAL);
        ASSERT_EQ_INT(runtime_kind_from_path("/usr/sbin/runc"), RUNTIME_RUNC);
        ASSERT_EQ_INT(runtime_kind_from_path("/usr/bin/crun"), RUNTIME_CRUN);
        {
                char *p = NULL;
                ASSERT_EQ_INT(runtime_find("/nonexistent/crun", &p), -ENOENT);
                ASSERT_EQ_INT(runtime_find("relative/crun", &p), -ENOENT);
                ASSERT_OK(runtime_find("sh", &p));
                ASSERT_TRUE(p[0] == '/');
                free(p);
        }
}

static char *result_json(const SandboxResult *r, SandboxResultShape shape) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        char *j;

        ASSERT_OK(sandbox_result_to_json(r, shape, &o));
        j = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        ASSERT_TRUE(j);
        return j;
}

/* The one JSON of a run_python result: the tool result the model sees
 * (API.md 8.6) and the stream's summary (11.2), the same keys in the same
 * order; bytes that are not UTF-8 (a caller's, not the sandbox's, which
 * sanitizes) made valid. */
TEST(result_json) {
        Artifact files[] = { { .name = (char *) "a.csv", .size_bytes = 12, .fd = -1 },
                             { .name = (char *) "b\xff", .size_bytes = UINT64_C(1) << 40, .fd = -1 } };
        SandboxResult r = {
                .has_exit_code = true,
                .exit_code = 3,
                .stdout_text = (char *) "out\n\"/",
                .stdout_size = 6,
                .stderr_text = (char *) "a\0b",
                .stderr_size = 3,
                .files = files,
                .n_files = 1,
        };
        _cleanup_free_ char *j = NULL, *k = NULL, *l = NULL, *m = NULL;

        j = result_json(&r, SANDBOX_RESULT_TOOL);
        ASSERT_EQ_STR(
                j,
                "{\"exit_code\":3,\"signal\":null,\"timed_out\":false,\"stdout\":\"out\\n\\\"/\","
                "\"stderr\":\"a\xef\xbf\xbd"
                "b\",\"files\":[{\"name\":\"a.csv\",\"size_bytes\":12}]}");
        k = result_json(&r, SANDBOX_RESULT_SUMMARY);
        ASSERT_EQ_STR(
                k,
                "{\"exit_code\":3,\"signal\":null,\"timed_out\":false,\"files\":[{\"name\":\"a.csv\",\"size_bytes\":12}]}");

        r = (SandboxResult){ .signal = "SIGKILL", .timed_out = true, .files = files + 1, .n_files = 1 };
        l = result_json(&r, SANDBOX_RESULT_TOOL);
        ASSERT_EQ_STR(
                l,
                "{\"exit_code\":null,\"signal\":\"SIGKILL\",\"timed_out\":true,\"stdout\":\"\",\"stderr\":\"\","
                "\"files\":[{\"name\":\"b\xef\xbf\xbd\",\"size_bytes\":1099511627776}]}");
        r = (SandboxResult){ 0 };
        m = result_json(&r, SANDBOX_RESULT_SUMMARY);
        ASSERT_EQ_STR(m, "{\"exit_code\":null,\"signal\":null,\"timed_out\":false,\"files\":[]}");
}

static const char *no_env(const char *name, void *userdata) {
        return NULL;
}

/* A query's /out into the store: the record lists the artifacts, the
 * artifact endpoint's lookup returns the bytes; links are not followed. */
TEST(store_artifacts) {
        _cleanup_free_ char *dir = make_tmpdir(), *work = NULL, *state = NULL, *out = NULL, *cfg_error = NULL;
        _cleanup_close_ int out_fd = -1;
        _cleanup_(history_record_freep) HistoryRecord *rec = NULL;
        sd_event *e = NULL;
        Config config = { 0 };
        Sandbox *s = NULL;
        SandboxQuery *q = NULL;
        History *h = NULL;
        SessionKey k = { .bytes = { 1, 2, 3 } };
        HistoryArtifact a = { 0 };
        SandboxArtifacts collected = { 0 };
        static const char png[] = "\x89PNG\r\n\x1a\n fake";
        char hex[65];
        uint8_t d[SHA256_DIGEST_SIZE];

        ASSERT_TRUE(asprintf(&work, "%s/sandbox", dir) > 0 && asprintf(&state, "%s/runtime", dir) > 0);
        ASSERT_OK(config_load(&config, no_env, NULL, &cfg_error));
        ASSERT_OK(sd_event_new(&e));
        ASSERT_OK(sandbox_new(
                e,
                &config,
                &(SandboxOptions){
                        .bus_address = "unix:path=/nonexistent/bus", .work_dir = work, .state_root = state },
                &s));
        ASSERT_TRUE(!sandbox_is_available(s));
        ASSERT_TRUE(strlen(sandbox_unavailable_reason(s)) > 0);
        ASSERT_EQ_INT(sandbox_query_new(s, "qr/../x", &q), -EINVAL);
        ASSERT_OK(sandbox_query_new(s, "qr_0123456789abcdef0123456789abcdef", &q));
        ASSERT_EQ_INT(sandbox_run_start(q, "print(1)", 8, NULL, NULL, NULL), -EAGAIN);
        ASSERT_TRUE(asprintf(&out, "%s/qr_0123456789abcdef0123456789abcdef/out", work) > 0);
        out_fd = open(out, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(out_fd >= 0);
        write_at(out_fd, "plot.png", png);
        write_at(out_fd, "notes.md", "# notes\n");
        ASSERT_TRUE(symlinkat("/etc/passwd", out_fd, "passwd.txt") == 0);

        /* Collected as the pipeline does, kept as the Manager does. */
        ASSERT_OK(sandbox_query_collect(q, &collected));
        ASSERT_EQ_INT(collected.n, 2);
        ASSERT_OK(history_open(dir, &h, NULL));
        {
                char id[HISTORY_ARTIFACT_ID_MAX];

                /* No record yet: refused. */
                ASSERT_EQ_INT(
                        history_add_artifact(h, "qr_0123456789abcdef0123456789abcdef", &collected.items[0], id),
                        -ENOENT);
                ASSERT_OK(history_begin(h, "qr_0123456789abcdef0123456789abcdef", &k, "q?", 1000000));
                for (size_t i = 0; i < collected.n; i++)
                        ASSERT_OK(history_add_artifact(
                                h, "qr_0123456789abcdef0123456789abcdef", &collected.items[i], id));
        }
        sandbox_artifacts_done(&collected);
        ASSERT_OK(history_get_record(h, "qr_0123456789abcdef0123456789abcdef", &k, &rec));
        ASSERT_EQ_INT(rec->n_artifacts, 2);
        /* name order: notes.md, plot.png */
        ASSERT_EQ_STR(rec->artifacts[0].name, "notes.md");
        ASSERT_EQ_STR(rec->artifacts[0].media_type, "text/markdown");
        ASSERT_EQ_INT(rec->artifacts[1].size_bytes, sizeof png - 1);
        ASSERT_OK(sha256(png, sizeof png - 1, d));
        sha256_to_hex(d, hex);
        ASSERT_EQ_STR(rec->artifacts[1].sha256, hex);
        ASSERT_OK(history_get_artifact(h, rec->artifacts[1].id, &k, &a));
        ASSERT_EQ_INT(a.size, sizeof png - 1);
        ASSERT_TRUE(memcmp(a.data, png, a.size) == 0);
        ASSERT_EQ_STR(a.media_type, "image/png");
        ASSERT_EQ_STR(a.sha256, hex);
        history_artifact_done(&a);
        {
                char id[HISTORY_ARTIFACT_ID_MAX];
                Artifact x = { .name = (char *) "x", .media_type = "text/plain", .size_bytes = 10, .fd = out_fd };

                memcpy(x.sha256, hex, sizeof x.sha256);
                ASSERT_EQ_INT(
                        history_add_artifact(h, "qr_0123456789abcdef0123456789abcdef", &x, id),
                        -EIO); /* a directory: not readable as bytes */
                snprintf(x.sha256, sizeof x.sha256, "short");
                x.size_bytes = 1;
                ASSERT_EQ_INT(history_add_artifact(h, "qr_0123456789abcdef0123456789abcdef", &x, id), -EINVAL);
        }

        q = sandbox_query_free(q);
        ASSERT_TRUE(access(out, F_OK) < 0 && errno == ENOENT);
        h = history_free(h);
        s = sandbox_free(s);
        e = sd_event_unref(e);
        config_done(&config);
        ASSERT_OK(sandbox_rm_rf(AT_FDCWD, dir));
}

/* ---- the Sandbox's state ---- */

/* The state rule, row by row: the fault switch holds it starting whatever
 * else; a static reason is for good; a user manager that answers makes it
 * available once the sweep is done; one that does not yet is waited for
 * only while it is to be expected and not overdue. */
TEST(state_rule) {
        static const struct {
                SandboxConditions c;
                SandboxState state;
        } rows[] = {
                { { .test_starting = true, .static_unavailable = true }, SANDBOX_STARTING },
                { { .test_starting = true, .manager_ready = true, .sweep_done = true }, SANDBOX_STARTING },
                { { .static_unavailable = true, .manager_ready = true, .sweep_done = true },
                  SANDBOX_UNAVAILABLE },
                { { .static_unavailable = true, .manager_expected = true }, SANDBOX_UNAVAILABLE },
                { { .manager_ready = true, .manager_expected = true, .sweep_done = true }, SANDBOX_AVAILABLE },
                /* Ready: overdue and expected no longer matter. */
                { { .manager_ready = true, .manager_overdue = true, .sweep_done = true }, SANDBOX_AVAILABLE },
                /* The start-up sweep runs. */
                { { .manager_ready = true, .manager_expected = true }, SANDBOX_STARTING },
                /* Not connected yet, or reconnecting. */
                { { .manager_expected = true }, SANDBOX_STARTING },
                { { .manager_expected = true, .sweep_done = true }, SANDBOX_STARTING },
                /* No user manager will come: no bus, the user does not linger. */
                { { 0 }, SANDBOX_UNAVAILABLE },
                { { .sweep_done = true }, SANDBOX_UNAVAILABLE },
                /* It did not answer in SANDBOX_STARTING_MAX_USEC. */
                { { .manager_expected = true, .manager_overdue = true }, SANDBOX_UNAVAILABLE },
                { { .manager_expected = true, .manager_overdue = true, .sweep_done = true },
                  SANDBOX_UNAVAILABLE },
        };

        for (size_t i = 0; i < ELEMENTSOF(rows); i++) {
                SandboxState st = sandbox_state_of(&rows[i].c);
                if (st != rows[i].state)
                        fprintf(stderr, "row %zu: %d\n", i, (int) st);
                ASSERT_EQ_INT(st, rows[i].state);
        }
}

typedef struct StateLog {
        Sandbox *sandbox;
        unsigned calls;
        SandboxState seen[8];
        bool inside; /* a call into the Sandbox is running */
} StateLog;

static void state_log_on_state(Sandbox *s, void *userdata) {
        StateLog *l = userdata;

        ASSERT_TRUE(s == l->sandbox);
        ASSERT_TRUE(!l->inside);
        ASSERT_TRUE(l->calls < ELEMENTSOF(l->seen));
        l->seen[l->calls++] = sandbox_get_state(s);
}

/* A Sandbox on a real loop: the state it starts in, and each change
 * announced once, from the loop, never from inside the call that made it. */
static Sandbox *state_sandbox(sd_event *e, Config *config, const char *runtime, const char *dir, StateLog *l) {
        _cleanup_free_ char *work = NULL, *state = NULL, *cfg_error = NULL;
        Sandbox *s = NULL;

        ASSERT_TRUE(asprintf(&work, "%s/sandbox", dir) > 0 && asprintf(&state, "%s/runtime", dir) > 0);
        ASSERT_OK(config_load(config, no_env, NULL, &cfg_error));
        free(config->sandbox_runtime);
        config->sandbox_runtime = strdup(runtime);
        ASSERT_TRUE(config->sandbox_runtime);
        ASSERT_OK(sandbox_new(
                e,
                config,
                &(SandboxOptions){
                        .bus_address = "unix:path=/nonexistent/bus", .work_dir = work, .state_root = state },
                &s));
        *l = (StateLog){ .sandbox = s };
        sandbox_set_state_handler(s, state_log_on_state, l);
        return s;
}

TEST(state_static_unavailable) {
        _cleanup_free_ char *dir = make_tmpdir();
        sd_event *e = NULL;
        Config config = { 0 };
        StateLog l;
        Sandbox *s;

        ASSERT_OK(sd_event_new(&e));
        s = state_sandbox(e, &config, "/nonexistent/crun", dir, &l);
        /* No runtime: unavailable for good, from the start (not announced). */
        ASSERT_EQ_INT(sandbox_get_state(s), SANDBOX_UNAVAILABLE);
        ASSERT_TRUE(strstr(sandbox_unavailable_reason(s), "/nonexistent/crun"));
        ASSERT_TRUE(!sandbox_is_available(s));
        ASSERT_OK(sd_event_run(e, 0));
        ASSERT_EQ_INT(l.calls, 0);

        s = sandbox_free(s);
        e = sd_event_unref(e);
        config_done(&config);
        ASSERT_OK(sandbox_rm_rf(AT_FDCWD, dir));
}

#if ENABLE_TEST_FAULTS
/* Run the loop until the handler was called n times, at most timeout. */
static void run_until_calls(sd_event *e, StateLog *l, unsigned n, usec_t timeout) {
        usec_t end = usec_add(now(CLOCK_MONOTONIC), timeout);

        while (l->calls < n && now(CLOCK_MONOTONIC) < end)
                ASSERT_OK(sd_event_run(e, 10 * USEC_PER_MSEC));
        ASSERT_EQ_INT(l->calls, n);
}

TEST(state_test_starting) {
        _cleanup_free_ char *dir = make_tmpdir();
        sd_event *e = NULL;
        Config config = { 0 };
        StateLog l;
        Sandbox *s;
        usec_t t0;

        ASSERT_OK(sd_event_new(&e));
        s = state_sandbox(e, &config, "/nonexistent/crun", dir, &l);
        /* No runtime: unavailable for good (state_static_unavailable). */
        ASSERT_EQ_INT(sandbox_get_state(s), SANDBOX_UNAVAILABLE);

        /* The fault switch: starting at once, announced from the loop;
         * then, when it ends, the real state again, announced once. */
        t0 = now(CLOCK_MONOTONIC);
        l.inside = true;
        sandbox_set_test_starting(s, 200 * USEC_PER_MSEC);
        l.inside = false;
        ASSERT_EQ_INT(sandbox_get_state(s), SANDBOX_STARTING);
        ASSERT_TRUE(strstr(sandbox_unavailable_reason(s), "WIKI_WEB_TEST_SANDBOX_STARTING_MS"));
        ASSERT_EQ_INT(l.calls, 0);
        run_until_calls(e, &l, 1, USEC_PER_SEC);
        ASSERT_EQ_INT(l.seen[0], SANDBOX_STARTING);
        run_until_calls(e, &l, 2, 5 * USEC_PER_SEC);
        ASSERT_EQ_INT(l.seen[1], SANDBOX_UNAVAILABLE);
        ASSERT_TRUE(now(CLOCK_MONOTONIC) - t0 >= 200 * USEC_PER_MSEC);
        /* By the timer, not by polling: nothing more to say. */
        ASSERT_OK(sd_event_run(e, 50 * USEC_PER_MSEC));
        ASSERT_EQ_INT(l.calls, 2);

        /* A change undone before the loop runs is no announcement. */
        sandbox_set_test_starting(s, 10 * USEC_PER_SEC);
        sandbox_set_test_starting(s, 0);
        ASSERT_OK(sd_event_run(e, 50 * USEC_PER_MSEC));
        ASSERT_EQ_INT(l.calls, 2);

        s = sandbox_free(s);
        e = sd_event_unref(e);
        config_done(&config);
        ASSERT_OK(sandbox_rm_rf(AT_FDCWD, dir));
}

#endif

TEST(state_starting_while_the_user_manager_is_expected) {
        _cleanup_free_ char *dir = make_tmpdir();
        sd_event *e = NULL;
        Config config = { 0 };
        StateLog l;
        Sandbox *s;

        ASSERT_OK(sd_event_new(&e));
        /* A runtime that is there, the host's python3, and a user bus that
         * is named but does not answer (yet): starting, with the reason. */
        s = state_sandbox(e, &config, "/bin/true", dir, &l);
        ASSERT_EQ_INT(sandbox_get_state(s), SANDBOX_STARTING);
        ASSERT_TRUE(strstr(sandbox_unavailable_reason(s), "/nonexistent/bus"));
        ASSERT_OK(sd_event_run(e, 50 * USEC_PER_MSEC));
        ASSERT_EQ_INT(l.calls, 0);

        s = sandbox_free(s);
        e = sd_event_unref(e);
        config_done(&config);
        ASSERT_OK(sandbox_rm_rf(AT_FDCWD, dir));
}

DEFINE_TEST_MAIN()
