/* SPDX-License-Identifier: MIT */
/* router_match() and router_path_is_api() on an arbitrary path (the input
 * as a C string). Checks: a match is a known route whose method table and
 * Allow header exist, its id has the documented shape, and every match is
 * an API path. Then http_percent_decode() on it: never longer, never a NUL
 * inside, unchanged without a '%', and the decoded path routes as well. */

#include <stdint.h>

#include "shared/macro.h"
#include "http/router.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        RouteMatch m;
        char *s;
        bool api;
        int r;

        s = malloc(size + 1);
        if (!s)
                return 0;
        memcpy(s, data, size);
        s[size] = '\0';

        api = router_path_is_api(s);
        r = router_match(s, &m);
        if (r == 0) {
                if (!api || m.route < 0 || m.route >= _ROUTE_MAX || !route_allow_header(m.route))
                        abort();
                if (strstr(s, "//") || strstr(s, "/.") || s[strlen(s) - 1] == '/')
                        abort();
                if (m.id[0] != '\0') {
                        /* An id has the shape of its route: a record's,
                         * an artifact's or a share token. */
                        const char *prefix = m.route == ROUTE_ARTIFACT ? "af_" :
                                m.route == ROUTE_SHARED || m.route == ROUTE_SHARED_EXPORT ||
                                        m.route == ROUTE_SHARED_ARTIFACT ?
                                                                         "sh_" :
                                                                         "qr_";
                        size_t digits = streq(prefix, "sh_") ? SHARE_TOKEN_HEX_DIGITS : 32;

                        if (strlen(m.id) != 3 + digits || !strneq(m.id, prefix, 3))
                                abort();
                        for (size_t i = 3; i < 3 + digits; i++)
                                if (!strchr("0123456789abcdef", m.id[i]))
                                        abort();
                        if (!strstr(s, m.id))
                                abort();
                } else if (m.route == ROUTE_HISTORY_ITEM || m.route == ROUTE_ARTIFACT || m.route == ROUTE_SHARED)
                        abort();
                if ((m.route == ROUTE_SHARED_ARTIFACT) != (m.id2[0] != '\0'))
                        abort();
                if (m.id2[0] != '\0' &&
                    (strlen(m.id2) != 35 || !strneq(m.id2, "af_", 3) || !streq(s + strlen(s) - 35, m.id2)))
                        abort();
                for (HttpMethod meth = 0; meth < _HTTP_METHOD_MAX; meth++)
                        (void) route_allows_method(m.route, meth);
        } else if (r != -ENOENT)
                abort();

        (void) http_method_from_string(s);

        {
                size_t before = strlen(s), after;
                bool had_percent = strchr(s, '%') != NULL;
                char *copy = strdup(s);

                if (!copy)
                        abort();
                after = http_percent_decode(s);
                if (after > before || after != strlen(s))
                        abort();
                if (!had_percent && !streq(copy, s))
                        abort();
                free(copy);
                (void) router_match(s, &m);
        }

        free(s);
        return 0;
}
