/* SPDX-License-Identifier: MIT */
#include <stdint.h>

#include "shared/macro.h"
#include "shared/sha256.h"
#include "http/session.h"
#include "tests.h"

/* 43 base64url characters, using both '-' and '_'. */
#define TOK "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123-_Z"
#define TOK2 "ZYXWVUTSRQPONMLKJIHGFEDCBAzyxwvutsrqponm987"

TEST(token_is_valid) {
        char buf[64];

        ASSERT_EQ_INT(strlen(TOK), SESSION_TOKEN_LEN);
        ASSERT_TRUE(session_token_is_valid(TOK, 43));
        ASSERT_TRUE(session_token_is_valid(TOK2, 43));

        /* Length: exactly 43. */
        ASSERT_TRUE(!session_token_is_valid(TOK, 42));
        ASSERT_TRUE(!session_token_is_valid(TOK "A", 44));
        ASSERT_TRUE(!session_token_is_valid("", 0));
        ASSERT_TRUE(!session_token_is_valid(NULL, 43));

        /* Characters of base64 proper and padding are not base64url. */
        for (const char *c = "+/=. \t\"\x80\xff;,"; *c; c++) {
                memcpy(buf, TOK, 44);
                buf[20] = *c;
                ASSERT_TRUE(!session_token_is_valid(buf, 43));
                memcpy(buf, TOK, 44);
                buf[42] = *c;
                ASSERT_TRUE(!session_token_is_valid(buf, 43));
        }

        /* A NUL inside the given length. */
        memcpy(buf, TOK, 44);
        buf[10] = '\0';
        ASSERT_TRUE(!session_token_is_valid(buf, 43));
}

static int parse(const char *header, char ret[static SESSION_TOKEN_LEN + 1]) {
        memset(ret, 'X', SESSION_TOKEN_LEN + 1);
        return session_cookie_parse(header, ret);
}

static void expect_token(const char *header, const char *expected) {
        char t[SESSION_TOKEN_LEN + 1];

        if (parse(header, t) != 1) {
                fprintf(stderr, "expected a token from: %s\n", header);
                abort();
        }
        ASSERT_EQ_STR(t, expected);
}

static void expect_none(const char *header) {
        char t[SESSION_TOKEN_LEN + 1];

        if (parse(header, t) != 0) {
                fprintf(stderr, "expected no token from: %s\n", header ? header : "(null)");
                abort();
        }
        ASSERT_EQ_INT(t[0], 'X'); /* untouched */
}

