/* SPDX-License-Identifier: MIT */
/* The event encoder of API.md 11 (http/sse.c): ids, exactly one data line
 * whatever the JSON holds, and the escapes that keep that line one line
 * (CR and LF, U+2028 and U+2029) without changing what the JSON means. */
#include <json-c/json.h>

#include "http/sse.h"
#include "shared/json-util.h"
#include "shared/macro.h"
#include "tests.h"

/* The encoded event as a C string (the encoder adds no NUL). */
static char *encode(uint64_t id, const char *event, const char *json, size_t json_size) {
        size_t n = sse_event_size(id, event, json, json_size), w;
        char *buf = malloc(n + 1);

        ASSERT_TRUE(buf);
        w = sse_event_write(buf, id, event, json, json_size);
        ASSERT_EQ_INT(w, n);
        buf[n] = 0;
        return buf;
}

static char *encode_str(uint64_t id, const char *event, const char *json) {
        return encode(id, event, json, strlen(json));
}

/* Split an encoded event as the WHATWG parser does (lines end at CR, LF or
 * CRLF) and return the value of its one data field; checks that the event
 * is id, event, data, then the empty line and nothing else. */
static char *data_of(const char *ev, uint64_t want_id, const char *want_event) {
        char want_head[128];
        const char *p, *end;
        size_t k;

        k = (size_t) snprintf(
                want_head, sizeof want_head, "id: %" PRIu64 "\nevent: %s\ndata: ", want_id, want_event);
        ASSERT_TRUE(strncmp(ev, want_head, k) == 0);
        p = ev + k;
        end = p + strcspn(p, "\r\n");
        /* The data line ends with LF, then the empty line, then nothing. */
        ASSERT_EQ_STR(end, "\n\n");
        return strndup(p, (size_t) (end - p));
}

TEST(ids_and_names) {
        _cleanup_free_ char *a = encode_str(1, "status", "{}");
        _cleanup_free_ char *b = encode_str(UINT64_MAX, "tool_result", "{\"ok\":true}");
        _cleanup_free_ char *c = encode_str(42, "removed", "{\"reason\":\"left\"}");

        ASSERT_EQ_STR(a, "id: 1\nevent: status\ndata: {}\n\n");
        ASSERT_EQ_STR(b, "id: 18446744073709551615\nevent: tool_result\ndata: {\"ok\":true}\n\n");
        ASSERT_EQ_STR(c, "id: 42\nevent: removed\ndata: {\"reason\":\"left\"}\n\n");
}

TEST(one_data_line_whatever_the_whitespace) {
        /* Pretty-printed JSON: its line ends are whitespace between tokens. */
        const char *json = "{\r\n  \"a\": 1,\n  \"b\": [\r2]\n}";
        _cleanup_free_ char *ev = encode_str(3, "status", json);
        _cleanup_free_ char *data = data_of(ev, 3, "status");
        _cleanup_(json_object_putp) json_object *o = json_tokener_parse(data);

        ASSERT_EQ_STR(data, "{    \"a\": 1,   \"b\": [ 2] }");
        ASSERT_TRUE(o);
        ASSERT_EQ_INT(json_object_get_int(json_object_object_get(o, "a")), 1);
}

TEST(line_separators_escaped) {
        /* U+2028, U+2029, and their neighbours U+2027 and U+202A, which stay. */
        const char *json =
                "{\"t\":\"a\xe2\x80\xa8"
                "b\xe2\x80\xa9"
                "c\xe2\x80\xa7\xe2\x80\xaa\"}";
        _cleanup_free_ char *ev = encode_str(9, "text", json);
        _cleanup_free_ char *data = data_of(ev, 9, "text");
        _cleanup_(json_object_putp) json_object *o = json_tokener_parse(data);

        ASSERT_EQ_STR(data, "{\"t\":\"a\\u2028b\\u2029c\xe2\x80\xa7\xe2\x80\xaa\"}");
        ASSERT_TRUE(o);
        /* The same string as before the escape. */
        ASSERT_EQ_STR(
                json_object_get_string(json_object_object_get(o, "t")),
                "a\xe2\x80\xa8"
                "b\xe2\x80\xa9"
                "c\xe2\x80\xa7\xe2\x80\xaa");
}

TEST(truncated_separator_at_the_end) {
        /* Not valid JSON, but the encoder must not read past the end. */
        const char json[] = { '"', (char) 0xe2, (char) 0x80 };
        _cleanup_free_ char *ev = encode(5, "text", json, sizeof json);

        ASSERT_EQ_INT(strlen(ev), sse_event_size(5, "text", json, sizeof json));
        ASSERT_TRUE(memcmp(ev + strlen("id: 5\nevent: text\ndata: "), json, sizeof json) == 0);
}

/* What json-c writes for text with every troublesome character (the
 * daemon's JSON comes from it) survives the round trip: one line, and the
 * same string parsed back. */
TEST(json_c_round_trip) {
        const char *text =
                "line 1\nline 2\r\nU+2028 \xe2\x80\xa8 U+2029 \xe2\x80\xa9 tab\t\"quote\" \\ </script> \x01";
        _cleanup_(json_object_putp) json_object *o = json_object_new_object(), *back = NULL;
        _cleanup_free_ char *ev = NULL, *data = NULL;
        const char *json;

        ASSERT_OK(json_add(o, "delta", json_string(text)));
        json = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        ev = encode_str(12, "text", json);
        data = data_of(ev, 12, "text");
        ASSERT_TRUE(!strstr(data, "\xe2\x80\xa8") && !strstr(data, "\xe2\x80\xa9"));
        back = json_tokener_parse(data);
        ASSERT_TRUE(back);
        ASSERT_EQ_STR(json_object_get_string(json_object_object_get(back, "delta")), text);
}

TEST(empty_data) {
        _cleanup_free_ char *ev = encode(2, "status", NULL, 0);

        ASSERT_EQ_STR(ev, "id: 2\nevent: status\ndata: \n\n");
}

TEST(keepalive_is_a_comment) {
        /* A line starting with ':' is a comment; the empty line after it
         * dispatches nothing, since no data field was seen. */
        ASSERT_EQ_STR(SSE_KEEPALIVE, ": keep-alive\n\n");
}

DEFINE_TEST_MAIN()
