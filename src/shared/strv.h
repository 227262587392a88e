/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "shared/macro.h"

/* NULL-terminated arrays of strings ("strv"), after systemd's strv.h. A
 * strv owns its array and every string in it. */

/* Free every string and the array; NULL is fine. Returns NULL, so that
 * "l = strv_free(l);" leaves nothing dangling. */
char **strv_free(char **l);
DEFINE_TRIVIAL_CLEANUP_FUNC(char **, strv_free);

/* The number of strings before the terminating NULL (0 for NULL). */
size_t strv_length(char *const *l);

/* A copy of every string and the array (an empty strv for NULL); NULL
 * when out of memory. */
char **strv_copy(char *const *l);

/* Whether s is one of l's strings. */
bool strv_contains(char *const *l, const char *s);

/* Append a copy of s to *l unless it is there already; *n is *l's length,
 * kept up to date (*l may be NULL with *n 0). Returns 0, or -ENOMEM with
 * *l unchanged. */
int strv_extend_unique(char ***l, size_t *n, const char *s);

/* Split s at commas into a new strv: blanks (spaces, tabs) around each
 * item are dropped and empty items left out, so "a, b,,c " is "a", "b",
 * "c". NULL and "" give an empty strv (never NULL). Returns 0, or -ENOMEM
 * with *ret unchanged. */
int strv_split_list(const char *s, char ***ret);
