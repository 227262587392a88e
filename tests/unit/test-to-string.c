/* SPDX-License-Identifier: MIT */
/* A table test for every *_to_string() of the tree: each value has exactly
 * the name the contract gives it, names are distinct, the parsers (where
 * there is one) invert them, and out-of-range values give NULL (or the
 * documented fallback), never a stray pointer. */
#include "admission/admission.h"
#include "http/origin.h"
#include "http/router.h"
#include "manager/manager.h"
#include "query/agent.h"
#include "query/citation.h"
#include "query/executor.h"
#include "query/llm.h"
#include "query/mediawiki.h"
#include "shared/api-error.h"
#include "shared/macro.h"
#include "tests.h"

/* API.md section 2, row by row. */
static const struct {
        ApiError e;
        const char *code;
        unsigned status;
        const char *message;
} api_errors[] = {
        { API_ERROR_INVALID_INPUT, "invalid_input", 400, "Invalid input" },
        { API_ERROR_MODEL_CONTEXT_EXCEEDED, "model_context_exceeded", 400, "Model context window exceeded" },
        { API_ERROR_ORIGIN_DENIED, "origin_denied", 403, "Origin denied by policy" },
        { API_ERROR_DESTINATION_DENIED, "destination_denied", 403, "Destination denied by policy" },
        { API_ERROR_WIKI_AUTH_FAILED, "wiki_auth_failed", 403, "Wiki authentication failed" },
        { API_ERROR_ARTIFACT_NOT_FOUND, "artifact_not_found", 404, "Artifact not found" },
        { API_ERROR_TICKET_NOT_FOUND, "ticket_not_found", 404, "Ticket not found" },
        { API_ERROR_QUERY_NOT_FOUND, "query_not_found", 404, "Query not found" },
        { API_ERROR_NOT_FOUND, "not_found", 404, "Not found" },
        { API_ERROR_METHOD_NOT_ALLOWED, "method_not_allowed", 405, "Method not allowed" },
        { API_ERROR_BUSY, "busy", 409, "Active query already in progress" },
        { API_ERROR_REQUEST_TOO_LARGE, "request_too_large", 413, "Request body exceeds maximum allowed size" },
        { API_ERROR_UPSTREAM_FAILED, "upstream_failed", 502, "Upstream request failed" },
        { API_ERROR_UPSTREAM_RESPONSE_TOO_LARGE,
          "upstream_response_too_large",
          502,
          "Upstream response exceeds maximum allowed size" },
        { API_ERROR_TLS_FAILED, "tls_failed", 502, "TLS certificate verification failed" },
        { API_ERROR_CONNECTIVITY_FAILED, "connectivity_failed", 502, "Failed to connect to upstream server" },
        { API_ERROR_MODEL_OUTPUT_LIMIT, "model_output_limit", 502, "Model output exceeded limit" },
        { API_ERROR_QUERY_TIMEOUT, "query_timeout", 504, "Query execution timed out" },
        { API_ERROR_EXECUTION_FAILED, "execution_failed", 500, "Query execution failed" },
        { API_ERROR_CLEANUP_FAILED, "cleanup_failed", 500, "Container cleanup could not be confirmed" },
        { API_ERROR_INTERNAL_ERROR, "internal_error", 500, "Internal error" },
        { API_ERROR_QUEUE_FULL, "queue_full", 503, "The queue is full" },
        /* Extension: a request head over the limit (docs/HTTP.md). */
        { API_ERROR_HEADER_TOO_LARGE,
          "request_header_too_large",
          431,
          "Request line and header fields exceed the maximum allowed size" },
        /* Extension: one event stream too many (API.md 11). */
        { API_ERROR_RATE_LIMITED, "rate_limited", 429, "Too many open event streams" },
        /* Extension: the history cannot take a new record (API.md 2). */
        { API_ERROR_STORAGE_UNAVAILABLE, "storage_unavailable", 503, "The history cannot take a new record" },
        { API_ERROR_UNAUTHORIZED, "unauthorized", 401, "Authentication required" },
        { API_ERROR_INVALID_TOKEN, "invalid_token", 401, "The access token is wrong, expired or revoked" },
};

