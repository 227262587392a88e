/* SPDX-License-Identifier: MIT */
/* The destination policy (src/query/destination.c): URL parsing, named and
 * unnamed hosts, ports, redirects, and every address class for IPv4, IPv6
 * and IPv4-mapped IPv6. Pure: no address here is ever connected to. */
#include <arpa/inet.h>
#include <netinet/in.h>

#include "query/destination.h"
#include "shared/macro.h"
#include "tests.h"

static bool special(const char *addr) {
        struct sockaddr_in in = { .sin_family = AF_INET };
        struct sockaddr_in6 in6 = { .sin6_family = AF_INET6 };

        if (inet_pton(AF_INET, addr, &in.sin_addr) == 1)
                return destination_address_is_special((struct sockaddr *) &in, sizeof in);
        if (inet_pton(AF_INET6, addr, &in6.sin6_addr) == 1)
                return destination_address_is_special((struct sockaddr *) &in6, sizeof in6);
        fprintf(stderr, "bad test address %s\n", addr);
        abort();
}

static bool allowed(const DestinationPolicy *p, const char *host, const char *addr) {
        struct sockaddr_in in = { .sin_family = AF_INET };
        struct sockaddr_in6 in6 = { .sin6_family = AF_INET6 };

        if (inet_pton(AF_INET, addr, &in.sin_addr) == 1)
                return destination_address_allowed(p, host, (struct sockaddr *) &in, sizeof in);
        ASSERT_TRUE(inet_pton(AF_INET6, addr, &in6.sin6_addr) == 1);
        return destination_address_allowed(p, host, (struct sockaddr *) &in6, sizeof in6);
}

TEST(address_classes) {
        static const char *const denied[] = {
                /* IPv4 */
                "0.0.0.0",
                "0.1.2.3",
                "10.0.0.1",
                "10.255.255.255",
                "100.64.0.1",
                "100.127.255.254",
                "127.0.0.1",
                "127.0.0.2",
                "127.255.255.255",
                "169.254.169.254",
                "172.16.0.1",
                "172.31.255.255",
                "192.0.0.8",
                "192.0.2.1",
                "192.168.0.1",
                "192.168.255.255",
                "198.18.0.1",
                "198.19.255.255",
                "198.51.100.7",
                "203.0.113.9",
                "224.0.0.1",
                "239.255.255.250",
                "240.0.0.1",
                "255.255.255.255",
                /* IPv6 */
                "::",
                "::1",
                "fe80::1",
                "febf::1",
                "fec0::1",
                "fc00::1",
                "fd12:3456::1",
                "ff02::1",
                "ff0e::1",
                "2001:db8::1",
                "100::1",
                /* IPv4-mapped, -compatible, NAT64 and 6to4 of denied IPv4 */
                "::ffff:127.0.0.1",
                "::ffff:10.1.2.3",
                "::ffff:192.168.1.1",
                "::ffff:169.254.169.254",
                "::ffff:100.64.0.1",
                "::ffff:0.0.0.0",
                "::127.0.0.1",
                "::10.0.0.1",
                "64:ff9b::a00:1",
                "64:ff9b::7f00:1",
                "64:ff9b:1::1",
                "2002:7f00:1::1",
                "2002:c0a8:101::1",
        };
        static const char *const public[] = {
                "1.1.1.1",         "8.8.8.8",          "9.255.255.255",
                "11.0.0.0",        "100.63.255.255",   "100.128.0.0",
                "126.255.255.255", "128.0.0.1",        "169.253.255.255",
                "172.15.255.255",  "172.32.0.0",       "192.167.255.255",
                "192.169.0.0",     "198.17.255.255",   "198.20.0.0",
                "223.255.255.255", "2606:4700::1111",  "2001:4860:4860::8888",
                "::ffff:8.8.8.8",  "64:ff9b::808:808", "2002:808:808::1",
                "fbff::1",         "fe7f::1",
        };

        for (size_t i = 0; i < ELEMENTSOF(denied); i++)
                if (!special(denied[i])) {
                        fprintf(stderr, "%s should be special\n", denied[i]);
                        abort();
                }
        for (size_t i = 0; i < ELEMENTSOF(public); i++)
                if (special(public[i])) {
                        fprintf(stderr, "%s should not be special\n", public[i]);
                        abort();
                }

        /* Unknown families and short lengths are special. */
        {
                struct sockaddr_in in = { .sin_family = AF_INET };
                struct sockaddr un = { .sa_family = AF_UNIX };
                ASSERT_TRUE(inet_pton(AF_INET, "8.8.8.8", &in.sin_addr) == 1);
                ASSERT_TRUE(destination_address_is_special((struct sockaddr *) &in, 4));
                ASSERT_TRUE(destination_address_is_special(&un, sizeof un));
                ASSERT_TRUE(destination_address_is_special(NULL, 0));
        }
}

