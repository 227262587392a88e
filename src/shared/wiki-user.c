/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "shared/macro.h"
#include "shared/utf8.h"
#include "shared/wiki-user.h"

static const char *const wiki_user_from_table[_WIKI_USER_FROM_MAX] = {
        [WIKI_USER_FROM_NAME] = "name",
        [WIKI_USER_FROM_EMAIL] = "email",
};

const char *wiki_user_from_to_string(WikiUserFrom f) {
        return f >= 0 && f < _WIKI_USER_FROM_MAX ? wiki_user_from_table[f] : NULL;
}

WikiUserFrom wiki_user_from_from_string(const char *s) {
        for (WikiUserFrom f = 0; s && f < _WIKI_USER_FROM_MAX; f++)
                if (streq(s, wiki_user_from_table[f]))
                        return f;
        return _WIKI_USER_FROM_INVALID;
}

/* 1..max bytes of valid UTF-8 without controls (C0, DEL, C1) or any byte of
 * refused. */
static bool text_is_plain(const char *s, size_t max, const char *refused) {
        size_t n = strlen(s);

        if (n < 1 || n > max || !utf8_is_valid(s, n))
                return false;
        for (size_t i = 0; i < n;) {
                uint32_t cp;
                size_t l = utf8_decode((const uint8_t *) s + i, n - i, &cp);

                if (l == 0 || cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) ||
                    (cp < 0x80 && strchr(refused, (int) cp)))
                        return false;
                i += l;
        }
        return true;
}

bool wiki_user_suffix_is_valid(const char *v) {
        return v && v[0] == '@' && text_is_plain(v + 1, WIKI_USER_AFFIX_MAX - 1, " \t@|,");
}

bool wiki_user_prefix_is_valid(const char *v) {
        size_t n;
        _cleanup_free_ char *head = NULL;

        if (!v)
                return false;
        n = strlen(v);
        if (n < 2 || n > WIKI_USER_AFFIX_MAX || v[n - 1] != '\\')
                return false;
        head = strndup(v, n - 1);
        return head && text_is_plain(head, WIKI_USER_AFFIX_MAX - 1, " \t@|,\\");
}

/* MediaWiki's limit of a parameter the client sends (mediawiki.h's
 * MEDIAWIKI_TITLE_MAX). */
#define WIKI_USER_PARAM_MAX 255

int wiki_user_resolve(const WikiUserMap *map, const char *identity, char **ret_name, char **ret_email) {
        const char *s, *e;
        char *v;

        assert(ret_name);
        assert(ret_email);

        *ret_name = *ret_email = NULL;
        if (!identity || !text_is_plain(identity, WIKI_USER_PARAM_MAX, "|"))
                return 0; /* anonymous */

        s = identity;
        e = identity + strlen(identity);
        if (map && map->from == WIKI_USER_FROM_EMAIL) {
                const char *at = strrchr(identity, '@');

                if (!at || at == identity || !at[1])
                        return 0;
                v = strdup(identity);
                if (!v)
                        return -ENOMEM;
                *ret_email = v;
                return 0;
        }

        for (char **p = map ? map->strip_suffixes : NULL; p && *p; p++) {
                size_t n = strlen(*p);

                if ((size_t) (e - s) >= n && strncasecmp(e - n, *p, n) == 0) {
                        e -= n;
                        break;
                }
        }
        for (char **p = map ? map->strip_prefixes : NULL; p && *p; p++) {
                size_t n = strlen(*p);

                if ((size_t) (e - s) >= n && strncasecmp(s, *p, n) == 0) {
                        s += n;
                        break;
                }
        }
        if (s >= e)
                return 0;
        v = strndup(s, (size_t) (e - s));
        if (!v)
                return -ENOMEM;
        *ret_name = v;
        return 0;
}
