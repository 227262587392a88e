/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>

/* A file a run left in /out: the one type for it in the sandbox (which
 * lists and collects them, sandbox/files.h), the agent (which tells the
 * model their names and sizes), the executor's outcome and the store
 * (which keeps them, store/history.h). A run's listing fills name and
 * size_bytes only; a collected artifact all of it. */

typedef struct Artifact {
        char *name;             /* made safe (sandbox_artifact_name()); owned */
        const char *media_type; /* static, from the allowlist; NULL in a listing */
        uint64_t size_bytes;
        char sha256[65]; /* 64 hex digits of the bytes; "" in a listing */
        int fd;          /* the bytes, read-only, at offset 0; owned; -1 in a listing */
} Artifact;

/* Frees the name and closes the fd; resets it to empty (fd -1). */
void artifact_done(Artifact *a);
