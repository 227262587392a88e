/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "query/query-types.h"

/* The earlier turns of a conversation as the model is given them (API.md
 * 7 "Follow-up", docs/QUERY.md "Follow-ups"), pure: turns in, message
 * texts out, within a budget of bytes.
 *
 * Each turn kept becomes two messages: the user's question, and the
 * assistant's answer followed by a note naming the pages that turn read,
 * with the revision read (so that the model can read them again). A turn
 * without an answer (it failed) says so instead of an answer.
 *
 * The budget: the newest turns are kept while their cost fits (the cost of
 * a message is its text's length as a JSON string, escapes counted, plus
 * CONVERSATION_MESSAGE_OVERHEAD); the oldest leave first. The turn just
 * before the new question is always kept: when it alone is over the
 * budget, its answer is cut first, then its question, each at a UTF-8
 * boundary and marked CONVERSATION_CUT_MARK, so that the two fit. */

#define CONVERSATION_MESSAGE_OVERHEAD 48
#define CONVERSATION_CUT_MARK " [… cut by wikiweb]"
/* Pages named per turn; the rest are counted ("and N more"). */
#define CONVERSATION_PAGES_MAX 20

typedef struct ConversationMessages {
        char **texts;     /* 2 per turn kept, oldest first: user, assistant; NULL-terminated, owned */
        size_t n_kept;    /* turns kept (texts holds 2 * n_kept) */
        size_t n_dropped; /* the oldest turns left out */
        bool cut;         /* the turn just before was cut to fit */
        size_t cost;      /* what the kept messages cost, by the rule above */
} ConversationMessages;

void conversation_messages_done(ConversationMessages *m);

/* The bytes a text costs as one message (see above). */
size_t conversation_message_cost(const char *text);

/* The messages of turns[0..n) (oldest first; n >= 1) within budget bytes.
 * turns[i].sources are the pages the turn read. Returns 0 and fills *ret; -EINVAL for n == 0; -ENOMEM. */
int conversation_build(const QueryTurn *turns, size_t n, size_t budget, ConversationMessages *ret);

/* A deep copy of turns (for a run that makes its agent again later);
 * free with query_turns_free(). Returns 0, -ENOMEM. */
int query_turns_copy(const QueryTurn *turns, size_t n, QueryTurn **ret);
void query_turns_free(QueryTurn *turns, size_t n);
