/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A page read from the wiki: the one type for it in the wiki client (which
 * parses it, query/mediawiki.h), the agent (which gives it to the model),
 * the sandbox (which writes it under /data) and the names derived from it. */

typedef struct WikiPage {
        bool missing;          /* the page does not exist (or the title is invalid) */
        char *title;           /* after redirects; UTF-8 as the wiki returned it */
        char *redirected_from; /* the title asked for, when a redirect was followed; NULL else */
        uint64_t revision_id;  /* 0 when missing */
        char *url;             /* canonical URL (canonicalurl, else fullurl); NULL when missing */
        char *content;         /* wikitext, NUL-terminated; NULL when missing (or not kept) */
        size_t content_size;
        bool truncated; /* only part of the content was kept */
} WikiPage;

/* Frees the strings of a page whose strings are owned (a parsed page, a
 * copy); resets it to empty. NULL is fine. */
void wiki_page_done(WikiPage *p);

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