TEST(named_and_unnamed) {
        DestinationPolicy *p = NULL;
        char *extra[] = { (char *) "Extra.Example.org.", (char *) "127.0.0.3", (char *) "[::1]", NULL };

        ASSERT_OK(destination_policy_new(
                "https://wiki.example.com/w/api.php", "http://localhost:8080/v1", extra, &p));

        ASSERT_TRUE(destination_host_named(p, "wiki.example.com"));
        ASSERT_TRUE(destination_host_named(p, "WIKI.example.COM."));
        ASSERT_TRUE(destination_host_named(p, "localhost"));
        ASSERT_TRUE(destination_host_named(p, "extra.example.org"));
        ASSERT_TRUE(destination_host_named(p, "127.0.0.3"));
        ASSERT_TRUE(destination_host_named(p, "::1"));
        ASSERT_TRUE(destination_host_named(p, "[::1]"));
        ASSERT_TRUE(destination_host_named(p, "[0:0::1]"));
        ASSERT_TRUE(!destination_host_named(p, "example.com"));
        ASSERT_TRUE(!destination_host_named(p, "wiki.example.com.evil"));
        ASSERT_TRUE(!destination_host_named(p, "127.0.0.1"));
        ASSERT_TRUE(!destination_host_named(p, "127.0.0.03"));
        ASSERT_TRUE(!destination_host_named(p, "::ffff:127.0.0.3"));
        ASSERT_TRUE(!destination_host_named(p, ""));
        ASSERT_TRUE(!destination_host_named(p, NULL));

        /* A named host may reach any address, special ones included. */
        ASSERT_TRUE(allowed(p, "localhost", "127.0.0.1"));
        ASSERT_TRUE(allowed(p, "localhost", "::1"));
        ASSERT_TRUE(allowed(p, "wiki.example.com", "10.0.0.5"));
        ASSERT_TRUE(allowed(p, "wiki.example.com", "93.184.216.34"));
        /* An unnamed host only public ones. */
        ASSERT_TRUE(!allowed(p, "rebind.example.net", "127.0.0.1"));
        ASSERT_TRUE(!allowed(p, "rebind.example.net", "::ffff:127.0.0.1"));
        ASSERT_TRUE(!allowed(p, "rebind.example.net", "169.254.169.254"));
        ASSERT_TRUE(!allowed(p, "rebind.example.net", "fd00::1"));
        ASSERT_TRUE(!allowed(p, "rebind.example.net", "100.64.1.1"));
        ASSERT_TRUE(allowed(p, "rebind.example.net", "93.184.216.34"));
        /* An IP literal host: that address only, named or not. */
        ASSERT_TRUE(allowed(p, "127.0.0.3", "127.0.0.3"));
        ASSERT_TRUE(allowed(p, "127.0.0.3", "::ffff:127.0.0.3"));
        ASSERT_TRUE(!allowed(p, "127.0.0.3", "127.0.0.1"));
        ASSERT_TRUE(!allowed(p, "127.0.0.3", "93.184.216.34"));
        ASSERT_TRUE(allowed(p, "::1", "::1"));
        ASSERT_TRUE(allowed(p, "[::1]", "::1"));
        ASSERT_TRUE(!allowed(p, "::1", "127.0.0.1"));
        ASSERT_TRUE(allowed(p, "8.8.8.8", "8.8.8.8"));
        ASSERT_TRUE(!allowed(p, "8.8.8.8", "8.8.4.4"));
        ASSERT_TRUE(!allowed(p, "127.0.0.1", "127.0.0.1")); /* not named */

        /* URLs: the host decides, any port. */
        ASSERT_OK(destination_check_url(p, "https://wiki.example.com/w/api.php?action=query", NULL));
        ASSERT_OK(destination_check_url(p, "http://wiki.example.com:8080/", NULL));
        ASSERT_OK(destination_check_url(p, "HTTPS://WIKI.EXAMPLE.COM", NULL));
        ASSERT_OK(destination_check_url(p, "http://localhost:1/", NULL));
        ASSERT_OK(destination_check_url(p, "http://[::1]:8080/x", NULL));
        ASSERT_OK(destination_check_url(p, "http://127.0.0.3/", NULL));
        ASSERT_EQ_INT(destination_check_url(p, "http://127.0.0.1/", NULL), -EPERM);
        ASSERT_EQ_INT(destination_check_url(p, "http://example.com/", NULL), -EPERM);
        ASSERT_EQ_INT(destination_check_url(p, "ftp://wiki.example.com/", NULL), -EPERM);
        ASSERT_EQ_INT(destination_check_url(p, "file:///etc/passwd", NULL), -EPERM);
        ASSERT_EQ_INT(destination_check_url(p, "gopher://localhost/", NULL), -EPERM);

        destination_policy_free(p);
}

