/* SPDX-License-Identifier: MIT */
/* src/query/conversation.c: the earlier turns of a follow-up within a
 * budget (the oldest leave first, the one before always stays, cut when it
 * alone is too large), the note of each turn's pages, and the agent's
 * messages of a follow-up. */

#include <stdlib.h>
#include <string.h>

#include "query/agent.h"
#include "query/conversation.h"
#include "shared/macro.h"
#include "shared/utf8.h"
#include "tests.h"

static const Source sources[] = {
        { .title = (char *) "Apple", .url = (char *) "u", .revision_id = 12, .has_revision_id = true },
        { .title = (char *) "Lyon \"roastery\"", .url = (char *) "u", .revision_id = 9, .has_revision_id = true },
};

static size_t cost_of(const ConversationMessages *m) {
        size_t c = 0;

        for (size_t i = 0; i < 2 * m->n_kept; i++)
                c += conversation_message_cost(m->texts[i]);
        return c;
}

TEST(all_fit) {
        const QueryTurn turns[] = {
                { .question = "Who roasts in Lyon?",
                  .answer = "Ines Marchetti [1].",
                  .sources = sources,
                  .n_sources = 2 },
                { .question = "Failed one?", .answer = NULL },
        };
        _cleanup_(conversation_messages_done) ConversationMessages m = { .texts = NULL };

        ASSERT_OK(conversation_build(turns, 2, 100000, &m));
        ASSERT_EQ_INT(m.n_kept, 2);
        ASSERT_EQ_INT(m.n_dropped, 0);
        ASSERT_TRUE(!m.cut);
        ASSERT_EQ_STR(m.texts[0], "Who roasts in Lyon?");
        ASSERT_EQ_STR(
                m.texts[1],
                "Ines Marchetti [1].\n\n[Pages read for this answer, with the revision read: \"Apple\" (revision "
                "12); \"Lyon \"roastery\"\" (revision 9). To quote one of them now, read it again with wiki_read.]");
        ASSERT_EQ_STR(m.texts[2], "Failed one?");
        ASSERT_EQ_STR(m.texts[3], "(No answer: this question failed.)");
        ASSERT_TRUE(m.texts[4] == NULL);
        ASSERT_EQ_INT(m.cost, cost_of(&m));

        ASSERT_EQ_INT(conversation_build(turns, 0, 100, &m), -EINVAL);
}

TEST(oldest_leave_first) {
        char answers[10][1001];
        QueryTurn turns[10];
        size_t one;

        for (size_t i = 0; i < 10; i++) {
                memset(answers[i], 'a' + (char) i, 1000);
                answers[i][1000] = 0;
                turns[i] = (QueryTurn){ .question = "q?", .answer = answers[i] };
        }
        one = conversation_message_cost("q?") + conversation_message_cost(answers[0]);

        /* Budgets from one turn to all ten: the newest k that fit stay. */
        for (size_t k = 1; k <= 10; k++) {
                _cleanup_(conversation_messages_done) ConversationMessages m = { .texts = NULL };

                ASSERT_OK(conversation_build(turns, 10, k * one + one - 1, &m));
                ASSERT_EQ_INT(m.n_kept, k);
                ASSERT_EQ_INT(m.n_dropped, 10 - k);
                ASSERT_TRUE(!m.cut);
                ASSERT_TRUE(m.cost <= k * one + one - 1);
                /* The kept ones are the newest, oldest first. */
                for (size_t i = 0; i < k; i++)
                        ASSERT_TRUE(m.texts[2 * i + 1][0] == 'a' + (char) (10 - k + i));
        }
}

/* The turn just before, alone over the budget: cut (the answer first, at a
 * UTF-8 boundary, marked), never dropped, whatever the budget. */
TEST(previous_turn_cut) {
        _cleanup_free_ char *answer = malloc(3 * 5000 + 1), *question = malloc(4000 + 1);
        QueryTurn turns[2];

        ASSERT_TRUE(answer && question);
        for (size_t i = 0; i < 5000; i++)
                memcpy(answer + 3 * i, "\xe2\x82\xac", 3); /* € */
        answer[3 * 5000] = 0;
        memset(question, '"', 4000); /* each costs 2 */
        question[4000] = 0;
        turns[0] = (QueryTurn){ .question = "old", .answer = "old answer" };
        turns[1] = (QueryTurn){ .question = question, .answer = answer, .sources = sources, .n_sources = 2 };

        for (size_t budget = 0; budget < 20000; budget += 997) {
                _cleanup_(conversation_messages_done) ConversationMessages m = { .texts = NULL };
                size_t floor = 2 * conversation_message_cost(CONVERSATION_CUT_MARK);

                ASSERT_OK(conversation_build(turns, 2, budget, &m));
                ASSERT_EQ_INT(m.n_kept, 1);
                ASSERT_EQ_INT(m.n_dropped, 1);
                ASSERT_TRUE(m.cut);
                ASSERT_TRUE(m.cost <= MAX(budget, floor));
                ASSERT_EQ_INT(m.cost, cost_of(&m));
                ASSERT_TRUE(utf8_is_valid(m.texts[1], strlen(m.texts[1])));
                ASSERT_TRUE(strstr(m.texts[1], CONVERSATION_CUT_MARK));
                /* The answer goes first: the question is whole while it can be. */
                if (budget >=
                    conversation_message_cost(question) + conversation_message_cost(CONVERSATION_CUT_MARK))
                        ASSERT_EQ_STR(m.texts[0], question);
                else
                        ASSERT_TRUE(strstr(m.texts[0], CONVERSATION_CUT_MARK));
        }
}