TEST(api_error_table) {
        ASSERT_EQ_INT(ELEMENTSOF(api_errors), _API_ERROR_MAX);
        for (size_t i = 0; i < ELEMENTSOF(api_errors); i++) {
                ApiError e = api_errors[i].e;

                ASSERT_EQ_STR(api_error_to_string(e), api_errors[i].code);
                ASSERT_EQ_INT(api_error_http_status(e), api_errors[i].status);
                ASSERT_EQ_STR(api_error_default_message(e), api_errors[i].message);
                ASSERT_EQ_INT(api_error_from_string(api_errors[i].code), e);
        }
        /* Out of range: NULL, the generic 500 and its message. */
        ASSERT_TRUE(!api_error_to_string(_API_ERROR_MAX));
        ASSERT_TRUE(!api_error_to_string(_API_ERROR_INVALID));
        ASSERT_EQ_INT(api_error_http_status(_API_ERROR_MAX), 500);
        ASSERT_EQ_INT(api_error_http_status(_API_ERROR_INVALID), 500);
        ASSERT_EQ_STR(api_error_default_message(_API_ERROR_MAX), "Internal error");
        ASSERT_EQ_STR(api_error_default_message(_API_ERROR_INVALID), "Internal error");
        /* The parser is exact. */
        ASSERT_EQ_INT(api_error_from_string("BUSY"), _API_ERROR_INVALID);
        ASSERT_EQ_INT(api_error_from_string("busy "), _API_ERROR_INVALID);
        ASSERT_EQ_INT(api_error_from_string(""), _API_ERROR_INVALID);
        ASSERT_EQ_INT(api_error_from_string(NULL), _API_ERROR_INVALID);
}

/* Each name in order, then NULL past the end and for the invalid value. */
#define CHECK_NAMES(to_string, max, invalid, ...)                                       \
        do {                                                                            \
                static const char *const _names[] = { __VA_ARGS__ };                    \
                ASSERT_EQ_INT(ELEMENTSOF(_names), max);                                 \
                for (int _i = 0; _i < (int) (max); _i++) {                              \
                        ASSERT_EQ_STR(to_string(_i), _names[_i]);                       \
                        for (int _j = 0; _j < _i; _j++)                                 \
                                ASSERT_TRUE(strcmp(to_string(_i), to_string(_j)) != 0); \
                }                                                                       \
                ASSERT_TRUE(!to_string(max));                                           \
                ASSERT_TRUE(!to_string(invalid));                                       \
        } while (0)

TEST(admission_names) {
        CHECK_NAMES(
                admission_state_to_string,
                _ADMISSION_STATE_MAX,
                _ADMISSION_STATE_INVALID,
                "idle",
                "reserved",
                "running");
        CHECK_NAMES(ticket_status_to_string, _TICKET_STATUS_MAX, _TICKET_STATUS_INVALID, "waiting", "reserved");
        CHECK_NAMES(
                remove_reason_to_string,
                _REMOVE_REASON_MAX,
                _REMOVE_REASON_INVALID,
                "left",
                "claimed",
                "heartbeat",
                "reservation",
                "admin");
}

TEST(manager_names) {
        CHECK_NAMES(
                manager_query_state_to_string,
                _MANAGER_QUERY_STATE_MAX,
                _MANAGER_QUERY_STATE_INVALID,
                "claimed",
                "executing",
                "completing",
                "awaiting_cleanup",
                "finished");
        CHECK_NAMES(
                manager_sandbox_health_to_string,
                _MANAGER_SANDBOX_HEALTH_MAX,
                _MANAGER_SANDBOX_HEALTH_INVALID,
                "ok",
                "starting",
                "unavailable");
}

