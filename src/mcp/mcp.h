/* SPDX-License-Identifier: MIT */
#pragma once

#include <systemd/sd-event.h>

#include "http/httpd.h"
#include "manager/manager.h"
#include "shared/macro.h"

/* The MCP face (API.md "MCP"): the Model Context Protocol's Streamable
 * HTTP transport on POST /mcp, a face of the Manager as the HTTP API is.
 * It parses one JSON-RPC message (mcp/jsonrpc.h), answers the lifecycle
 * (initialize, ping), lists its tools and calls them:
 *   - ask_wiki: a query for the same person and session as POST
 *     /api/v1/query makes it, through the same admission queue (it joins,
 *     waits for its turn holding its ticket, then claims), recorded in the
 *     person's history; with a progressToken the reply is an event stream
 *     of notifications/progress (the place and wait range while waiting,
 *     each step while running) before the result;
 *   - search_wiki and read_page: manager_wiki_search() and
 *     manager_wiki_read(), rate-limited per person.
 * notifications/cancelled, or the client closing the stream, leaves the
 * queue or cancels the running query as CancelQuery does.
 *
 * Stateless: no Mcp-Session-Id; who asks is the request's identity and
 * session, as for the API. An Mcp borrows the Manager, which must outlive
 * it. */

typedef struct Mcp Mcp;

/* Subscribes to the Manager's announcements. */
int mcp_new(sd_event *event, Manager *manager, Mcp **ret);
/* Only after the HTTP server is freed (which closes the streams). */
Mcp *mcp_free(Mcp *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(Mcp *, mcp_free);

/* The request of ROUTE_MCP (a POST; the server has answered every other
 * method with 405). userdata is the Mcp. */
HttpHandlerResult mcp_handle(HttpRequest *req, void *userdata);
