/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <errno.h>
#include <limits.h>

#include "shared/json-util.h"
#include "shared/strv.h"
#include "shared/utf8.h"

char *json_quote(const char *s) {
        size_t n, k = 0;
        char *out;

        assert(s);

        n = strlen(s);
        out = malloc(n * 6 + 3);
        if (!out)
                return NULL;
        out[k++] = '"';
        for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
                if (*p == '"' || *p == '\\') {
                        out[k++] = '\\';
                        out[k++] = (char) *p;
                } else if (*p < 0x20 || *p == 0x7f) {
                        k += (size_t) snprintf(out + k, 7, "\\u%04x", *p);
                } else
                        out[k++] = (char) *p;
        }
        out[k++] = '"';
        out[k] = 0;
        return out;
}

json_object *json_string_n(const char *s, size_t n) {
        assert(s || n == 0);

        if (n > INT_MAX)
                return NULL;
        return json_object_new_string_len(s ? s : "", (int) n);
}

json_object *json_string(const char *s) {
        return s ? json_string_n(s, strlen(s)) : json_string_n("", 0);
}

json_object *json_string_bytes(const char *s, size_t n) {
        _cleanup_free_ char *v = NULL;
        size_t l;

        if (utf8_make_valid(s ? s : "", s ? n : 0, &v, &l) < 0)
                return NULL;
        return json_string_n(v, l);
}

int json_add(json_object *obj, const char *key, json_object *value) {
        assert(obj);
        assert(key);

        if (!value)
                return -ENOMEM;
        if (json_object_object_add(obj, key, value) < 0) {
                json_object_put(value);
                return -ENOMEM;
        }
        return 0;
}

int json_append(json_object *array, json_object *value) {
        assert(array);

        if (!value)
                return -ENOMEM;
        if (json_object_array_add(array, value) < 0) {
                json_object_put(value);
                return -ENOMEM;
        }
        return 0;
}

bool json_rest_is_whitespace(const char *s, size_t from, size_t n) {
        assert(s || from >= n);

        for (size_t i = from; i < n; i++)
                if (s[i] == 0 || !strchr(" \t\r\n", s[i]))
                        return false;
        return true;
}

int json_array_strings_unique(const char *json, const char *key, char ***l, size_t *n) {
        json_object *a = json ? json_tokener_parse(json) : NULL;
        size_t k = json_object_is_type(a, json_type_array) ? json_object_array_length(a) : 0;
        int r = 0;

        assert(key);
        assert(l);
        assert(n);
        for (size_t j = 0; j < k && r >= 0; j++) {
                const char *t = json_object_get_string(
                        json_object_object_get(json_object_array_get_idx(a, j), key));

                if (t &&
                    json_object_is_type(
                            json_object_object_get(json_object_array_get_idx(a, j), key), json_type_string))
                        r = strv_extend_unique(l, n, t);
        }
        json_object_put(a);
        return r;
}
