/* SPDX-License-Identifier: MIT */
#pragma once

#include <errno.h>

/* The API error codes of API.md section 2. This enum and its table in
 * api-error.c are the only place that knows code names, HTTP statuses and
 * default messages. */
typedef enum ApiError {
        API_ERROR_INVALID_INPUT,
        API_ERROR_MODEL_CONTEXT_EXCEEDED,
        API_ERROR_ORIGIN_DENIED,
        API_ERROR_DESTINATION_DENIED,
        API_ERROR_WIKI_AUTH_FAILED,
        API_ERROR_ARTIFACT_NOT_FOUND,
        API_ERROR_TICKET_NOT_FOUND,
        API_ERROR_QUERY_NOT_FOUND,
        API_ERROR_NOT_FOUND,
        API_ERROR_METHOD_NOT_ALLOWED,
        API_ERROR_BUSY,
        API_ERROR_REQUEST_TOO_LARGE,
        API_ERROR_UPSTREAM_FAILED,
        API_ERROR_UPSTREAM_RESPONSE_TOO_LARGE,
        API_ERROR_TLS_FAILED,
        API_ERROR_CONNECTIVITY_FAILED,
        API_ERROR_MODEL_OUTPUT_LIMIT,
        API_ERROR_QUERY_TIMEOUT,
        API_ERROR_EXECUTION_FAILED,
        API_ERROR_CLEANUP_FAILED,
        API_ERROR_INTERNAL_ERROR,
        API_ERROR_QUEUE_FULL,
        API_ERROR_HEADER_TOO_LARGE, /* extension: 431 */
        API_ERROR_RATE_LIMITED,     /* extension: 429, too many event streams (API.md 11) */
        /* extension: 503, the history cannot take a new record (API.md 2) */
        API_ERROR_STORAGE_UNAVAILABLE,
        API_ERROR_UNAUTHORIZED, /* extension: 401 with WWW-Authenticate (API.md "MCP") */
        /* extension: 401, a wrong, expired or revoked access token (API.md "Access tokens") */
        API_ERROR_INVALID_TOKEN,
        _API_ERROR_MAX,
        _API_ERROR_INVALID = -EINVAL,
} ApiError;

/* "invalid_input", ... ; NULL for an out-of-range value. */
const char *api_error_to_string(ApiError e);
ApiError api_error_from_string(const char *s);
/* The HTTP status, 500 for an out-of-range value. */
unsigned api_error_http_status(ApiError e);
/* The default message of the table, "Internal error" for an out-of-range value. */
const char *api_error_default_message(ApiError e);
