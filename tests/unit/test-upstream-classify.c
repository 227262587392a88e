/* SPDX-License-Identifier: MIT */
/* The one mapping of an upstream exchange's end to an API error
 * (upstream_classify(), API.md 8), and Retry-After parsing. */
#include <curl/curl.h>

#include "query/upstream.h"
#include "shared/macro.h"
#include "tests.h"

/* The API error of an outcome, _API_ERROR_INVALID for a 2xx (classified
 * as 0, no API error); a failure is always a negative errno. */
static ApiError classify_api_error(const UpstreamOutcome *o) {
        ApiError e = _API_ERROR_INVALID;
        int r = upstream_classify(o, &e);

        ASSERT_TRUE(r <= 0);
        ASSERT_TRUE((r == 0) == (e == _API_ERROR_INVALID));
        return e;
}

#define OUTCOME(code, status, ...) \
        (&(UpstreamOutcome){ .curl_code = (code), .http_status = (status), __VA_ARGS__ })
#define C(code, status, ...) classify_api_error(OUTCOME(code, status, __VA_ARGS__))
#define E(code, status, ...) upstream_classify(OUTCOME(code, status, __VA_ARGS__), &(ApiError){ 0 })

TEST(table) {
        /* 2xx */
        for (long s = 200; s <= 299; s++)
                ASSERT_EQ_INT(C(CURLE_OK, s), _API_ERROR_INVALID);
        /* other statuses, whatever they are */
        static const long other[] = { 0,   100, 199, 300, 301, 304, 400, 401,
                                      403, 404, 429, 500, 502, 503, 599, 999 };
        for (size_t i = 0; i < ELEMENTSOF(other); i++)
                ASSERT_EQ_INT(C(CURLE_OK, other[i]), API_ERROR_UPSTREAM_FAILED);
        ASSERT_EQ_INT(C(CURLE_OK, 200, .too_many_redirects = true), API_ERROR_UPSTREAM_FAILED);
        ASSERT_EQ_INT(C(CURLE_OK, 302, .bad_redirect = true), API_ERROR_UPSTREAM_FAILED);

        /* policy first, whatever curl says */
        ASSERT_EQ_INT(C(CURLE_COULDNT_CONNECT, 0, .denied = true), API_ERROR_DESTINATION_DENIED);
        ASSERT_EQ_INT(C(CURLE_OK, 200, .denied = true), API_ERROR_DESTINATION_DENIED);
        ASSERT_EQ_INT(
                C(CURLE_OPERATION_TIMEDOUT, 0, .denied = true, .deadline_passed = true),
                API_ERROR_DESTINATION_DENIED);
        ASSERT_EQ_INT(C(CURLE_UNSUPPORTED_PROTOCOL, 0), API_ERROR_DESTINATION_DENIED);

        /* the cap */
        ASSERT_EQ_INT(C(CURLE_FILESIZE_EXCEEDED, 200), API_ERROR_UPSTREAM_RESPONSE_TOO_LARGE);
        ASSERT_EQ_INT(C(CURLE_WRITE_ERROR, 200, .over_cap = true), API_ERROR_UPSTREAM_RESPONSE_TOO_LARGE);
        ASSERT_EQ_INT(
                C(CURLE_FILESIZE_EXCEEDED, 200, .deadline_passed = true),
                API_ERROR_UPSTREAM_RESPONSE_TOO_LARGE);

        /* timeouts */
        ASSERT_EQ_INT(C(CURLE_OPERATION_TIMEDOUT, 0), API_ERROR_CONNECTIVITY_FAILED);
        ASSERT_EQ_INT(C(CURLE_OPERATION_TIMEDOUT, 0, .deadline_passed = true), API_ERROR_QUERY_TIMEOUT);
        ASSERT_EQ_INT(C(CURLE_OPERATION_TIMEDOUT, 0, .connected = true), API_ERROR_QUERY_TIMEOUT);
        ASSERT_EQ_INT(C(CURLE_RECV_ERROR, 0, .deadline_passed = true), API_ERROR_QUERY_TIMEOUT);

        /* connectivity */
        ASSERT_EQ_INT(C(CURLE_COULDNT_RESOLVE_HOST, 0), API_ERROR_CONNECTIVITY_FAILED);
        ASSERT_EQ_INT(C(CURLE_COULDNT_RESOLVE_PROXY, 0), API_ERROR_CONNECTIVITY_FAILED);
        ASSERT_EQ_INT(C(CURLE_COULDNT_CONNECT, 0), API_ERROR_CONNECTIVITY_FAILED);

        /* TLS */
        static const CURLcode tls[] = {
                CURLE_SSL_CONNECT_ERROR,        CURLE_PEER_FAILED_VERIFICATION,
                CURLE_SSL_CERTPROBLEM,          CURLE_SSL_CIPHER,
                CURLE_SSL_CACERT_BADFILE,       CURLE_SSL_ISSUER_ERROR,
                CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS,
                CURLE_SSL_CRL_BADFILE,          CURLE_SSL_ENGINE_NOTFOUND,
                CURLE_SSL_ENGINE_SETFAILED,     CURLE_SSL_ENGINE_INITFAILED,
                CURLE_USE_SSL_FAILED,
        };
        for (size_t i = 0; i < ELEMENTSOF(tls); i++)
                ASSERT_EQ_INT(C(tls[i], 0), API_ERROR_TLS_FAILED);

        /* everything else the upstream did */
        static const CURLcode failed[] = {
                CURLE_GOT_NOTHING,  CURLE_SEND_ERROR,          CURLE_RECV_ERROR,
                CURLE_PARTIAL_FILE, CURLE_WEIRD_SERVER_REPLY,  CURLE_BAD_CONTENT_ENCODING,
                CURLE_HTTP2,        CURLE_HTTP2_STREAM,        CURLE_TOO_MANY_REDIRECTS,
                CURLE_WRITE_ERROR,  CURLE_HTTP_RETURNED_ERROR,
        };
        for (size_t i = 0; i < ELEMENTSOF(failed); i++)
                ASSERT_EQ_INT(C(failed[i], 0), API_ERROR_UPSTREAM_FAILED);

        ASSERT_EQ_INT(C(CURLE_OUT_OF_MEMORY, 0), API_ERROR_INTERNAL_ERROR);

        /* every CURLcode maps to exactly one valid error (or success for OK) */
        for (int code = 0; code < CURL_LAST; code++) {
                ApiError e = C(code, 200);
                if (code == CURLE_OK)
                        ASSERT_EQ_INT(e, _API_ERROR_INVALID);
                else
                        ASSERT_TRUE(e >= 0 && e < _API_ERROR_MAX && api_error_to_string(e));
        }
}

