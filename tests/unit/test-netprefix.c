/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>

#include "shared/macro.h"
#include "shared/netprefix.h"
#include "tests.h"

static int parse(const char *s, NetPrefix *ret) {
        return net_prefix_parse(s, strlen(s), ret);
}

static void expect_prefix(const char *s, const char *canonical) {
        char buf[NET_PREFIX_STRING_MAX];
        NetPrefix p, q;

        if (parse(s, &p) < 0) {
                fprintf(stderr, "expected a prefix from \"%s\"\n", s);
                abort();
        }
        net_prefix_format(&p, buf);
        ASSERT_EQ_STR(buf, canonical);
        /* The canonical form reads back to the same prefix. */
        ASSERT_OK(parse(buf, &q));
        ASSERT_EQ_INT(q.address.family, p.address.family);
        ASSERT_EQ_INT(q.prefix_len, p.prefix_len);
        ASSERT_TRUE(memcmp(q.address.bytes, p.address.bytes, 16) == 0);
}

static void expect_refused(const char *s, int error) {
        NetPrefix p;
        int r = parse(s, &p);

        if (r != error) {
                fprintf(stderr, "\"%s\": expected %d, got %d\n", s, error, r);
                abort();
        }
}

static NetAddress addr(const char *s) {
        struct sockaddr_in in = { .sin_family = AF_INET };
        struct sockaddr_in6 in6 = { .sin6_family = AF_INET6 };
        NetAddress a;

        if (inet_pton(AF_INET, s, &in.sin_addr) == 1)
                ASSERT_OK(net_address_from_sockaddr((struct sockaddr *) &in, sizeof in, &a));
        else {
                ASSERT_EQ_INT(inet_pton(AF_INET6, s, &in6.sin6_addr), 1);
                ASSERT_OK(net_address_from_sockaddr((struct sockaddr *) &in6, sizeof in6, &a));
        }
        return a;
}

static bool contains(const char *prefix, const char *address) {
        NetPrefix p;
        NetAddress a = addr(address);

        ASSERT_OK(parse(prefix, &p));
        return net_prefix_contains(&p, &a);
}

TEST(parse_ipv4) {
        expect_prefix("127.0.0.2", "127.0.0.2/32");
        expect_prefix("127.0.0.2/32", "127.0.0.2/32");
        expect_prefix("10.0.0.0/8", "10.0.0.0/8");
        expect_prefix("192.168.1.128/25", "192.168.1.128/25");
        expect_prefix("128.0.0.0/1", "128.0.0.0/1");
        expect_prefix("255.255.255.255", "255.255.255.255/32");
}

TEST(parse_ipv6) {
        /* Without a prefix, an IPv6 address is one host: /128, never /32. */
        expect_prefix("::1", "::1/128");
        expect_prefix("fd00::1", "fd00::1/128");
        expect_prefix("fd00::/8", "fd00::/8");
        expect_prefix("2001:db8::/32", "2001:db8::/32");
        expect_prefix("2001:DB8:0:0:0:0:0:1", "2001:db8::1/128");
        expect_prefix("8000::/1", "8000::/1");
}

TEST(parse_mapped) {
        /* An IPv4-mapped entry is the IPv4 prefix. */
        expect_prefix("::ffff:127.0.0.2", "127.0.0.2/32");
        expect_prefix("::ffff:10.0.0.0/104", "10.0.0.0/8");
        expect_prefix("::ffff:a00:0/104", "10.0.0.0/8");
        /* Shorter than /96 it reaches past the mapped range. */
        expect_refused("::ffff:10.0.0.0/95", -EINVAL);
        expect_refused("::ffff:0.0.0.0/96", -EPERM);
        expect_refused("::ffff:0.0.0.0", -EPERM);
        /* Host bits past the mapped length. */
        expect_refused("::ffff:10.0.0.1/104", -EINVAL);
}

TEST(every_prefix_length) {
        char s[NET_PREFIX_STRING_MAX], want[NET_PREFIX_STRING_MAX];

        for (unsigned n = 1; n <= 32; n++) {
                snprintf(s, sizeof s, "128.0.0.0/%u", n);
                expect_prefix(s, s);
                snprintf(s, sizeof s, "255.255.255.255/%u", n);
                /* Every length but 32 leaves host bits set in all-ones. */
                if (n < 32)
                        expect_refused(s, -EINVAL);
                else
                        expect_prefix(s, s);
        }
        for (unsigned n = 1; n <= 128; n++) {
                snprintf(s, sizeof s, "8000::/%u", n);
                expect_prefix(s, s);
                snprintf(s, sizeof s, "::ffff:128.0.0.0/%u", n);
                if (n < 96)
                        expect_refused(s, -EINVAL);
                else if (n == 96)
                        expect_refused(s, -EPERM); /* 128.0.0.0/0: every IPv4 peer */
                else {
                        snprintf(want, sizeof want, "128.0.0.0/%u", n - 96);
                        expect_prefix(s, want);
                }
        }
        expect_refused("10.0.0.0/33", -EINVAL);
        expect_refused("fd00::/129", -EINVAL);
        expect_refused("::ffff:10.0.0.0/129", -EINVAL);
}

