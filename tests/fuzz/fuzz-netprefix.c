/* SPDX-License-Identifier: MIT */
/* net_prefix_parse() on arbitrary bytes (a WIKI_WEB_TRUSTED_PROXIES entry).
 * Checks: a refusal is -EINVAL or -EPERM and leaves *ret untouched; an
 * accepted prefix has a length within its family's, no host bits, is not a
 * wildcard, reads back from its canonical form to the same prefix, holds
 * its own network address and its last address, and not the address with
 * its last prefix bit flipped. */

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "shared/macro.h"
#include "shared/netprefix.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char buf[NET_PREFIX_STRING_MAX];
        NetPrefix p, q, untouched;
        NetAddress a;
        unsigned bits;
        int r;

        memset(&p, 0xa5, sizeof p);
        untouched = p;
        r = net_prefix_parse((const char *) data, size, &p);
        if (r < 0) {
                CHECK(r == -EINVAL || r == -EPERM);
                CHECK(memcmp(&p, &untouched, sizeof p) == 0);
                return 0;
        }
        CHECK(r == 0);
        CHECK(p.address.family == AF_INET || p.address.family == AF_INET6);
        bits = p.address.family == AF_INET ? 32 : 128;
        CHECK(p.prefix_len >= 1 && p.prefix_len <= bits);

        net_prefix_format(&p, buf);
        CHECK(net_prefix_parse(buf, strlen(buf), &q) == 0);
        CHECK(q.address.family == p.address.family && q.prefix_len == p.prefix_len);
        CHECK(memcmp(q.address.bytes, p.address.bytes, sizeof p.address.bytes) == 0);

        a = p.address;
        CHECK(net_prefix_contains(&p, &a));
        for (unsigned i = p.prefix_len; i < bits; i++) {
                /* No host bits in the parsed prefix. */
                CHECK(!(p.address.bytes[i / 8] & (0x80u >> (i % 8))));
                a.bytes[i / 8] |= (uint8_t) (0x80u >> (i % 8));
        }
        CHECK(net_prefix_contains(&p, &a));
        a.bytes[(p.prefix_len - 1) / 8] ^= (uint8_t) (0x80u >> ((p.prefix_len - 1) % 8));
        CHECK(!net_prefix_contains(&p, &a));
        /* The other family never matches. */
        a.family = p.address.family == AF_INET ? AF_INET6 : AF_INET;
        CHECK(!net_prefix_contains(&p, &a));
        return 0;
}
