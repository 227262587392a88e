/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Addresses and prefixes of the trusted reverse proxies
 * (WIKI_WEB_TRUSTED_PROXIES, API.md "Identity"): parsed strictly, matched
 * against the connection's own address. Pure: no I/O, no allocation.
 *
 * An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is an IPv4 address, as a
 * peer and as an entry, so that a dual-stack socket's peer matches an IPv4
 * entry and nothing else. */

typedef struct NetAddress {
        int family;        /* AF_INET or AF_INET6 */
        uint8_t bytes[16]; /* network order; the first 4 for AF_INET */
} NetAddress;

typedef struct NetPrefix {
        NetAddress address;  /* its bits past prefix_len are zero */
        unsigned prefix_len; /* 1..32 (AF_INET), 1..128 (AF_INET6) */
} NetPrefix;

/* Whether s is an IPv4 dotted quad in its strict shape: four decimal
 * numbers of 1..3 digits without leading zeros. inet_pton(AF_INET) still
 * checks each is 0..255; it already refuses the short and the octal or hex
 * forms that inet_aton() reads, but some libcs take "010" as ten. */
bool net_ipv4_is_strict(const char *s);

/* The longest entry accepted: a full IPv6 address with an embedded IPv4
 * and "/128". */
#define NET_PREFIX_STRING_MAX 64

/* Parse "ADDRESS" or "ADDRESS/LEN" (s[0..len), not NUL-terminated; any
 * bytes). IPv4 is dotted quad only (no octal, hex or short forms, no
 * leading zeros); IPv6 as inet_pton() reads it, without a zone; an address
 * without a prefix is one host (/32, /128); the length is decimal without
 * sign or leading zero. Refused:
 *   -EPERM  a wildcard: "*", a zero-length prefix, the unspecified address
 *           as a host (0.0.0.0, ::), which each mean "any peer";
 *   -EINVAL anything else malformed, bits set past the prefix length
 *           ("10.0.0.1/8" is a mistake for 10.0.0.0/8 or 10.0.0.1/32), an
 *           IPv4-mapped prefix shorter than /96.
 * Returns 0 and fills *ret only on success. */
int net_prefix_parse(const char *s, size_t len, NetPrefix *ret);

/* The address of a socket (AF_INET, AF_INET6; a mapped IPv6 address is
 * returned as AF_INET). -EAFNOSUPPORT for other families (AF_UNIX),
 * -EINVAL for a short length. */
int net_address_from_sockaddr(const struct sockaddr *sa, socklen_t len, NetAddress *ret);

/* Whether a lies in p (same family, the first prefix_len bits equal). */
bool net_prefix_contains(const NetPrefix *p, const NetAddress *a);

/* Whether a lies in any of the n prefixes. */
bool net_prefix_list_contains(const NetPrefix *prefixes, size_t n, const NetAddress *a);

/* "a.b.c.d/n" or "x:y::z/n" into buf (NUL-terminated); the canonical form,
 * which net_prefix_parse() reads back to the same prefix. */
void net_prefix_format(const NetPrefix *p, char buf[static NET_PREFIX_STRING_MAX]);
/* The address alone (no prefix), for log lines. */
void net_address_format(const NetAddress *a, char buf[static NET_PREFIX_STRING_MAX]);
