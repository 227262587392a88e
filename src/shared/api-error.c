/* SPDX-License-Identifier: MIT */
#include "shared/api-error.h"
#include "shared/macro.h"

static const struct {
        const char *code;
        unsigned status;
        const char *message;
} table[_API_ERROR_MAX] = {
        [API_ERROR_INVALID_INPUT] = { "invalid_input", 400, "Invalid input" },
        [API_ERROR_MODEL_CONTEXT_EXCEEDED] = { "model_context_exceeded", 400, "Model context window exceeded" },
        [API_ERROR_ORIGIN_DENIED] = { "origin_denied", 403, "Origin denied by policy" },
        [API_ERROR_DESTINATION_DENIED] = { "destination_denied", 403, "Destination denied by policy" },
        [API_ERROR_WIKI_AUTH_FAILED] = { "wiki_auth_failed", 403, "Wiki authentication failed" },
        [API_ERROR_ARTIFACT_NOT_FOUND] = { "artifact_not_found", 404, "Artifact not found" },
        [API_ERROR_TICKET_NOT_FOUND] = { "ticket_not_found", 404, "Ticket not found" },
        [API_ERROR_QUERY_NOT_FOUND] = { "query_not_found", 404, "Query not found" },
        [API_ERROR_NOT_FOUND] = { "not_found", 404, "Not found" },
        [API_ERROR_METHOD_NOT_ALLOWED] = { "method_not_allowed", 405, "Method not allowed" },
        [API_ERROR_BUSY] = { "busy", 409, "Active query already in progress" },
        [API_ERROR_REQUEST_TOO_LARGE] = { "request_too_large", 413, "Request body exceeds maximum allowed size" },
        [API_ERROR_UPSTREAM_FAILED] = { "upstream_failed", 502, "Upstream request failed" },
        [API_ERROR_UPSTREAM_RESPONSE_TOO_LARGE] = { "upstream_response_too_large",
                                                    502,
                                                    "Upstream response exceeds maximum allowed size" },
        [API_ERROR_TLS_FAILED] = { "tls_failed", 502, "TLS certificate verification failed" },
        [API_ERROR_CONNECTIVITY_FAILED] = { "connectivity_failed", 502, "Failed to connect to upstream server" },
        [API_ERROR_MODEL_OUTPUT_LIMIT] = { "model_output_limit", 502, "Model output exceeded limit" },
        [API_ERROR_QUERY_TIMEOUT] = { "query_timeout", 504, "Query execution timed out" },
        [API_ERROR_EXECUTION_FAILED] = { "execution_failed", 500, "Query execution failed" },
        [API_ERROR_CLEANUP_FAILED] = { "cleanup_failed", 500, "Container cleanup could not be confirmed" },
        [API_ERROR_INTERNAL_ERROR] = { "internal_error", 500, "Internal error" },
        [API_ERROR_QUEUE_FULL] = { "queue_full", 503, "The queue is full" },
        [API_ERROR_HEADER_TOO_LARGE] = { "request_header_too_large",
                                         431,
                                         "Request line and header fields exceed the maximum allowed size" },
        [API_ERROR_RATE_LIMITED] = { "rate_limited", 429, "Too many open event streams" },
        [API_ERROR_STORAGE_UNAVAILABLE] = { "storage_unavailable", 503, "The history cannot take a new record" },
        [API_ERROR_UNAUTHORIZED] = { "unauthorized", 401, "Authentication required" },
        [API_ERROR_INVALID_TOKEN] = { "invalid_token", 401, "The access token is wrong, expired or revoked" },
};

const char *api_error_to_string(ApiError e) {
        if (e < 0 || e >= _API_ERROR_MAX)
                return NULL;
        return table[e].code;
}

ApiError api_error_from_string(const char *s) {
        if (!s)
                return _API_ERROR_INVALID;
        for (int i = 0; i < _API_ERROR_MAX; i++)
                if (streq(table[i].code, s))
                        return (ApiError) i;
        return _API_ERROR_INVALID;
}

unsigned api_error_http_status(ApiError e) {
        if (e < 0 || e >= _API_ERROR_MAX)
                return 500;
        return table[e].status;
}

const char *api_error_default_message(ApiError e) {
        if (e < 0 || e >= _API_ERROR_MAX)
                return "Internal error";
        return table[e].message;
}
