/* SPDX-License-Identifier: MIT */
/* llm_parse_props_total_slots() on arbitrary bodies (what a model server, or
 * anything at its address, answers to GET /props), and llm_props_url() on
 * the input as a URL. Checks: a count is in 1..LLM_PROPS_SLOTS_MAX and is
 * the body's own "total_slots"; anything else is -ENODATA; a props URL
 * ends in "/props" and begins with the input's scheme and authority. */

#include <json-c/json.h>
#include <stdint.h>
#include <string.h>

#include "query/llm.h"
#include "shared/macro.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        unsigned n = 0;
        char *s, *url = NULL;
        int r;

        r = llm_parse_props_total_slots(data, size, &n);
        if (r == 0) {
                json_object *o, *v;

                CHECK(n >= 1 && n <= LLM_PROPS_SLOTS_MAX);
                /* Independently: json-c parses the same body to the same
                 * number. */
                s = strndup((const char *) data, size);
                CHECK(s);
                o = json_tokener_parse(s);
                CHECK(o && json_object_object_get_ex(o, "total_slots", &v));
                CHECK(json_object_get_int64(v) == (int64_t) n);
                json_object_put(o);
                free(s);
        } else
                CHECK(r == -ENODATA);

        s = strndup((const char *) data, size);
        if (!s)
                return 0;
        r = llm_props_url(s, &url);
        if (r == 0) {
                const char *a = strstr(s, "://");
                size_t len = strlen(url);

                CHECK(a);
                CHECK(len >= STRLEN("/props") && streq(url + len - STRLEN("/props"), "/props"));
                CHECK(strncmp(url, s, len - STRLEN("/props")) == 0);
                free(url);
        } else
                CHECK(r == -EINVAL && !strstr(s, "://"));
        free(s);
        return 0;
}