TEST(wildcards_refused) {
        expect_refused("*", -EPERM);
        expect_refused("0.0.0.0/0", -EPERM);
        expect_refused("0.0.0.0", -EPERM);
        expect_refused("::/0", -EPERM);
        expect_refused("::", -EPERM);
        expect_refused("::/128", -EPERM);
        /* A zero-length prefix of any address is a wildcard too (and its
         * host bits are set: either way refused). */
        expect_refused("10.0.0.0/0", -EPERM);
        expect_refused("fd00::/0", -EPERM);
}

TEST(malformed) {
        const char *bad[] = {
                "",
                " ",
                "127.0.0.1 ",
                " 127.0.0.1",
                "127.0.0.1/",
                "127.0.0.1//32",
                "127.0.0.1/32/",
                "127.0.0.1/+8",
                "127.0.0.1/-1",
                "127.0.0.1/032",
                "127.0.0.1/ 32",
                "127.0.0.1/3a",
                "127.0.0.1/4294967328",
                "10.0.0.0/08",
                "127.1",
                "127.0.0",
                "127.0.0.1.1",
                "127.0.0.01",
                "0127.0.0.1",
                "0x7f.0.0.1",
                "256.0.0.1",
                "1.2.3.4.",
                ".1.2.3.4",
                "1..2.3",
                "localhost",
                "fe80::1%lo",
                "fe80::1%1",
                ":::1",
                "1:2:3:4:5:6:7:8:9",
                "fd00::g",
                "[::1]",
                "[::1]/128",
                "10.0.0.1/8",
                "fd00::1/8",
                "**",
                "*/8",
                "1.2.3.4,5.6.7.8",
                "1.2.3.4\n",
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        };
        NetPrefix p;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                expect_refused(bad[i], -EINVAL);

        /* A NUL inside the given length. */
        ASSERT_EQ_INT(net_prefix_parse("127.0.0.1\0/8", 12, &p), -EINVAL);
        ASSERT_EQ_INT(net_prefix_parse("", 0, &p), -EINVAL);
}

TEST(match_ipv4) {
        ASSERT_TRUE(contains("127.0.0.2/32", "127.0.0.2"));
        /* The neighbours of a /32 are outside. */
        ASSERT_TRUE(!contains("127.0.0.2/32", "127.0.0.1"));
        ASSERT_TRUE(!contains("127.0.0.2/32", "127.0.0.3"));
        /* The boundaries of a /25. */
        ASSERT_TRUE(contains("192.168.1.128/25", "192.168.1.128"));
        ASSERT_TRUE(contains("192.168.1.128/25", "192.168.1.255"));
        ASSERT_TRUE(!contains("192.168.1.128/25", "192.168.1.127"));
        ASSERT_TRUE(!contains("192.168.1.128/25", "192.168.2.0"));
        /* A /31 holds two. */
        ASSERT_TRUE(contains("127.0.0.2/31", "127.0.0.3"));
        ASSERT_TRUE(!contains("127.0.0.2/31", "127.0.0.4"));
        ASSERT_TRUE(!contains("127.0.0.2/31", "127.0.0.1"));
        /* An IPv4 prefix never holds an IPv6 address. */
        ASSERT_TRUE(!contains("127.0.0.0/8", "::1"));
        ASSERT_TRUE(!contains("10.0.0.0/8", "::a00:1"));
}

TEST(match_ipv6) {
        ASSERT_TRUE(contains("::1", "::1"));
        /* An entry without a prefix is /128: its /32 neighbours are out. */
        ASSERT_TRUE(!contains("fd00::1", "fd00::2"));
        ASSERT_TRUE(!contains("fd00::1", "fd00::1:1"));
        ASSERT_TRUE(contains("fd00::/64", "fd00::ffff:ffff:ffff:ffff"));
        ASSERT_TRUE(!contains("fd00::/64", "fd00:0:0:1::"));
        ASSERT_TRUE(contains("fc00::/7", "fdff::1"));
        ASSERT_TRUE(!contains("fd00::/8", "fc00::1"));
        ASSERT_TRUE(!contains("::1", "127.0.0.1"));
}