TEST(cookie_parse) {
        /* The simple cases. */
        expect_token("wikiweb_session=" TOK, TOK);
        expect_token("a=b; wikiweb_session=" TOK, TOK);
        expect_token("wikiweb_session=" TOK "; a=b", TOK);
        expect_token("a=b;wikiweb_session=" TOK ";c=d", TOK);
        expect_token("a; wikiweb_session=" TOK, TOK);  /* a pair without '=' */
        expect_token("=x; wikiweb_session=" TOK, TOK); /* an empty name */
        expect_token(";;; wikiweb_session=" TOK ";;", TOK);

        /* Whitespace (SP, HTAB) around the pair, the name and the value. */
        expect_token("  wikiweb_session=" TOK "  ", TOK);
        expect_token("\twikiweb_session\t=\t" TOK "\t", TOK);
        expect_token("a=b ;  wikiweb_session = " TOK " ; c=d", TOK);
        expect_none("wikiweb_session=" TOK "\n"); /* LF is not OWS */
        expect_none("wiki web_session=" TOK);
        expect_none(
                "wikiweb_session="
                "abcdefghijklmnopqrstu vwxyzABCDEFGHIJ0123-_Z");

        /* Quoted: the quotes are dropped, the rest validated. */
        expect_token("wikiweb_session=\"" TOK "\"", TOK);
        expect_token("a=\"x;y\"; wikiweb_session=\"" TOK "\"", TOK); /* a quoted ';' ends a pair: no harm */
        expect_token(" wikiweb_session = \"" TOK "\" ", TOK);
        expect_none("wikiweb_session=\"" TOK);
        expect_none("wikiweb_session=" TOK "\"");
        expect_none("wikiweb_session=\"\"" TOK "\"\"");
        expect_none("wikiweb_session=\" " TOK "\"");
        expect_none("wikiweb_session=\"\"");
        expect_none("wikiweb_session=\"");

        /* Duplicates: the first one decides, even when it is malformed. */
        expect_token("wikiweb_session=" TOK "; wikiweb_session=" TOK2, TOK);
        expect_token("wikiweb_session=" TOK2 "; wikiweb_session=" TOK, TOK2);
        expect_none("wikiweb_session=bad; wikiweb_session=" TOK);
        expect_none("wikiweb_session=; wikiweb_session=" TOK);

        /* Other cookies whose names merely contain ours. */
        expect_none("xwikiweb_session=" TOK);
        expect_none("wikiweb_sessionx=" TOK);
        expect_none("WIKIWEB_SESSION=" TOK);
        expect_none("Wikiweb_session=" TOK);
        expect_none("wikiweb_session_=" TOK);
        expect_none("__Host-wikiweb_session=" TOK);
        expect_token("xwikiweb_session=" TOK2 "; wikiweb_session=" TOK, TOK);
        expect_token("wikiweb_sessionx=" TOK2 "; wikiweb_session=" TOK, TOK);
        expect_none("a=wikiweb_session=" TOK);

        /* Values of the wrong length or alphabet. */
        expect_none("wikiweb_session=" TOK "A");
        expect_none("wikiweb_session=abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123-_");
        expect_none("wikiweb_session=abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123+/Z");
        expect_none("wikiweb_session=abcdefghijklmnopqrstuvwxyzABCDEFGHIJ012345=");
        expect_none("wikiweb_session=" TOK "=");
        expect_none("wikiweb_session=" TOK ",a=b");
        expect_none("wikiweb_session");
        expect_none("wikiweb_session=");

        /* Nothing at all. */
        expect_none(NULL);
        expect_none("");
        expect_none(" ");
        expect_none(";");
        expect_none("=");
        expect_none("a=b");

        /* Hostile bytes: high bytes, control characters, a cookie cut off by
         * the end of the string. */
        expect_none("wikiweb_session=\xff\xfe\x80\x01\x7f");
        expect_none("\xff\xff=\x01; wikiweb_session=\x80" TOK);
        expect_token("\x80\xff\x01=\x7f; wikiweb_session=" TOK, TOK);
        expect_none("wikiweb_session=abc");
        expect_none("wikiweb_sess");
}

TEST(cookie_parse_huge) {
        size_t n = 1024 * 1024;
        char *h = malloc(n + 64), t[SESSION_TOKEN_LEN + 1];
        size_t i = 0;

        ASSERT_TRUE(h);
        /* Many small cookies, then ours. */
        while (i + 4 < n) {
                memcpy(h + i, "a=b;", 4);
                i += 4;
        }
        memcpy(h + i, "wikiweb_session=" TOK, STRLEN("wikiweb_session=" TOK) + 1);
        ASSERT_EQ_INT(session_cookie_parse(h, t), 1);
        ASSERT_EQ_STR(t, TOK);

        /* One enormous value. */
        memcpy(h, "wikiweb_session=", STRLEN("wikiweb_session="));
        memset(h + STRLEN("wikiweb_session="), 'A', n - STRLEN("wikiweb_session="));
        h[n] = '\0';
        ASSERT_EQ_INT(session_cookie_parse(h, t), 0);

        /* Only whitespace and separators. */
        memset(h, ' ', n);
        for (i = 0; i < n; i += 7)
                h[i] = ';';
        h[n] = '\0';
        ASSERT_EQ_INT(session_cookie_parse(h, t), 0);
        free(h);
}

TEST(cookie_parse_exact_buffer) {
        /* A header that ends right after the token, in a buffer exactly that
         * big: ASan catches any read past the NUL. */
        static const char src[] = "wikiweb_session=" TOK;
        char *h = malloc(sizeof src), t[SESSION_TOKEN_LEN + 1];

        ASSERT_TRUE(h);
        memcpy(h, src, sizeof src);
        ASSERT_EQ_INT(session_cookie_parse(h, t), 1);
        ASSERT_EQ_STR(t, TOK);
        for (size_t cut = 0; cut < sizeof src - 1; cut++) {
                h[cut] = '\0';
                ASSERT_EQ_INT(session_cookie_parse(h, t), 0);
                memcpy(h, src, sizeof src);
        }
        free(h);
}

