/* SPDX-License-Identifier: MIT */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shared/macro.h"

/* json-c's object, declared only: a header that includes this one (the
 * store's) needs no json-c. */
struct json_object;

/* The sources and citations of a query record (API.md 9 "sources" and
 * "citations") as one type each, for every reader and writer: the store
 * parses its stored JSON arrays into them once, when it hands a record out
 * (store/history.h), and the faces write them (the API's JSON, the
 * Markdown export, the unanswered report, the streams, the conversation
 * given to the model, the sources check).
 *
 * The stored form is the JSON the API shows: sources are
 *     [{"title", "url", "revision_id"}, ...]
 * and citations
 *     [{"n", "title", "revision_id", "quote", "status", "url", "section"}, ...]
 * with null for a value that is not known. The writers below give exactly
 * those keys in that order, so that a record written and read back renders
 * to the same bytes.
 *
 * The parsers read text the store wrote, but the file is not the daemon's
 * alone (an administrator's copy, a damaged disk): they take any bytes. An
 * entry that is not an object, or lacks its title (a citation: its title
 * or its quote), is skipped; a value of the wrong type counts as null; at
 * most SOURCES_MAX entries are read. */

/* Entries read from one stored array at most; later ones are dropped. A
 * query's own lists are far shorter (a citation list is at most 64). */
#define SOURCES_MAX 1024u

typedef enum CitationStatus {
        CITATION_VERIFIED,  /* the quote is in the text of that revision as read */
        CITATION_NOT_FOUND, /* the page was read, the quote is not in it */
        CITATION_NOT_READ,  /* the page was never read by this query */
        CITATION_TOO_SHORT, /* under CITATION_QUOTE_MIN_CHARS once normalized: too short to mean anything */
        _CITATION_STATUS_MAX,
        _CITATION_STATUS_INVALID = -EINVAL,
} CitationStatus;

/* "verified", "not_found", "not_read", "too_short"; NULL out of range. */
const char *citation_status_to_string(CitationStatus s);
/* The status named s; _CITATION_STATUS_INVALID for NULL or another name. */
CitationStatus citation_status_from_string(const char *s);

/* A page a query read. */
typedef struct Source {
        char *title; /* after redirects; never NULL */
        char *url;   /* the page's URL as the wiki gave it; NULL: null */
        uint64_t revision_id;
        bool has_revision_id; /* false: null */
} Source;

/* A citation of the answer (docs/QUERY.md "Citations"): a quote the model
 * gave for marker n, and whether it is in the page it names. */
typedef struct SourceCitation {
        unsigned n;  /* the marker number; 0 when not known */
        char *title; /* the page's title when it was read, the model's otherwise; never NULL */
        uint64_t revision_id;
        bool has_revision_id;  /* false: the page was not read (null) */
        char *quote;           /* as the model wrote it; never NULL */
        CitationStatus status; /* _CITATION_STATUS_INVALID: not known (null) */
        char *url; /* the revision's permalink, with the quote's text fragment when verified; NULL: null */
        char *section; /* the heading above the quote; NULL: null */
} SourceCitation;

/* Free sources[0..n) and the array itself. Returns NULL. */
Source *source_free_many(Source *sources, size_t n);
SourceCitation *source_citation_free_many(SourceCitation *citations, size_t n);

/* A deep copy of sources[0..n) in *ret (NULL when n is 0). Returns 0 or
 * -ENOMEM. */
int source_copy_many(const Source *sources, size_t n, Source **ret);

/* Parse stored JSON text (NULL: []) into a new array in *ret (NULL when
 * empty; free with source_free_many() / source_citation_free_many()) and
 * its length in *ret_n, by the rules above. Returns 0, -EINVAL when text
 * is not one JSON array (nothing but whitespace after it), -ENOMEM.
 * Untrusted input: fuzzed (fuzz-source). */
int source_parse_array(const char *text, Source **ret, size_t *ret_n);
int source_citation_parse_array(const char *text, SourceCitation **ret, size_t *ret_n);

/* The same from a parsed array (borrowed); -EINVAL when it is not one. */
int source_from_json(struct json_object *array, Source **ret, size_t *ret_n);
int source_citation_from_json(struct json_object *array, SourceCitation **ret, size_t *ret_n);

/* The JSON of sources[0..n) / citations[0..n), the stored and shown form
 * above: a new array (the caller puts it), NULL when out of memory. */
struct json_object *source_to_json(const Source *sources, size_t n);
struct json_object *source_citation_to_json(const SourceCitation *citations, size_t n);