TEST(parse_url) {
        DestinationUrl u;
        static const char *const bad[] = {
                "",
                "http",
                "http:",
                "http:/x",
                "http:///",
                "http://",
                "http://:80/",
                "http://a..b/",
                "http://a../",
                "http://a.b..:80/",
                "http://.a/",
                "http://a b/",
                "http://a..b/",
                "http://a../",
                "http://a.b..:80/",
                "http://user@host/",
                "http://user:pw@host/",
                "http://host:/",
                "http://host:0/",
                "http://host:65536/",
                "http://host:1x/",
                "http://host:000080/",
                "http://[::1/",
                "http://[::1]x/",
                "http://[fe80::1%25eth0]/",
                "http://[1.2.3.4]/",
                "http://2130706433/",
                "http://0x7f000001/",
                "http://0x7f.0.0.1/",
                "http://127.1/",
                "http://127.0.0.01/",
                "http://1.2.3.4.5/",
                "http://256.0.0.1/",
                "http://a/\x7f",
                "http://h\xc3\xa9.example/",
                "http://host\\@evil/",
                "http://a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z.0123456789012345678901234567890123456789"
                "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
                "0123456789012345678901234567890123456789/",
                "http://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example/",
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                int r = destination_parse_url(bad[i], &u);
                if (r >= 0) {
                        fprintf(stderr, "accepted: %s (host %s)\n", bad[i], u.host);
                        abort();
                }
        }
        ASSERT_EQ_INT(destination_parse_url("ftp://x/", &u), -EPROTONOSUPPORT);
        ASSERT_EQ_INT(destination_parse_url("javascript://x/", &u), -EPROTONOSUPPORT);
        ASSERT_EQ_INT(destination_parse_url(NULL, &u), -EINVAL);

        ASSERT_OK(destination_parse_url("http://Example.COM./a?b#c", &u));
        ASSERT_EQ_STR(u.host, "example.com");
        ASSERT_EQ_INT(u.port, 80);
        ASSERT_TRUE(!u.https && !u.host_is_ip);
        ASSERT_OK(destination_parse_url("https://example.com:8443", &u));
        ASSERT_EQ_INT(u.port, 8443);
        ASSERT_TRUE(u.https);
        ASSERT_OK(destination_parse_url("https://[0:0:0:0:0:0:0:1]:9/", &u));
        ASSERT_EQ_STR(u.host, "::1");
        ASSERT_TRUE(u.host_is_ip);
        ASSERT_OK(destination_parse_url("http://[::FFFF:127.0.0.1]/", &u));
        ASSERT_EQ_STR(u.host, "::ffff:127.0.0.1");
        ASSERT_OK(destination_parse_url("http://192.168.1.1:65535?x", &u));
        ASSERT_EQ_STR(u.host, "192.168.1.1");
        ASSERT_EQ_INT(u.port, 65535);
        ASSERT_TRUE(u.host_is_ip);
        ASSERT_OK(destination_parse_url("http://under_score.example/", &u));
        ASSERT_OK(destination_parse_url("http://1host.example/#frag", &u));
        ASSERT_EQ_STR(u.host, "1host.example");
}

