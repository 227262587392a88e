/* SPDX-License-Identifier: MIT */
#include "shared/strv.h"
#include "shared/wiki-user.h"
#include "tests.h"

/* name and email as wiki_user_resolve() gives them ("-": NULL). */
static void check(const WikiUserMap *m, const char *identity, const char *name, const char *email) {
        _cleanup_free_ char *n = NULL, *e = NULL;

        ASSERT_OK(wiki_user_resolve(m, identity, &n, &e));
        if (streq(name, "-"))
                ASSERT_TRUE(!n);
        else
                ASSERT_EQ_STR(n, name);
        if (streq(email, "-"))
                ASSERT_TRUE(!e);
        else
                ASSERT_EQ_STR(e, email);
}

TEST(names_as_they_are) {
        WikiUserMap plain = { .from = WIKI_USER_FROM_NAME };
        char big[300];

        check(NULL, "Alice", "Alice", "-");
        check(&plain, "jdoe@CORP.EXAMPLE", "jdoe@CORP.EXAMPLE", "-");
        check(&plain, NULL, "-", "-");
        check(&plain, "", "-", "-");
        /* Never a wiki parameter: an anonymous reader, not a failure. */
        check(&plain, "A|B", "-", "-");
        check(&plain, "A\tB", "-", "-");
        check(&plain,
              "A\xc2\x85"
              "B",
              "-",
              "-"); /* U+0085, a C1 control */
        check(&plain, "\xff", "-", "-");
        memset(big, 'a', sizeof big - 1);
        big[sizeof big - 1] = 0;
        check(&plain, big, "-", "-");
        big[255] = 0;
        check(&plain, big, big, "-");
}

TEST(strip) {
        char *suffixes[] = { (char *) "@OTHER.TEST", (char *) "@CORP.EXAMPLE", NULL };
        char *prefixes[] = { (char *) "CORP\\", (char *) "EMEA\\", NULL };
        WikiUserMap m = { .from = WIKI_USER_FROM_NAME, .strip_suffixes = suffixes, .strip_prefixes = prefixes };

        check(&m, "jdoe@CORP.EXAMPLE", "jdoe", "-");
        check(&m, "jdoe@corp.example", "jdoe", "-");
        check(&m, "jdoe@other.test", "jdoe", "-");
        check(&m, "CORP\\jdoe", "jdoe", "-");
        check(&m, "emea\\jdoe", "jdoe", "-");
        check(&m, "corp\\jdoe@Corp.Example", "jdoe", "-");
        check(&m, "jdoe", "jdoe", "-");
        /* Another realm or domain stays: MediaWiki refuses "@" and "\" is not ours to drop. */
        check(&m, "jdoe@ELSEWHERE.EXAMPLE", "jdoe@ELSEWHERE.EXAMPLE", "-");
        check(&m, "OTHER\\jdoe", "OTHER\\jdoe", "-");
        /* Only one of each, and only at its end. */
        check(&m, "jdoe@CORP.EXAMPLE@CORP.EXAMPLE", "jdoe@CORP.EXAMPLE", "-");
        check(&m, "CORP\\CORP\\jdoe", "CORP\\jdoe", "-");
        check(&m, "jdoe@CORP.EXAMPLEx", "jdoe@CORP.EXAMPLEx", "-");
        /* Nothing left: an anonymous reader. */
        check(&m, "@CORP.EXAMPLE", "-", "-");
        check(&m, "CORP\\", "-", "-");
        check(&m, "CORP\\@CORP.EXAMPLE", "-", "-");
}

TEST(email) {
        WikiUserMap m = { .from = WIKI_USER_FROM_EMAIL };

        check(&m, "jdoe@Corp.Example", "-", "jdoe@Corp.Example");
        check(&m, "a@b@c", "-", "a@b@c");
        check(&m, "jdoe", "-", "-");
        check(&m, "@corp.example", "-", "-");
        check(&m, "jdoe@", "-", "-");
        check(&m, "a|b@corp.example", "-", "-");
        check(&m, NULL, "-", "-");
}

TEST(settings) {
        ASSERT_EQ_INT(wiki_user_from_from_string("name"), WIKI_USER_FROM_NAME);
        ASSERT_EQ_INT(wiki_user_from_from_string("email"), WIKI_USER_FROM_EMAIL);
        ASSERT_EQ_INT(wiki_user_from_from_string("Email"), -EINVAL);
        ASSERT_EQ_INT(wiki_user_from_from_string("sub"), -EINVAL);
        ASSERT_EQ_INT(wiki_user_from_from_string(NULL), -EINVAL);
        ASSERT_EQ_STR(wiki_user_from_to_string(WIKI_USER_FROM_EMAIL), "email");
        ASSERT_TRUE(!wiki_user_from_to_string(_WIKI_USER_FROM_MAX));

        ASSERT_TRUE(wiki_user_suffix_is_valid("@CORP.EXAMPLE"));
        ASSERT_TRUE(wiki_user_suffix_is_valid("@b\xc3\xbcro.example"));
        ASSERT_TRUE(!wiki_user_suffix_is_valid("CORP.EXAMPLE"));
        ASSERT_TRUE(!wiki_user_suffix_is_valid("@"));
        ASSERT_TRUE(!wiki_user_suffix_is_valid("@a@b"));
        ASSERT_TRUE(!wiki_user_suffix_is_valid("@a b"));
        ASSERT_TRUE(!wiki_user_suffix_is_valid("@a|b"));
        ASSERT_TRUE(!wiki_user_suffix_is_valid("@a\x01"));
        ASSERT_TRUE(!wiki_user_suffix_is_valid("@\xff"));
        ASSERT_TRUE(!wiki_user_suffix_is_valid(NULL));

        ASSERT_TRUE(wiki_user_prefix_is_valid("CORP\\"));
        ASSERT_TRUE(!wiki_user_prefix_is_valid("\\"));
        ASSERT_TRUE(!wiki_user_prefix_is_valid("CORP"));
        ASSERT_TRUE(!wiki_user_prefix_is_valid("CORP\\\\"));
        ASSERT_TRUE(!wiki_user_prefix_is_valid("A\\B\\"));
        ASSERT_TRUE(!wiki_user_prefix_is_valid("CO RP\\"));
        ASSERT_TRUE(!wiki_user_prefix_is_valid("C@\\"));
        ASSERT_TRUE(!wiki_user_prefix_is_valid(NULL));
        {
                char long_prefix[WIKI_USER_AFFIX_MAX + 2];

                memset(long_prefix, 'A', sizeof long_prefix);
                long_prefix[WIKI_USER_AFFIX_MAX - 1] = '\\';
                long_prefix[WIKI_USER_AFFIX_MAX] = 0;
                ASSERT_TRUE(wiki_user_prefix_is_valid(long_prefix));
                long_prefix[WIKI_USER_AFFIX_MAX] = '\\';
                long_prefix[WIKI_USER_AFFIX_MAX - 1] = 'A';
                long_prefix[WIKI_USER_AFFIX_MAX + 1] = 0;
                ASSERT_TRUE(!wiki_user_prefix_is_valid(long_prefix));
        }
}

DEFINE_TEST_MAIN()
