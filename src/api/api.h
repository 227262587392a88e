/* SPDX-License-Identifier: MIT */
#pragma once

#include "http/httpd.h"
#include "manager/manager.h"
#include "shared/macro.h"

/* The endpoints of API.md 6, 7 and 9, a face of the Manager: they turn a
 * validated request into calls on the Manager (a query's life), the
 * admission controller (the queue) and the history store, and their
 * results into the JSON bodies of the contract. A POST /query waits,
 * suspended, for its record to be durable (MANAGER_QUERY_DURABLE); the
 * query streams and the queue streams are fed from the Manager's
 * announcements.
 *
 * An Api borrows the Manager, which must outlive it. */

typedef struct Api Api;

/* Subscribes to the Manager's announcements. */
int api_new(sd_event *event, Manager *manager, Api **ret);
/* Only after the HTTP server is freed (which closes the streams). */
Api *api_free(Api *api);
DEFINE_TRIVIAL_CLEANUP_FUNC(Api *, api_free);

/* The HttpTokenVerifier for http_server_set_token_verifier(); userdata is
 * the Api: the Manager's manager_token_authenticate(). */
int api_verify_token(const char *credential, char **ret_user, void *userdata);

/* The HttpHandler for http_server_new(); userdata is the Api. */
HttpHandlerResult api_handle(HttpRequest *req, void *userdata);
