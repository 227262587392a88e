/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* The one number parser: decimal digits only (no sign, no spaces, no
 * trailing bytes), checked against [min, max].
 * Returns 0 and sets *ret, -EINVAL for a malformed string, -ERANGE for a
 * value outside the range. */
int parse_uint64_range(const char *s, uint64_t min, uint64_t max, uint64_t *ret);

/* "1", "yes", "true", "on" / "0", "no", "false", "off" (ASCII case-insensitive).
 * Returns 0 and sets *ret, or -EINVAL. */
int parse_boolean(const char *s, bool *ret);

/* The value of one hexadecimal digit (either case), or -EINVAL. */
int unhexchar(char c);