TEST(redirects) {
        DestinationPolicy *p = NULL;
        DestinationUrl from, to;
        char *extra[] = { (char *) "other.example", (char *) "127.0.0.2", NULL };

        ASSERT_OK(destination_policy_new("http://127.0.0.1:8080/api.php", "http://llm.example/v1", extra, &p));
        ASSERT_OK(destination_check_url(p, "http://127.0.0.1:8080/api.php", &from));

        ASSERT_OK(destination_check_redirect(p, &from, "http://127.0.0.1:8080/index.php", &to));
        ASSERT_OK(destination_check_redirect(p, &from, "https://127.0.0.1/x", &to));
        ASSERT_TRUE(to.https && to.port == 443);
        /* another host, named or not; IP literal of another host */
        ASSERT_EQ_INT(destination_check_redirect(p, &from, "http://127.0.0.2:8080/", &to), -EPERM);
        ASSERT_EQ_INT(destination_check_redirect(p, &from, "http://localhost:8080/", &to), -EPERM);
        ASSERT_EQ_INT(destination_check_redirect(p, &from, "http://llm.example/", &to), -EPERM);
        ASSERT_EQ_INT(destination_check_redirect(p, &from, "http://[::1]:8080/", &to), -EPERM);
        ASSERT_EQ_INT(destination_check_redirect(p, &from, "http://2130706433/", &to), -EINVAL);
        ASSERT_EQ_INT(destination_check_redirect(p, &from, "ftp://127.0.0.1/", &to), -EPERM);
        ASSERT_EQ_INT(destination_check_redirect(p, &from, "/relative", &to), -EINVAL);

        ASSERT_OK(destination_check_url(p, "http://llm.example/v1/chat/completions", &from));
        ASSERT_OK(destination_check_redirect(p, &from, "https://LLM.example./v2", &to));
        ASSERT_EQ_INT(destination_check_redirect(p, &from, "http://other.example/", &to), -EPERM);
        destination_policy_free(p);
}

TEST(policy_errors) {
        DestinationPolicy *p = NULL;
        char *bad[] = { (char *) "bad host", NULL };

        ASSERT_EQ_INT(destination_policy_new("ftp://x/", NULL, NULL, &p), -EPROTONOSUPPORT);
        ASSERT_EQ_INT(destination_policy_new("http://u@x/", NULL, NULL, &p), -EINVAL);
        ASSERT_EQ_INT(destination_policy_new(NULL, NULL, bad, &p), -EINVAL);
        ASSERT_OK(destination_policy_new(NULL, NULL, NULL, &p));
        ASSERT_EQ_INT(destination_check_url(p, "http://127.0.0.1/", NULL), -EPERM);
        destination_policy_free(p);
}

DEFINE_TEST_MAIN()
