/* SPDX-License-Identifier: MIT */
/* session_user_is_valid() on the raw input (a user header's value: any
 * bytes), session_cookie_parse() on an arbitrary Cookie header (the input as a C
 * string), and origin_check() with the input split at '\n' into Origin,
 * Host, Sec-Fetch-Site and allow-list entries. Checks: a parsed token is
 * a valid token that occurs in the header; a verdict is in range, and an
 * allow-list verdict names an origin that really is in the list. */

#include <stdint.h>

#include "shared/macro.h"
#include "http/origin.h"
#include "http/session.h"
#include "shared/utf8.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char token[SESSION_TOKEN_LEN + 1];
        char *s, *fields[8] = { NULL };
        size_t n_fields = 0;
        OriginVerdict v;
        int r;

        /* A user name: 1..256 bytes of UTF-8, no control character; and
         * then a key that depends on it alone. */
        if (session_user_is_valid((const char *) data, size)) {
                CHECK(size >= 1 && size <= SESSION_USER_MAX_BYTES);
                CHECK(utf8_is_valid((const char *) data, size));
                for (size_t i = 0; i < size; i++)
                        CHECK(data[i] >= 0x20 && data[i] != 0x7f);
        }

        /* MHD hands us NUL-terminated header values of any length. */
        s = malloc(size + 1);
        if (!s)
                return 0;
        memcpy(s, data, size);
        s[size] = '\0';

        r = session_cookie_parse(s, token);
        if (r == 1) {
                if (!session_token_is_valid(token, strlen(token)) || !strstr(s, token))
                        abort();
        } else if (r != 0)
                abort();

        /* Fields: origin, host, sec-fetch-site, then allow-list entries,
         * separated by '\n'. A field "-" stands for an absent header and
         * ends the allow-list. */
        for (char *p = s;;) {
                char *nl = strchr(p, '\n');

                if (nl)
                        *nl = '\0';
                fields[n_fields++] = streq(p, "-") ? NULL : p;
                if (!nl || n_fields == ELEMENTSOF(fields) - 1)
                        break;
                p = nl + 1;
        }

        for (int secure = 0; secure <= 1; secure++) {
                const char *origin = fields[0], *host = fields[1], *sfs = fields[2];
                char *const *allowed = n_fields > 3 ? fields + 3 : NULL;

                v = origin_check(origin, host, sfs, secure, allowed);
                if (v < 0 || v >= _ORIGIN_VERDICT_MAX)
                        abort();
                if (origin && (strlen(origin) > ORIGIN_MAX_LEN || streq(origin, "null")) && v != ORIGIN_DENY)
                        abort();
                switch (v) {
                case ORIGIN_ALLOW_CORS:
                        /* The list alone decides: Host and Sec-Fetch-Site do not
                         * matter, and without the list it is not CORS. */
                        if (!origin ||
                            origin_check(origin, NULL, "cross-site", secure, allowed) != ORIGIN_ALLOW_CORS ||
                            origin_check(origin, host, sfs, secure, NULL) == ORIGIN_ALLOW_CORS)
                                abort();
                        break;
                case ORIGIN_ALLOW:
                        /* No Origin, or our own: the list does not matter. */
                        if (origin_check(origin, host, sfs, secure, NULL) != ORIGIN_ALLOW)
                                abort();
                        /* Our own origin in one scheme is not in the other. */
                        if (origin && origin_check(origin, host, sfs, !secure, NULL) != ORIGIN_DENY)
                                abort();
                        break;
                case ORIGIN_DENY:
                        /* Adding the own origin's Host or the list never turns an
                         * allowed request into a denied one, and vice versa. */
                        if (origin_check(origin, host, sfs, secure, NULL) != ORIGIN_DENY)
                                abort();
                        break;
                default:
                        abort();
                }
        }

        free(s);
        return 0;
}
