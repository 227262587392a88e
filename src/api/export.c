/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include "api/export.h"
#include "shared/macro.h"
#include "shared/source.h"
#include "shared/strbuf.h"
#include "shared/time-util.h"

/* Text with every ASCII punctuation character Markdown gives a meaning
 * backslash-escaped (CommonMark: any ASCII punctuation may be), and line
 * breaks as spaces when one_line. */
static void put_escaped(StrBuf *b, const char *s, bool one_line) {
        for (; *s; s++) {
                if (*s == '\r' || (*s == '\n' && one_line)) {
                        (void) strbuf_put_literal(b, " ");
                        continue;
                }
                if (strchr("\\`*_{}[]()#+-.!|<>~&\"'=:", *s))
                        (void) strbuf_put_literal(b, "\\");
                (void) strbuf_put(b, s, 1);
        }
}

/* A block quote of text, each line escaped. */
static void put_quote(StrBuf *b, const char *s) {
        (void) strbuf_put_literal(b, "> ");
        for (; *s; s++) {
                if (*s == '\n') {
                        (void) strbuf_put_literal(b, "\n> ");
                        continue;
                }
                if (*s == '\r')
                        continue;
                if (strchr("\\`*_{}[]()#+-.!|<>~&\"'=:", *s))
                        (void) strbuf_put_literal(b, "\\");
                (void) strbuf_put(b, s, 1);
        }
        (void) strbuf_put_literal(b, "\n");
}

/* The model's answer as written, "<" escaped. */
static void put_answer(StrBuf *b, const char *s) {
        for (; *s; s++) {
                if (*s == '<')
                        (void) strbuf_put_literal(b, "\\");
                if (*s != '\r')
                        (void) strbuf_put(b, s, 1);
        }
        (void) strbuf_put_literal(b, "\n");
}

static bool is_web_url(const char *u) {
        return u && (strneq(u, "https://", 8) || strneq(u, "http://", 7));
}

/* A link destination: <url>, the bytes that could end or break it
 * percent-encoded. */
static void put_destination(StrBuf *b, const char *u) {
        static const char hex[] = "0123456789ABCDEF";

        (void) strbuf_put_literal(b, "<");
        for (const unsigned char *p = (const unsigned char *) u; *p; p++)
                if (*p <= 0x20 || *p >= 0x7f || strchr("<>\\", *p)) {
                        char e[3] = { '%', hex[*p >> 4], hex[*p & 15] };
                        (void) strbuf_put(b, e, 3);
                } else
                        (void) strbuf_put(b, (const char *) p, 1);
        (void) strbuf_put_literal(b, ">");
}

static void put_sources(StrBuf *b, const Source *sources, size_t n) {
        for (size_t i = 0; i < n; i++) {
                const Source *s = &sources[i];

                if (i == 0)
                        (void) strbuf_put_literal(b, "\n**Sources**\n\n");
                (void) strbuf_put_literal(b, "- ");
                if (is_web_url(s->url)) {
                        (void) strbuf_put_literal(b, "[");
                        put_escaped(b, s->title, true);
                        (void) strbuf_put_literal(b, "](");
                        put_destination(b, s->url);
                        (void) strbuf_put_literal(b, ")");
                } else
                        put_escaped(b, s->title, true);
                if (s->has_revision_id)
                        strbuf_printf(b, ", revision %" PRIu64, s->revision_id);
                (void) strbuf_put_literal(b, "\n");
        }
}

static void put_citations(StrBuf *b, const SourceCitation *citations, size_t n) {
        for (size_t i = 0; i < n; i++) {
                const SourceCitation *c = &citations[i];
                bool verified = c->status == CITATION_VERIFIED;
                const char *status = citation_status_to_string(c->status);

                if (i == 0)
                        (void) strbuf_put_literal(b, "\n**Citations**\n\n");
                strbuf_printf(b, "- \\[%u\\] \"", c->n);
                put_escaped(b, c->quote, true);
                (void) strbuf_put_literal(b, "\", ");
                if (verified && is_web_url(c->url)) {
                        (void) strbuf_put_literal(b, "[");
                        put_escaped(b, c->title, true);
                        if (c->has_revision_id)
                                strbuf_printf(b, ", revision %" PRIu64, c->revision_id);
                        (void) strbuf_put_literal(b, "](");
                        put_destination(b, c->url);
                        (void) strbuf_put_literal(b, "), verified\n");
                } else if (verified) {
                        put_escaped(b, c->title, true);
                        (void) strbuf_put_literal(b, ", verified\n");
                } else {
                        put_escaped(b, c->title, true);
                        (void) strbuf_put_literal(b, ", not verified (");
                        put_escaped(b, status ? status : "unknown", true);
                        (void) strbuf_put_literal(b, ")\n");
                }
        }
}

static void put_artifacts(StrBuf *b, const HistoryRecord *r, const char *artifact_base) {
        if (r->n_artifacts == 0)
                return;
        (void) strbuf_put_literal(b, "\n**Files**\n\n- ");
        for (size_t i = 0; i < r->n_artifacts; i++) {
                const HistoryArtifactInfo *a = &r->artifacts[i];
                _cleanup_free_ char *path = NULL;

                if (i > 0)
                        (void) strbuf_put_literal(b, "- ");
                if (artifact_base && asprintf(&path, "%s%s", artifact_base, a->id) < 0) {
                        b->failed = true;
                        return;
                }
                if (path) {
                        (void) strbuf_put_literal(b, "[");
                        put_escaped(b, a->name, true);
                        (void) strbuf_put_literal(b, "](");
                        put_destination(b, path);
                        (void) strbuf_put_literal(b, ")");
                } else
                        put_escaped(b, a->name, true);
                (void) strbuf_put_literal(b, " (");
                put_escaped(b, a->media_type, true);
                strbuf_printf(b, ", %" PRId64 " bytes, SHA\\-256 %s)\n", a->size_bytes, a->sha256);
        }
}

int export_markdown(const HistoryRecord *turns, size_t n, const char *artifact_base, char **ret) {
        _cleanup_(strbuf_done) StrBuf b = { 0 };
        char *text;

        assert(turns || n == 0);
        assert(ret);

        if (n == 0)
                return -EINVAL;

        (void) strbuf_put_literal(&b, "# ");
        put_escaped(&b, turns[0].question, true);
        (void) strbuf_put_literal(&b, "\n");

        for (size_t i = 0; i < n; i++) {
                const HistoryRecord *r = &turns[i];
                char t[RFC3339_MS_MAX];

                strbuf_printf(&b, "\n## Question %zu\n\n", i + 1);
                put_quote(&b, r->question);
                strbuf_printf(&b, "\nAsked %s\n", format_rfc3339_ms(t, r->created_at));

                (void) strbuf_put_literal(&b, "\n**Answer**\n\n");
                if (r->answer)
                        put_answer(&b, r->answer);
                else if (streq(r->status, "running"))
                        (void) strbuf_put_literal(&b, "(Still running.)\n");
                else {
                        (void) strbuf_put_literal(&b, "(No answer: ");
                        put_escaped(&b, r->error_message ? r->error_message : "the query failed", true);
                        (void) strbuf_put_literal(&b, ")\n");
                }
                put_citations(&b, r->citations, r->n_citations);
                put_sources(&b, r->sources, r->n_sources);
                put_artifacts(&b, r, artifact_base);
        }

        text = strbuf_steal(&b);
        if (!text)
                return -ENOMEM;
        *ret = text;
        return 0;
}