TEST(many_pages) {
        char titles[25][8];
        Source pages[25];
        QueryTurn t;
        _cleanup_(conversation_messages_done) ConversationMessages m = { .texts = NULL };

        for (int i = 0; i < 25; i++) {
                snprintf(titles[i], sizeof titles[i], "P%d", i);
                pages[i] = (Source){ .title = titles[i], .revision_id = (uint64_t) i, .has_revision_id = true };
        }
        /* A source whose revision is not known is named without one. */
        pages[1].has_revision_id = false;
        t = (QueryTurn){ .question = "q", .answer = "a", .sources = pages, .n_sources = 25 };
        ASSERT_OK(conversation_build(&t, 1, 100000, &m));
        ASSERT_TRUE(strstr(m.texts[1], "\"P0\" (revision 0); \"P1\"; \"P2\" (revision 2)"));
        ASSERT_TRUE(strstr(m.texts[1], "\"P19\" (revision 19); and 5 more"));
        ASSERT_TRUE(!strstr(m.texts[1], "P20"));

        /* No sources: no note. */
        conversation_messages_done(&m);
        t.n_sources = 0;
        ASSERT_OK(conversation_build(&t, 1, 100000, &m));
        ASSERT_EQ_STR(m.texts[1], "a");
}

/* A deep copy of the turns, their sources included. */
TEST(turns_copy) {
        const QueryTurn turns[] = {
                { .question = "q1", .answer = "a1", .sources = sources, .n_sources = 2 },
                { .question = "q2", .answer = NULL },
        };
        QueryTurn *c = NULL;

        ASSERT_OK(query_turns_copy(turns, 2, &c));
        ASSERT_EQ_STR(c[0].question, "q1");
        ASSERT_EQ_INT(c[0].n_sources, 2);
        ASSERT_TRUE(c[0].sources != sources);
        ASSERT_EQ_STR(c[0].sources[1].title, "Lyon \"roastery\"");
        ASSERT_EQ_INT(c[0].sources[1].revision_id, 9);
        ASSERT_TRUE(c[1].answer == NULL && c[1].sources == NULL && c[1].n_sources == 0);
        query_turns_free(c, 2);
}

/* The agent's first request of a follow-up: system, the turns, the new
 * question last; the request stays within a small context. */
TEST(agent_follow_up) {
        _cleanup_free_ char *big = malloc(200001);
        QueryTurn turns[3];
        AgentSettings s = {
                .model = "m",
                .max_steps = 4,
                .context_tokens = 2048,
                .max_output_bytes = 4096,
                .tool_result_max_bytes = 1024,
        };
        _cleanup_(agent_freep) Agent *a = NULL;
        const LlmMessage *msgs;
        AgentAction act;
        size_t n, kept, dropped;
        bool cut;

        ASSERT_TRUE(big);
        memset(big, 'x', 200000);
        big[200000] = 0;
        turns[0] = (QueryTurn){ .question = "first?", .answer = "one" };
        turns[1] = (QueryTurn){ .question = "second?", .answer = "two" };
        turns[2] = (QueryTurn){ .question = "third?", .answer = big };

        ASSERT_OK(agent_new_follow_up(&s, "fourth?", turns, 3, &a));
        msgs = agent_messages(a, &n);
        ASSERT_EQ_INT(n, 4);
        ASSERT_EQ_INT(msgs[0].role, LLM_ROLE_SYSTEM);
        ASSERT_TRUE(strstr(msgs[0].content, "follows earlier ones"));
        ASSERT_EQ_STR(msgs[1].content, "third?");
        ASSERT_EQ_INT(msgs[2].role, LLM_ROLE_ASSISTANT);
        ASSERT_TRUE(strstr(msgs[2].content, CONVERSATION_CUT_MARK));
        ASSERT_EQ_STR(msgs[3].content, "fourth?");
        agent_turns(a, &kept, &dropped, &cut);
        ASSERT_EQ_INT(kept, 1);
        ASSERT_EQ_INT(dropped, 2);
        ASSERT_TRUE(cut);
        ASSERT_OK(agent_next(a, &act));
        ASSERT_EQ_INT(act.type, AGENT_ACTION_SEND);
        ASSERT_TRUE(act.prompt_tokens_estimate <= s.context_tokens);

        /* Without turns: the prompt says nothing of a conversation. */
        a = agent_free(a);
        ASSERT_OK(agent_new_follow_up(&s, "alone?", NULL, 0, &a));
        msgs = agent_messages(a, &n);
        ASSERT_EQ_INT(n, 2);
        ASSERT_TRUE(!strstr(msgs[0].content, "follows earlier ones"));
}

DEFINE_TEST_MAIN()
