/* SPDX-License-Identifier: MIT */
#pragma once

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
