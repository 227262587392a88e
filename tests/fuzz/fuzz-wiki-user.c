/* SPDX-License-Identifier: MIT */
/* Fuzz target for whose permissions a read check uses (API.md "Whose
 * name"): the first byte's bit 0 picks the part, bit 1 the mode.
 * - bit 0 clear: the reader of a WikiwebReadCheck reply
 *   (mediawiki_parse_reader(), asked by e-mail with bit 1), the rest the
 *   reply. What it accepts is consistent: an account exactly when "one"
 *   was answered to an address, a name that is a valid title, and
 *   "several" never with a name.
 * - bit 0 set: wiki_user_resolve() of the rest as an identity, with
 *   suffixes and prefixes (bit 1 clear) or by e-mail (set). What comes out
 *   is a valid parameter for the wiki, shorter than or as long as the
 *   identity, and at most one of a name and an address. */

#include <stdint.h>
#include <string.h>

#include "query/mediawiki.h"
#include "shared/macro.h"
#include "shared/wiki-user.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static char *suffixes[] = { (char *) "@CORP.EXAMPLE", (char *) "@b\xc3\xbcro.test", NULL };
        static char *prefixes[] = { (char *) "CORP\\", NULL };
        bool by_email;

        if (size < 1 || size > 64 * 1024)
                return 0;
        by_email = data[0] & 2;

        if (!(data[0] & 1)) {
                MediaWikiReader reader = { 0 };
                MediaWikiError e = { 0 };

                if (mediawiki_parse_reader((const char *) data + 1, size - 1, by_email, &reader, &e) == 0) {
                        if (reader.user)
                                CHECK(mediawiki_title_is_valid(reader.user));
                        if (by_email) {
                                CHECK(reader.accounts >= 0 && reader.accounts < _MEDIAWIKI_ACCOUNTS_MAX);
                                CHECK((reader.accounts == MEDIAWIKI_ACCOUNTS_ONE) == !!reader.user);
                        } else
                                CHECK(reader.accounts == _MEDIAWIKI_ACCOUNTS_INVALID);
                }
                mediawiki_reader_done(&reader);
                mediawiki_error_done(&e);
        } else {
                WikiUserMap m = by_email ? (WikiUserMap){ .from = WIKI_USER_FROM_EMAIL } :
                                           (WikiUserMap){ .from = WIKI_USER_FROM_NAME,
                                                          .strip_suffixes = suffixes,
                                                          .strip_prefixes = prefixes };
                char *identity = strndup((const char *) data + 1, size - 1);
                char *name = NULL, *email = NULL;

                if (!identity)
                        return 0;
                if (wiki_user_resolve(&m, identity, &name, &email) == 0) {
                        CHECK(!(name && email));
                        CHECK(!email || by_email);
                        if (name) {
                                CHECK(mediawiki_title_is_valid(name));
                                CHECK(strlen(name) <= strlen(identity));
                                CHECK(strstr(identity, name));
                        }
                        if (email) {
                                CHECK(mediawiki_title_is_valid(email));
                                CHECK(streq(email, identity) && strchr(email, '@'));
                        }
                }
                free(name);
                free(email);
                free(identity);
        }
        return 0;
}
