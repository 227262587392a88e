/* SPDX-License-Identifier: MIT */
#include "shared/strv.h"
#include "tests.h"

TEST(strv_length) {
        char *const three[] = { (char *) "a", (char *) "b", (char *) "", NULL };
        char *const none[] = { NULL };

        ASSERT_EQ_INT(strv_length(NULL), 0);
        ASSERT_EQ_INT(strv_length(none), 0);
        ASSERT_EQ_INT(strv_length(three), 3);
}

TEST(strv_free) {
        char **l = calloc(3, sizeof(char *));

        ASSERT_TRUE(l);
        ASSERT_TRUE(l[0] = strdup("one"));
        ASSERT_TRUE(l[1] = strdup("two"));
        /* Frees every string and the array (ASan's leak check sees it),
         * returns NULL, and takes NULL. */
        ASSERT_TRUE(strv_free(l) == NULL);
        ASSERT_TRUE(strv_free(NULL) == NULL);
}

TEST(strv_freep) {
        _cleanup_(strv_freep) char **l = calloc(2, sizeof(char *));
        _cleanup_(strv_freep) char **empty = NULL;

        ASSERT_TRUE(l);
        ASSERT_TRUE(l[0] = strdup("freed on scope exit"));
        /* A NULL strv is fine for the cleanup too. */
        ASSERT_EQ_INT(strv_length(empty), 0);
}

TEST(strv_copy) {
        char *l[] = { (char *) "one", (char *) "two", NULL };
        _cleanup_(strv_freep) char **c = strv_copy(l), **e = strv_copy(NULL);

        ASSERT_TRUE(c && c[0] != l[0]);
        ASSERT_EQ_INT(strv_length(c), 2);
        ASSERT_EQ_STR(c[0], "one");
        ASSERT_EQ_STR(c[1], "two");
        ASSERT_TRUE(e && !e[0]);
}

TEST(strv_contains) {
        char *l[] = { (char *) "one", (char *) "", NULL };

        ASSERT_TRUE(strv_contains(l, "one"));
        ASSERT_TRUE(strv_contains(l, ""));
        ASSERT_TRUE(!strv_contains(l, "One"));
        ASSERT_TRUE(!strv_contains(NULL, "one"));
}

TEST(strv_extend_unique) {
        _cleanup_(strv_freep) char **l = NULL;
        size_t n = 0;

        /* From NULL; a second "a" is not added; the array stays terminated. */
        ASSERT_OK(strv_extend_unique(&l, &n, "a"));
        ASSERT_OK(strv_extend_unique(&l, &n, "b"));
        ASSERT_OK(strv_extend_unique(&l, &n, "a"));
        ASSERT_EQ_INT(n, 2);
        ASSERT_EQ_INT(strv_length(l), 2);
        ASSERT_EQ_STR(l[0], "a");
        ASSERT_EQ_STR(l[1], "b");
        ASSERT_TRUE(!l[2]);
}

TEST(strv_split_list) {
        _cleanup_(strv_freep) char **l = NULL;
        _cleanup_(strv_freep) char **empty = NULL;
        _cleanup_(strv_freep) char **blank = NULL;

        ASSERT_OK(strv_split_list(" a, b c ,,\tc\t,", &l));
        ASSERT_EQ_INT(strv_length(l), 3);
        ASSERT_EQ_STR(l[0], "a");
        ASSERT_EQ_STR(l[1], "b c");
        ASSERT_EQ_STR(l[2], "c");
        ASSERT_OK(strv_split_list(NULL, &empty));
        ASSERT_TRUE(empty && !empty[0]);
        ASSERT_OK(strv_split_list(" , ,\t", &blank));
        ASSERT_TRUE(blank && !blank[0]);
}

DEFINE_TEST_MAIN()
