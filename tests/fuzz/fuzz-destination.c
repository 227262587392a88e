/* SPDX-License-Identifier: MIT */
/* Fuzz target for the destination policy (src/query/destination.c). The
 * input is "POLICY_URL\nEXTRA_HOST\nURL\nREDIRECT" (missing lines are
 * empty); the rest is used as a socket address. Besides memory errors it
 * checks:
 *  - a URL that passes the check names a host the policy names, and
 *    re-parsing "scheme://host:port/" built from the parts gives the same
 *    parts (the normalised host is a fixed point);
 *  - a host that parses as an IP literal is a canonical inet_ntop() form;
 *  - an allowed redirect keeps the host;
 *  - a special address is allowed only for a named host, a named DNS name
 *    may reach any address, an IP literal only its own. */

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>

#include "query/destination.h"
#include "shared/macro.h"
#include "fuzz.h"

static void check_fixed_point(const DestinationUrl *u) {
        char buf[DESTINATION_HOST_MAX + 64];
        DestinationUrl v;
        bool v6 = strchr(u->host, ':');

        (void) snprintf(
                buf,
                sizeof buf,
                "%s://%s%s%s:%u/",
                u->https ? "https" : "http",
                v6 ? "[" : "",
                u->host,
                v6 ? "]" : "",
                (unsigned) u->port);
        CHECK(destination_parse_url(buf, &v) == 0);
        CHECK(streq(v.host, u->host));
        CHECK(v.port == u->port && v.https == u->https && v.host_is_ip == u->host_is_ip);
        if (u->host_is_ip) {
                unsigned char a[16];
                char canon[INET6_ADDRSTRLEN];
                int fam = v6 ? AF_INET6 : AF_INET;

                CHECK(inet_pton(fam, u->host, a) == 1);
                CHECK(inet_ntop(fam, a, canon, sizeof canon));
                CHECK(streq(canon, u->host));
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *lines[4] = { 0 };
        const uint8_t *p = data, *end = data + size;
        DestinationPolicy *policy = NULL;
        DestinationUrl u, r;
        char *extra[2] = { 0 };

        if (size > 4 * DESTINATION_URL_MAX)
                return 0;
        for (size_t i = 0; i < ELEMENTSOF(lines); i++) {
                const uint8_t *nl = p < end ? memchr(p, '\n', (size_t) (end - p)) : NULL;
                size_t n = nl ? (size_t) (nl - p) : (size_t) (end - p);

                lines[i] = strndup((const char *) p, n);
                if (!lines[i])
                        goto out;
                p = nl ? nl + 1 : end;
        }

        if (destination_parse_url(lines[0], &u) == 0)
                check_fixed_point(&u);
        if (destination_parse_url(lines[2], &u) == 0)
                check_fixed_point(&u);

        extra[0] = *lines[1] ? lines[1] : NULL;
        if (destination_policy_new(*lines[0] ? lines[0] : NULL, NULL, extra, &policy) < 0)
                goto out;

        if (destination_check_url(policy, lines[2], &u) == 0) {
                CHECK(destination_host_named(policy, u.host));
                check_fixed_point(&u);
                if (u.host_is_ip) {
                        /* the literal's own address is allowed, as a socket address */
                        struct sockaddr_in6 s6 = { .sin6_family = AF_INET6 };
                        struct sockaddr_in s4 = { .sin_family = AF_INET };
                        if (strchr(u.host, ':')) {
                                CHECK(inet_pton(AF_INET6, u.host, &s6.sin6_addr) == 1);
                                CHECK(destination_address_allowed(
                                        policy, u.host, (struct sockaddr *) &s6, sizeof s6));
                        } else {
                                CHECK(inet_pton(AF_INET, u.host, &s4.sin_addr) == 1);
                                CHECK(destination_address_allowed(
                                        policy, u.host, (struct sockaddr *) &s4, sizeof s4));
                        }
                }
                if (destination_check_redirect(policy, &u, lines[3], &r) == 0) {
                        CHECK(streq(r.host, u.host));
                        CHECK(destination_host_named(policy, r.host));
                }

                /* The remaining bytes as an address. */
                if (end - p >= 16) {
                        struct sockaddr_in6 in6 = { .sin6_family = AF_INET6 };
                        memcpy(&in6.sin6_addr, p, 16);
                        if (destination_address_allowed(
                                    policy, "unnamed.invalid", (struct sockaddr *) &in6, sizeof in6))
                                CHECK(!destination_address_is_special((struct sockaddr *) &in6, sizeof in6));
                        if (!u.host_is_ip)
                                CHECK(destination_address_allowed(
                                        policy, u.host, (struct sockaddr *) &in6, sizeof in6));
                } else if (end - p >= 4) {
                        struct sockaddr_in in = { .sin_family = AF_INET };
                        memcpy(&in.sin_addr, p, 4);
                        if (destination_address_allowed(
                                    policy, "unnamed.invalid", (struct sockaddr *) &in, sizeof in))
                                CHECK(!destination_address_is_special((struct sockaddr *) &in, sizeof in));
                        if (!u.host_is_ip)
                                CHECK(destination_address_allowed(
                                        policy, u.host, (struct sockaddr *) &in, sizeof in));
                }
        }
out:
        destination_policy_free(policy);
        for (size_t i = 0; i < ELEMENTSOF(lines); i++)
                free(lines[i]);
        return 0;
}