TEST(token_new) {
        char a[SESSION_TOKEN_LEN + 1], b[SESSION_TOKEN_LEN + 1];

        memset(a, 'X', sizeof a);
        ASSERT_OK(session_token_new(a));
        ASSERT_EQ_INT(strlen(a), SESSION_TOKEN_LEN);
        ASSERT_TRUE(session_token_is_valid(a, strlen(a)));
        ASSERT_OK(session_token_new(b));
        ASSERT_TRUE(!streq(a, b));

        /* A fresh token round-trips through the cookie parser. */
        {
                char header[128], t[SESSION_TOKEN_LEN + 1];

                snprintf(header, sizeof header, "wikiweb_session=%s", a);
                ASSERT_EQ_INT(session_cookie_parse(header, t), 1);
                ASSERT_EQ_STR(t, a);
        }

        /* 32 random bytes: the last character carries 2 zero bits of
         * padding, so it is one of 16 ("AEIM...") every time. */
        for (unsigned i = 0; i < 100; i++) {
                ASSERT_OK(session_token_new(a));
                ASSERT_TRUE(strchr("AEIMQUYcgkosw048", a[42]));
        }
}

TEST(key_from_token) {
        SessionKey k, k2;
        uint8_t d[SHA256_DIGEST_SIZE];
        char hex[65];

        ASSERT_OK(session_key_from_token(TOK, &k));
        ASSERT_OK(sha256(TOK, 43, d));
        ASSERT_TRUE(memcmp(k.bytes, d, sizeof d) == 0);

        /* Only the 43 characters count, not what follows. */
        ASSERT_OK(session_key_from_token(TOK "trailing", &k2));
        ASSERT_TRUE(memcmp(k.bytes, k2.bytes, sizeof k.bytes) == 0);

        ASSERT_OK(session_key_from_token(TOK2, &k2));
        ASSERT_TRUE(memcmp(k.bytes, k2.bytes, sizeof k.bytes) != 0);

        /* Against sha256sum: printf %s 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123-_Z' | sha256sum */
        sha256_to_hex(k.bytes, hex);
        ASSERT_EQ_STR(hex, "97af5c7528d292b012c6a73c2a5cefff13eaee1fee7000ae7c851bef677664d1");
}

TEST(set_cookie_header) {
        char *h = NULL;

        ASSERT_OK(session_set_cookie_header(TOK, 2592000, true, &h));
        ASSERT_EQ_STR(h, "wikiweb_session=" TOK "; Path=/; HttpOnly; SameSite=Lax; Max-Age=2592000; Secure");
        free(h);

        ASSERT_OK(session_set_cookie_header(TOK, 2592000, false, &h));
        ASSERT_EQ_STR(h, "wikiweb_session=" TOK "; Path=/; HttpOnly; SameSite=Lax; Max-Age=2592000");
        free(h);

        ASSERT_OK(session_set_cookie_header(TOK, 0, false, &h));
        ASSERT_EQ_STR(h, "wikiweb_session=" TOK "; Path=/; HttpOnly; SameSite=Lax; Max-Age=0");
        free(h);

        ASSERT_OK(session_set_cookie_header(TOK, UINT64_MAX, true, &h));
        ASSERT_EQ_STR(
                h,
                "wikiweb_session=" TOK
                "; Path=/; HttpOnly; SameSite=Lax; Max-Age=18446744073709551615; Secure");
        free(h);

        /* Nothing that is not a token gets into a header. */
        h = NULL;
        ASSERT_EQ_INT(session_set_cookie_header(TOK "\r\nX-Evil: 1", 1, true, &h), -EINVAL);
        ASSERT_EQ_INT(session_set_cookie_header(TOK "; Domain=evil", 1, true, &h), -EINVAL);
        ASSERT_EQ_INT(session_set_cookie_header("short", 1, true, &h), -EINVAL);
        ASSERT_EQ_INT(session_set_cookie_header(NULL, 1, true, &h), -EINVAL);
        ASSERT_TRUE(!h);
}

/* session_cookie_find() tells "none" from "malformed", which is what lets
 * the caller look through several Cookie fields in order. */
TEST(cookie_find) {
        char t[SESSION_TOKEN_LEN + 1];

        ASSERT_EQ_INT(session_cookie_find(NULL, t), -ENOENT);
        ASSERT_EQ_INT(session_cookie_find("", t), -ENOENT);
        ASSERT_EQ_INT(session_cookie_find("other=1; x", t), -ENOENT);
        ASSERT_EQ_INT(session_cookie_find("wikiweb_session=bad", t), 0);
        ASSERT_EQ_INT(session_cookie_find("wikiweb_session=bad; wikiweb_session=" TOK, t), 0);
        ASSERT_EQ_INT(session_cookie_find("a=b; wikiweb_session=" TOK, t), 1);
        ASSERT_EQ_STR(t, TOK);
        /* parse() is find() with "none" folded into 0. */
        ASSERT_EQ_INT(session_cookie_parse("other=1", t), 0);
}

