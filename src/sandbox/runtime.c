/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <json-c/json.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "sandbox/runtime.h"
#include "shared/json-util.h"
#include "shared/macro.h"
#include "shared/strv.h"


/* PID 1 of the container: a small init in Python. The code runs in a
 * forked child that reads the program from stdin and runs it as __main__
 * (a traceback without this wrapper's frame), so that
 * - its real end is known: the init writes the child's waitstatus (the exit
 *   code, or minus the signal) and a newline to fd 3, the status pipe the
 *   runtime passes in (--preserve-fds=3), because the runtime's own exit
 *   status is 128 + signal for a signal and cannot be told from
 *   sys.exit(139);
 * - orphans are reaped (a Python PID 1 does not: zombies would count
 *   against RLIMIT_NPROC);
 * - the code is not PID 1, so signals behave as everywhere else;
 * - /out has an exact total cap: it is a tmpfs of that size. fd 4 is the
 *   query's out directory on the host (read-only use) and fd 5 an empty
 *   directory of the host for this run's result. Before the code starts,
 *   the init copies fd 4 into /out (the files of the query's earlier runs);
 *   when the code has ended it kills every process left (kill(-1)), reaps
 *   them, copies /out into fd 5 (directories and regular files only, never
 *   following a link, at most argv[1] bytes and argv[2] entries, 8 levels)
 *   and writes "copied" and a newline to fd 3; the daemon then makes fd 5
 *   the query's out directory. SIGUSR1 (the daemon's timeout or cancel)
 *   makes it kill every other process: the code ends with SIGKILL and /out
 *   is still copied.
 * The init makes itself non-dumpable before anything else, so the code
 * (same uid, no capabilities) cannot reach fds 4 and 5 or its memory
 * through /proc/1 (ptrace access checks); the child makes itself dumpable
 * again and closes every fd above 2 before it runs the code. Without the
 * prctl the init exits 126 before it runs anything. */
