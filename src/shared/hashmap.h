/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "shared/macro.h"

/* A map from NUL-terminated string keys to pointers: open addressing with
 * linear probing (load at most 1/2) and backward-shift removal, as
 * admission.c finds tickets. The keys are borrowed: each must stay valid
 * and unchanged while its entry is in the map (typically a field of the
 * value itself, like ManagerQuery.id). The map does not own the values.
 * Lookup, insertion and removal are O(1) expected; there is no iteration:
 * a caller that needs an order keeps its own list beside it. */

typedef struct StringHashmap StringHashmap;

int string_hashmap_new(StringHashmap **ret);
/* Frees the table only; the values are the caller's. */
StringHashmap *string_hashmap_free(StringHashmap *h);
DEFINE_TRIVIAL_CLEANUP_FUNC(StringHashmap *, string_hashmap_free);

/* 0, -EEXIST (the key is in the map already: nothing changed), -ENOMEM. */
int string_hashmap_put(StringHashmap *h, const char *key, void *value);
/* The value of key, NULL when none (key NULL: none). */
void *string_hashmap_get(const StringHashmap *h, const char *key);
/* Removes key's entry and returns its value, NULL when none. */
void *string_hashmap_remove(StringHashmap *h, const char *key);
size_t string_hashmap_size(const StringHashmap *h);
