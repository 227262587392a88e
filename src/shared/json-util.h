/* SPDX-License-Identifier: MIT */
#pragma once

#include <json-c/json.h>

#include "shared/macro.h"

/* json-c helpers shared by the modules that speak JSON, so that no file
 * keeps its own copy. */

DEFINE_TRIVIAL_CLEANUP_FUNC(json_object *, json_object_put);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct json_tokener *, json_tokener_free);

/* s (UTF-8, NUL-terminated) as a JSON string literal, quotes included:
 * '"' and '\' escaped, control characters and DEL as \u00XX, everything
 * else as it is. Returns a new string (the caller frees it), NULL when out
 * of memory. */
char *json_quote(const char *s);
