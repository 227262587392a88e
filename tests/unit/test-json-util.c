/* SPDX-License-Identifier: MIT */
#include "shared/json-util.h"
#include "tests.h"

static void check_quote(const char *in, const char *expected) {
        _cleanup_free_ char *q = json_quote(in);
        _cleanup_(json_object_putp) json_object *o = NULL;

        ASSERT_EQ_STR(q, expected);
        /* json-c reads it back as the same string. */
        o = json_tokener_parse(q);
        ASSERT_TRUE(o && json_object_is_type(o, json_type_string));
        ASSERT_EQ_STR(json_object_get_string(o), in);
}

TEST(json_quote) {
        check_quote("", "\"\"");
        check_quote("plain", "\"plain\"");
        check_quote("a\"b\\c", "\"a\\\"b\\\\c\"");
        check_quote("\n\t\x01\x1f\x7f", "\"\\u000a\\u0009\\u0001\\u001f\\u007f\"");
        check_quote("caf\xc3\xa9 \xe2\x82\xac", "\"caf\xc3\xa9 \xe2\x82\xac\"");
        check_quote("/", "\"/\"");
}

TEST(json_quote_worst_case) {
        /* Every byte a six-byte escape: the buffer is sized for it. */
        char in[257];
        _cleanup_free_ char *q = NULL;

        memset(in, 0x01, sizeof in - 1);
        in[sizeof in - 1] = 0;
        q = json_quote(in);
        ASSERT_TRUE(q);
        ASSERT_EQ_INT(strlen(q), 256 * 6 + 2);
}

TEST(json_cleanup) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        _cleanup_(json_tokener_freep) struct json_tokener *t = json_tokener_new();

        ASSERT_TRUE(o && t);
}

DEFINE_TEST_MAIN()
