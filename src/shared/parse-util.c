/* SPDX-License-Identifier: MIT */
#include <strings.h>

#include "shared/macro.h"
#include "shared/parse-util.h"

int parse_uint64_range(const char *s, uint64_t min, uint64_t max, uint64_t *ret) {
        uint64_t v = 0;

        if (!s || !*s)
                return -EINVAL;
        /* Leading zeros are accepted ("007"), anything else is not: strtoull
         * would accept "-1", " 5" and "0x10", which a setting must not. */
        for (const char *p = s; *p; p++) {
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                if (v > (UINT64_MAX - (uint64_t) (*p - '0')) / 10)
                        return -ERANGE;
                v = v * 10 + (uint64_t) (*p - '0');
        }
        if (v < min || v > max)
                return -ERANGE;
        *ret = v;
        return 0;
}

int parse_boolean(const char *s, bool *ret) {
        static const char *const yes[] = { "1", "yes", "true", "on" };
        static const char *const no[] = { "0", "no", "false", "off" };

        if (!s)
                return -EINVAL;
        for (size_t i = 0; i < ELEMENTSOF(yes); i++)
                if (strcasecmp(s, yes[i]) == 0) {
                        *ret = true;
                        return 0;
                }
        for (size_t i = 0; i < ELEMENTSOF(no); i++)
                if (strcasecmp(s, no[i]) == 0) {
                        *ret = false;
                        return 0;
                }
        return -EINVAL;
}

int unhexchar(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -EINVAL;
}
