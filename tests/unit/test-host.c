/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>

#include "shared/host.h"
#include "shared/macro.h"
#include "tests.h"

static HostVerdict check(
        const char *host, char *const *hosts, char *const *origins, const NetAddress *own, size_t n_own) {
        HostPolicy p = {
                .allowed_hosts = hosts,
                .allowed_origins = origins,
                .own = own,
                .n_own = n_own,
        };

        return host_check(host, &p);
}

static void expect(const char *host, HostVerdict expected) {
        char *hosts[] = { (char *) "wiki.example.com", (char *) "*.corp.example", NULL };
        char *origins[] = { (char *) "https://portal.example.org", (char *) "http://[2001:db8::7]:8080", NULL };
        NetAddress own[2] = { { .family = AF_INET }, { .family = AF_INET6 } };
        HostVerdict v;

        ASSERT_TRUE(inet_pton(AF_INET, "192.0.2.10", own[0].bytes) == 1);
        ASSERT_TRUE(inet_pton(AF_INET6, "2001:db8::10", own[1].bytes) == 1);
        v = check(host, hosts, origins, own, ELEMENTSOF(own));
        if (v != expected) {
                fprintf(stderr,
                        "Host \"%s\": %s, expected %s\n",
                        host ? host : "(null)",
                        host_verdict_to_string(v),
                        host_verdict_to_string(expected));
                abort();
        }
}

TEST(own_names) {
        expect("localhost", HOST_ALLOW);
        expect("LOCALHOST:8080", HOST_ALLOW);
        expect("localhost.", HOST_ALLOW);
        expect("127.0.0.1", HOST_ALLOW);
        expect("127.0.0.1:8080", HOST_ALLOW);
        expect("127.45.6.7:1", HOST_ALLOW);
        expect("[::1]:8080", HOST_ALLOW);
        expect("[::1]", HOST_ALLOW);
        expect("0.0.0.0:8080", HOST_ALLOW);
        expect("[::]:8080", HOST_ALLOW);
        expect("[::ffff:127.0.0.1]:80", HOST_ALLOW);
        expect("192.0.2.10:8080", HOST_ALLOW);
        expect("[2001:db8::10]:8080", HOST_ALLOW);
        expect("[2001:DB8:0::10]", HOST_ALLOW);
        expect(" \t127.0.0.1:8080 ", HOST_ALLOW);
}

TEST(listed_names) {
        expect("wiki.example.com", HOST_ALLOW);
        expect("WIKI.Example.COM:443", HOST_ALLOW);
        expect("wiki.example.com.:8080", HOST_ALLOW);
        expect("a.corp.example", HOST_ALLOW);
        expect("a-b_c.corp.example:8080", HOST_ALLOW);
        expect("portal.example.org:8443", HOST_ALLOW); /* any port */
        expect("[2001:db8::7]", HOST_ALLOW);
        /* One label for "*.", no more, no less. */
        expect("corp.example", HOST_DENY);
        expect("a.b.corp.example", HOST_DENY);
        expect(".corp.example", HOST_DENY);
        expect("xcorp.example", HOST_DENY);
        expect("example.com", HOST_DENY);
        expect("evil.wiki.example.com", HOST_DENY);
        expect("wiki.example.com.evil.example", HOST_DENY);
}

TEST(rebinding) {
        expect("evil.example.com:8080", HOST_DENY);
        expect("evil.example.com", HOST_DENY);
        expect("localhost.evil.example", HOST_DENY);
        expect("127.0.0.1.evil.example", HOST_DENY);
        expect("sub.localhost", HOST_DENY);
        /* Literals that are not ours: the caller may look again. */
        expect("198.51.100.1:8080", HOST_UNKNOWN_ADDRESS);
        expect("[2001:db8::11]", HOST_UNKNOWN_ADDRESS);
}

