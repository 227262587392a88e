/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shared/artifact.h"
#include "shared/wiki-page.h"

/* The files a run sees and leaves (API.md 8.7, 9): the /data writer
 * (shared/wiki-page.h names the files), and the /out artifact collector. No event loop, no D-Bus: plain
 * file system calls on directories the caller owns. */

/* Write one page's file into the /data directory dir_fd and rewrite
 * pages.json with entries (n of them, in first-read order; the page is
 * expected to be among them). Files are written to a temporary name and
 * renamed, so a run never sees half a file. Returns 0 or a negative errno. */
int sandbox_data_write_page(int dir_fd, const WikiPage *page, const WikiPage *entries, size_t n);

/* The artifact name of an /out file name (API.md 9): valid UTF-8 (an invalid
 * byte becomes '_'), no control characters ('_'), no '/', at most 255 bytes
 * (cut on a character boundary), never empty, "." or ".." ("_"). */
int sandbox_artifact_name(const char *name, char **ret);

/* The media type of a file name, from its extension, through an allowlist;
 * anything else "application/octet-stream". Static string. */
const char *sandbox_media_type(const char *name);

typedef struct SandboxArtifacts {
        Artifact *items; /* each with all its fields */
        size_t n;
        /* What was left out, by reason (each also logged, at most a few
         * lines per reason). */
        size_t skipped_not_regular; /* links, devices, FIFOs, sockets, directories */
        size_t skipped_too_large;   /* would exceed the total byte cap */
        size_t skipped_too_many;    /* beyond the file count cap */
        size_t skipped_unreadable;
} SandboxArtifacts;

void sandbox_artifacts_done(SandboxArtifacts *a);

/* Collect the artifacts of an /out directory (dir_fd, borrowed): its
 * regular top-level files in name order, never following a link (openat
 * with O_NOFOLLOW, fstat on the opened file), at most max_files, and in
 * total at most max_bytes (a file that would exceed it is skipped, a later
 * smaller one may still fit). A file's size is taken from fstat before
 * reading and the hash covers exactly that many bytes; a file that changes
 * size while read is skipped as unreadable. Returns 0, or -ENOMEM, or the
 * error of reading the directory itself. */
int sandbox_collect_artifacts(int dir_fd, uint64_t max_files, uint64_t max_bytes, SandboxArtifacts *ret);

/* Remove everything below dir_fd (borrowed), never following links, making
 * the container's mode-000 directories writable first (they belong to us).
 * Returns 0 or the first error. */
int sandbox_rm_rf_children(int dir_fd);
/* As above, and then path itself (relative to at_fd). Missing: 0. */
int sandbox_rm_rf(int at_fd, const char *path);
