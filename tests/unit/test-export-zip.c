/* SPDX-License-Identifier: MIT */
/* src/api/export-zip.c: a person's whole history as a ZIP, read back with
 * libarchive after it was made a few bytes at a time from a real store;
 * the names of artifacts made safe. */

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/export-zip.h"
#include "history-fixture.h"
#include "shared/artifact.h"
#include "shared/macro.h"
#include "shared/sha256.h"
#include "shared/strbuf.h"
#include "tests.h"

#define T0 (UINT64_C(1700000000) * USEC_PER_SEC)

TEST(safe_name) {
        static const struct {
                const char *in, *out;
        } table[] = {
                { "table.csv", "table.csv" },
                { "../../etc/passwd", ".._.._etc_passwd" },
                { "a\\b", "a_b" },
                { "line\nbreak\x7f", "line_break_" },
                { ".", "file" },
                { "..", "file" },
                { "", "file" },
                { "...", "..." },
                { "Zürich.txt", "Zürich.txt" },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_free_ char *s = export_zip_safe_name(table[i].in);

                ASSERT_EQ_STR(s, table[i].out);
        }
}

static void add_artifact(
        History *h, const char *dir, unsigned n, const char *name, const void *data, size_t size) {
        _cleanup_free_ char *path = NULL;
        char id[HISTORY_ARTIFACT_ID_MAX];
        uint8_t digest[32];
        Artifact a = { .media_type = "application/octet-stream", .size_bytes = size };
        int fd;

        ASSERT_TRUE(asprintf(&path, "%s/artifact", dir) >= 0);
        fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ASSERT_TRUE(fd >= 0);
        ASSERT_TRUE(write(fd, data, size) == (ssize_t) size);
        ASSERT_OK(sha256(data, size, digest));
        sha256_to_hex(digest, a.sha256);
        a.fd = fd;
        a.name = strdup(name);
        ASSERT_OK(history_add_artifact(h, qid(n), &a, id));
        artifact_done(&a);
        ASSERT_TRUE(unlink(path) == 0);
}

/* The whole archive, read max bytes at a time. */
static void read_all(ExportZip *z, size_t max, StrBuf *ret) {
        uint8_t buf[4096];
        ssize_t n;

        ASSERT_TRUE(max <= sizeof buf);
        while ((n = export_zip_read(z, buf, max)) > 0) {
                ASSERT_TRUE((size_t) n <= max);
                ASSERT_OK(strbuf_put(ret, (const char *) buf, (size_t) n));
        }
        ASSERT_EQ_INT(n, 0);
        /* Complete: it stays so. */
        ASSERT_EQ_INT(export_zip_read(z, buf, max), 0);
}

/* The entries of a ZIP, as "name size\n" lines, and the bytes of the one
 * named want (NULL: none) in *ret_data. */
static char *list_zip(const StrBuf *zip, const char *want, StrBuf *ret_data) {
        struct archive *a = archive_read_new();
        struct archive_entry *e;
        _cleanup_(strbuf_done) StrBuf names = { 0 };

        ASSERT_TRUE(a);
        ASSERT_EQ_INT(archive_read_support_format_zip(a), ARCHIVE_OK);
        ASSERT_EQ_INT(archive_read_open_memory(a, zip->data, zip->len), ARCHIVE_OK);
        while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
                const char *name = archive_entry_pathname_utf8(e);
                char buf[8192];
                la_ssize_t k;
                size_t total = 0;

                while ((k = archive_read_data(a, buf, sizeof buf)) > 0) {
                        total += (size_t) k;
                        if (want && streq(name, want))
                                ASSERT_OK(strbuf_put(ret_data, buf, (size_t) k));
                }
                ASSERT_EQ_INT(k, 0);
                ASSERT_OK(strbuf_printf(&names, "%s %zu\n", name, total));
        }
        ASSERT_EQ_INT(archive_read_free(a), ARCHIVE_OK);
        return strbuf_steal(&names);
}

