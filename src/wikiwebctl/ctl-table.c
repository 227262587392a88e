/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <ctype.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "shared/json-util.h"
#include "wikiwebctl/ctl-table.h"

typedef enum CellType {
        CELL_STRING,
        CELL_UINT,
        CELL_TIMESTAMP,
        CELL_TIMESPAN,
} CellType;

typedef struct Cell {
        CellType type;
        char *text; /* as shown in the text form */
        uint64_t number;
        char *json_key; /* vertical tables: the key's JSON name */
} Cell;

struct Table {
        const char *const *columns;
        size_t n_columns;
        bool vertical;
        Cell *cells;
        size_t n_cells, allocated;
        const char *singular, *plural;
};

static const char *const vertical_columns[] = { "key", "value", NULL };

TableJson table_json_from_string(const char *s) {
        static const char *const names[_TABLE_JSON_MAX] = {
                [TABLE_JSON_OFF] = "off",
                [TABLE_JSON_SHORT] = "short",
                [TABLE_JSON_PRETTY] = "pretty",
        };

        for (int i = 0; s && i < _TABLE_JSON_MAX; i++)
                if (streq(names[i], s))
                        return (TableJson) i;
        return _TABLE_JSON_INVALID;
}

Table *table_new(const char *const *columns) {
        Table *t = calloc(1, sizeof *t);

        if (!t)
                return NULL;
        t->columns = columns;
        while (columns[t->n_columns])
                t->n_columns++;
        t->singular = "entry";
        t->plural = "entries";
        return t;
}

Table *table_new_vertical(void) {
        Table *t = table_new(vertical_columns);

        if (t)
                t->vertical = true;
        return t;
}

Table *table_free(Table *t) {
        if (!t)
                return NULL;
        for (size_t i = 0; i < t->n_cells; i++) {
                free(t->cells[i].text);
                free(t->cells[i].json_key);
        }
        free(t->cells);
        free(t);
        return NULL;
}

void table_set_noun(Table *t, const char *singular, const char *plural) {
        t->singular = singular;
        t->plural = plural;
}

size_t table_rows(const Table *t) {
        return t->n_cells / t->n_columns;
}

static int add_cell(Table *t, CellType type, char *text, uint64_t number, const char *json_key) {
        Cell *c;

        if (!text)
                return -ENOMEM;
        if (t->n_cells == t->allocated) {
                size_t n = MAX(t->allocated * 2, (size_t) 16);
                Cell *p = reallocarray(t->cells, n, sizeof *p);

                if (!p) {
                        free(text);
                        return -ENOMEM;
                }
                t->cells = p;
                t->allocated = n;
        }
        c = &t->cells[t->n_cells];
        *c = (Cell){ .type = type, .text = text, .number = number };
        if (json_key) {
                c->json_key = strdup(json_key);
                if (!c->json_key) {
                        free(text);
                        return -ENOMEM;
                }
        }
        t->n_cells++;
        return 0;
}

int table_add_key(Table *t, const char *key, const char *json_key) {
        assert(t->vertical && t->n_cells % 2 == 0);
        return add_cell(t, CELL_STRING, strdup(key), 0, json_key);
}

int table_add_string(Table *t, const char *s) {
        return add_cell(t, CELL_STRING, strdup(s ? s : ""), 0, NULL);
}

int table_add_uint(Table *t, uint64_t v) {
        char buf[32];

        snprintf(buf, sizeof buf, "%" PRIu64, v);
        return add_cell(t, CELL_UINT, strdup(buf), v, NULL);
}

int table_add_timestamp(Table *t, usec_t realtime) {
        char buf[RFC3339_MS_MAX];

        return add_cell(
                t,
                CELL_TIMESTAMP,
                strdup(realtime > 0 ? format_rfc3339_ms(buf, realtime) : "n/a"),
                realtime,
                NULL);
}

int table_add_timespan(Table *t, usec_t span) {
        char buf[64];

        snprintf(buf, sizeof buf, "%.1fs", (double) span / (double) USEC_PER_SEC);
        return add_cell(t, CELL_TIMESPAN, strdup(buf), span, NULL);
}

/* "joined_at" -> "JOINED AT" */
static void header_of(const char *column, char *buf, size_t size) {
        size_t i = 0;

        for (; column[i] && i + 1 < size; i++)
                buf[i] = column[i] == '_' ? ' ' : (char) toupper((unsigned char) column[i]);
        buf[i] = 0;
}

