/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* The web page of API.md 13: its files (src/www/) are built into the
 * daemon as a fixed table (src/www/embed.py writes it at build time), so
 * there is no directory to configure and no request path ever reaches the
 * file system. Pure lookups; httpd.c serves the result. */

typedef struct WwwFile {
        const char *path;       /* "/" for index.html, "/app.js", ... */
        const char *media_type; /* Content-Type */
        const char *etag;       /* "\"<SHA-256 of the bytes, hex>\"", a strong ETag */
        const unsigned char *data;
        size_t size;
        /* The same bytes compressed with gzip at build time, with an ETag of
         * their own ("\"<hex>-gzip\""); NULL and 0 when gzip would not make
         * the file smaller. */
        const char *gzip_etag;
        const unsigned char *gzip_data;
        size_t gzip_size;
} WwwFile;

/* The table, sorted by path; static, never freed. */
extern const WwwFile www_files[];
extern const size_t www_n_files;

/* Content-Security-Policy of the page and its files (API.md 13). */
#define WWW_CONTENT_SECURITY_POLICY                                                       \
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " \
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

/* The file served at path (the request path, without the query string),
 * or NULL. Matching is exact, as router_match() is for the API. */
const WwwFile *www_lookup(const char *path);

/* Whether an Accept-Encoding field value (RFC 9110 12.5.3) accepts gzip:
 * "gzip" or "x-gzip", else "*", with a weight above 0 ("q=0" refuses it).
 * A malformed element or weight counts as not accepting (the identity
 * bytes are always right). NULL or empty: false. Linear in the length. */
bool www_accepts_gzip(const char *accept_encoding);

/* Whether an If-None-Match field value (RFC 9110 13.1.2) matches etag: "*",
 * or a comma-separated list of entity tags one of which, weak or not, is
 * etag (the weak comparison, as a GET's revalidation uses). NULL: false. */
bool www_etag_matches(const char *if_none_match, const char *etag);
