/* SPDX-License-Identifier: MIT */
#include <archive.h>
#include <archive_entry.h>
#include <assert.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "api/export-zip.h"
#include "api/export.h"
#include "api/render.h"
#include "shared/json-util.h"
#include "shared/log.h"
#include "shared/strbuf.h"

/* Records read at a time: one page of the listing is one step. */
#define EXPORT_ZIP_PAGE 25u
/* An artifact's bytes are copied this many at a time: one step. */
#define EXPORT_ZIP_PIECE_BYTES (64u * 1024u)
/* Output kept for reuse between steps; a larger buffer is given back. */
#define EXPORT_ZIP_KEEP_BYTES (256u * 1024u)

typedef enum ExportZipPhase {
        EXPORT_ZIP_RECORDS, /* records.json, a page at a time */
        EXPORT_ZIP_FILES,   /* each record's conversation (a last turn's) and artifacts */
        EXPORT_ZIP_CLOSE,   /* the central directory */
        EXPORT_ZIP_DONE,
        EXPORT_ZIP_FAILED,
} ExportZipPhase;

struct ExportZip {
        History *history;
        SessionKey session;
        usec_t as_of;
        struct archive *archive;
        ExportZipPhase phase;

        /* Made by libarchive and not yet handed out: out.data[sent..len). */
        StrBuf out;
        size_t sent;

        /* The listing: the page being read, the next record in it, the
         * cursor of the page after it ("" with more false: none). */
        HistoryPage *page;
        size_t next;
        char cursor[HISTORY_CURSOR_MAX];
        bool started; /* a page of this phase was read */
        size_t n_listed;

        /* EXPORT_ZIP_FILES: where the record page->records[next] is. */
        bool conversation_done;
        size_t artifact;      /* its next artifact */
        bool artifact_open;   /* that artifact's entry is being written */
        uint64_t artifact_at; /* the bytes of it copied */
        uint8_t *piece;
};

static la_ssize_t export_zip_on_write(struct archive *a, void *userdata, const void *buf, size_t n) {
        ExportZip *z = userdata;

        if (strbuf_put(&z->out, buf, n) < 0) {
                archive_set_error(a, ENOMEM, "out of memory");
                return -1;
        }
        return (la_ssize_t) n;
}

/* A libarchive call's result: a warning is still success. */
static int export_zip_check(ExportZip *z, int k, const char *what) {
        if (k >= ARCHIVE_WARN)
                return 0;
        log_error(
                "History export: cannot %s: %s",
                what,
                archive_error_string(z->archive) ? archive_error_string(z->archive) : "unknown error");
        return -EIO;
}

int export_zip_new(History *history, const SessionKey *session, usec_t as_of, ExportZip **ret) {
        _cleanup_(export_zip_freep) ExportZip *z = NULL;
        int r;

        assert(history);
        assert(session);
        assert(ret);

        z = calloc(1, sizeof *z);
        if (!z)
                return -ENOMEM;
        z->history = history;
        z->session = *session;
        z->as_of = as_of;
        z->archive = archive_write_new();
        if (!z->archive)
                return -ENOMEM;
        /* Deflate, names in UTF-8 (the flag set, nothing converted), and
         * every write handed straight to us: no blocks, no padding. */
        r = export_zip_check(z, archive_write_set_format_zip(z->archive), "choose ZIP");
        if (r >= 0)
                r = export_zip_check(
                        z, archive_write_set_options(z->archive, "zip:hdrcharset=UTF-8"), "set ZIP's options");
        if (r >= 0)
                r = export_zip_check(z, archive_write_set_bytes_per_block(z->archive, 0), "set the block size");
        if (r >= 0)
                r = export_zip_check(
                        z, archive_write_set_bytes_in_last_block(z->archive, 1), "set the last block's size");
        if (r >= 0)
                r = export_zip_check(
                        z, archive_write_open(z->archive, z, NULL, export_zip_on_write, NULL), "start the ZIP");
        if (r < 0)
                return r;
        *ret = TAKE_PTR(z);
        return 0;
}

