/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Validation of request bodies (API.md 1 and 7): pure, bytes in, structs
 * out. Anything that is not exactly what the contract allows is
 * invalid_input, with a short message that says what is wrong without
 * quoting the body. The size limit (413) is the caller's: it is decided
 * before the body is read. */

/* Deepest nesting of arrays and objects accepted in a body. A valid query
 * needs 2; more is only ever an attack on the parser. */
#define REQUEST_JSON_MAX_DEPTH 8
#define QUERY_QUESTION_MAX_CHARS 4000
#define QUERY_PAGES_MAX 20
#define QUERY_PAGE_TITLE_MAX_BYTES 255
/* "qr_" + 32 lowercase hex digits */
#define QUERY_FOLLOW_UP_LEN 35

/* True for "application/json", ASCII case-insensitive, optionally followed
 * by parameters of which only charset=utf-8 (value case-insensitive,
 * optionally quoted) is accepted; OWS around the whole value and around
 * ";" is tolerated, an empty parameter ("application/json;") too. Anything
 * else, and NULL, is false. */
bool request_content_type_is_json(const char *content_type);

typedef struct QueryBody {
        char *question; /* trimmed, valid UTF-8 without NUL, owned */
        char **pages;   /* NULL-terminated, owned, never NULL (may be empty) */
        size_t n_pages;
        char *follow_up; /* "qr_" + 32 lowercase hex digits, owned; NULL: absent */
} QueryBody;

/* Free what a QueryBody owns and zero it; safe on a zeroed or already
 * done QueryBody. */
void query_body_done(QueryBody *b);

/* Validate a POST /query body. Accepted is exactly:
 *   - a JSON Content-Type (request_content_type_is_json());
 *   - valid UTF-8 (RFC 3629: no overlongs, no surrogates, nothing above
 *     U+10FFFF) without NUL bytes;
 *   - one JSON object (RFC 8259, strictly: no comments, single quotes,
 *     NaN/Infinity, leading '+', "1.", raw control characters in strings,
 *     unpaired \u surrogate escapes, byte order mark) with only JSON
 *     whitespace after it, nested at most REQUEST_JSON_MAX_DEPTH deep, and
 *     without duplicate keys;
 *   - with the keys "question" (required, a string), "pages" (optional,
 *     an array; null is a wrong type, not "absent") and "follow_up"
 *     (optional, a string: "qr_" and exactly 32 lowercase hex digits; null
 *     is a wrong type), and no others;
 *   - question: 1..4000 code points after trimming ASCII whitespace
 *     (SP, \t, \n, \v, \f, \r) at both ends, no U+0000;
 *   - pages: at most 20 strings of 1..255 bytes each, without control
 *     characters (U+0000..U+001F, U+007F..U+009F). Kept as sent.
 * Returns 0 and fills *ret (owned by the caller, free with
 * query_body_done()); -EINVAL and an allocated human message in
 * *ret_message (if ret_message is not NULL; the caller frees); -ENOMEM.
 * *ret is only written on success. */
int request_parse_query(
        const char *content_type, const uint8_t *body, size_t size, QueryBody *ret, char **ret_message);

/* Validate a POST /queue/join body: either empty (any or no Content-Type),
 * or the JSON object {} (JSON Content-Type, JSON whitespace around and
 * inside allowed). Returns 0; -EINVAL with a message as above; -ENOMEM. */
int request_parse_join(const char *content_type, const uint8_t *body, size_t size, char **ret_message);

/* A POST /history/{id}/feedback body (API.md 9.1). */
#define FEEDBACK_COMMENT_MAX_CHARS 1000

typedef struct FeedbackBody {
        const char *rating; /* "up" or "down", static */
        const char *reason; /* one of the reasons (store/report.h), static; NULL: none */
        char *comment;      /* trimmed, owned; NULL: none (also for a blank one) */
} FeedbackBody;

/* Free what a FeedbackBody owns and zero it; safe on a zeroed one. */
void feedback_body_done(FeedbackBody *b);

/* Validate a feedback body. Accepted is exactly, besides what
 * request_parse_query() asks of every body (JSON Content-Type, UTF-8,
 * strict JSON, one object, no duplicate keys):
 *   - "rating" (required): the string "up" or "down";
 *   - "reason" (optional, only with "down"): one of the strings "wrong",
 *     "incomplete", "not_what_i_asked", "bad_sources", "other";
 *   - "comment" (optional): a string of at most 1000 code points after
 *     trimming ASCII whitespace at both ends, without NUL and control
 *     characters other than tab, line feed and carriage return
 *     (U+0001..U+001F, U+007F..U+009F); blank is no comment;
 *   - no other key; null for any of them is a wrong type.
 * Returns 0 and fills *ret (free with feedback_body_done()); -EINVAL with
 * an allocated message in *ret_message (if not NULL); -ENOMEM. */
int request_parse_feedback(
        const char *content_type, const uint8_t *body, size_t size, FeedbackBody *ret, char **ret_message);

/* A POST /tokens body (API.md "Access tokens"). */
#define TOKEN_NAME_MAX_CHARS 64
#define TOKEN_DAYS_MAX 3650

typedef struct TokenBody {
        char *name;               /* owned */
        unsigned expires_in_days; /* 0: not given (the most WIKI_WEB_TOKEN_MAX_DAYS allows) */
} TokenBody;

/* Free what a TokenBody owns and zero it; safe on a zeroed one. */
void token_body_done(TokenBody *b);

/* Validate a token body. Accepted is exactly, besides what
 * request_parse_query() asks of every body (JSON Content-Type, UTF-8,
 * strict JSON, one object, no duplicate keys):
 *   - "name" (required): a string of 1 to 64 code points without NUL or
 *     any control character (tab and line ends included), not beginning
 *     or ending with ASCII whitespace;
 *   - "expires_in_days" (optional): a JSON integer from 1 to 3650 (the
 *     setting WIKI_WEB_TOKEN_MAX_DAYS bounds it further, in the Manager);
 *   - no other key.
 * Returns 0 and fills *ret (free with token_body_done()); -EINVAL with an
 * allocated message in *ret_message (if not NULL); -ENOMEM. */
int request_parse_token(
        const char *content_type, const uint8_t *body, size_t size, TokenBody *ret, char **ret_message);
