/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "shared/macro.h"
#include "shared/time-util.h"

/* wikiwebctl's output, pure (a FILE in, text out), in the manner of
 * systemd's format-table: cells are added row by row, then the table is
 * shown either as aligned columns under an upper-case header (the legend,
 * which --no-legend drops, with a "N tickets listed." line after) or as
 * JSON (--json=short|pretty: an array of objects keyed by the column names,
 * numbers as numbers, times as microseconds).
 *
 * A vertical table (table_new_vertical()) is one record: "Key: value" lines
 * with the keys right-aligned (resolvectl status), or one JSON object. */

typedef enum TableJson {
        TABLE_JSON_OFF,
        TABLE_JSON_SHORT,
        TABLE_JSON_PRETTY,
        _TABLE_JSON_MAX,
        _TABLE_JSON_INVALID = -EINVAL,
} TableJson;

/* "off", "short", "pretty" */
TableJson table_json_from_string(const char *s);

typedef struct Table Table;

/* columns: the names, NULL-terminated, lower case with underscores (the
 * JSON keys; the text header shows them upper case with spaces). Borrowed:
 * they must outlive the table (string literals). NULL on OOM. */
Table *table_new(const char *const *columns);
/* A key/value table: the keys are added as the cells of column 0 with
 * table_add_key(). */
Table *table_new_vertical(void);
Table *table_free(Table *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(Table *, table_free);

/* The noun of the "N NOUNS listed." line (e.g. "ticket", "tickets"). */
void table_set_noun(Table *t, const char *singular, const char *plural);

/* Cells, filling rows left to right. Strings are copied. A timestamp is
 * CLOCK_REALTIME microseconds, 0 shown as "n/a" (JSON null); a timespan is
 * microseconds, shown as seconds ("42.5s"). In a vertical table, a key
 * first, then its value. Return 0 or -ENOMEM. */
int table_add_key(Table *t, const char *key, const char *json_key);
int table_add_string(Table *t, const char *s);
int table_add_uint(Table *t, uint64_t v);
int table_add_timestamp(Table *t, usec_t realtime);
int table_add_timespan(Table *t, usec_t span);

size_t table_rows(const Table *t);

/* Show it on f. legend: the header and the summary line (a vertical table
 * has neither). Returns 0 or a negative errno. */
int table_print(Table *t, FILE *f, TableJson json, bool legend);
