/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

#include "store/history.h"

/* A conversation as Markdown (API.md 9 "Export"), pure: records in, text
 * out. For each turn, in order: the question (every character Markdown
 * could read as markup escaped, as a block quote), the answer as the model
 * wrote it (only "<" escaped, so that no viewer takes it for HTML), the
 * sources (each title linked to the page as read, with its revision), the
 * citations (a verified one linked to its revision with the text fragment,
 * the record's url; any other marked as not verified, unlinked), and the
 * artifacts (name, type, size, SHA-256; linked to
 * artifact_base + id when artifact_base is not NULL). A failed turn says
 * so, with its error's message. Links are only ever http(s) URLs or
 * artifact_base paths, written as <...> destinations with every byte
 * outside printable ASCII and each of "<>\ " percent-encoded; titles and
 * quotes in link texts are escaped like the questions.
 *
 * Returns 0 and the text in *ret (the caller frees it), -EINVAL for n ==
 * 0, -ENOMEM. */
int export_markdown(const HistoryRecord *turns, size_t n, const char *artifact_base, char **ret);
