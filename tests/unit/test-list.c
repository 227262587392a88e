/* SPDX-License-Identifier: MIT */
#include "shared/list.h"
#include "tests.h"

typedef struct Item Item;
struct Item {
        int value;
        Item *item_prev, *item_next;
};

/* The values from head to tail, and the back links checked on the way. */
static void check(Item *head, const int *expected, size_t n) {
        size_t i = 0;

        ASSERT_TRUE(!head || !head->item_prev);
        for (Item *p = head; p; p = p->item_next, i++) {
                ASSERT_TRUE(i < n);
                ASSERT_EQ_INT(p->value, expected[i]);
                ASSERT_TRUE(!p->item_next || p->item_next->item_prev == p);
        }
        ASSERT_EQ_INT(i, n);
}

TEST(prepend_remove) {
        Item a = { .value = 1 }, b = { .value = 2 }, c = { .value = 3 };
        Item *head = NULL;

        LIST_PREPEND(item, head, &a);
        LIST_PREPEND(item, head, &b);
        LIST_PREPEND(item, head, &c);
        check(head, (const int[]){ 3, 2, 1 }, 3);

        LIST_REMOVE(item, head, &b); /* the middle */
        check(head, (const int[]){ 3, 1 }, 2);
        ASSERT_TRUE(!b.item_prev && !b.item_next);

        LIST_REMOVE(item, head, &c); /* the head */
        check(head, (const int[]){ 1 }, 1);

        LIST_PREPEND(item, head, &b);
        LIST_REMOVE(item, head, &a); /* the tail */
        check(head, (const int[]){ 2 }, 1);

        LIST_REMOVE(item, head, &b); /* the last one */
        ASSERT_TRUE(head == NULL);
}

DEFINE_TEST_MAIN()