#define RUNTIME_INIT_PY                                                                                                         \
        "import os, signal, stat, sys\n"                                                                                        \
        "cap, entries = int(sys.argv[1]), int(sys.argv[2])\n"                                                                   \
        "stop = []\n"                                                                                                           \
        "def on_stop(s, f):\n"                                                                                                  \
        "    stop.append(s)\n"                                                                                                  \
        "    try:\n"                                                                                                            \
        "        os.kill(-1, signal.SIGKILL)\n"                                                                                 \
        "    except OSError:\n"                                                                                                 \
        "        pass\n"                                                                                                        \
        "signal.signal(signal.SIGUSR1, on_stop)\n"                                                                              \
        "import ctypes\n"                                                                                                       \
        "libc = ctypes.CDLL(None)\n"                                                                                            \
        "if libc.prctl(4, 0, 0, 0, 0) != 0:\n"                                                                                  \
        "    os._exit(126)\n"                                                                                                   \
        "F = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC\n"                                                      \
        "D = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC\n"                                                     \
        "def cp(src, dst, depth, b):\n"                                                                                         \
        "    os.lseek(src, 0, 0)\n"                                                                                             \
        "    for n in sorted(os.listdir(src)):\n"                                                                               \
        "        try:\n"                                                                                                        \
        "            st = os.stat(n, dir_fd=src, follow_symlinks=False)\n"                                                      \
        "            m = st.st_mode\n"                                                                                          \
        "            if stat.S_ISREG(m) and st.st_size <= b[0] and b[1] > 0:\n"                                                 \
        "                if m & 0o600 != 0o600:\n"                                                                              \
        "                    os.chmod(n, 0o600, dir_fd=src)\n"                                                                  \
        "                fi = os.open(n, F, dir_fd=src)\n"                                                                      \
        "            elif stat.S_ISDIR(m) and depth > 0 and b[1] > 0:\n"                                                        \
        "                if m & 0o700 != 0o700:\n"                                                                              \
        "                    os.chmod(n, 0o700, dir_fd=src)\n"                                                                  \
        "                fi = os.open(n, D, dir_fd=src)\n"                                                                      \
        "            else:\n"                                                                                                   \
        "                b[2] += 1\n"                                                                                           \
        "                continue\n"                                                                                            \
        "        except OSError:\n"                                                                                             \
        "            b[2] += 1\n"                                                                                               \
        "            continue\n"                                                                                                \
        "        try:\n"                                                                                                        \
        "            st = os.fstat(fi)\n"                                                                                       \
        "            b[1] -= 1\n"                                                                                               \
        "            if stat.S_ISDIR(st.st_mode):\n"                                                                            \
        "                os.mkdir(n, 0o755, dir_fd=dst)\n"                                                                      \
        "                fo = os.open(n, D, dir_fd=dst)\n"                                                                      \
        "                try:\n"                                                                                                \
        "                    cp(fi, fo, depth - 1, b)\n"                                                                        \
        "                finally:\n"                                                                                            \
        "                    os.close(fo)\n"                                                                                    \
        "                continue\n"                                                                                            \
        "            if not stat.S_ISREG(st.st_mode) or st.st_size > b[0]:\n"                                                   \
        "                b[2] += 1\n"                                                                                           \
        "                continue\n"                                                                                            \
        "            b[0] -= st.st_size\n"                                                                                      \
        "            fo = os.open(n, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dst)\n" \
        "            try:\n"                                                                                                    \
        "                o = 0\n"                                                                                               \
        "                while o < st.st_size:\n"                                                                               \
        "                    k = os.sendfile(fo, fi, o, min(st.st_size - o, 1 << 24))\n"                                        \
        "                    if k <= 0:\n"                                                                                      \
        "                        raise OSError(5, 'short copy')\n"                                                              \
        "                    o += k\n"                                                                                          \
        "            finally:\n"                                                                                                \
        "                os.close(fo)\n"                                                                                        \
        "        finally:\n"                                                                                                    \
        "            os.close(fi)\n"                                                                                            \
        "out = os.open('/out', D)\n"                                                                                            \
        "try:\n"                                                                                                                \
        "    cp(4, out, 8, [cap, entries, 0])\n"                                                                                \
        "except OSError:\n"                                                                                                     \
        "    pass\n"                                                                                                            \
        "pid = -1 if stop else os.fork()\n"                                                                                     \
        "if pid == 0:\n"                                                                                                        \
        "    signal.signal(signal.SIGUSR1, signal.SIG_DFL)\n"                                                                   \
        "    if stop:\n"                                                                                                        \
        "        os._exit(137)\n"                                                                                               \
        "    libc.prctl(4, 1, 0, 0, 0)\n"                                                                                       \
        "    os.closerange(3, 65536)\n"                                                                                         \
        "    import traceback\n"                                                                                                \
        "    sys.argv = ['-']\n"                                                                                                \
        "    g = {'__name__': '__main__', '__builtins__': __builtins__, '__file__': '<stdin>'}\n"                               \
        "    try:\n"                                                                                                            \
        "        exec(compile(sys.stdin.buffer.read(), '<stdin>', 'exec'), g)\n"                                                \
        "    except SystemExit:\n"                                                                                              \
        "        raise\n"                                                                                                       \
        "    except BaseException as e:\n"                                                                                      \
        "        traceback.print_exception(type(e), e, e.__traceback__.tb_next)\n"                                              \
        "        sys.exit(1)\n"                                                                                                 \
        "    sys.exit(0)\n"                                                                                                     \
        "c = -9\n"                                                                                                              \
        "while pid > 0:\n"                                                                                                      \
        "    p, st = os.waitpid(-1, 0)\n"                                                                                       \
        "    if p == pid:\n"                                                                                                    \
        "        c = os.waitstatus_to_exitcode(st)\n"                                                                           \
        "        break\n"                                                                                                       \
        "os.write(3, b'%d\\n' % c)\n"                                                                                           \
        "try:\n"                                                                                                                \
        "    os.kill(-1, signal.SIGKILL)\n"                                                                                     \
        "except OSError:\n"                                                                                                     \
        "    pass\n"                                                                                                            \
        "while True:\n"                                                                                                         \
        "    try:\n"                                                                                                            \
        "        os.waitpid(-1, 0)\n"                                                                                           \
        "    except ChildProcessError:\n"                                                                                       \
        "        break\n"                                                                                                       \
        "b = [cap, entries, 0]\n"                                                                                               \
        "try:\n"                                                                                                                \
        "    cp(out, 5, 8, b)\n"                                                                                                \
        "    os.write(3, b'copied\\n')\n"                                                                                       \
        "except OSError as e:\n"                                                                                                \
        "    os.write(2, b'[sandbox: /out could not be kept: %s]\\n' % os.strerror(e.errno or 5).encode())\n"                   \
        "if b[2]:\n"                                                                                                            \
        "    os.write(2, b'[sandbox: %d entries of /out not kept (not files or dirs, too deep, over the cap)]\\n' % b[2])\n"    \
        "os._exit(c if c >= 0 else 128 - c)\n"