static size_t text_width(const char *s) {
        size_t n = 0;

        /* UTF-8: count the first byte of each character. */
        for (const unsigned char *p = (const unsigned char *) s; *p; p++)
                if ((*p & 0xc0) != 0x80)
                        n++;
        return n;
}

static void pad(FILE *f, size_t n) {
        while (n-- > 0)
                fputc(' ', f);
}

static int print_text(Table *t, FILE *f, bool legend) {
        size_t width[16] = { 0 }, rows = table_rows(t);
        char header[64];

        assert(t->n_columns <= ELEMENTSOF(width));

        if (legend && !t->vertical)
                for (size_t c = 0; c < t->n_columns; c++)
                        width[c] = strlen(t->columns[c]);
        for (size_t i = 0; i < t->n_cells; i++)
                width[i % t->n_columns] = MAX(width[i % t->n_columns], text_width(t->cells[i].text));

        if (t->vertical) {
                for (size_t r = 0; r < rows; r++) {
                        const char *key = t->cells[2 * r].text;

                        pad(f, width[0] - text_width(key));
                        fprintf(f, "%s: %s\n", key, t->cells[2 * r + 1].text);
                }
                return 0;
        }

        if (legend) {
                for (size_t c = 0; c < t->n_columns; c++) {
                        header_of(t->columns[c], header, sizeof header);
                        fputs(header, f);
                        if (c + 1 < t->n_columns)
                                pad(f, width[c] - strlen(header) + 1);
                }
                fputc('\n', f);
        }
        for (size_t i = 0; i < t->n_cells; i++) {
                const Cell *cell = &t->cells[i];
                size_t c = i % t->n_columns;
                size_t w = text_width(cell->text);

                /* Numbers right-aligned, the rest left-aligned; no
                 * trailing blanks. */
                if (cell->type == CELL_UINT)
                        pad(f, width[c] - w);
                fputs(cell->text, f);
                if (c + 1 < t->n_columns) {
                        if (cell->type != CELL_UINT)
                                pad(f, width[c] - w);
                        fputc(' ', f);
                } else
                        fputc('\n', f);
        }
        if (legend)
                fprintf(f, "\n%zu %s listed.\n", rows, rows == 1 ? t->singular : t->plural);
        return 0;
}

static json_object *cell_to_json(const Cell *c) {
        switch (c->type) {
        case CELL_UINT:
        case CELL_TIMESPAN:
                return json_object_new_uint64(c->number);
        case CELL_TIMESTAMP:
                return c->number > 0 ? json_object_new_uint64(c->number) : NULL;
        default:
                return json_object_new_string(c->text);
        }
}

static int print_json(Table *t, FILE *f, TableJson json) {
        _cleanup_(json_object_putp) json_object *top = t->vertical ? json_object_new_object() :
                                                                     json_object_new_array();
        json_object *row = NULL;
        int flags = JSON_C_TO_STRING_NOSLASHESCAPE |
                (json == TABLE_JSON_PRETTY ? JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED :
                                             JSON_C_TO_STRING_PLAIN);

        if (!top)
                return -ENOMEM;
        for (size_t i = 0; i < t->n_cells; i++) {
                const Cell *c = &t->cells[i];
                size_t col = i % t->n_columns;

                if (t->vertical) {
                        if (col == 1)
                                json_object_object_add(
                                        top,
                                        t->cells[i - 1].json_key ? t->cells[i - 1].json_key :
                                                                   t->cells[i - 1].text,
                                        cell_to_json(c));
                        continue;
                }
                if (col == 0) {
                        row = json_object_new_object();
                        if (!row || json_object_array_add(top, row) < 0) {
                                json_object_put(row);
                                return -ENOMEM;
                        }
                }
                json_object_object_add(row, t->columns[col], cell_to_json(c));
        }
        fprintf(f, "%s\n", json_object_to_json_string_ext(top, flags));
        return 0;
}

int table_print(Table *t, FILE *f, TableJson json, bool legend) {
        assert(t && f);
        if (json == TABLE_JSON_SHORT || json == TABLE_JSON_PRETTY)
                return print_json(t, f, json);
        return print_text(t, f, legend);
}
