/* SPDX-License-Identifier: MIT */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

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

/* A new JSON string of the n bytes at s (json_object_new_string_len()
 * takes an int): NULL when n > INT_MAX or out of memory. */
json_object *json_string_n(const char *s, size_t n);

/* A new JSON string of s; NULL stands for "". NULL when out of memory. */
json_object *json_string(const char *s);

/* A new JSON string of any n bytes at s, made valid UTF-8 without NUL
 * (utf8_make_valid(): each bad byte and each NUL becomes U+FFFD); NULL
 * stands for "". NULL when out of memory. */
json_object *json_string_bytes(const char *s, size_t n);

/* obj[key] = value. value is taken over, also on failure and when it is
 * NULL (a failed constructor): -ENOMEM then, so that
 * "r = json_add(o, "k", json_string(s));" checks both. */
int json_add(json_object *obj, const char *key, json_object *value);

/* Append value to array; value is taken over as by json_add(). */
int json_append(json_object *array, json_object *value);

/* Whether the bytes of s from "from" to n are JSON whitespace only (space,
 * tab, CR, LF; a NUL is not): what may follow a document that
 * json_tokener_parse_ex() read up to json_tokener_get_parse_end(). */
bool json_rest_is_whitespace(const char *s, size_t from, size_t n);

/* Append to *l (n entries, NULL-terminated; strv_extend_unique()) the
 * string member key of each object of the JSON array text json, each
 * string once: a record's source titles. Text that is not such an array
 * (NULL included) adds nothing. Returns 0 or -ENOMEM. */
int json_array_strings_unique(const char *json, const char *key, char ***l, size_t *n);