TEST(errno_beside_api_error) {
        /* The errno beside each API error. */
        ASSERT_EQ_INT(E(CURLE_OK, 200), 0);
        ASSERT_EQ_INT(E(CURLE_OK, 404), -EIO);
        ASSERT_EQ_INT(E(CURLE_OK, 200, .too_many_redirects = true), -ELOOP);
        ASSERT_EQ_INT(E(CURLE_OK, 302, .bad_redirect = true), -EBADMSG);
        ASSERT_EQ_INT(E(CURLE_OK, 200, .denied = true), -EPERM);
        ASSERT_EQ_INT(E(CURLE_UNSUPPORTED_PROTOCOL, 0), -EPROTONOSUPPORT);
        ASSERT_EQ_INT(E(CURLE_WRITE_ERROR, 200, .over_cap = true), -EFBIG);
        ASSERT_EQ_INT(E(CURLE_OPERATION_TIMEDOUT, 0), -ETIMEDOUT);
        ASSERT_EQ_INT(E(CURLE_OPERATION_TIMEDOUT, 0, .deadline_passed = true), -ETIMEDOUT);
        ASSERT_EQ_INT(E(CURLE_RECV_ERROR, 0, .deadline_passed = true), -ETIMEDOUT);
        ASSERT_EQ_INT(E(CURLE_COULDNT_RESOLVE_HOST, 0), -EHOSTUNREACH);
        ASSERT_EQ_INT(E(CURLE_COULDNT_CONNECT, 0), -ECONNREFUSED);
        ASSERT_EQ_INT(E(CURLE_PEER_FAILED_VERIFICATION, 0), -EPROTO);
        ASSERT_EQ_INT(E(CURLE_RECV_ERROR, 0), -EIO);
        ASSERT_EQ_INT(E(CURLE_OUT_OF_MEMORY, 0), -ENOMEM);
}

TEST(retry_after) {
        usec_t u;
        /* Sun, 06 Nov 1994 08:49:37 GMT */
        const usec_t t = 784111777ULL * USEC_PER_SEC;

        ASSERT_OK(upstream_parse_retry_after("2", 0, &u));
        ASSERT_EQ_INT(u, 2 * USEC_PER_SEC);
        ASSERT_OK(upstream_parse_retry_after(" 0 ", 0, &u));
        ASSERT_EQ_INT(u, 0);
        ASSERT_OK(upstream_parse_retry_after("86400", 0, &u));
        ASSERT_EQ_INT(upstream_parse_retry_after("86401", 0, &u), -EINVAL);
        ASSERT_EQ_INT(upstream_parse_retry_after("99999999999999999999999", 0, &u), -EINVAL);
        ASSERT_EQ_INT(upstream_parse_retry_after("-1", 0, &u), -EINVAL);
        ASSERT_EQ_INT(upstream_parse_retry_after("1.5", 0, &u), -EINVAL);
        ASSERT_EQ_INT(upstream_parse_retry_after("", 0, &u), -EINVAL);
        ASSERT_EQ_INT(upstream_parse_retry_after(NULL, 0, &u), -EINVAL);
        ASSERT_EQ_INT(upstream_parse_retry_after("soon", 0, &u), -EINVAL);
        ASSERT_OK(upstream_parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", t - 5 * USEC_PER_SEC, &u));
        ASSERT_EQ_INT(u, 5 * USEC_PER_SEC);
        ASSERT_OK(upstream_parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", t + USEC_PER_SEC, &u));
        ASSERT_EQ_INT(u, 0);
        ASSERT_EQ_INT(
                upstream_parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", t - 2 * 86400 * USEC_PER_SEC, &u),
                -EINVAL);
        ASSERT_EQ_INT(upstream_parse_retry_after("Sun, 06 Nov 1994 08:49:37 UTC", 0, &u), -EINVAL);
}

TEST(media_type) {
        ASSERT_TRUE(upstream_media_type_is("text/event-stream", "text/event-stream"));
        ASSERT_TRUE(upstream_media_type_is("text/event-stream; charset=utf-8", "text/event-stream"));
        ASSERT_TRUE(upstream_media_type_is(" Text/Event-Stream ;charset=utf-8", "text/event-stream"));
        ASSERT_TRUE(!upstream_media_type_is("application/json", "text/event-stream"));
        ASSERT_TRUE(!upstream_media_type_is("text/event-streamx", "text/event-stream"));
        ASSERT_TRUE(!upstream_media_type_is("text/event", "text/event-stream"));
        ASSERT_TRUE(!upstream_media_type_is("", "text/event-stream"));
        ASSERT_TRUE(!upstream_media_type_is(NULL, "text/event-stream"));
}

DEFINE_TEST_MAIN()
