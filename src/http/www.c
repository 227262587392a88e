/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <string.h>

#include "http/www.h"
#include "shared/macro.h"

const WwwFile *www_lookup(const char *path) {
        if (!path)
                return NULL;
        /* A handful of entries: a linear scan is as fast as anything. */
        for (size_t i = 0; i < www_n_files; i++)
                if (streq(path, www_files[i].path))
                        return &www_files[i];
        return NULL;
}

static bool www_is_ows(char c) {
        return c == ' ' || c == '\t';
}

bool www_etag_matches(const char *if_none_match, const char *etag) {
        const char *p = if_none_match;
        size_t n;

        assert(etag);
        if (!p)
                return false;
        n = strlen(etag);

        for (;;) {
                const char *end;

                while (www_is_ows(*p) || *p == ',')
                        p++;
                if (!*p)
                        return false;
                if (*p == '*') {
                        /* "*" alone matches any current representation. */
                        end = p + 1;
                        while (www_is_ows(*end))
                                end++;
                        if (*end == '\0' || *end == ',')
                                return true;
                }
                if (strneq(p, "W/", 2))
                        p += 2;
                /* An entity tag is a quoted string without inner quotes
                 * (RFC 9110 8.8.3): compare it whole. */
                end = *p == '"' ? strchr(p + 1, '"') : NULL;
                if (!end)
                        return false; /* malformed: no match, the full response */
                end++;
                if ((size_t) (end - p) == n && strneq(p, etag, n))
                        return true;
                p = end;
        }
}
