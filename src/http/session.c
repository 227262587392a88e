/* SPDX-License-Identifier: MIT */
#include <assert.h>

#include "shared/macro.h"
#include "shared/base64url.h"
#include "shared/random-util.h"
#include "shared/sha256.h"
#include "shared/user-key.h"
#include "shared/utf8.h"
#include "http/session.h"

bool session_token_is_valid(const char *s, size_t len) {
        if (!s || len != SESSION_TOKEN_LEN)
                return false;
        for (size_t i = 0; i < len; i++)
                if (!base64url_char_is_valid(s[i]))
                        return false;
        return true;
}

static bool is_ows(char c) {
        return c == ' ' || c == '\t';
}

/* Cookie header grammar (RFC 6265 section 4.2.1 and 5.4), parsed the
 * lenient way browsers and servers do:
 *
 *   cookie-string = pair *( ";" pair ),  pair = OWS name "=" value OWS
 *
 * with OWS being SP and HTAB, allowed around names and values. A pair
 * without "=" has no name and matches nothing. The name must be exactly
 * "wikiweb_session" (case-sensitive, so "xwikiweb_session" or
 * "WIKIWEB_SESSION" are other cookies). Only the first cookie of that name
 * counts: if its value is malformed the answer is 0 even when a later one
 * is well-formed, so a cookie injected ahead of ours (e.g. by a sibling
 * subdomain) cannot be skipped over to pick a different session.
 *
 * Quoted values: RFC 6265 allows cookie-value = DQUOTE *cookie-octet DQUOTE
 * and says the quotes are part of the value, but some clients quote on
 * their own. We never quote, so a value in one pair of double quotes is
 * taken without them and then validated like any other (43 base64url
 * characters); a stray or unbalanced quote makes the value malformed. */
int session_cookie_find(const char *header, char ret[static SESSION_TOKEN_LEN + 1]) {
        const char *p;

        if (!header)
                return -ENOENT;

        p = header;
        for (;;) {
                const char *pair_end, *eq, *name, *name_end, *value, *value_end;

                pair_end = strchrnul(p, ';');

                /* Trim the pair, then split at the first '='. */
                name = p;
                while (name < pair_end && is_ows(*name))
                        name++;
                eq = memchr(name, '=', (size_t) (pair_end - name));
                if (eq) {
                        name_end = eq;
                        while (name_end > name && is_ows(name_end[-1]))
                                name_end--;

                        if ((size_t) (name_end - name) == STRLEN(SESSION_COOKIE_NAME) &&
                            memcmp(name, SESSION_COOKIE_NAME, STRLEN(SESSION_COOKIE_NAME)) == 0) {
                                value = eq + 1;
                                value_end = pair_end;
                                while (value < value_end && is_ows(*value))
                                        value++;
                                while (value_end > value && is_ows(value_end[-1]))
                                        value_end--;

                                if (value_end - value >= 2 && *value == '"' && value_end[-1] == '"') {
                                        value++;
                                        value_end--;
                                }

                                if (!session_token_is_valid(value, (size_t) (value_end - value)))
                                        return 0;

                                memcpy(ret, value, SESSION_TOKEN_LEN);
                                ret[SESSION_TOKEN_LEN] = '\0';
                                return 1;
                        }
                }

                if (*pair_end == '\0')
                        return -ENOENT;
                p = pair_end + 1;
        }
}

int session_cookie_parse(const char *header, char ret[static SESSION_TOKEN_LEN + 1]) {
        return MAX(session_cookie_find(header, ret), 0);
}

int session_token_new(char ret[static SESSION_TOKEN_LEN + 1]) {
        uint8_t bytes[SESSION_TOKEN_BYTES];
        int r;

        r = random_bytes(bytes, sizeof bytes);
        if (r < 0)
                return r;

        base64url_encode(bytes, sizeof bytes, ret);
        explicit_bzero(bytes, sizeof bytes);
        return 0;
}

int session_key_from_token(const char *token, SessionKey *ret) {
        assert(token);
        assert(ret);

        _Static_assert(sizeof ret->bytes == SHA256_DIGEST_SIZE, "SessionKey is a SHA-256 digest");
        return sha256(token, SESSION_TOKEN_LEN, ret->bytes);
}

int session_set_cookie_header(const char *token, uint64_t max_age_seconds, bool secure, char **ret) {
        char *s;

        if (!token || !session_token_is_valid(token, strnlen(token, SESSION_TOKEN_LEN + 1)))
                return -EINVAL;

        if (asprintf(
                    &s,
                    SESSION_COOKIE_NAME "=%s; Path=/; HttpOnly; SameSite=Lax; Max-Age=%" PRIu64 "%s",
                    token,
                    max_age_seconds,
                    secure ? "; Secure" : "") < 0)
                return -ENOMEM;

        *ret = s;
        return 0;
}

bool session_user_is_valid(const char *s, size_t len) {
        return user_name_is_valid(s, len);
}

#define SESSION_USER_COOKIE_DOMAIN "wikiweb-cookie"

/* SHA-256 of the secret (when there is one: it has a fixed length), the
 * domain with its NUL, then the name. Names contain no NUL, so no two
 * inputs of one domain are the same bytes. */
static int user_digest(
        const uint8_t *secret,
        const char *domain,
        size_t domain_size,
        const char *user,
        uint8_t ret[static SHA256_DIGEST_SIZE]) {
        _cleanup_(sha256_done) Sha256Ctx ctx = { 0 };
        int r;

        r = sha256_init(&ctx);
        if (r < 0)
                return r;
        if (secret) {
                r = sha256_update(&ctx, secret, SESSION_SECRET_BYTES);
                if (r < 0)
                        return r;
        }
        r = sha256_update(&ctx, domain, domain_size);
        if (r < 0)
                return r;
        r = sha256_update(&ctx, user, strlen(user));
        if (r < 0)
                return r;
        return sha256_final(&ctx, ret);
}

int session_key_from_user(const char *user, SessionKey *ret) {
        return user_key_from_name(user, ret);
}

int session_token_for_user(
        const uint8_t secret[static SESSION_SECRET_BYTES],
        const char *user,
        char ret[static SESSION_TOKEN_LEN + 1]) {
        uint8_t d[SHA256_DIGEST_SIZE];
        int r;

        assert(secret);
        assert(user);

        _Static_assert(SHA256_DIGEST_SIZE == SESSION_TOKEN_BYTES, "a token is a digest's worth of bytes");
        r = user_digest(secret, SESSION_USER_COOKIE_DOMAIN, sizeof(SESSION_USER_COOKIE_DOMAIN), user, d);
        if (r < 0)
                return r;
        base64url_encode(d, sizeof d, ret);
        explicit_bzero(d, sizeof d);
        return 0;
}
