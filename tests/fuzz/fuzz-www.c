/* SPDX-License-Identifier: MIT */
/* www_accepts_gzip() and www_etag_matches() on an arbitrary header value
 * (the input as a C string, as MHD hands it over). Checks: gzip is accepted
 * only when the value names it or "*"; a value that matches an ETag names
 * that ETag or "*"; neither depends on anything after a NUL. */

#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "http/www.h"
#include "shared/macro.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *etag = "\"0123456789abcdef\"";
        char *s;

        s = malloc(size + 1);
        if (!s)
                return 0;
        memcpy(s, data, size);
        s[size] = '\0';

        if (www_accepts_gzip(s))
                CHECK(strcasestr(s, "gzip") || strchr(s, '*'));
        if (www_etag_matches(s, etag))
                CHECK(strstr(s, etag) || strchr(s, '*'));
        for (size_t i = 0; i < www_n_files; i++) {
                (void) www_etag_matches(s, www_files[i].etag);
                if (www_files[i].gzip_etag && www_etag_matches(s, www_files[i].gzip_etag))
                        CHECK(strstr(s, www_files[i].gzip_etag) || strchr(s, '*'));
        }

        free(s);
        return 0;
}
