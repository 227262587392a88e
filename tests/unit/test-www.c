/* SPDX-License-Identifier: MIT */
#include "http/www.h"
#include "shared/macro.h"
#include "shared/sha256.h"
#include "tests.h"

/* The table embed.py wrote: the files of src/www/ at fixed paths, each with
 * its media type and the SHA-256 of its bytes as a strong ETag. */
TEST(table) {
        /* path, media type */
        static const char *const want[][2] = {
                { "/", "text/html; charset=utf-8" },
                { "/app.js", "text/javascript; charset=utf-8" },
                { "/favicon.svg", "image/svg+xml" },
                { "/i18n.js", "text/javascript; charset=utf-8" },
                { "/i18n/ar.json", "application/json" },
                { "/i18n/de.json", "application/json" },
                { "/i18n/en.json", "application/json" },
                { "/i18n/es.json", "application/json" },
                { "/i18n/fr.json", "application/json" },
                { "/i18n/ja.json", "application/json" },
                { "/markdown.js", "text/javascript; charset=utf-8" },
                { "/style.css", "text/css; charset=utf-8" },
        };

        ASSERT_EQ_INT(www_n_files, ELEMENTSOF(want));
        for (size_t i = 0; i < ELEMENTSOF(want); i++) {
                const WwwFile *f = www_lookup(want[i][0]);
                uint8_t d[SHA256_DIGEST_SIZE];
                char hex[65], etag[80];

                ASSERT_TRUE(f);
                ASSERT_EQ_STR(f->path, want[i][0]);
                ASSERT_EQ_STR(f->media_type, want[i][1]);
                ASSERT_TRUE(f->size > 0);
                ASSERT_OK(sha256(f->data, f->size, d));
                sha256_to_hex(d, hex);
                snprintf(etag, sizeof etag, "\"%s\"", hex);
                ASSERT_EQ_STR(f->etag, etag);
                /* The compressed copy, when there is one, is smaller, is
                 * gzip, and has an ETag of its own. */
                if (f->gzip_data) {
                        ASSERT_TRUE(f->gzip_size > 18 && f->gzip_size < f->size);
                        ASSERT_TRUE(f->gzip_data[0] == 0x1f && f->gzip_data[1] == 0x8b);
                        snprintf(etag, sizeof etag, "\"%s-gzip\"", hex);
                        ASSERT_EQ_STR(f->gzip_etag, etag);
                } else
                        ASSERT_TRUE(!f->gzip_etag && f->gzip_size == 0);
        }
        /* The page and its scripts shrink: at least these are compressed. */
        ASSERT_TRUE(www_lookup("/")->gzip_data);
        ASSERT_TRUE(www_lookup("/app.js")->gzip_data);
        ASSERT_TRUE(www_lookup("/style.css")->gzip_data);
}

TEST(lookup_is_exact) {
        static const char *const miss[] = {
                "",          "/index.html", "/app.js/", "//",           "/APP.JS",   "/app.js?x",
                "/./app.js", "/../app.js",  "app.js",   "/style.css%",  "/api/v1",   "/www/app.js",
                "/app",      "/app.jsx",    "/.",       "/favicon.ico", "/embed.py", "/meson.build",
        };

        for (size_t i = 0; i < ELEMENTSOF(miss); i++)
                ASSERT_TRUE(!www_lookup(miss[i]));
        ASSERT_TRUE(!www_lookup(NULL));
}

/* The page names only its own files, at the paths they are served at (and
 * its own fragments): a file added to src/www/ without a line in its
 * meson.build, or a typo, fails here rather than in a browser. */