TEST(user_is_valid) {
        char long_name[SESSION_USER_MAX_BYTES + 2];

        ASSERT_TRUE(session_user_is_valid("alice", 5));
        ASSERT_TRUE(session_user_is_valid("alice@example.org", 17));
        ASSERT_TRUE(session_user_is_valid("Zo\xc3\xab Fran\xc3\xa7ois", 14));
        ASSERT_TRUE(session_user_is_valid("\xe6\x9d\xb1\xe4\xba\xac", 6));
        ASSERT_TRUE(session_user_is_valid("a b", 3));

        /* Length: 1 to 256 bytes. */
        memset(long_name, 'a', sizeof long_name);
        ASSERT_TRUE(session_user_is_valid(long_name, SESSION_USER_MAX_BYTES));
        ASSERT_TRUE(!session_user_is_valid(long_name, SESSION_USER_MAX_BYTES + 1));
        ASSERT_TRUE(!session_user_is_valid("", 0));
        ASSERT_TRUE(!session_user_is_valid(NULL, 3));

        /* Control characters: C0, DEL, C1. */
        ASSERT_TRUE(!session_user_is_valid("a\rb", 3));
        ASSERT_TRUE(!session_user_is_valid("a\nb", 3));
        ASSERT_TRUE(!session_user_is_valid("a\tb", 3));
        ASSERT_TRUE(!session_user_is_valid("a\0b", 3));
        ASSERT_TRUE(!session_user_is_valid("a\x7f", 2));
        ASSERT_TRUE(!session_user_is_valid("a\xc2\x85", 3));

        /* Malformed UTF-8: a lone continuation, overlong, a surrogate,
         * beyond U+10FFFF, cut short. */
        ASSERT_TRUE(!session_user_is_valid("a\x80", 2));
        ASSERT_TRUE(!session_user_is_valid("\xc0\xaf", 2));
        ASSERT_TRUE(!session_user_is_valid("\xed\xa0\x80", 3));
        ASSERT_TRUE(!session_user_is_valid("\xf4\x90\x80\x80", 4));
        ASSERT_TRUE(!session_user_is_valid("\xe6\x9d", 2));
        ASSERT_TRUE(!session_user_is_valid("\xff", 1));
}

TEST(key_from_user) {
        SessionKey a, a2, b, t;

        ASSERT_OK(session_key_from_user("alice", &a));
        ASSERT_OK(session_key_from_user("alice", &a2));
        ASSERT_OK(session_key_from_user("bob", &b));
        /* One person, one key; two people, two keys. */
        ASSERT_TRUE(memcmp(&a, &a2, sizeof a) == 0);
        ASSERT_TRUE(memcmp(&a, &b, sizeof a) != 0);
        /* Case matters: the proxy's name is taken as it is. */
        ASSERT_OK(session_key_from_user("Alice", &a2));
        ASSERT_TRUE(memcmp(&a, &a2, sizeof a) != 0);
        /* Not the bare digest of the name (domain separated). */
        ASSERT_OK(sha256("alice", 5, t.bytes));
        ASSERT_TRUE(memcmp(&a, &t, sizeof a) != 0);
}

TEST(token_for_user) {
        uint8_t secret[SESSION_SECRET_BYTES] = { 1, 2, 3 }, other[SESSION_SECRET_BYTES] = { 3, 2, 1 };
        char a[SESSION_TOKEN_LEN + 1], a2[SESSION_TOKEN_LEN + 1], b[SESSION_TOKEN_LEN + 1];
        SessionKey ka, ku;

        ASSERT_OK(session_token_for_user(secret, "alice", a));
        ASSERT_OK(session_token_for_user(secret, "alice", a2));
        ASSERT_OK(session_token_for_user(secret, "bob", b));
        ASSERT_TRUE(session_token_is_valid(a, strlen(a)));
        ASSERT_EQ_STR(a, a2);
        ASSERT_TRUE(strcmp(a, b) != 0);
        /* Another daemon's secret, another token. */
        ASSERT_OK(session_token_for_user(other, "alice", a2));
        ASSERT_TRUE(strcmp(a, a2) != 0);
        /* The token is no key to the user's data: presented without an
         * identity it is an anonymous session of its own. */
        ASSERT_OK(session_key_from_token(a, &ka));
        ASSERT_OK(session_key_from_user("alice", &ku));
        ASSERT_TRUE(memcmp(&ka, &ku, sizeof ka) != 0);
}

DEFINE_TEST_MAIN()
