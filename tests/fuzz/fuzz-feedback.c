/* SPDX-License-Identifier: MIT */
/* The untrusted inputs of feedback and the unanswered report (API.md 9.1,
 * 9.2): request_parse_feedback() on arbitrary bodies, report_parse_days()
 * on arbitrary arguments, and wording_key() on arbitrary questions. The
 * first byte picks the input and, for a body, the Content-Type. Checks the
 * contract: an accepted body is one of the allowed ratings and reasons
 * with a comment of at most 1000 code points, trimmed and without control
 * characters; a key is valid UTF-8 of sorted distinct words without ASCII
 * capitals, at most WORDING_KEY_MAX_BYTES. */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/request.h"
#include "shared/macro.h"
#include "shared/utf8.h"
#include "store/wording.h"
#include "store/report.h"
#include "fuzz.h"

static void check_feedback(const char *ct, const uint8_t *data, size_t size) {
        FeedbackBody f = { .rating = NULL };
        char *msg = NULL;
        int r;

        r = request_parse_feedback(ct, data, size, &f, &msg);
        if (r == 0) {
                if (msg || !f.rating || (strcmp(f.rating, "up") != 0 && strcmp(f.rating, "down") != 0))
                        abort();
                if (f.reason && (strcmp(f.rating, "down") != 0 || report_reason_from_string(f.reason) < 0))
                        abort();
                if (f.comment) {
                        size_t n = strlen(f.comment);

                        if (n == 0 || !utf8_is_valid(f.comment, n) ||
                            utf8_count(f.comment, n) > FEEDBACK_COMMENT_MAX_CHARS ||
                            strchr(" \t\n\v\f\r", f.comment[0]) || strchr(" \t\n\v\f\r", f.comment[n - 1]))
                                abort();
                        for (size_t i = 0; i < n; i++)
                                if ((uint8_t) f.comment[i] < 0x20 && !strchr("\t\n\r", f.comment[i]))
                                        abort();
                }
                feedback_body_done(&f);
        } else {
                if (r != -EINVAL && r != -ENOMEM)
                        abort();
                if (r == -EINVAL && !msg)
                        abort();
                if (f.rating || f.comment)
                        abort();
        }
        free(msg);
}

static void check_days(const uint8_t *data, size_t size) {
        char *s = strndup((const char *) data, size);
        const char *msg = NULL;
        unsigned days = 0;

        if (!s)
                return;
        if (report_parse_days(s, &days, &msg) == 0) {
                if (days < REPORT_DAYS_MIN || days > REPORT_DAYS_MAX || s[0] == '0' || s[0] == '+')
                        abort();
        } else if (!msg)
                abort();
        free(s);
}

static void check_key(const uint8_t *data, size_t size) {
        char *q = strndup((const char *) data, size), *k = NULL, *copy;
        const char *prev = NULL;
        size_t n;

        if (!q)
                return;
        if (wording_key(q, &k) < 0) {
                free(q);
                return;
        }
        n = strlen(k);
        if (n > WORDING_KEY_MAX_BYTES || !utf8_is_valid(k, n) ||
            (n > 0 && (k[0] == ' ' || k[n - 1] == ' ')) || strstr(k, "  "))
                abort();
        for (size_t i = 0; i < n; i++)
                if (k[i] >= 'A' && k[i] <= 'Z')
                        abort();
        /* Sorted, distinct words. */
        copy = strdup(k);
        if (copy) {
                for (char *save = NULL, *w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
                        if (prev && strcmp(prev, w) >= 0)
                                abort();
                        prev = w;
                }
                free(copy);
        }
        if (wording_similarity(k, k) != 1.0)
                abort();
        free(k);
        free(q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const char *const content_types[] = {
                "application/json",
                "application/json; charset=utf-8",
                "application/json",
                "text/plain",
                NULL,
        };
        uint8_t mode;

        if (size < 1 || size > 65536 + 1)
                return 0;
        mode = data[0];
        data++, size--;

        switch (mode % 8) {
        case 6:
                check_days(data, size);
                break;
        case 7:
                check_key(data, size);
                break;
        default:
                check_feedback(content_types[mode % ELEMENTSOF(content_types)], data, size);
        }
        return 0;
}
