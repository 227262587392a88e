/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <limits.h>

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

TEST(json_string) {
        _cleanup_(json_object_putp) json_object *a = json_string("x\"y"), *b = json_string(NULL),
                                                *c = json_string_n("a\0b", 3), *d = json_string_n("", 0);

        ASSERT_TRUE(a && b && c && d);
        ASSERT_EQ_STR(json_object_get_string(a), "x\"y");
        ASSERT_EQ_STR(json_object_get_string(b), "");
        ASSERT_EQ_INT(json_object_get_string_len(c), 3);
        ASSERT_TRUE(memcmp(json_object_get_string(c), "a\0b", 3) == 0);
        ASSERT_EQ_INT(json_object_get_string_len(d), 0);
        /* Longer than json-c's int: refused, not truncated. */
        ASSERT_TRUE(json_string_n("", (size_t) INT_MAX + 1) == NULL);
}

TEST(json_string_bytes) {
        _cleanup_(json_object_putp) json_object *a = json_string_bytes(
                                                        "a\xff"
                                                        "b\0c",
                                                        5),
                                                *b = json_string_bytes(NULL, 7),
                                                *c = json_string_bytes("caf\xc3\xa9", 5);

        ASSERT_TRUE(a && b && c);
        ASSERT_EQ_STR(
                json_object_get_string(a),
                "a\xef\xbf\xbd"
                "b\xef\xbf\xbd"
                "c");
        ASSERT_EQ_STR(json_object_get_string(b), "");
        ASSERT_EQ_STR(json_object_get_string(c), "caf\xc3\xa9");
}

TEST(json_add_append) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object(), *a = json_object_new_array();

        ASSERT_TRUE(o && a);
        ASSERT_OK(json_add(o, "k", json_string("v")));
        ASSERT_OK(json_append(a, json_object_new_int(1)));
        ASSERT_OK(json_append(a, json_string("two")));
        /* A failed constructor (NULL) is -ENOMEM, and nothing is added. */
        ASSERT_EQ_INT(json_add(o, "n", NULL), -ENOMEM);
        ASSERT_EQ_INT(json_append(a, NULL), -ENOMEM);
        ASSERT_OK(json_add(o, "a", json_object_get(a)));
        ASSERT_EQ_STR(
                json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN), "{\"k\":\"v\",\"a\":[1,\"two\"]}");
        ASSERT_EQ_INT(json_object_array_length(a), 2);
}

TEST(json_rest_is_whitespace) {
        ASSERT_TRUE(json_rest_is_whitespace("{} \t\r\n", 2, 6));
        ASSERT_TRUE(json_rest_is_whitespace("{}", 2, 2));
        ASSERT_TRUE(json_rest_is_whitespace(NULL, 0, 0));
        ASSERT_TRUE(!json_rest_is_whitespace("{} x", 2, 4));
        ASSERT_TRUE(!json_rest_is_whitespace("{} \0", 2, 4));
        ASSERT_TRUE(!json_rest_is_whitespace("{}\v", 2, 3));
        /* Only the range counts. */
        ASSERT_TRUE(json_rest_is_whitespace("{} x", 2, 3));
}

DEFINE_TEST_MAIN()
