/* SPDX-License-Identifier: MIT */
#include "shared/macro.h"
#include "store/wording.h"
#include "tests.h"

static void check_key(const char *question, const char *want) {
        _cleanup_free_ char *k = NULL;

        ASSERT_OK(wording_key(question, &k));
        ASSERT_EQ_STR(k, want);
}

TEST(wording_key) {
        check_key("What is the parking policy?", "parking policy");
        check_key("Parking policy for visitors?", "parking policy visitor");
        check_key("  the PARKING   policy!!", "parking policy");
        check_key("parking's policies", "parking policy");
        /* Not over-stemmed. */
        check_key("bus analysis class", "analysis bus class");
        /* German, French, Spanish stop words; accents kept, case folded. */
        check_key("Wie ist die Parkplatz-Regelung für Besucher?", "besucher parkplatz regelung");
        check_key("Quelle est la politique de l'hôtel ?", "hôtel politique");
        check_key("¿Cuál es la POLÍTICA de estacionamiento?", "estacionamiento política");
        check_key("ÉTÉ Été", "été");
        /* Only stop words: they are the key. */
        check_key("What is it?", "is it what");
        check_key("?!", "");
        check_key("", "");
        /* Invalid UTF-8 is a separator, not a crash. */
        check_key(
                "park\xff"
                "ing",
                "ing park");
        /* Digits are words. */
        check_key("Room 101 booking", "101 booking room");
}

TEST(wording_similarity) {
        ASSERT_TRUE(wording_similarity("parking policy", "parking policy visitor") > 0.66);
        ASSERT_TRUE(wording_similarity("parking policy", "policy travel") < WORDING_SIMILARITY_MIN);
        ASSERT_TRUE(wording_similarity("", "") == 1.0);
        ASSERT_TRUE(wording_similarity("a", "") == 0.0);
}

static size_t group_of(const char *const *questions, size_t n, size_t *groups) {
        char *keys[16];
        size_t n_groups = 0;

        ASSERT_TRUE(n <= 16);
        for (size_t i = 0; i < n; i++)
                ASSERT_OK(wording_key(questions[i], &keys[i]));
        ASSERT_OK(wording_group((const char *const *) keys, n, groups, &n_groups));
        for (size_t i = 0; i < n; i++)
                free(keys[i]);
        return n_groups;
}

TEST(wording_group) {
        const char *q[] = {
                "What is the parking policy?",
                "Parking policy for visitors?",
                "What is the travel policy?",
                "How do I book a meeting room?",
                "Book meeting rooms",
                "Travel expenses policy",
                "parking",
                "What is it?",
                "?",
                "!",
        };
        size_t g[ELEMENTSOF(q)];
        size_t n = group_of(q, ELEMENTSOF(q), g);

        /* Wordings of one question: one group. */
        ASSERT_EQ_INT(g[1], g[0]);
        ASSERT_EQ_INT(g[4], g[3]);
        ASSERT_EQ_INT(g[5], g[2]); /* "expense policy travel" ~ "policy travel": 2/3 */
        ASSERT_EQ_INT(g[6], g[0]); /* "parking" ~ "parking policy": 1/2 */
        ASSERT_EQ_INT(g[9], g[8]); /* two empty keys */
        /* Different questions sharing a word: not one group. */
        ASSERT_TRUE(g[2] != g[0]);
        ASSERT_TRUE(g[3] != g[0]);
        ASSERT_TRUE(g[7] != g[0]);
        ASSERT_TRUE(g[8] != g[7]);
        /* Numbered in founding order. */
        ASSERT_EQ_INT(g[0], 0);
        ASSERT_EQ_INT(g[2], 1);
        ASSERT_EQ_INT(g[3], 2);
        ASSERT_EQ_INT(n, 5);
}

TEST(wording_group_order_decides) {
        /* A key similar to two groups joins the older one. */
        const char *q[] = { "parking policy", "travel policy", "parking travel policy" };
        size_t g[3];

        ASSERT_EQ_INT(group_of(q, 3, g), 2);
        ASSERT_EQ_INT(g[2], 0);
}

TEST(wording_group_many) {
        /* Many distinct keys: each its own group, found through the index. */
        enum { N = 3000 };
        char *keys[N];
        size_t *g = calloc(N, sizeof(size_t)), n = 0;

        ASSERT_TRUE(g);
        for (size_t i = 0; i < N; i++)
                ASSERT_TRUE(asprintf(&keys[i], "common w%zu x%zu", i, i) > 0);
        ASSERT_OK(wording_group((const char *const *) keys, N, g, &n));
        ASSERT_EQ_INT(n, N);
        for (size_t i = 0; i < N; i++)
                free(keys[i]);
        free(g);
}

DEFINE_TEST_MAIN()
