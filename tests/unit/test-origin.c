/* SPDX-License-Identifier: MIT */
#include "shared/macro.h"
#include "http/origin.h"
#include "tests.h"

static void
        check(int line,
              OriginVerdict expected,
              const char *origin,
              const char *host,
              const char *sfs,
              bool secure,
              char *const *allowed) {
        OriginVerdict v = origin_check(origin, host, sfs, secure, allowed);

        if (v != expected) {
                fprintf(stderr,
                        "%s:%d: origin=%s host=%s sfs=%s secure=%d: %s != %s\n",
                        __FILE__,
                        line,
                        origin ? origin : "(null)",
                        host ? host : "(null)",
                        sfs ? sfs : "(null)",
                        (int) secure,
                        origin_verdict_to_string(v),
                        origin_verdict_to_string(expected));
                abort();
        }
}

#define CHECK(expected, origin, host, sfs, secure, allowed) \
        check(__LINE__, (expected), (origin), (host), (sfs), (secure), (allowed))

static char *const none[] = { NULL };
static char *const list[] = {
        (char *) "https://app.example.com",
        (char *) "http://localhost:3000",
        (char *) "https://wiki.example.org:8443",
        NULL,
};

TEST(no_origin) {
        CHECK(ORIGIN_ALLOW, NULL, "wiki.example", NULL, true, NULL);
        CHECK(ORIGIN_ALLOW, NULL, NULL, NULL, true, NULL);
        CHECK(ORIGIN_ALLOW, NULL, "wiki.example", "same-origin", true, list);
        CHECK(ORIGIN_ALLOW, NULL, "wiki.example", "same-site", true, list);
        CHECK(ORIGIN_ALLOW, NULL, "wiki.example", "none", true, list);
        CHECK(ORIGIN_ALLOW, NULL, "wiki.example", "", true, list);
        CHECK(ORIGIN_ALLOW, NULL, "wiki.example", "cross-site-ish", true, list);
        CHECK(ORIGIN_DENY, NULL, "wiki.example", "cross-site", true, list);
        CHECK(ORIGIN_DENY, NULL, "wiki.example", "Cross-Site", false, NULL);
        CHECK(ORIGIN_DENY, NULL, "wiki.example", "CROSS-SITE", false, NULL);
        CHECK(ORIGIN_DENY, NULL, "wiki.example", " cross-site\t", false, NULL);
        CHECK(ORIGIN_DENY, NULL, NULL, "cross-site", false, NULL);

        /* A long value that merely starts with "cross-site" is not it, even
         * past the length where the check stops looking. */
        {
                char v[256];

                memset(v, ' ', sizeof v);
                memcpy(v, "cross-site", STRLEN("cross-site"));
                v[sizeof v - 2] = 'x';
                v[sizeof v - 1] = '\0';
                CHECK(ORIGIN_ALLOW, NULL, "wiki.example", v, true, NULL);
                v[sizeof v - 2] = ' ';
                CHECK(ORIGIN_ALLOW, NULL, "wiki.example", v, true, NULL);
                v[20] = '\0';
                CHECK(ORIGIN_DENY, NULL, "wiki.example", v, true, NULL);
        }
}

