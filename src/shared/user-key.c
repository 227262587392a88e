/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <string.h>

#include "shared/macro.h"
#include "shared/sha256.h"
#include "shared/user-key.h"
#include "shared/utf8.h"

bool user_name_is_valid(const char *s, size_t len) {
        if (!s || len == 0 || len > USER_NAME_MAX_BYTES)
                return false;
        for (size_t i = 0; i < len;) {
                size_t n;

                /* C0 and DEL here; C1 and malformed sequences below. */
                if ((unsigned char) s[i] < 0x20 || s[i] == 0x7f)
                        return false;
                n = utf8_decode_no_c1((const uint8_t *) s + i, len - i);
                if (n == 0)
                        return false;
                i += n;
        }
        return true;
}

#define USER_KEY_DOMAIN "wikiweb-user"

int user_key_from_name(const char *user, SessionKey *ret) {
        _cleanup_(sha256_done) Sha256Ctx ctx = { 0 };
        uint8_t d[SHA256_DIGEST_SIZE];
        int r;

        assert(user);
        assert(ret);

        _Static_assert(sizeof ret->bytes == SHA256_DIGEST_SIZE, "SessionKey is a SHA-256 digest");
        /* The domain with its NUL, then the name: names contain no NUL, so
         * no two names are the same bytes. */
        r = sha256_init(&ctx);
        if (r < 0)
                return r;
        r = sha256_update(&ctx, USER_KEY_DOMAIN, sizeof(USER_KEY_DOMAIN));
        if (r < 0)
                return r;
        r = sha256_update(&ctx, user, strlen(user));
        if (r < 0)
                return r;
        r = sha256_final(&ctx, d);
        if (r < 0)
                return r;
        memcpy(ret->bytes, d, sizeof d);
        return 0;
}