TEST(page_refers_to_table) {
        static const char *const attrs[] = { "src=\"", "href=\"" };
        const WwwFile *page = www_lookup("/");
        _cleanup_free_ char *html = NULL;
        unsigned n = 0;

        ASSERT_TRUE(page);
        html = strndup((const char *) page->data, page->size);
        ASSERT_TRUE(html);
        for (size_t a = 0; a < ELEMENTSOF(attrs); a++)
                for (char *p = html; (p = strstr(p, attrs[a]));) {
                        _cleanup_free_ char *v = NULL;
                        char *end;

                        p += strlen(attrs[a]);
                        end = strchr(p, '"');
                        ASSERT_TRUE(end);
                        v = strndup(p, (size_t) (end - p));
                        ASSERT_TRUE(v);
                        if (v[0] == '#')
                                continue;
                        if (!www_lookup(v)) {
                                fprintf(stderr, "index.html refers to %s, which is not served\n", v);
                                abort();
                        }
                        n++;
                }
        ASSERT_EQ_INT(
                n, 6); /* the icon, the style, the three scripts, the shared view's way back to the form */
}

TEST(etag_matches) {
        const char *e = "\"abc\"";

        ASSERT_TRUE(www_etag_matches("\"abc\"", e));
        ASSERT_TRUE(www_etag_matches("W/\"abc\"", e));
        ASSERT_TRUE(www_etag_matches("*", e));
        ASSERT_TRUE(www_etag_matches(" * ", e));
        ASSERT_TRUE(www_etag_matches("\"x\", \"abc\"", e));
        ASSERT_TRUE(www_etag_matches("\"x\",W/\"abc\" ,\"y\"", e));
        ASSERT_TRUE(www_etag_matches(",,\"abc\"", e));

        ASSERT_TRUE(!www_etag_matches(NULL, e));
        ASSERT_TRUE(!www_etag_matches("", e));
        ASSERT_TRUE(!www_etag_matches("abc", e));
        ASSERT_TRUE(!www_etag_matches("\"ab\"", e));
        ASSERT_TRUE(!www_etag_matches("\"abcd\"", e));
        ASSERT_TRUE(!www_etag_matches("\"abc", e));
        ASSERT_TRUE(!www_etag_matches("w/\"abc\"", e));
        ASSERT_TRUE(!www_etag_matches("*x", e));
        ASSERT_TRUE(!www_etag_matches("\"x\" junk \"abc\"", e));
}

TEST(accepts_gzip) {
        static const char *const yes[] = {
                "gzip",
                "GZIP",
                "x-gzip",
                "gzip, deflate, br",
                "br;q=1.0, gzip;q=0.8, *;q=0.1",
                " ,, gzip ;q=0.001",
                "*",
                "*;q=0.5",
                "identity, *",
                "gzip;q=0, gzip",
                "deflate;level=9, gzip",
        };
        static const char *const no[] = {
                "",
                "identity",
                "br, deflate",
                "gzip;q=0",
                "gzip;q=0.000",
                "gzip; q=0",
                "*;q=0",
                "gzip;q=0, *",   /* named and refused: the wildcard does not bring it back */
                "gzip;q=1.1",    /* malformed weight: ignored */
                "gzip;q=0.0001", /* four decimals */
                "gzip;q=",       /* empty weight */
                "gzip;q=-1",
                "gzip;;",       /* an empty parameter */
                "gzip deflate", /* not a list */
                "gzipx",
                "gzi",
                "xgzip",
                "*x",
                ";q=1",
        };

        for (size_t i = 0; i < ELEMENTSOF(yes); i++)
                if (!www_accepts_gzip(yes[i])) {
                        fprintf(stderr, "should accept gzip: \"%s\"\n", yes[i]);
                        abort();
                }
        for (size_t i = 0; i < ELEMENTSOF(no); i++)
                if (www_accepts_gzip(no[i])) {
                        fprintf(stderr, "should not accept gzip: \"%s\"\n", no[i]);
                        abort();
                }
        ASSERT_TRUE(!www_accepts_gzip(NULL));
}

/* Hostile input: a long header of separators and parameters is read in one
 * pass and gives the right answer. */
TEST(accepts_gzip_long) {
        size_t n = 1 << 20;
        _cleanup_free_ char *s = malloc(n + 16);

        ASSERT_TRUE(s);
        for (size_t i = 0; i < n; i++)
                s[i] = "; ,"[i % 3];
        s[n] = '\0';
        ASSERT_TRUE(!www_accepts_gzip(s));
        memcpy(s + n - 5, ",gzip", 6);
        ASSERT_TRUE(www_accepts_gzip(s));
}

DEFINE_TEST_MAIN()
