/* SPDX-License-Identifier: MIT */
/* host_parse() and host_check() on arbitrary bytes (a request's Host).
 * Checks: a refusal is -EINVAL and leaves *ret untouched, and host_check()
 * denies it; an accepted name is lower-case, a valid WIKI_WEB_ALLOWED_HOSTS
 * entry unless numeric, and reads back to itself; it is allowed by a list
 * holding it, and by "*." and its parent when it has one; an accepted
 * address is allowed exactly when loopback, unspecified or listed as own. */

#include <string.h>
#include <sys/socket.h>

#include "shared/host.h"
#include "shared/macro.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char buf[HOST_MAX_LEN + 64];
        HostParts p, q, untouched;
        HostPolicy none = { 0 };
        HostVerdict v;
        int r;

        if (size >= sizeof buf)
                return 0;
        memcpy(buf, data, size);
        buf[size] = '\0';

        memset(&p, 0xa5, sizeof p);
        untouched = p;
        r = host_parse(buf, &p);
        v = host_check(buf, &none);
        if (r < 0) {
                CHECK(r == -EINVAL);
                CHECK(memcmp(&p, &untouched, sizeof p) == 0);
                CHECK(v == HOST_DENY);
                return 0;
        }
        CHECK(r == 0);

        if (p.kind == HOST_KIND_NAME) {
                char pattern[HOST_NAME_MAX_LEN + 3];
                char *list[2] = { p.name, NULL };
                const char *dot = strchr(p.name, '.');
                HostPolicy listed = { .allowed_hosts = list };

                for (const char *c = p.name; *c; c++)
                        CHECK(!(*c >= 'A' && *c <= 'Z'));
                CHECK(host_parse(p.name, &q) == 0 && q.kind == HOST_KIND_NAME && streq(q.name, p.name));
                CHECK(host_pattern_is_valid(p.name));
                CHECK(v == (streq(p.name, "localhost") ? HOST_ALLOW : HOST_DENY));
                CHECK(host_check(buf, &listed) == HOST_ALLOW);
                if (dot) {
                        snprintf(pattern, sizeof pattern, "*.%s", dot + 1);
                        list[0] = pattern;
                        CHECK(host_check(buf, &listed) == HOST_ALLOW);
                        /* Not the parent itself. */
                        CHECK(host_check(dot + 1, &listed) != HOST_ALLOW || streq(dot + 1, "localhost"));
                }
        } else {
                HostPolicy own = { .own = &p.address, .n_own = 1 };

                CHECK(p.kind == HOST_KIND_ADDRESS);
                CHECK(p.address.family == AF_INET || p.address.family == AF_INET6);
                CHECK(v == ((p.loopback || p.unspecified) ? HOST_ALLOW : HOST_UNKNOWN_ADDRESS));
                CHECK(host_check(buf, &own) == HOST_ALLOW);
        }
        return 0;
}