TEST(origin_names) {
        CHECK_NAMES(
                origin_verdict_to_string,
                _ORIGIN_VERDICT_MAX,
                _ORIGIN_VERDICT_INVALID,
                "allow",
                "allow-cors",
                "deny");
}

TEST(route_names) {
        /* Every route has a distinct name, for the logs. */
        for (int r = 0; r < _ROUTE_MAX; r++) {
                ASSERT_TRUE(route_to_string(r) && *route_to_string(r));
                for (int j = 0; j < r; j++)
                        ASSERT_TRUE(strcmp(route_to_string(r), route_to_string(j)) != 0);
        }
        ASSERT_TRUE(!route_to_string(_ROUTE_MAX));
        ASSERT_TRUE(!route_to_string(_ROUTE_INVALID));
}

TEST(http_method_names) {
        /* Each method's token round-trips; OTHER has no name. */
        for (int m = 0; m < _HTTP_METHOD_MAX; m++) {
                const char *s = http_method_to_string(m);

                if (m == HTTP_METHOD_OTHER) {
                        ASSERT_TRUE(!s);
                        continue;
                }
                ASSERT_TRUE(s);
                ASSERT_EQ_INT(http_method_from_string(s), m);
        }
        ASSERT_TRUE(!http_method_to_string(_HTTP_METHOD_MAX));
        ASSERT_TRUE(!http_method_to_string(_HTTP_METHOD_INVALID));
}

/* The pipeline's enums: names sent to the model (tools, roles), written in
 * logs (actions) or read from MediaWiki (login results, API.md 8.1). */
TEST(query_names) {
        CHECK_NAMES(
                agent_tool_to_string,
                _AGENT_TOOL_MAX,
                _AGENT_TOOL_INVALID,
                "wiki_search",
                "wiki_read",
                "run_python");
        for (int t = 0; t < _AGENT_TOOL_MAX; t++)
                ASSERT_EQ_INT(agent_tool_from_string(agent_tool_to_string(t)), t);
        ASSERT_EQ_INT(agent_tool_from_string("WIKI_READ"), _AGENT_TOOL_INVALID);
        ASSERT_EQ_INT(agent_tool_from_string(NULL), _AGENT_TOOL_INVALID);
        CHECK_NAMES(
                agent_action_type_to_string,
                _AGENT_ACTION_MAX,
                _AGENT_ACTION_INVALID,
                "send",
                "tool",
                "answer",
                "fail");
        CHECK_NAMES(
                llm_role_to_string, _LLM_ROLE_MAX, _LLM_ROLE_INVALID, "system", "user", "assistant", "tool");
        /* The phases of a running query (API.md 11.4) and whether it
         * offered run_python (the record's "sandbox", API.md 9). */
        CHECK_NAMES(
                query_phase_to_string, _QUERY_PHASE_MAX, _QUERY_PHASE_INVALID, "wiki", "model", "sandbox", "cleanup");
        CHECK_NAMES(
                query_sandbox_to_string,
                _QUERY_SANDBOX_MAX,
                _QUERY_SANDBOX_INVALID,
                "offered",
                "unavailable",
                "starting");
        /* A citation's status (API.md 9, "citations"). */
        CHECK_NAMES(
                citation_status_to_string,
                _CITATION_STATUS_MAX,
                _CITATION_STATUS_INVALID,
                "verified",
                "not_found",
                "not_read",
                "too_short");
        /* MediaWikiLoginResult has no _MAX: OTHER is the last value. */
        CHECK_NAMES(
                mediawiki_login_result_to_string,
                MEDIAWIKI_LOGIN_OTHER + 1,
                -EINVAL,
                "Success",
                "Failed",
                "WrongToken",
                "NeedToken",
                "Aborted",
                "other");
}

DEFINE_TEST_MAIN()