TEST(hostile) {
        static const char *const bad[] = {
                "",
                " ",
                ":8080",
                "localhost:",
                "localhost:0x50",
                "localhost:65536",
                "localhost:123456",
                "localhost:-1",
                "localhost:80:80",
                "localhost:+80",
                "local host",
                "localhost/",
                "localhost/x",
                "user@localhost",
                "localhost?x",
                "localhost#x",
                "localhost%2e",
                "l%6fcalhost",
                "localhost\r\nX: y",
                "localhost\x7f",
                "l\303\266calhost",
                "..",
                ".",
                "a..b",
                "-",
                "*.corp.example",
                "*",
                "127.1",
                "127.0.0.01",
                "0x7f.0.0.1",
                "0177.0.0.1",
                "2130706433",
                "256.0.0.1",
                "1.2.3.4.5",
                "::1",
                "[::1",
                "::1]",
                "[::1]x",
                "[::1]:",
                "[::1]:99999",
                "[]",
                "[[::1]]",
                "[::1%25lo]",
                "[::1%lo]",
                "[fe80::1%eth0]:80",
                "[127.0.0.1]",
                "[localhost]",
                "[::g]",
        };

        expect(NULL, HOST_DENY);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                expect(bad[i], HOST_DENY);
}

TEST(lengths) {
        char label[65], name[300];
        HostParts p;

        memset(label, 'a', 63);
        label[63] = '\0';
        ASSERT_OK(host_parse(label, &p));
        label[63] = 'a';
        label[64] = '\0';
        ASSERT_TRUE(host_parse(label, &p) == -EINVAL);

        /* 253 bytes in four labels of 63 and one of 1. */
        name[0] = '\0';
        for (int i = 0; i < 4; i++) {
                memset(name + i * 64, 'b', 63);
                name[i * 64 + 63] = '.';
        }
        name[256] = '\0';
        name[252] = 'c';
        name[253] = '\0';
        ASSERT_OK(host_parse(name, &p));
        ASSERT_EQ_INT(p.kind, HOST_KIND_NAME);
        name[253] = 'd';
        name[254] = '\0';
        ASSERT_TRUE(host_parse(name, &p) == -EINVAL);

        /* A value longer than HOST_MAX_LEN: a short host and blanks. */
        memset(name, ' ', sizeof name - 1);
        memcpy(name, "localhost", 9);
        name[sizeof name - 1] = '\0';
        ASSERT_TRUE(host_parse(name, &p) == -EINVAL);
}

TEST(parts) {
        HostParts p;

        ASSERT_OK(host_parse("Wiki.Example.COM.:80", &p));
        ASSERT_EQ_INT(p.kind, HOST_KIND_NAME);
        ASSERT_EQ_STR(p.name, "wiki.example.com");

        ASSERT_OK(host_parse("[::ffff:10.1.2.3]", &p));
        ASSERT_EQ_INT(p.kind, HOST_KIND_ADDRESS);
        ASSERT_EQ_INT(p.address.family, AF_INET);
        ASSERT_TRUE(p.address.bytes[0] == 10 && p.address.bytes[3] == 3);
        ASSERT_TRUE(!p.loopback && !p.unspecified);
}

TEST(patterns) {
        ASSERT_TRUE(host_pattern_is_valid("wiki.example.com"));
        ASSERT_TRUE(host_pattern_is_valid("*.example.com"));
        ASSERT_TRUE(host_pattern_is_valid("intranet"));
        ASSERT_TRUE(!host_pattern_is_valid(""));
        ASSERT_TRUE(!host_pattern_is_valid("*"));
        ASSERT_TRUE(!host_pattern_is_valid("*."));
        ASSERT_TRUE(!host_pattern_is_valid("*.*.example.com"));
        ASSERT_TRUE(!host_pattern_is_valid("a.*.example.com"));
        ASSERT_TRUE(!host_pattern_is_valid("w*.example.com"));
        ASSERT_TRUE(!host_pattern_is_valid("wiki.example.com:8080"));
        ASSERT_TRUE(!host_pattern_is_valid("wiki.example.com."));
        ASSERT_TRUE(!host_pattern_is_valid("192.0.2.1"));
        ASSERT_TRUE(!host_pattern_is_valid("[::1]"));
        ASSERT_TRUE(!host_pattern_is_valid("http://wiki.example.com"));
        ASSERT_TRUE(!host_pattern_is_valid("wiki example"));
}

TEST(empty_policy) {
        ASSERT_EQ_INT(check("localhost:1", NULL, NULL, NULL, 0), HOST_ALLOW);
        ASSERT_EQ_INT(check("wiki.example.com", NULL, NULL, NULL, 0), HOST_DENY);
        ASSERT_EQ_INT(check("192.0.2.10", NULL, NULL, NULL, 0), HOST_UNKNOWN_ADDRESS);
}

DEFINE_TEST_MAIN()
