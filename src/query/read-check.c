/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/read-check.h"

#define READ_CHECK_FAILED_MESSAGE                                                                           \
        "The wiki could not say what this person may read (%s), so nothing of it was used: the wiki needs " \
        "the MediaWiki extension WikiwebReadCheck and the service account the right wikiweb-readcheck "     \
        "(or set WIKI_WEB_WIKI_READ_AS=service)"

int read_check_failure(ApiError cause, const char *message, char **ret) {
        char *m;

        if (cause == API_ERROR_WIKI_AUTH_FAILED && message)
                m = strdup(message);
        else if (
                asprintf(
                        &m,
                        READ_CHECK_FAILED_MESSAGE,
                        api_error_to_string(cause) ? api_error_to_string(cause) : "internal_error") < 0)
                m = NULL;
        if (!m)
                return -ENOMEM;
        *ret = m;
        return 0;
}
