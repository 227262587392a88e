/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "shared/ids.h"
#include "shared/macro.h"
#include "shared/time-util.h"
#include "store/history.h"

/* A person's whole history as one ZIP (API.md 9 "Export of a whole
 * history"), made with libarchive as it is read, a bounded piece at a
 * time: the response asks for bytes (export_zip_read()) as the socket
 * drains, and each call does at most a few steps of work (a page of
 * records, one conversation, a piece of one artifact), so the event loop
 * never waits long and the memory held is a page, a conversation and a
 * piece, whatever the size of the history. Only the ZIP's central
 * directory, which the format puts at the end, grows with the number of
 * entries (about 100 bytes each).
 *
 * Inside, in this order:
 *  - records.json: every record as GET /history/{id} shows it, newest
 *    first, in one JSON array;
 *  - conversations/{id}.md: for each last turn of a conversation, the
 *    Markdown of GET /history/{id}/export (api/export.h), byte for byte;
 *  - artifacts/{record id}/{name}: each artifact's bytes, under a name made
 *    safe (no "/", "\", control character, "." or ".."; a name a record
 *    already used gets its artifact's id in front).
 *
 * What it holds is the history as it stood at as_of (CLOCK_REALTIME, the
 * request's time): a record still running then, or asked since, is left
 * out of every part (it is in the next export), so that the parts agree.
 * Every read is a short one of its own (no read stays open between
 * calls, which would hold back the store's checkpoints); a record deleted
 * meanwhile is missing from the parts made after, and an artifact deleted
 * while it is copied fails the download.
 *
 * The history is borrowed and must outlive the ExportZip. */

typedef struct ExportZip ExportZip;

int export_zip_new(History *history, const SessionKey *session, usec_t as_of, ExportZip **ret);
ExportZip *export_zip_free(ExportZip *z);
DEFINE_TRIVIAL_CLEANUP_FUNC(ExportZip *, export_zip_free);

/* The next bytes of the archive, at most max into buf: their number
 * (> 0), 0 when the archive is complete, or a negative errno (-EIO,
 * -ENOMEM; logged) after which it stays failed. */
ssize_t export_zip_read(ExportZip *z, uint8_t *buf, size_t max);

/* An artifact's name as its entry's last part: a new string (the caller
 * frees it), NULL when out of memory. Pure. */
char *export_zip_safe_name(const char *name);