TEST(match_mapped) {
        /* A dual-stack socket's IPv4 peer arrives as ::ffff:a.b.c.d and
         * is compared as IPv4, with IPv4 and mapped entries alike. */
        ASSERT_TRUE(contains("127.0.0.2/32", "::ffff:127.0.0.2"));
        ASSERT_TRUE(!contains("127.0.0.2/32", "::ffff:127.0.0.3"));
        ASSERT_TRUE(contains("::ffff:127.0.0.2", "127.0.0.2"));
        ASSERT_TRUE(contains("::ffff:10.0.0.0/104", "::ffff:10.255.0.1"));
        ASSERT_TRUE(!contains("::ffff:10.0.0.0/104", "::ffff:11.0.0.1"));
        /* A mapped peer is not an IPv6 peer. */
        ASSERT_TRUE(!contains("::/1", "::ffff:127.0.0.1"));
}

TEST(match_every_length) {
        /* For every length, the first address past the prefix is out and
         * the last one in is in. */
        for (unsigned n = 1; n <= 32; n++) {
                NetPrefix p;
                NetAddress a = { .family = AF_INET };

                ASSERT_OK(parse("10.0.0.0/8", &p));
                p.prefix_len = n;
                memset(p.address.bytes, 0, 16);
                p.address.bytes[0] = 0x0a;
                /* The same bits up to n, every bit after it set. */
                memcpy(a.bytes, p.address.bytes, 4);
                for (unsigned i = n; i < 32; i++)
                        a.bytes[i / 8] |= (uint8_t) (0x80u >> (i % 8));
                ASSERT_TRUE(net_prefix_contains(&p, &a));
                /* Flip bit n-1: outside. */
                a.bytes[(n - 1) / 8] ^= (uint8_t) (0x80u >> ((n - 1) % 8));
                ASSERT_TRUE(!net_prefix_contains(&p, &a));
        }
        for (unsigned n = 1; n <= 128; n++) {
                NetPrefix p = { .address = { .family = AF_INET6 }, .prefix_len = n };
                NetAddress a = { .family = AF_INET6 };

                p.address.bytes[0] = 0xfd;
                memcpy(a.bytes, p.address.bytes, 16);
                for (unsigned i = n; i < 128; i++)
                        a.bytes[i / 8] |= (uint8_t) (0x80u >> (i % 8));
                ASSERT_TRUE(net_prefix_contains(&p, &a));
                a.bytes[(n - 1) / 8] ^= (uint8_t) (0x80u >> ((n - 1) % 8));
                ASSERT_TRUE(!net_prefix_contains(&p, &a));
        }
}

TEST(list) {
        NetPrefix l[2];
        NetAddress a;

        ASSERT_OK(parse("127.0.0.2/32", &l[0]));
        ASSERT_OK(parse("fd00::/8", &l[1]));
        a = addr("127.0.0.2");
        ASSERT_TRUE(net_prefix_list_contains(l, 2, &a));
        a = addr("fd12::1");
        ASSERT_TRUE(net_prefix_list_contains(l, 2, &a));
        a = addr("127.0.0.1");
        ASSERT_TRUE(!net_prefix_list_contains(l, 2, &a));
        /* An empty list trusts nobody. */
        ASSERT_TRUE(!net_prefix_list_contains(NULL, 0, &a));
}

TEST(sockaddr) {
        struct sockaddr_un {
                sa_family_t sun_family;
                char sun_path[108];
        } un = { .sun_family = AF_UNIX };
        struct sockaddr_in in = { .sin_family = AF_INET };
        NetAddress a;
        char buf[NET_PREFIX_STRING_MAX];

        ASSERT_EQ_INT(net_address_from_sockaddr((struct sockaddr *) &un, sizeof un, &a), -EAFNOSUPPORT);
        ASSERT_EQ_INT(net_address_from_sockaddr((struct sockaddr *) &in, 4, &a), -EINVAL);
        ASSERT_EQ_INT(net_address_from_sockaddr(NULL, 0, &a), -EINVAL);
        a = addr("::ffff:192.0.2.1");
        ASSERT_EQ_INT(a.family, AF_INET);
        net_address_format(&a, buf);
        ASSERT_EQ_STR(buf, "192.0.2.1");
        a = addr("2001:db8::1");
        net_address_format(&a, buf);
        ASSERT_EQ_STR(buf, "2001:db8::1");
}

DEFINE_TEST_MAIN()
