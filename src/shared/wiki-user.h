/* SPDX-License-Identifier: MIT */
#pragma once

#include <errno.h>
#include <stdbool.h>

/* The sign-on's name for a person as a wiki account (API.md "Whose name"):
 * WIKI_WEB_WIKI_USER_FROM, WIKI_WEB_WIKI_USER_STRIP_SUFFIXES and
 * WIKI_WEB_WIKI_USER_STRIP_PREFIXES. Pure: the wiki itself answers which
 * account a name or an address is (the extension WikiwebReadCheck), at
 * every read check; nothing here is cached. */

typedef enum WikiUserFrom {
        WIKI_USER_FROM_NAME,  /* the identity name is the wiki user name */
        WIKI_USER_FROM_EMAIL, /* the identity is an e-mail address: the wiki says whose */
        _WIKI_USER_FROM_MAX,
        _WIKI_USER_FROM_INVALID = -EINVAL,
} WikiUserFrom;

/* "name", "email"; NULL out of range. And back: _WIKI_USER_FROM_INVALID for
 * anything else. */
const char *wiki_user_from_to_string(WikiUserFrom f);
WikiUserFrom wiki_user_from_from_string(const char *s);

#define WIKI_USER_AFFIX_MAX 128 /* bytes of one suffix or prefix */

typedef struct WikiUserMap {
        WikiUserFrom from;
        char **strip_suffixes; /* each "@..."; NULL or empty: none */
        char **strip_prefixes; /* each "...\"; NULL or empty: none */
} WikiUserMap;

/* Whether v may be listed in WIKI_WEB_WIKI_USER_STRIP_SUFFIXES: "@" and 1 to
 * WIKI_USER_AFFIX_MAX - 1 more bytes of valid UTF-8 without control
 * characters, blanks, "@", "|" or ","; in ..._PREFIXES: the same before a
 * final "\", without another "\". */
bool wiki_user_suffix_is_valid(const char *v);
bool wiki_user_prefix_is_valid(const char *v);

/* Whom the wiki is asked about for identity (NULL: an anonymous session):
 * exactly one of *ret_name and *ret_email is set (owned by the caller), or
 * neither for an anonymous reader.
 * - from name: the identity less the first listed suffix that ends it and
 *   then the first listed prefix that begins it, each matched with ASCII
 *   letters case-insensitive; what is left is the wiki user name (MediaWiki
 *   normalises it). Nothing left: an anonymous reader.
 * - from email: the identity as it is, if it has the form of an address
 *   (something, "@", something); else an anonymous reader.
 * A name or an address that cannot be a wiki parameter (over 255 bytes, a
 * "|", a control character) is never an account: an anonymous reader.
 * map NULL: names as they are. Returns 0 or -ENOMEM. */
int wiki_user_resolve(const WikiUserMap *map, const char *identity, char **ret_name, char **ret_email);
