/* SPDX-License-Identifier: MIT */
/* request_parse_query(), request_parse_join() and request_parse_token()
 * on arbitrary bodies. The
 * first byte picks the Content-Type (mostly JSON, so the body parser is
 * what gets exercised); the rest is the body. Checks the contract, not
 * just the absence of crashes: success means a well-formed QueryBody,
 * failure means -EINVAL with a message or -ENOMEM. */

#include <stdint.h>

#include "shared/macro.h"
#include "api/request.h"
#include "fuzz.h"

static const char *const content_types[] = {
        "application/json",
        "application/json; charset=utf-8",
        "APPLICATION/JSON;CHARSET=\"UTF-8\"",
        "application/json",
        "application/json",
        "application/json",
        "text/plain",
        NULL,
};

static size_t utf8_count(const char *s) {
        size_t n = 0;

        for (; *s; s++)
                n += ((uint8_t) *s & 0xc0) != 0x80;
        return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *ct;
        QueryBody q = { .question = NULL };
        char *msg = NULL;
        int r;

        if (size < 1)
                return 0;
        /* The daemon's default limit: bigger bodies never get here. */
        if (size > 65536 + 1)
                return 0;

        ct = content_types[data[0] % ELEMENTSOF(content_types)];
        data++, size--;

        r = request_parse_query(ct, data, size, &q, &msg);
        if (r == 0) {
                size_t n;

                if (msg)
                        abort();
                if (!q.question || !q.pages || q.pages[q.n_pages] || q.n_pages > QUERY_PAGES_MAX)
                        abort();
                n = utf8_count(q.question);
                if (n < 1 || n > QUERY_QUESTION_MAX_CHARS || strchr(" \t\n\v\f\r", q.question[0]))
                        abort();
                for (size_t i = 0; i < q.n_pages; i++) {
                        size_t l = strlen(q.pages[i]);
                        if (l < 1 || l > QUERY_PAGE_TITLE_MAX_BYTES)
                                abort();
                }
                /* A follow-up names a record id and nothing else. */
                if (q.follow_up) {
                        if (strlen(q.follow_up) != QUERY_FOLLOW_UP_LEN || !strneq(q.follow_up, "qr_", 3) ||
                            strspn(q.follow_up + 3, "0123456789abcdef") != 32)
                                abort();
                }
                query_body_done(&q);
        } else if (r == -EINVAL) {
                if (!msg || !*msg || strlen(msg) > 128)
                        abort();
        } else if (r != -ENOMEM)
                abort();
        free(msg);
        msg = NULL;

        r = request_parse_join(ct, data, size, &msg);
        if (r == 0) {
                if (msg)
                        abort();
        } else if (r == -EINVAL) {
                if (!msg || !*msg)
                        abort();
        } else if (r != -ENOMEM)
                abort();
        free(msg);
        msg = NULL;

        /* An access token's name: 1 to 64 code points, no control
         * character, no blank at either end; its life 0 (not given) or
         * 1..3650. */
        TokenBody tb = { .name = NULL };
        r = request_parse_token(ct, data, size, &tb, &msg);
        if (r == 0) {
                size_t n, l;

                if (msg || !tb.name)
                        abort();
                n = utf8_count(tb.name);
                l = strlen(tb.name);
                if (n < 1 || n > TOKEN_NAME_MAX_CHARS || strchr(" \t\n\v\f\r", tb.name[0]) ||
                    strchr(" \t\n\v\f\r", tb.name[l - 1]) || tb.expires_in_days > TOKEN_DAYS_MAX)
                        abort();
                for (size_t i = 0; i < l; i++)
                        if ((uint8_t) tb.name[i] < 0x20 || tb.name[i] == 0x7f)
                                abort();
                token_body_done(&tb);
        } else if (r == -EINVAL) {
                if (!msg || !*msg)
                        abort();
        } else if (r != -ENOMEM)
                abort();
        free(msg);

        return 0;
}