/* The container's own namespaces. "network" above all: runc spec --rootless
 * leaves it out, and a container without it reached a listener on the
 * host's 127.0.0.1. "cgroup" hides the scope's path in /proc/self/cgroup. */
static const char *const container_namespaces[] = { "pid", "network", "ipc", "uts", "mount", "user", "cgroup" };

RuntimeKind runtime_kind_from_path(const char *path) {
        const char *base = strrchr(path, '/');

        base = base ? base + 1 : path;
        return strstr(base, "runc") ? RUNTIME_RUNC : RUNTIME_CRUN;
}

static bool is_executable_file(const char *p) {
        struct stat st;

        return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

int runtime_find(const char *name_or_path, char **ret) {
        const char *path = getenv("PATH");
        _cleanup_free_ char *copy = NULL;
        char *p, *save = NULL;

        if (!name_or_path || !*name_or_path)
                return -ENOENT;
        if (strchr(name_or_path, '/')) {
                if (name_or_path[0] != '/' || !is_executable_file(name_or_path))
                        return -ENOENT;
                *ret = strdup(name_or_path);
                return *ret ? 0 : -ENOMEM;
        }
        copy = strdup(path && *path ? path : "/usr/bin:/bin");
        if (!copy)
                return -ENOMEM;
        for (p = strtok_r(copy, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
                _cleanup_free_ char *f = NULL;

                if (p[0] != '/')
                        continue;
                if (asprintf(&f, "%s/%s", p, name_or_path) < 0)
                        return -ENOMEM;
                if (is_executable_file(f)) {
                        *ret = TAKE_PTR(f);
                        return 0;
                }
        }
        return -ENOENT;
}

static int add_strings(json_object *o, const char *key, const char *const *v) {
        json_object *a = json_object_new_array();

        if (!a)
                return -ENOMEM;
        for (; v && *v; v++)
                if (json_object_array_add(a, json_object_new_string(*v)) < 0)
                        return -ENOMEM;
        return json_object_object_add(o, key, a) < 0 ? -ENOMEM : 0;
}

static int add_mount(
        json_object *mounts, const char *dest, const char *type, const char *source, const char *const *options) {
        json_object *m = json_object_new_object();

        if (!m || json_object_array_add(mounts, m) < 0) {
                json_object_put(m);
                return -ENOMEM;
        }
        json_object_object_add(m, "destination", json_object_new_string(dest));
        json_object_object_add(m, "type", json_object_new_string(type));
        json_object_object_add(m, "source", json_object_new_string(source));
        return add_strings(m, "options", options);
}

static int add_rlimit(json_object *rlimits, const char *type, uint64_t value) {
        json_object *l = json_object_new_object();

        if (!l || json_object_array_add(rlimits, l) < 0) {
                json_object_put(l);
                return -ENOMEM;
        }
        json_object_object_add(l, "type", json_object_new_string(type));
        json_object_object_add(l, "hard", json_object_new_uint64(value));
        json_object_object_add(l, "soft", json_object_new_uint64(value));
        return 0;
}

/* The strict filter: the service unit's own
 * SystemCallFilter= is the allowlist, inherited by the runtime and the
 * container; it has to allow what rootless crun needs (@mount, unshare,
 * setns, sethostname, seccomp). This filter then takes exactly those, and
 * the other escape and introspection calls, away from the contained code:
 * new namespaces, mounts, keyrings, io_uring, userfaultfd, ptrace and
 * friends, BPF, perf, modules, time, reboot. */
static const char *const seccomp_denied[] = {
        "unshare",
        "setns",
        "mount",
        "umount2",
        "pivot_root",
        "chroot",
        "keyctl",
        "add_key",
        "request_key",
        "io_uring_setup",
        "io_uring_enter",
        "io_uring_register",
        "userfaultfd",
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "bpf",
        "perf_event_open",
        "kexec_load",
        "kexec_file_load",
        "init_module",
        "finit_module",
        "delete_module",
        "open_by_handle_at",
        "name_to_handle_at",
        "fsopen",
        "fsconfig",
        "fsmount",
        "fspick",
        "move_mount",
        "open_tree",
        "mount_setattr",
        "swapon",
        "swapoff",
        "reboot",
        "syslog",
        "acct",
        "quotactl",
        "settimeofday",
        "clock_settime",
        "clock_adjtime",
        "adjtimex",
        "iopl",
        "ioperm",
        "lookup_dcookie",
        "vhangup",
        "sethostname",
        "setdomainname",
        "pidfd_getfd",
        "kcmp",
        "fanotify_init",
        "uselib",
        "personality",
        /* SysV IPC and POSIX message queues: the container shares the
         * service's (private) IPC namespace, so it gets none of them. */
        "shmget",
        "shmat",
        "shmdt",
        "shmctl",
        "semget",
        "semop",
        "semtimedop",
        "semctl",
        "msgget",
        "msgsnd",
        "msgrcv",
        "msgctl",
        "mq_open",
        "mq_unlink",
        "mq_timedsend",
        "mq_timedreceive",
        "mq_notify",
        "mq_getsetattr",
        NULL,
};

/* clone() flags that make a namespace. */
static const uint64_t clone_new_flags[] = {
        0x00000080, /* CLONE_NEWTIME */
        0x00020000, /* CLONE_NEWNS */
        0x02000000, /* CLONE_NEWCGROUP */
        0x04000000, /* CLONE_NEWUTS */
        0x08000000, /* CLONE_NEWIPC */
        0x10000000, /* CLONE_NEWUSER */
        0x20000000, /* CLONE_NEWPID */
        0x40000000, /* CLONE_NEWNET */
};

static int build_seccomp(json_object **ret) {
        _cleanup_(json_object_putp) json_object *sc = json_object_new_object();
        json_object *syscalls = json_object_new_array(), *rule;
        static const char *const arches[] = {
#if defined(__x86_64__)
                "SCMP_ARCH_X86_64",
#elif defined(__aarch64__)
                "SCMP_ARCH_AARCH64",
#else
#        error "add the seccomp architecture name of this machine"
#endif
                NULL,
        };

        if (!sc || !syscalls || json_object_object_add(sc, "syscalls", syscalls) < 0) {
                json_object_put(syscalls);
                return -ENOMEM;
        }
        json_object_object_add(sc, "defaultAction", json_object_new_string("SCMP_ACT_ALLOW"));
        if (add_strings(sc, "architectures", arches) < 0)
                return -ENOMEM;

        rule = json_object_new_object();
        if (!rule || json_object_array_add(syscalls, rule) < 0) {
                json_object_put(rule);
                return -ENOMEM;
        }
        if (add_strings(rule, "names", seccomp_denied) < 0)
                return -ENOMEM;
        json_object_object_add(rule, "action", json_object_new_string("SCMP_ACT_ERRNO"));
        json_object_object_add(rule, "errnoRet", json_object_new_int(EPERM));

        /* clone3 takes its flags in a struct a filter cannot read: ENOSYS
         * makes glibc fall back to clone, whose flags it can. */
        rule = json_object_new_object();
        if (!rule || json_object_array_add(syscalls, rule) < 0) {
                json_object_put(rule);
                return -ENOMEM;
        }
        if (add_strings(rule, "names", (const char *const[]){ "clone3", NULL }) < 0)
                return -ENOMEM;
        json_object_object_add(rule, "action", json_object_new_string("SCMP_ACT_ERRNO"));
        json_object_object_add(rule, "errnoRet", json_object_new_int(ENOSYS));

        /* clone with any CLONE_NEW* flag: one rule per flag (rules OR). */
        for (size_t i = 0; i < ELEMENTSOF(clone_new_flags); i++) {
                json_object *args = json_object_new_array(), *arg = json_object_new_object();

                rule = json_object_new_object();
                if (!rule || !args || !arg || json_object_array_add(syscalls, rule) < 0) {
                        json_object_put(rule);
                        json_object_put(args);
                        json_object_put(arg);
                        return -ENOMEM;
                }
                if (add_strings(rule, "names", (const char *const[]){ "clone", NULL }) < 0)
                        return -ENOMEM;
                json_object_object_add(rule, "action", json_object_new_string("SCMP_ACT_ERRNO"));
                json_object_object_add(rule, "errnoRet", json_object_new_int(EPERM));
                json_object_object_add(arg, "index", json_object_new_int(0));
                json_object_object_add(arg, "value", json_object_new_uint64(clone_new_flags[i]));
                json_object_object_add(arg, "valueTwo", json_object_new_uint64(clone_new_flags[i]));
                json_object_object_add(arg, "op", json_object_new_string("SCMP_CMP_MASKED_EQ"));
                json_object_array_add(args, arg);
                json_object_object_add(rule, "args", args);
        }
        *ret = TAKE_PTR(sc);
        return 0;
}

/* podman's defaults (containers/common pkg/config/default.go). */
static const char *const masked_paths[] = {
        "/proc/acpi",        "/proc/kcore",       "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
        "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/proc/interrupts",    "/sys/firmware",
        "/sys/fs/selinux",   "/sys/dev/block",    NULL,
};
static const char *const readonly_paths[] = {
        "/proc/asound", "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger", NULL,
};

/* config.json's "process": the init on stdin's program, no capabilities,
 * the rlimits. */
static int runtime_config_process(json_object *c, const RuntimeSpec *s) {
        _cleanup_free_ char *cap_arg = NULL, *entries_arg = NULL;
        json_object *process, *user, *caps, *rlimits;
        int r;

        process = json_object_new_object();
        json_object_object_add(c, "process", process);
        json_object_object_add(process, "terminal", json_object_new_boolean(false));
        user = json_object_new_object();
        json_object_object_add(process, "user", user);
        json_object_object_add(user, "uid", json_object_new_int(0));
        json_object_object_add(user, "gid", json_object_new_int(0));
        /* The program comes on stdin: no code in config.json or argv. */
        if (asprintf(&cap_arg, "%" PRIu64, s->out_max_bytes) < 0 ||
            asprintf(&entries_arg, "%" PRIu64, (uint64_t) RUNTIME_OUT_MAX_ENTRIES) < 0)
                return -ENOMEM;
        r = add_strings(
                process,
                "args",
                (const char *const[]){ "python3", "-c", RUNTIME_INIT_PY, cap_arg, entries_arg, NULL });
        if (r < 0)
                return r;
        r = add_strings(
                process,
                "env",
                (const char *const[]){
                        "PATH=/usr/local/bin:/usr/bin:/bin",
                        "HOME=/tmp",
                        "TMPDIR=/tmp",
                        "LANG=C.UTF-8",
                        /* What was printed before a kill still
                         * reaches the model. */
                        "PYTHONUNBUFFERED=1",
                        "PYTHONDONTWRITEBYTECODE=1",
                        NULL,
                });
        if (r < 0)
                return r;
        json_object_object_add(process, "cwd", json_object_new_string("/tmp"));
        caps = json_object_new_object();
        json_object_object_add(process, "capabilities", caps);
        for (const char *const *k =
                     (const char *const[]){
                             "bounding", "effective", "inheritable", "permitted", "ambient", NULL };
             *k;
             k++)
                if (add_strings(caps, *k, NULL) < 0)
                        return -ENOMEM;
        json_object_object_add(process, "noNewPrivileges", json_object_new_boolean(true));
        rlimits = json_object_new_array();
        json_object_object_add(process, "rlimits", rlimits);
        /* Per process (DATA) or per uid (NPROC): they hold where no cgroup
         * controller is delegated (cgroup v1, the nspawn bed). */
        if (add_rlimit(rlimits, "RLIMIT_NPROC", s->tasks_max) < 0 ||
            add_rlimit(rlimits, "RLIMIT_DATA", s->memory_max_bytes) < 0 ||
            add_rlimit(rlimits, "RLIMIT_CPU", s->cpu_seconds) < 0 ||
            add_rlimit(rlimits, "RLIMIT_FSIZE", s->file_max_bytes) < 0 ||
            add_rlimit(rlimits, "RLIMIT_NOFILE", RUNTIME_NOFILE) < 0 ||
            add_rlimit(rlimits, "RLIMIT_CORE", 0) < 0)
                return -ENOMEM;
        return 0;
}

/* config.json's "mounts": /proc, /dev, a capped /tmp, /usr and /data read
 * only, a capped /out. */
static int runtime_config_mounts(json_object *c, const RuntimeSpec *s) {
        _cleanup_free_ char *tmp_opt = NULL, *out_opt = NULL, *out_inodes = NULL;
        json_object *mounts;
        uint64_t out_size;

        /* tmpfs counts whole pages: the size rounded down to one, so that
         * nothing written can pass the cap. Under one page, no file at all:
         * only the root inode fits (size=0 would mean no limit). */
        out_size = s->out_max_bytes & ~(uint64_t) (RUNTIME_PAGE_SIZE - 1);
        if (asprintf(&out_opt, "size=%" PRIu64, MAX(out_size, (uint64_t) RUNTIME_PAGE_SIZE)) < 0 ||
            asprintf(&out_inodes, "nr_inodes=%u", out_size > 0 ? RUNTIME_OUT_MAX_ENTRIES + 1 : 1) < 0)
                return -ENOMEM;
        mounts = json_object_new_array();
        json_object_object_add(c, "mounts", mounts);
        if (asprintf(&tmp_opt, "size=%" PRIu64, s->tmp_max_bytes) < 0)
                return -ENOMEM;
        if (add_mount(mounts, "/proc", "proc", "proc", (const char *const[]){ "nosuid", "noexec", "nodev", NULL }) <
                    0 ||
            add_mount(
                    mounts,
                    "/dev",
                    "tmpfs",
                    "tmpfs",
                    (const char *const[]){ "nosuid", "strictatime", "mode=755", "size=64k", NULL }) < 0 ||
            add_mount(
                    mounts,
                    "/dev/pts",
                    "devpts",
                    "devpts",
                    (const char *const[]){
                            "nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", NULL }) < 0 ||
            add_mount(
                    mounts,
                    "/dev/shm",
                    "tmpfs",
                    "shm",
                    (const char *const[]){ "nosuid", "noexec", "nodev", "mode=1777", "size=16m", NULL }) < 0 ||
            add_mount(
                    mounts,
                    "/tmp",
                    "tmpfs",
                    "tmpfs",
                    (const char *const[]){ "nosuid", "nodev", "mode=1777", tmp_opt, NULL }) < 0)
                return -ENOMEM;
        if (s->usr &&
            add_mount(
                    mounts,
                    "/usr",
                    "bind",
                    s->usr,
                    (const char *const[]){ "rbind", "ro", "nosuid", "nodev", NULL }) < 0)
                return -ENOMEM;
        if (add_mount(
                    mounts,
                    "/data",
                    "bind",
                    s->data_dir,
                    (const char *const[]){ "rbind", "ro", "nosuid", "nodev", "noexec", NULL }) < 0 ||
            add_mount(
                    mounts,
                    "/out",
                    "tmpfs",
                    "tmpfs",
                    (const char *const[]){
                            "nosuid", "nodev", "noexec", "mode=755", out_opt, out_inodes, NULL }) < 0)
                return -ENOMEM;
        return 0;
}

/* config.json's "linux": one id mapped each way, the namespaces, the
 * masked and read-only paths, the seccomp filter. */
static int runtime_config_linux(json_object *c, const RuntimeSpec *s) {
        json_object *linux_, *ns, *map, *m, *seccomp = NULL;
        int r;

        linux_ = json_object_new_object();
        json_object_object_add(c, "linux", linux_);
        /* One mapping each: container 0 is the daemon's user, and no other
         * id exists (subordinate ranges need setuid newuidmap, which
         * NoNewPrivileges= defeats). */
        for (int i = 0; i < 2; i++) {
                json_object *a = json_object_new_array();
                m = json_object_new_object();
                json_object_object_add(linux_, i == 0 ? "uidMappings" : "gidMappings", a);
                json_object_array_add(a, m);
                json_object_object_add(m, "containerID", json_object_new_int(0));
                json_object_object_add(
                        m, "hostID", json_object_new_uint64(i == 0 ? (uint64_t) s->uid : (uint64_t) s->gid));
                json_object_object_add(m, "size", json_object_new_int(1));
        }
        ns = json_object_new_array();
        json_object_object_add(linux_, "namespaces", ns);
        for (size_t i = 0; i < ELEMENTSOF(container_namespaces); i++) {
                map = json_object_new_object();
                json_object_array_add(ns, map);
                json_object_object_add(map, "type", json_object_new_string(container_namespaces[i]));
        }
        if (add_strings(linux_, "maskedPaths", masked_paths) < 0 ||
            add_strings(linux_, "readonlyPaths", readonly_paths) < 0)
                return -ENOMEM;
        if (s->seccomp) {
                r = build_seccomp(&seccomp);
                if (r < 0)
                        return r;
                json_object_object_add(linux_, "seccomp", seccomp);
        }
        return 0;
}

int runtime_config_render(const RuntimeSpec *s, char **ret) {
        _cleanup_(json_object_putp) json_object *c = json_object_new_object();
        json_object *root;
        const char *text;
        int r;

        if (!s->rootfs || !s->data_dir)
                return -EINVAL;
        if (!c)
                return -ENOMEM;

        json_object_object_add(c, "ociVersion", json_object_new_string("1.0.2"));
        r = runtime_config_process(c, s);
        if (r < 0)
                return r;
        root = json_object_new_object();
        json_object_object_add(c, "root", root);
        json_object_object_add(root, "path", json_object_new_string(s->rootfs));
        json_object_object_add(root, "readonly", json_object_new_boolean(true));
        /* No "hostname": sethostname() is what ProtectHostname= denies the
         * service, and keeping that costs less than naming the container. */
        r = runtime_config_mounts(c, s);
        if (r < 0)
                return r;
        r = runtime_config_linux(c, s);
        if (r < 0)
                return r;

        text = json_object_to_json_string_ext(
                c, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!text)
                return -ENOMEM;
        *ret = strdup(text);
        return *ret ? 0 : -ENOMEM;
}

int runtime_write_bundle(int bundle_fd, const RuntimeSpec *s) {
        _cleanup_free_ char *text = NULL;
        _cleanup_close_ int fd = -1;
        size_t len, done = 0;
        int r;

        r = runtime_config_render(s, &text);
        if (r < 0)
                return r;
        len = strlen(text);
        fd = openat(bundle_fd, "config.json", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return negative_errno();
        while (done < len) {
                ssize_t k = write(fd, text + done, len - done);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                done += (size_t) k;
        }
        return 0;
}

int runtime_argv(
        RuntimeKind kind,
        const char *binary,
        const char *state_root,
        RuntimeVerb verb,
        const char *id,
        const char *bundle,
        char ***ret) {
        _cleanup_free_ char *pid_file = NULL;
        const char *v[16];
        size_t n = 0;
        char **a;

        if (verb == RUNTIME_RUN && bundle && asprintf(&pid_file, "%s/" RUNTIME_PID_FILE, bundle) < 0)
                return -ENOMEM;

        v[n++] = binary;
        v[n++] = "--root";
        v[n++] = state_root;
        switch (verb) {
        case RUNTIME_RUN:
                if (!id || !bundle)
                        return -EINVAL;
                /* We made the scope ourselves; crun's own systemd cgroup
                 * manager would cost ~14 ms a run for nothing. runc has no
                 * such switch: rootless, it leaves cgroups alone when it
                 * cannot write them. */
                if (kind == RUNTIME_CRUN)
                        v[n++] = "--cgroup-manager=disabled";
                v[n++] = "run";
                /* A new session keyring is refused inside nspawn, and the
                 * filter denies the keyring calls to the code anyway. */
                v[n++] = "--no-new-keyring";
                /* fds 3, 4, 5: the status pipe of the container's init and
                 * the two /out directories (RUNTIME_INIT_PY). */
                v[n++] = "--preserve-fds=3";
                v[n++] = "--bundle";
                v[n++] = bundle;
                /* Written once the container exists: without it, a failure
                 * is the runtime's (execution_failed), not the code's. */
                v[n++] = "--pid-file";
                v[n++] = pid_file;
                v[n++] = id;
                break;
        case RUNTIME_DELETE:
                if (!id)
                        return -EINVAL;
                v[n++] = "delete";
                v[n++] = "-f";
                v[n++] = id;
                break;
        case RUNTIME_STATE:
                if (!id)
                        return -EINVAL;
                v[n++] = "state";
                v[n++] = id;
                break;
        case RUNTIME_KILL:
                if (!id)
                        return -EINVAL;
                v[n++] = "kill";
                v[n++] = id;
                v[n++] = "KILL";
                break;
        case RUNTIME_LIST:
                v[n++] = "list";
                v[n++] = "-q";
                break;
        default:
                return -EINVAL;
        }
        a = calloc(n + 1, sizeof *a);
        if (!a)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                a[i] = strdup(v[i]);
                if (!a[i]) {
                        strv_free(a);
                        return -ENOMEM;
                }
        }
        *ret = a;
        return 0;
}

/* Between fork and exec: async-signal-safe calls only. fds 0 to 5 (the
 * standard ones, the run's status pipe and the /out directories, or
 * /dev/null) go to the runtime; the hold pipe is fd 6 until it is read,
 * then closed. */
_noreturn_ static void child_exec(const RuntimeFds *f, char *const *argv) {
        static char *const envp[] = { (char *) "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                                      (char *) "LANG=C.UTF-8",
                                      NULL };
        struct sigaction sa = { .sa_handler = SIG_DFL };
        sigset_t none;
        /* Their numbers in the child: the index; the hold pipe last. */
        enum { HOLD = 6, N_FDS };
        int fds[N_FDS] = { f->stdin_fd,   f->stdout_fd,  f->stderr_fd, f->status_fd,
                           f->out_src_fd, f->out_dst_fd, f->hold_fd },
            null_fd;

        for (int sig = 1; sig < NSIG; sig++)
                (void) sigaction(sig, &sa, NULL);
        sigemptyset(&none);
        (void) sigprocmask(SIG_SETMASK, &none, NULL);

        null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        /* Move every fd out of 0..HOLD first, then into place. */
        for (int i = 0; i < N_FDS; i++) {
                if (fds[i] < 0)
                        fds[i] = i < HOLD ? null_fd : -1;
                if (fds[i] >= 0) {
                        fds[i] = fcntl(fds[i], F_DUPFD, 10);
                        if (fds[i] < 0)
                                _exit(127);
                }
        }
        for (int i = 0; i < N_FDS; i++)
                if (fds[i] >= 0 && dup2(fds[i], i) < 0)
                        _exit(127);
        (void) syscall(SYS_close_range, f->hold_fd >= 0 ? (unsigned) N_FDS : (unsigned) HOLD, ~0U, 0U);

        if (f->hold_fd >= 0) {
                char c;
                ssize_t k;

                do
                        k = read(HOLD, &c, 1);
                while (k < 0 && errno == EINTR);
                if (k != 1)
                        _exit(127);
                (void) close(HOLD);
        }
        execve(argv[0], argv, envp);
        _exit(127);
}

int runtime_spawn(char *const *argv, const RuntimeFds *fds, pid_t *ret_pid) {
        static const RuntimeFds none = RUNTIME_FDS_NONE;
        pid_t pid;

        if (!argv || !argv[0] || argv[0][0] != '/')
                return -EINVAL;
        if (!fds)
                fds = &none;
        pid = fork();
        if (pid < 0)
                return negative_errno();
        if (pid == 0)
                child_exec(fds, argv);
        *ret_pid = pid;
        return 0;
}
