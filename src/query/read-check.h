/* SPDX-License-Identifier: MIT */
#pragma once

#include "shared/api-error.h"

/* A read check that could not be made (API.md "Whose permissions": fail
 * closed), whatever the cause: the extension WikiwebReadCheck missing, the
 * right wikiweb-readcheck revoked, a timeout, a reply that does not parse.
 * Every caller (a query's own check, a share, the report, a record's
 * sources) fails with wiki_auth_failed and this message: the wiki
 * client's (cause wiki_auth_failed, which names what to fix), else one
 * that names the cause's code and what to set. Never the wiki's own text
 * otherwise: it may name a title. Pure. Returns 0 or -ENOMEM; *ret is the
 * caller's to free. */
#define READ_CHECK_API_ERROR API_ERROR_WIKI_AUTH_FAILED

int read_check_failure(ApiError cause, const char *message, char **ret);
