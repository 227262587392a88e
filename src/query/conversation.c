/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include "query/conversation.h"
#include "shared/macro.h"
#include "shared/strbuf.h"
#include "shared/strv.h"
#include "shared/utf8.h"

void conversation_messages_done(ConversationMessages *m) {
        if (!m)
                return;
        strv_free(m->texts);
        *m = (ConversationMessages){ .texts = NULL };
}

/* The length of s[0..n) as the inside of a JSON string (counted high: a
 * '/' as escaped, every control character as \u00XX). */
static size_t json_string_cost(const char *s, size_t n) {
        size_t c = n;

        for (size_t i = 0; i < n; i++) {
                unsigned char b = (unsigned char) s[i];

                if (b == '"' || b == '\\' || b == '/')
                        c += 1;
                else if (b < 0x20)
                        c += 5;
        }
        return c;
}

size_t conversation_message_cost(const char *text) {
        assert(text);
        return json_string_cost(text, strlen(text)) + CONVERSATION_MESSAGE_OVERHEAD;
}

/* The note after a turn's answer: the pages it read, with the revision
 * read. Appended to sb. */
static void add_pages_note(StrBuf *sb, const Source *sources, size_t n) {
        for (size_t i = 0; i < n; i++) {
                if (i == CONVERSATION_PAGES_MAX) {
                        strbuf_printf(sb, "; and %zu more", n - i);
                        break;
                }
                (void) strbuf_puts(
                        sb, i == 0 ? "\n\n[Pages read for this answer, with the revision read: " : "; ");
                strbuf_printf(sb, "\"%s\"", sources[i].title);
                if (sources[i].has_revision_id)
                        strbuf_printf(sb, " (revision %" PRIu64 ")", sources[i].revision_id);
        }
        if (n > 0)
                (void) strbuf_puts(sb, ". To quote one of them now, read it again with wiki_read.]");
}

static int turn_texts(const QueryTurn *t, char **ret_user, char **ret_assistant) {
        _cleanup_(strbuf_done) StrBuf sb = { 0 };
        char *u;

        (void) strbuf_puts(&sb, t->answer ? t->answer : "(No answer: this question failed.)");
        add_pages_note(&sb, t->sources, t->n_sources);
        if (sb.failed)
                return -ENOMEM;
        u = strdup(t->question ? t->question : "");
        if (!u)
                return -ENOMEM;
        *ret_user = u;
        *ret_assistant = strbuf_steal(&sb);
        if (!*ret_assistant) {
                free(u);
                return -ENOMEM;
        }
        return 0;
}

/* Cut *text so that its message costs at most max (when it is over): the
 * longest prefix at a UTF-8 boundary that fits with the mark (the cost
 * grows with the prefix, so it is found by bisection). */
static int cut_to_cost(char **text, size_t max) {
        const size_t mark = json_string_cost(CONVERSATION_CUT_MARK, strlen(CONVERSATION_CUT_MARK));
        size_t n = strlen(*text), lo = 0, hi = n, keep;
        char *c;

        if (conversation_message_cost(*text) <= max)
                return 0;
        while (lo < hi) {
                size_t mid = lo + (hi - lo + 1) / 2;

                if (json_string_cost(*text, mid) + mark + CONVERSATION_MESSAGE_OVERHEAD <= max)
                        lo = mid;
                else
                        hi = mid - 1;
        }
        keep = utf8_cut(*text, n, lo);
        c = malloc(keep + strlen(CONVERSATION_CUT_MARK) + 1);
        if (!c)
                return -ENOMEM;
        memcpy(c, *text, keep);
        memcpy(c + keep, CONVERSATION_CUT_MARK, sizeof(CONVERSATION_CUT_MARK));
        free(*text);
        *text = c;
        return 0;
}

int conversation_build(const QueryTurn *turns, size_t n, size_t budget, ConversationMessages *ret) {
        _cleanup_(strv_freep) char **texts = NULL;
        size_t kept = 0, cost = 0;
        bool cut = false;
        int r;

        assert(turns || n == 0);
        assert(ret);

        if (n == 0)
                return -EINVAL;
        /* Filled from the end: texts[2 * n - 2 * k ..] are the k newest. */
        texts = calloc(2 * n + 1, sizeof(char *));
        if (!texts)
                return -ENOMEM;

        for (size_t i = n; i-- > 0;) {
                _cleanup_free_ char *u = NULL, *a = NULL;
                size_t c;

                r = turn_texts(&turns[i], &u, &a);
                if (r < 0)
                        return r;
                c = conversation_message_cost(u) + conversation_message_cost(a);
                if (kept == 0 && c > budget) {
                        /* The turn just before: cut, the answer first. */
                        size_t uc = conversation_message_cost(u);
                        size_t room = budget > uc ? budget - uc : 0;

                        r = cut_to_cost(&a, MAX(room, conversation_message_cost(CONVERSATION_CUT_MARK)));
                        if (r < 0)
                                return r;
                        if (conversation_message_cost(u) + conversation_message_cost(a) > budget) {
                                size_t ac = conversation_message_cost(a);

                                r = cut_to_cost(
                                        &u,
                                        MAX(budget > ac ? budget - ac : 0,
                                            conversation_message_cost(CONVERSATION_CUT_MARK)));
                                if (r < 0)
                                        return r;
                        }
                        c = conversation_message_cost(u) + conversation_message_cost(a);
                        cut = true;
                } else if (kept > 0 && cost + c > budget)
                        break;
                texts[2 * i] = TAKE_PTR(u);
                texts[2 * i + 1] = TAKE_PTR(a);
                cost += c;
                kept++;
        }

        /* Move the kept ones to the front. */
        if (kept < n) {
                memmove(texts, texts + 2 * (n - kept), 2 * kept * sizeof(char *));
                for (size_t i = 2 * kept; i < 2 * n; i++)
                        texts[i] = NULL;
        }

        *ret = (ConversationMessages){
                .texts = TAKE_PTR(texts),
                .n_kept = kept,
                .n_dropped = n - kept,
                .cut = cut,
                .cost = cost,
        };
        return 0;
}

void query_turns_free(QueryTurn *turns, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free((char *) turns[i].question);
                free((char *) turns[i].answer);
                source_free_many((Source *) turns[i].sources, turns[i].n_sources);
        }
        free(turns);
}

int query_turns_copy(const QueryTurn *turns, size_t n, QueryTurn **ret) {
        QueryTurn *c;

        assert(turns || n == 0);
        assert(ret);

        c = calloc(MAX(n, (size_t) 1), sizeof *c);
        if (!c)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                Source *sources = NULL;

                c[i].question = strdup(turns[i].question ? turns[i].question : "");
                c[i].answer = turns[i].answer ? strdup(turns[i].answer) : NULL;
                if (source_copy_many(turns[i].sources, turns[i].n_sources, &sources) >= 0) {
                        c[i].sources = sources;
                        c[i].n_sources = turns[i].n_sources;
                }
                if (!c[i].question || (turns[i].answer && !c[i].answer) ||
                    (turns[i].n_sources > 0 && !c[i].sources)) {
                        query_turns_free(c, n);
                        return -ENOMEM;
                }
        }
        *ret = c;
        return 0;
}