TEST(same_origin) {
        /* The scheme follows WIKI_WEB_COOKIE_SECURE. */
        CHECK(ORIGIN_ALLOW, "https://wiki.example", "wiki.example", NULL, true, NULL);
        CHECK(ORIGIN_DENY, "http://wiki.example", "wiki.example", NULL, true, NULL);
        CHECK(ORIGIN_ALLOW, "http://wiki.example", "wiki.example", NULL, false, NULL);
        CHECK(ORIGIN_DENY, "https://wiki.example", "wiki.example", NULL, false, NULL);

        /* Same origin wins over Sec-Fetch-Site (which would say same-origin anyway). */
        CHECK(ORIGIN_ALLOW, "https://wiki.example", "wiki.example", "cross-site", true, NULL);

        /* Ports. */
        CHECK(ORIGIN_ALLOW, "http://127.0.0.1:8080", "127.0.0.1:8080", NULL, false, none);
        CHECK(ORIGIN_DENY, "http://127.0.0.1:8081", "127.0.0.1:8080", NULL, false, none);
        CHECK(ORIGIN_DENY, "http://127.0.0.1", "127.0.0.1:8080", NULL, false, none);
        CHECK(ORIGIN_DENY, "http://127.0.0.1:8080", "127.0.0.1", NULL, false, none);
        /* A default port is no port. */
        CHECK(ORIGIN_ALLOW, "http://wiki.example", "wiki.example:80", NULL, false, none);
        CHECK(ORIGIN_ALLOW, "http://wiki.example:80", "wiki.example", NULL, false, none);
        CHECK(ORIGIN_ALLOW, "https://wiki.example", "wiki.example:443", NULL, true, none);
        CHECK(ORIGIN_ALLOW, "https://wiki.example:443", "wiki.example", NULL, true, none);
        CHECK(ORIGIN_DENY, "https://wiki.example", "wiki.example:80", NULL, true, none);
        CHECK(ORIGIN_DENY, "http://wiki.example", "wiki.example:443", NULL, false, none);
        CHECK(ORIGIN_DENY, "http://wiki.example:080", "wiki.example", NULL, false, none);

        /* Host compares ASCII case-insensitively, the scheme exactly. */
        CHECK(ORIGIN_ALLOW, "https://Wiki.Example", "wiki.example", NULL, true, NULL);
        CHECK(ORIGIN_ALLOW, "https://wiki.example", "WIKI.EXAMPLE", NULL, true, NULL);
        CHECK(ORIGIN_DENY, "HTTPS://wiki.example", "wiki.example", NULL, true, NULL);
        CHECK(ORIGIN_DENY, "Https://wiki.example", "wiki.example", NULL, true, NULL);

        /* IPv6 literals. */
        CHECK(ORIGIN_ALLOW, "http://[::1]:8080", "[::1]:8080", NULL, false, NULL);
        CHECK(ORIGIN_ALLOW, "http://[::1]", "[::1]", NULL, false, NULL);
        CHECK(ORIGIN_ALLOW, "http://[::1]", "[::1]:80", NULL, false, NULL);
        CHECK(ORIGIN_DENY, "http://[::1]:8080", "[::1]:8081", NULL, false, NULL);
        CHECK(ORIGIN_DENY, "http://[::1]", "::1", NULL, false, NULL);
        CHECK(ORIGIN_DENY, "http://::1", "::1", NULL, false, NULL);
        CHECK(ORIGIN_DENY, "http://[::1", "[::1", NULL, false, NULL);
        CHECK(ORIGIN_DENY, "http://[]", "[]", NULL, false, NULL);
        CHECK(ORIGIN_DENY, "http://[::1]x", "[::1]x", NULL, false, NULL);
        CHECK(ORIGIN_DENY, "http://[[::1]", "[[::1]", NULL, false, NULL);
        CHECK(ORIGIN_DENY, "http://a]b", "a]b", NULL, false, NULL);

        /* Other hosts, near misses. */
        CHECK(ORIGIN_DENY, "https://wiki.example.evil", "wiki.example", NULL, true, NULL);
        CHECK(ORIGIN_DENY, "https://evil.wiki.example", "wiki.example", NULL, true, NULL);
        CHECK(ORIGIN_DENY, "https://wiki.exampl", "wiki.example", NULL, true, NULL);
        CHECK(ORIGIN_DENY, "https://wiki.example.", "wiki.example", NULL, true, NULL);

        /* Host with OWS around it is still ours. */
        CHECK(ORIGIN_ALLOW, "https://wiki.example", " wiki.example ", NULL, true, NULL);
}

TEST(malformed_host) {
        /* Missing Host: no own origin to compare with. */
        CHECK(ORIGIN_DENY, "https://wiki.example", NULL, NULL, true, NULL);
        CHECK(ORIGIN_DENY, "https://wiki.example", "", NULL, true, NULL);
        /* A Host that is not a host[:port] never matches. */
        CHECK(ORIGIN_DENY, "https://wiki.example", "wiki.example/", NULL, true, NULL);
        CHECK(ORIGIN_DENY, "https://wiki.example", "wiki.example:", NULL, true, NULL);
        CHECK(ORIGIN_DENY, "https://wiki.example:", "wiki.example:", NULL, true, NULL);
        CHECK(ORIGIN_DENY, "https://a@wiki.example", "a@wiki.example", NULL, true, NULL);
        CHECK(ORIGIN_DENY, "https://wiki.example:123456", "wiki.example:123456", NULL, true, NULL);
        CHECK(ORIGIN_DENY, "https://wiki.example:1a", "wiki.example:1a", NULL, true, NULL);
        CHECK(ORIGIN_DENY, "https://:80", ":80", NULL, true, NULL);
        CHECK(ORIGIN_DENY, "https://a:1:2", "a:1:2", NULL, true, NULL);
        /* But an allow-listed origin does not need a Host. */
        CHECK(ORIGIN_ALLOW_CORS, "https://app.example.com", NULL, NULL, true, list);
}

