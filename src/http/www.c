/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <string.h>
#include <strings.h>

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

/* A weight (RFC 9110 12.4.2): "0" to "1" with at most three decimals.
 * Returns the weight in thousandths, or -1 when malformed. */
static int www_parse_qvalue(const char *p, const char *end) {
        int v, n = 0;

        if (p == end || (*p != '0' && *p != '1'))
                return -1;
        v = (*p - '0') * 1000;
        p++;
        if (p == end)
                return v;
        if (*p != '.')
                return -1;
        p++;
        for (int scale = 100; p < end; p++, n++, scale /= 10) {
                if (n >= 3 || *p < '0' || *p > '9')
                        return -1;
                v += (*p - '0') * scale;
        }
        return v > 1000 ? -1 : v;
}

bool www_accepts_gzip(const char *accept_encoding) {
        int gzip = -1, star = -1; /* their weights, -1: not named */
        const char *p = accept_encoding;

        if (!p)
                return false;
        while (*p) {
                const char *name, *name_end, *elem_end;
                int q = 1000;

                while (www_is_ows(*p) || *p == ',')
                        p++;
                if (!*p)
                        break;
                name = p;
                while (*p && *p != ',' && *p != ';' && !www_is_ows(*p))
                        p++;
                name_end = p;
                elem_end = strchrnul(p, ',');
                /* Parameters: only "q" means anything here. */
                while (p < elem_end) {
                        const char *pname, *pend;

                        while (p < elem_end && www_is_ows(*p))
                                p++;
                        if (p == elem_end)
                                break;
                        if (*p != ';') {
                                q = -1;
                                break;
                        }
                        p++;
                        while (p < elem_end && www_is_ows(*p))
                                p++;
                        pname = p;
                        while (p < elem_end && *p != ';' && !www_is_ows(*p))
                                p++;
                        pend = p;
                        if (pend - pname >= 2 && (pname[0] == 'q' || pname[0] == 'Q') && pname[1] == '=')
                                q = www_parse_qvalue(pname + 2, pend);
                        else if (pend == pname)
                                q = -1;
                        if (q < 0)
                                break;
                }
                p = elem_end;
                if (q < 0)
                        continue; /* malformed: ignored */
                if ((name_end - name == 4 && strncasecmp(name, "gzip", 4) == 0) ||
                    (name_end - name == 6 && strncasecmp(name, "x-gzip", 6) == 0))
                        gzip = MAX(gzip, q);
                else if (name_end - name == 1 && name[0] == '*')
                        star = MAX(star, q);
        }
        return gzip >= 0 ? gzip > 0 : star > 0;
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
