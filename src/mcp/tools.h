/* SPDX-License-Identifier: MIT */
#pragma once

/* What the MCP face says of itself (API.md "MCP"): the initialize
 * result's instructions and the tools/list result, each tool with its
 * title, description, inputSchema, outputSchema and annotations. The
 * limits the schemas state are the ones the face checks (ask_wiki's are
 * POST /api/v1/query's, API.md 7; search_wiki's and read_page's are the
 * model's tools', API.md 8.6). */

#define MCP_INSTRUCTIONS                                                                                     \
        "wikiweb answers questions from the organisation's wiki, as the person asking: ask_wiki runs a "     \
        "query through wikiweb's fair queue (it may wait for its turn; with a progress token it says where " \
        "it stands) and answers with quotes verified against the revisions they cite; search_wiki and "      \
        "read_page search the wiki and read a page as the person may."

#define MCP_TOOLS_JSON                                                                                                 \
        "{\"tools\":["                                                                                                 \
        "{\"name\":\"ask_wiki\",\"title\":\"Ask the wiki\","                                                           \
        "\"description\":\"Ask a question that the organisation's wiki answers: wikiweb searches and reads the "       \
        "wiki as you, may compute with Python, and answers with sources and quotes verified against the revisions "    \
        "they cite. The query waits for its turn in a shared queue and appears in your wikiweb history. Give "         \
        "follow_up (the id of an earlier answer) to continue that conversation.\","                                    \
        "\"inputSchema\":{\"type\":\"object\",\"properties\":{"                                                        \
        "\"question\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":4000,\"description\":\"The question, 1 to "   \
        "4000 characters.\"},"                                                                                         \
        "\"follow_up\":{\"type\":\"string\",\"pattern\":\"^qr_[0-9a-f]{32}$\",\"description\":\"The id of an earlier " \
        "answer of yours whose conversation this question continues.\"}},"                                             \
        "\"required\":[\"question\"],\"additionalProperties\":false},"                                                 \
        "\"outputSchema\":{\"type\":\"object\",\"properties\":{"                                                       \
        "\"id\":{\"type\":\"string\"},\"status\":{\"type\":\"string\"},\"answer\":{\"type\":[\"string\",\"null\"]},"   \
        "\"citations\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"title\":{\"type\":"        \
        "\"string\"},\"quote\":{\"type\":\"string\"},\"status\":{\"type\":[\"string\",\"null\"]},\"url\":{\"type\":"   \
        "[\"string\",\"null\"]}}}},"                                                                                   \
        "\"sources\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"title\":{\"type\":"          \
        "\"string\"},\"url\":{\"type\":[\"string\",\"null\"]},\"revision_id\":{\"type\":[\"integer\",\"null\"]}}}},"   \
        "\"artifacts\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":"         \
        "\"string\"},\"media_type\":{\"type\":\"string\"},\"size_bytes\":{\"type\":\"integer\"},\"download_url\":"     \
        "{\"type\":\"string\"}}}},"                                                                                    \
        "\"record_url\":{\"type\":\"string\"}},"                                                                       \
        "\"required\":[\"id\",\"status\",\"answer\",\"citations\",\"sources\",\"artifacts\",\"record_url\"]},"         \
        "\"annotations\":{\"title\":\"Ask the wiki\",\"readOnlyHint\":false,\"destructiveHint\":false,"                \
        "\"idempotentHint\":false,\"openWorldHint\":false}},"                                                          \
        "{\"name\":\"search_wiki\",\"title\":\"Search the wiki\","                                                     \
        "\"description\":\"Search the organisation's wiki as you: the titles and snippets of the pages you may read, " \
        "in the wiki's order.\","                                                                                      \
        "\"inputSchema\":{\"type\":\"object\",\"properties\":{"                                                        \
        "\"query\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":300,\"description\":\"What to search for.\"},"   \
        "\"limit\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":50,\"default\":10,\"description\":\"At most this "  \
        "many results.\"}},"                                                                                           \
        "\"required\":[\"query\"],\"additionalProperties\":false},"                                                    \
        "\"outputSchema\":{\"type\":\"object\",\"properties\":{\"results\":{\"type\":\"array\",\"items\":{\"type\":"   \
        "\"object\",\"properties\":{\"title\":{\"type\":\"string\"},\"snippet\":{\"type\":\"string\"}},"               \
        "\"required\":[\"title\",\"snippet\"]}}},\"required\":[\"results\"]},"                                         \
        "\"annotations\":{\"title\":\"Search the wiki\",\"readOnlyHint\":true,\"openWorldHint\":false}},"              \
        "{\"name\":\"read_page\",\"title\":\"Read a wiki page\","                                                      \
        "\"description\":\"Read a page of the organisation's wiki as you: its wikitext and revision. A page you may "  \
        "not read reads as a missing one.\","                                                                          \
        "\"inputSchema\":{\"type\":\"object\",\"properties\":{"                                                        \
        "\"title\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":255,\"description\":\"The page's title.\"}},"    \
        "\"required\":[\"title\"],\"additionalProperties\":false},"                                                    \
        "\"outputSchema\":{\"type\":\"object\",\"properties\":{\"title\":{\"type\":[\"string\",\"null\"]},"            \
        "\"missing\":{\"type\":\"boolean\"},\"url\":{\"type\":[\"string\",\"null\"]},\"revision_id\":{\"type\":"       \
        "\"integer\"},\"truncated\":{\"type\":\"boolean\"},\"content\":{\"type\":\"string\"}},"                        \
        "\"required\":[\"missing\"]},"                                                                                 \
        "\"annotations\":{\"title\":\"Read a wiki page\",\"readOnlyHint\":true,\"openWorldHint\":false}}"              \
        "]}"
