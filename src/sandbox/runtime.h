/* SPDX-License-Identifier: MIT */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* The OCI runtime (crun or runc): the bundle's config.json, the command
 * lines, and fork/exec of the runtime. No event loop here: the caller
 * (sandbox.c) watches the pids through the reaper and the fds through IO
 * sources. */

typedef enum RuntimeKind {
        RUNTIME_CRUN,
        RUNTIME_RUNC,
        _RUNTIME_KIND_MAX,
        _RUNTIME_KIND_INVALID = -EINVAL,
} RuntimeKind;

/* By the file name of the binary: "runc" anywhere in it is runc, anything
 * else is treated as crun. */
RuntimeKind runtime_kind_from_path(const char *path);

/* Resolve name_or_path (an absolute path, or a name looked up in PATH,
 * else /usr/bin:/bin) to an executable file. Returns 0 and a new string,
 * -ENOENT, -ENOMEM. */
int runtime_find(const char *name_or_path, char **ret);

typedef struct RuntimeSpec {
        const char *rootfs;   /* the container's root, mounted read-only */
        const char *usr;      /* NULL, or a host directory bound read-only at /usr (the default skeleton) */
        const char *data_dir; /* host directory bound read-only at /data */
        uid_t uid;            /* the daemon's uid and gid: container 0 maps to them, nothing else */
        gid_t gid;
        uint64_t memory_max_bytes; /* RLIMIT_DATA of every process */
        uint64_t tasks_max;        /* RLIMIT_NPROC */
        uint64_t cpu_seconds;      /* RLIMIT_CPU */
        uint64_t file_max_bytes;   /* RLIMIT_FSIZE: one file in /out or /tmp */
        uint64_t tmp_max_bytes;    /* the /tmp tmpfs */
        uint64_t out_max_bytes;    /* the /out tmpfs: all of it, exactly (rounded down to a page) */
        bool seccomp;              /* the strict filter (always on in production) */
} RuntimeSpec;

/* Sizes the daemon uses. */
#define RUNTIME_TMP_MAX_BYTES (UINT64_C(64) << 20)
#define RUNTIME_NOFILE 256
/* Files and directories in /out (its tmpfs's nr_inodes, the root aside):
 * bounds what the init copies out after a run. */
#define RUNTIME_OUT_MAX_ENTRIES 4096U
#define RUNTIME_PAGE_SIZE 4096U

/* The bundle's config.json (OCI runtime spec 1.0) for s: a new user, pid,
 * network (only lo) and mount namespace (not uts, ipc, cgroup: see
 * runtime.c); no capabilities;
 * noNewPrivileges; the strict seccomp filter; podman's masked and read-only
 * /proc paths; a read-only root; /data read-only, /out a tmpfs of
 * out_max_bytes (rounded down to a page; RUNTIME_OUT_MAX_ENTRIES entries),
 * /tmp a small tmpfs; rlimits NPROC, DATA, CPU, FSIZE, NOFILE and CORE=0;
 * a small Python init (runtime.c) running the program from its stdin in a
 * child, reporting that child's end on fd 3 and copying /out in from fd 4
 * before and out to fd 5 after the code, cwd /tmp, HOME=/tmp. Pure. Returns 0 and a new NUL-terminated
 * string, or -ENOMEM, -EINVAL (a missing path). */
int runtime_config_render(const RuntimeSpec *s, char **ret);

/* Write config.json into the directory bundle_fd (borrowed). */
int runtime_write_bundle(int bundle_fd, const RuntimeSpec *s);

/* The command lines, NULL-terminated, every string owned by the returned
 * array (a strv: free with strv_free()). state_root is the runtime's
 * --root (a directory of ours: the start-up sweep lists it). */
typedef enum RuntimeVerb {
        RUNTIME_RUN, /* run --no-new-keyring --bundle B --pid-file B/container.pid ID (crun: --cgroup-manager=disabled) */
        RUNTIME_DELETE, /* delete -f ID: 0 even when ID does not exist */
        RUNTIME_STATE,  /* state ID: fails once ID is gone (the confirmation) */
        RUNTIME_KILL,   /* kill ID KILL */
        RUNTIME_LIST,   /* list -q: one id per line */
        _RUNTIME_VERB_MAX,
} RuntimeVerb;

#define RUNTIME_PID_FILE "container.pid"

int runtime_argv(
        RuntimeKind kind,
        const char *binary,
        const char *state_root,
        RuntimeVerb verb,
        const char *id,
        const char *bundle,
        char ***ret);

/* The fds a runtime process gets; -1: /dev/null (hold_fd: none). */
typedef struct RuntimeFds {
        int stdin_fd, stdout_fd, stderr_fd;
        int status_fd;  /* fd 3: the init's status pipe (write end) */
        int out_src_fd; /* fd 4: the query's out directory, copied into /out before the code */
        int out_dst_fd; /* fd 5: an empty directory, /out is copied into it after the code */
        int hold_fd;    /* see runtime_spawn() */
} RuntimeFds;
#define RUNTIME_FDS_NONE                                                                             \
        {                                                                                            \
                .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1, .status_fd = -1, .out_src_fd = -1, \
                .out_dst_fd = -1, .hold_fd = -1                                                      \
        }

/* Fork and exec argv (argv[0] an absolute path) with a minimal environment,
 * every signal unblocked and at its default, and fds 0 to 5 from fds (NULL:
 * all /dev/null; "run" passes 3, 4 and 5 into the container with
 * --preserve-fds=3); every other fd is closed. With fds->hold_fd >= 0 (the
 * read end of a pipe) the child first waits for one byte on it and exits
 * with 127 without executing if the pipe is closed without one: that is
 * how a child is put into its scope before the runtime runs. The fds stay
 * the caller's. Returns 0 and the pid, or a negative errno. */
int runtime_spawn(char *const *argv, const RuntimeFds *fds, pid_t *ret_pid);
