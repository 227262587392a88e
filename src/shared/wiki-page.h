/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

/* A page read from the wiki, and the names derived from it. */

/* The /data file name of a page title (API.md 8.7), computed here only:
 * the sandbox writes the page under it and the agent names it to the
 * model. Spaces become '_', every byte outside "A-Z a-z 0-9 _ - . ( ) ," is percent-encoded ("%2F"
 * for '/', upper-case hex), then ".wiki". The title is any bytes (NUL,
 * invalid UTF-8 included: each byte is encoded). A name that would exceed
 * NAME_MAX (255 bytes) is cut at a percent-escape boundary and ends in
 * "~" + 16 hex digits of the title's SHA-256 before ".wiki": '~' cannot come
 * from the rule, so a cut name never collides with an uncut one.
 * "." and ".." cannot result (a '.'-only title keeps its dots but gains
 * ".wiki"). Returns 0 and a new string, -EINVAL for an empty title, -ENOMEM. */
int wiki_page_data_file_name(const char *title, size_t len, char **ret);
