/* SPDX-License-Identifier: MIT */
/* wikiwebctl's output (src/wikiwebctl/ctl-table.c): aligned columns under
 * an upper-case legend and a summary line, --no-legend, JSON short and
 * pretty with numbers as numbers and unknown times as null, and the
 * vertical "Key: value" form of status. */
#include <stdio.h>

#include "shared/macro.h"
#include "tests.h"
#include "wikiwebctl/ctl-table.h"

static char *print(Table *t, TableJson json, bool legend) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);

        ASSERT_TRUE(f);
        ASSERT_OK(table_print(t, f, json, legend));
        ASSERT_TRUE(fclose(f) == 0);
        return buf;
}

static Table *tickets(void) {
        static const char *const columns[] = { "id", "status", "position", "joined", NULL };
        Table *t = table_new(columns);

        ASSERT_TRUE(t);
        table_set_noun(t, "ticket", "tickets");
        ASSERT_OK(table_add_string(t, "tk_1"));
        ASSERT_OK(table_add_string(t, "reserved"));
        ASSERT_OK(table_add_uint(t, 0));
        ASSERT_OK(table_add_timestamp(t, 1795780800123456)); /* 2026-11-27T12:00:00.123Z */
        ASSERT_OK(table_add_string(t, "tk_22222"));
        ASSERT_OK(table_add_string(t, "waiting"));
        ASSERT_OK(table_add_uint(t, 12));
        ASSERT_OK(table_add_timestamp(t, 0));
        return t;
}

TEST(json_modes) {
        ASSERT_EQ_INT(table_json_from_string("short"), TABLE_JSON_SHORT);
        ASSERT_EQ_INT(table_json_from_string("pretty"), TABLE_JSON_PRETTY);
        ASSERT_EQ_INT(table_json_from_string("off"), TABLE_JSON_OFF);
        ASSERT_EQ_INT(table_json_from_string("yes"), _TABLE_JSON_INVALID);
        ASSERT_EQ_INT(table_json_from_string(NULL), _TABLE_JSON_INVALID);
}

TEST(text) {
        _cleanup_(table_freep) Table *t = tickets();
        _cleanup_free_ char *legend = NULL, *bare = NULL;

        ASSERT_EQ_INT(table_rows(t), 2);
        legend = print(t, TABLE_JSON_OFF, true);
        ASSERT_EQ_STR(
                legend,
                "ID       STATUS   POSITION JOINED\n"
                "tk_1     reserved        0 2026-11-27T12:00:00.123Z\n"
                "tk_22222 waiting        12 n/a\n"
                "\n"
                "2 tickets listed.\n");
        bare = print(t, TABLE_JSON_OFF, false);
        ASSERT_EQ_STR(
                bare,
                "tk_1     reserved  0 2026-11-27T12:00:00.123Z\n"
                "tk_22222 waiting  12 n/a\n");
}

TEST(text_empty) {
        static const char *const columns[] = { "id", NULL };
        _cleanup_(table_freep) Table *t = table_new(columns);
        _cleanup_free_ char *text = NULL, *json = NULL;

        table_set_noun(t, "ticket", "tickets");
        text = print(t, TABLE_JSON_OFF, true);
        ASSERT_EQ_STR(text, "ID\n\n0 tickets listed.\n");
        json = print(t, TABLE_JSON_SHORT, true);
        ASSERT_EQ_STR(json, "[]\n");
}

TEST(json) {
        _cleanup_(table_freep) Table *t = tickets();
        _cleanup_free_ char *shrt = NULL, *pretty = NULL;

        shrt = print(t, TABLE_JSON_SHORT, true);
        ASSERT_EQ_STR(
                shrt,
                "[{\"id\":\"tk_1\",\"status\":\"reserved\",\"position\":0,\"joined\":1795780800123456},"
                "{\"id\":\"tk_22222\",\"status\":\"waiting\",\"position\":12,\"joined\":null}]\n");
        pretty = print(t, TABLE_JSON_PRETTY, false);
        ASSERT_TRUE(strstr(pretty, "\n  {\n    \"id\": \"tk_1\",\n"));
        ASSERT_TRUE(strstr(pretty, "\"joined\": null\n"));
}

TEST(vertical) {
        _cleanup_(table_freep) Table *t = table_new_vertical();
        _cleanup_free_ char *text = NULL, *json = NULL;

        ASSERT_TRUE(t);
        ASSERT_OK(table_add_key(t, "State", "state"));
        ASSERT_OK(table_add_string(t, "running"));
        ASSERT_OK(table_add_key(t, "Queue length", "queue_length"));
        ASSERT_OK(table_add_uint(t, 3));
        ASSERT_OK(table_add_key(t, "Average query", "average_query_usec"));
        ASSERT_OK(table_add_timespan(t, 42500000));
        ASSERT_OK(table_add_key(t, "Quote \"é\"", "quote"));
        ASSERT_OK(table_add_string(t, "a\"b/c"));
        text = print(t, TABLE_JSON_OFF, true);
        ASSERT_EQ_STR(
                text,
                "        State: running\n"
                " Queue length: 3\n"
                "Average query: 42.5s\n"
                "    Quote \"é\": a\"b/c\n");
        json = print(t, TABLE_JSON_SHORT, true);
        ASSERT_EQ_STR(
                json,
                "{\"state\":\"running\",\"queue_length\":3,\"average_query_usec\":42500000,"
                "\"quote\":\"a\\\"b/c\"}\n");
}

DEFINE_TEST_MAIN()