TEST(allow_list) {
        CHECK(ORIGIN_ALLOW_CORS, "https://app.example.com", "wiki.example", NULL, true, list);
        CHECK(ORIGIN_ALLOW_CORS, "https://APP.example.com", "wiki.example", NULL, true, list);
        CHECK(ORIGIN_ALLOW_CORS, "https://app.example.com:443", "wiki.example", NULL, true, list);
        CHECK(ORIGIN_ALLOW_CORS, "http://localhost:3000", "wiki.example", NULL, true, list);
        CHECK(ORIGIN_ALLOW_CORS, "https://wiki.example.org:8443", "wiki.example", NULL, false, list);
        CHECK(ORIGIN_ALLOW_CORS, "http://localhost:3000", "wiki.example", "cross-site", true, list);

        CHECK(ORIGIN_DENY, "http://app.example.com", "wiki.example", NULL, true, list);
        CHECK(ORIGIN_DENY, "https://app.example.com:8443", "wiki.example", NULL, true, list);
        CHECK(ORIGIN_DENY, "http://localhost:3001", "wiki.example", NULL, true, list);
        CHECK(ORIGIN_DENY, "http://localhost", "wiki.example", NULL, true, list);
        CHECK(ORIGIN_DENY, "https://wiki.example.org", "wiki.example", NULL, true, list);
        CHECK(ORIGIN_DENY, "https://app.example.com.evil", "wiki.example", NULL, true, list);
        CHECK(ORIGIN_DENY, "https://app.example.co", "wiki.example", NULL, true, list);
        CHECK(ORIGIN_DENY, "HTTPS://app.example.com", "wiki.example", NULL, true, list);

        /* A list member that is also our own origin: ALLOW_CORS. */
        CHECK(ORIGIN_ALLOW_CORS, "https://app.example.com", "app.example.com", NULL, true, list);

        /* Empty and absent lists. */
        CHECK(ORIGIN_DENY, "https://app.example.com", "wiki.example", NULL, true, none);
        CHECK(ORIGIN_DENY, "https://app.example.com", "wiki.example", NULL, true, NULL);

        /* Malformed list entries never match, not even themselves. */
        {
                char *const bad[] = {
                        (char *) "null", (char *) "https://x.example/", (char *) "", (char *) "*", NULL
                };

                CHECK(ORIGIN_DENY, "null", "wiki.example", NULL, true, bad);
                CHECK(ORIGIN_DENY, "https://x.example/", "wiki.example", NULL, true, bad);
                CHECK(ORIGIN_DENY, "https://x.example", "wiki.example", NULL, true, bad);
                CHECK(ORIGIN_DENY, "*", "wiki.example", NULL, true, bad);
        }
}

TEST(malformed_origin) {
        static const char *const bad[] = {
                "null",
                "Null",
                "",
                " ",
                "https://wiki.example/",
                "https://wiki.example/path",
                "https://wiki.example?x",
                "https://wiki.example#x",
                "https://user@wiki.example",
                "https://user:pw@wiki.example",
                "https:/wiki.example",
                "https//wiki.example",
                "://wiki.example",
                "wiki.example",
                "https://",
                " https://wiki.example",
                "https://wiki.example ",
                "https://wiki .example",
                "https://wiki.example\t",
                "https://wiki.example\r\n",
                "https://wiki.example\x01",
                "https://wiki\x7f.example",
                "https://wïki.example",
                "https://wiki%2eexample",
                "https://wiki.example,https://wiki.example",
                "1https://wiki.example",
                "ht!tps://wiki.example",
                "https://wiki.example:",
                "https://wiki.example:-1",
                "https://wiki.example:+80",
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                /* Denied even when the Host would make it ours and when it is
                 * allow-listed verbatim. */
                char *const l[] = { (char *) bad[i], NULL };

                CHECK(ORIGIN_DENY, bad[i], "wiki.example", NULL, true, l);
                CHECK(ORIGIN_DENY, bad[i], bad[i], NULL, true, l);
        }
}

TEST(long_origin) {
        char o[2048], host[2048];
        size_t prefix = STRLEN("https://");

        /* host of exactly 1024 - 8 bytes: a 1024 byte Origin is considered. */
        memcpy(o, "https://", prefix);
        memset(o + prefix, 'a', ORIGIN_MAX_LEN - prefix);
        o[ORIGIN_MAX_LEN] = '\0';
        memcpy(host, o + prefix, ORIGIN_MAX_LEN - prefix + 1);
        CHECK(ORIGIN_ALLOW, o, host, NULL, true, NULL);

        /* 1025 bytes: denied. */
        memset(o + prefix, 'a', ORIGIN_MAX_LEN + 1 - prefix);
        o[ORIGIN_MAX_LEN + 1] = '\0';
        memcpy(host, o + prefix, ORIGIN_MAX_LEN + 1 - prefix + 1);
        CHECK(ORIGIN_DENY, o, host, NULL, true, NULL);

        /* A Host padded past the limit with OWS is not cut back into shape. */
        memcpy(host, "wiki.example", STRLEN("wiki.example"));
        memset(host + STRLEN("wiki.example"), ' ', 1500);
        host[STRLEN("wiki.example") + 1500] = '\0';
        CHECK(ORIGIN_DENY, "https://wiki.example", host, NULL, true, NULL);
        host[STRLEN("wiki.example") + 100] = '\0';
        CHECK(ORIGIN_ALLOW, "https://wiki.example", host, NULL, true, NULL);
        {
                char *const l[] = { o, NULL };
                CHECK(ORIGIN_DENY, o, host, NULL, true, l);
        }
}

TEST(verdict_to_string) {
        ASSERT_EQ_STR(origin_verdict_to_string(ORIGIN_ALLOW), "allow");
        ASSERT_EQ_STR(origin_verdict_to_string(ORIGIN_ALLOW_CORS), "allow-cors");
        ASSERT_EQ_STR(origin_verdict_to_string(ORIGIN_DENY), "deny");
        ASSERT_TRUE(!origin_verdict_to_string(_ORIGIN_VERDICT_MAX));
        ASSERT_TRUE(!origin_verdict_to_string(_ORIGIN_VERDICT_INVALID));
}

DEFINE_TEST_MAIN()