ExportZip *export_zip_free(ExportZip *z) {
        if (!z)
                return NULL;
        /* archive_write_free() closes the archive first, an entry being
         * written included: what that writes goes to z->out, unread, and
         * it ends the compressor's stream, which archive_write_fail()
         * would leave allocated (libarchive 3.6). */
        if (z->archive)
                (void) archive_write_free(z->archive);
        history_page_free(z->page);
        strbuf_done(&z->out);
        free(z->piece);
        free(z);
        return NULL;
}

char *export_zip_safe_name(const char *name) {
        _cleanup_(strbuf_done) StrBuf b = { 0 };

        assert(name);

        for (const char *p = name; *p; p++) {
                unsigned char c = (unsigned char) *p;

                (void) strbuf_put(&b, (c < 0x20 || c == 0x7f || c == '/' || c == '\\') ? "_" : p, 1);
        }
        if (!b.data || streq(b.data, ".") || streq(b.data, "..")) {
                strbuf_done(&b);
                (void) strbuf_put_literal(&b, "file");
        }
        return strbuf_steal(&b);
}

/* Whether r is in the export: it had ended by as_of. */
static bool export_zip_includes(const ExportZip *z, const HistoryRecord *r) {
        return !streq(r->status, "running") && r->created_at <= z->as_of && r->finished_at <= z->as_of;
}

/* The next page of the listing into z->page; its cursor, "" after the
 * last one, in z->cursor. */
static int export_zip_next_page(ExportZip *z) {
        int r;

        z->page = history_page_free(z->page);
        z->next = 0;
        r = history_list_records(
                z->history, &z->session, EXPORT_ZIP_PAGE, z->started ? z->cursor : NULL, &z->page);
        if (r < 0)
                return log_error_errno(r, "History export: cannot read the history");
        z->started = true;
        snprintf(z->cursor, sizeof z->cursor, "%s", z->page->next_cursor);
        return 0;
}

/* Whether the listing has been read to its end. */
static bool export_zip_listed(const ExportZip *z) {
        return z->started && !z->cursor[0];
}

static int export_zip_begin_entry(ExportZip *z, const char *path, int64_t size, usec_t mtime) {
        struct archive_entry *e = archive_entry_new();
        int r;

        if (!e)
                return -ENOMEM;
        archive_entry_set_pathname_utf8(e, path);
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_mtime(e, (time_t) (mtime / USEC_PER_SEC), 0);
        if (size >= 0)
                archive_entry_set_size(e, size);
        r = export_zip_check(z, archive_write_header(z->archive, e), "begin an entry");
        archive_entry_free(e);
        return r;
}

static int export_zip_write(ExportZip *z, const void *data, size_t n) {
        la_ssize_t k;

        if (n == 0)
                return 0;
        k = archive_write_data(z->archive, data, n);
        if (k < 0 || (size_t) k != n)
                return export_zip_check(z, ARCHIVE_FATAL, "write an entry");
        return 0;
}

static int export_zip_end_entry(ExportZip *z) {
        return export_zip_check(z, archive_write_finish_entry(z->archive), "end an entry");
}

/* One step of records.json: a page of records (after its start), or
 * its end. */