TEST(archive) {
        _cleanup_(history_fixture_done) HistoryFixture f = history_fixture_new("export-zip");
        History *h = f.h;
        _cleanup_(strbuf_done) StrBuf zip = { 0 }, data = { 0 }, again = { 0 };
        _cleanup_free_ char *names = NULL;
        const SessionKey mine = key(1), other = key(2);
        static uint8_t big[200000];
        ExportZip *z = NULL;

        /* Empty: a valid ZIP of an empty records.json. */
        ASSERT_OK(export_zip_new(h, &mine, T0, &z));
        read_all(z, 4096, &zip);
        z = export_zip_free(z);
        names = list_zip(&zip, "records.json", &data);
        ASSERT_EQ_STR(names, "records.json 3\n");
        ASSERT_EQ_STR(data.data, "[]\n");

        /* Three records of mine (2 follows 1), one of another's. */
        for (size_t i = 0; i < sizeof big; i++)
                big[i] = (uint8_t) (i * 7919 >> 3);
        add_record(h, 1, &mine, T0 + 1 * USEC_PER_SEC, NULL);
        add_record(h, 2, &mine, T0 + 2 * USEC_PER_SEC, qid(1));
        add_record(h, 3, &mine, T0 + 3 * USEC_PER_SEC, NULL);
        add_record(h, 4, &other, T0 + 4 * USEC_PER_SEC, NULL);
        add_artifact(h, f.dir, 1, "t.csv", "a,b\n", 4);
        add_artifact(h, f.dir, 1, "t.csv", "c,d\n", 4);
        add_artifact(h, f.dir, 3, "big.bin", big, sizeof big);
        add_artifact(h, f.dir, 4, "theirs.txt", "no", 2);

        /* Read 7 bytes at a time: the pieces do not depend on the reads. */
        strbuf_done(&zip);
        strbuf_done(&data);
        ASSERT_OK(export_zip_new(h, &mine, T0 + 3600 * USEC_PER_SEC, &z));
        read_all(z, 7, &zip);
        z = export_zip_free(z);
        names = mfree(names);
        names = list_zip(
                &zip,
                "artifacts/"
                "qr_00000000000000000000000000000003"
                "/big.bin",
                &data);
        ASSERT_TRUE(strstr(names, "records.json "));
        ASSERT_TRUE(strstr(names, "conversations/qr_00000000000000000000000000000002.md "));
        ASSERT_TRUE(strstr(names, "conversations/qr_00000000000000000000000000000003.md "));
        ASSERT_TRUE(!strstr(names, "conversations/qr_00000000000000000000000000000001.md"));
        ASSERT_TRUE(strstr(names, "artifacts/qr_00000000000000000000000000000001/t.csv 4\n"));
        ASSERT_TRUE(strstr(names, "-t.csv 4\n"));
        ASSERT_TRUE(strstr(names, "/big.bin 200000\n"));
        ASSERT_TRUE(!strstr(names, "theirs") && !strstr(names, "qr_00000000000000000000000000000004"));
        ASSERT_TRUE(data.len == sizeof big && memcmp(data.data, big, sizeof big) == 0);

        /* As of before record 3 ended: it is in no part. */
        ASSERT_OK(export_zip_new(h, &mine, T0 + 3 * USEC_PER_SEC + 1, &z));
        read_all(z, 4096, &again);
        z = export_zip_free(z);
        names = mfree(names);
        names = list_zip(&again, NULL, NULL);
        ASSERT_TRUE(!strstr(names, "qr_00000000000000000000000000000003"));
        ASSERT_TRUE(strstr(names, "conversations/qr_00000000000000000000000000000002.md "));

        /* Given up midway: nothing leaks (ASan), nothing else happens. */
        {
                uint8_t buf[100];

                ASSERT_OK(export_zip_new(h, &mine, T0 + 3600 * USEC_PER_SEC, &z));
                ASSERT_TRUE(export_zip_read(z, buf, sizeof buf) > 0);
                z = export_zip_free(z);
        }
}

DEFINE_TEST_MAIN()