static int export_zip_step_records(ExportZip *z) {
        int r;

        if (export_zip_listed(z)) {
                r = export_zip_write(z, z->n_listed > 0 ? "\n]\n" : "]\n", z->n_listed > 0 ? 3 : 2);
                if (r >= 0)
                        r = export_zip_end_entry(z);
                if (r < 0)
                        return r;
                /* The files, from the newest record again. */
                z->started = false;
                z->cursor[0] = 0;
                z->phase = EXPORT_ZIP_FILES;
                return 0;
        }
        if (!z->started) {
                r = export_zip_begin_entry(z, "records.json", -1, z->as_of);
                if (r >= 0)
                        r = export_zip_write(z, "[", 1);
                if (r < 0)
                        return r;
        }
        r = export_zip_next_page(z);
        if (r < 0)
                return r;
        for (size_t i = 0; i < z->page->n_records; i++) {
                const HistoryRecord *rec = &z->page->records[i];
                _cleanup_(json_object_putp) json_object *o = NULL;
                const char *text;

                if (!export_zip_includes(z, rec))
                        continue;
                o = render_history_record(rec);
                text = o ? render_body(o) : NULL;
                if (!text)
                        return log_oom();
                r = export_zip_write(z, z->n_listed > 0 ? ",\n" : "\n", z->n_listed > 0 ? 2 : 1);
                if (r >= 0)
                        r = export_zip_write(z, text, strlen(text));
                if (r < 0)
                        return r;
                z->n_listed++;
        }
        z->page = history_page_free(z->page);
        return 0;
}

/* The conversation that ends at rec, when nothing of the export follows
 * it: the Markdown of GET /history/{id}/export. */
static int export_zip_conversation(ExportZip *z, const HistoryRecord *rec) {
        HistoryRecord *turns = NULL;
        _cleanup_free_ char *text = NULL, *path = NULL;
        size_t n = 0;
        int r;

        r = history_has_follower(z->history, rec->id, &z->session, z->as_of);
        if (r < 0)
                return r;
        if (r > 0)
                return 0;
        r = history_get_conversation(
                z->history, rec->id, &z->session, HISTORY_CONVERSATION_MAX_TURNS, &turns, &n);
        if (r == -ENOENT)
                return 0; /* deleted meanwhile */
        if (r < 0)
                return log_error_errno(r, "History export: cannot read a conversation");
        r = export_markdown(turns, n, "/api/v1/artifacts/", &text);
        history_conversation_free_records(turns, n);
        if (r < 0)
                return log_oom();
        if (asprintf(&path, "conversations/%s.md", rec->id) < 0)
                return log_oom();
        r = export_zip_begin_entry(z, path, (int64_t) strlen(text), rec->created_at);
        if (r >= 0)
                r = export_zip_write(z, text, strlen(text));
        if (r >= 0)
                r = export_zip_end_entry(z);
        return r;
}

/* The entry name of rec's artifact i: its safe name, or, when an earlier
 * artifact of rec has that name already, its id and the name. */
static char *export_zip_artifact_path(const HistoryRecord *rec, size_t i) {
        _cleanup_free_ char *name = export_zip_safe_name(rec->artifacts[i].name), *prefixed = NULL;
        char *path = NULL;
        bool taken = false;

        if (!name)
                return NULL;
        for (size_t j = 0; j < i && !taken; j++) {
                _cleanup_free_ char *other = export_zip_safe_name(rec->artifacts[j].name);

                if (!other)
                        return NULL;
                taken = streq(other, name);
        }
        if (taken) {
                /* An id is unique, and no safe name of the sandbox's starts
                 * with one followed by "-" by chance in practice; the id
                 * alone is the last resort. */
                if (asprintf(&prefixed, "%s-%s", rec->artifacts[i].id, name) < 0)
                        return NULL;
                for (size_t j = 0; j < i; j++) {
                        _cleanup_free_ char *other = export_zip_safe_name(rec->artifacts[j].name);

                        if (!other)
                                return NULL;
                        if (streq(other, prefixed)) {
                                free(prefixed);
                                prefixed = strdup(rec->artifacts[i].id);
                                if (!prefixed)
                                        return NULL;
                                break;
                        }
                }
        }
        if (asprintf(&path, "artifacts/%s/%s", rec->id, prefixed ? prefixed : name) < 0)
                return NULL;
        return path;
}

/* One step of the files: the conversation of a record, or a piece of one
 * of its artifacts. */
static int export_zip_step_files(ExportZip *z) {
        const HistoryRecord *rec;
        const HistoryArtifactInfo *a;
        size_t n;
        int r;

        if (!z->page || z->next >= z->page->n_records) {
                if (export_zip_listed(z)) {
                        z->page = history_page_free(z->page);
                        z->phase = EXPORT_ZIP_CLOSE;
                        return 0;
                }
                r = export_zip_next_page(z);
                if (r < 0)
                        return r;
                z->conversation_done = false;
                z->artifact = 0;
                return 0;
        }

        rec = &z->page->records[z->next];
        if (!export_zip_includes(z, rec) || (z->conversation_done && z->artifact >= rec->n_artifacts)) {
                z->next++;
                z->conversation_done = false;
                z->artifact = 0;
                return 0;
        }
        if (!z->conversation_done) {
                z->conversation_done = true;
                return export_zip_conversation(z, rec);
        }

        a = &rec->artifacts[z->artifact];
        if (!z->artifact_open) {
                _cleanup_free_ char *path = export_zip_artifact_path(rec, z->artifact);

                if (!path)
                        return log_oom();
                r = export_zip_begin_entry(z, path, a->size_bytes, rec->finished_at);
                if (r < 0)
                        return r;
                z->artifact_open = true;
                z->artifact_at = 0;
        }
        if (!z->piece) {
                z->piece = malloc(EXPORT_ZIP_PIECE_BYTES);
                if (!z->piece)
                        return log_oom();
        }
        r = history_read_artifact(
                z->history, a->id, &z->session, z->artifact_at, z->piece, EXPORT_ZIP_PIECE_BYTES, &n);
        if (r < 0)
                return log_error_errno(r, "History export: cannot read artifact %s", a->id);
        if (n > 0) {
                r = export_zip_write(z, z->piece, n);
                if (r < 0)
                        return r;
                z->artifact_at += n;
        }
        if (n == 0 || z->artifact_at >= (uint64_t) MAX(a->size_bytes, 0)) {
                if (z->artifact_at != (uint64_t) MAX(a->size_bytes, 0))
                        return log_error_errno(
                                EIO, "History export: artifact %s is shorter than listed", a->id);
                r = export_zip_end_entry(z);
                if (r < 0)
                        return r;
                z->artifact_open = false;
                z->artifact++;
        }
        return 0;
}

static int export_zip_step(ExportZip *z) {
        switch (z->phase) {
        case EXPORT_ZIP_RECORDS:
                return export_zip_step_records(z);
        case EXPORT_ZIP_FILES:
                return export_zip_step_files(z);
        case EXPORT_ZIP_CLOSE:
                z->phase = EXPORT_ZIP_DONE;
                return export_zip_check(z, archive_write_close(z->archive), "end the ZIP");
        default:
                return 0;
        }
}

ssize_t export_zip_read(ExportZip *z, uint8_t *buf, size_t max) {
        size_t n;
        int r;

        assert(z);
        assert(buf);

        /* Steps until there is something to hand out: a step that only fed
         * the compressor, or skipped a record, makes none. */
        while (z->sent >= z->out.len) {
                if (z->phase == EXPORT_ZIP_FAILED)
                        return -EIO;
                if (z->phase == EXPORT_ZIP_DONE)
                        return 0;
                z->out.len = 0;
                z->sent = 0;
                if (z->out.cap > EXPORT_ZIP_KEEP_BYTES)
                        strbuf_done(&z->out);
                r = export_zip_step(z);
                if (r < 0 || z->out.failed) {
                        z->phase = EXPORT_ZIP_FAILED;
                        return r < 0 ? r : -ENOMEM;
                }
        }
        n = MIN(max, z->out.len - z->sent);
        memcpy(buf, z->out.data + z->sent, n);
        z->sent += n;
        return (ssize_t) n;
}
