/* SPDX-License-Identifier: MIT */
#include <stdlib.h>

#include "shared/fault.h"
#include "shared/log.h"
#include "shared/macro.h"
#include "shared/parse-util.h"

bool fault_enabled(void) {
        const char *f = getenv("WIKI_WEB_TEST_FAULTS");
        return f && streq(f, "1");
}

/* The switch name's value with the faults enabled, NULL otherwise. */
static const char *fault_get(const char *name) {
        return fault_enabled() ? getenv(name) : NULL;
}

int fault_uint64(const char *name, uint64_t max, uint64_t *ret) {
        const char *v = fault_get(name);

        if (!v)
                return 0;
        if (parse_uint64_range(v, 0, max, ret) < 0)
                return log_error_errno(EINVAL, "%s: expected 0..%" PRIu64, name, max);
        return 1;
}

bool fault_bool(const char *name) {
        const char *v = fault_get(name);
        return v && streq(v, "1");
}

FaultHttpOom fault_http_oom(void) {
        const char *v = fault_get("WIKI_WEB_TEST_HTTP_OOM");
        FaultHttpOom t = FAULT_HTTP_OOM_NONE;

        if (!v)
                return FAULT_HTTP_OOM_NONE;
        if (streq(v, "reply"))
                t = FAULT_HTTP_OOM_REPLY;
        else if (streq(v, "all"))
                t = FAULT_HTTP_OOM_ALL;
        else if (streq(v, "request"))
                t = FAULT_HTTP_OOM_REQUEST;
        else
                log_warning("WIKI_WEB_TEST_HTTP_OOM=%s: expected reply, all or request; ignored.", v);
        if (t != FAULT_HTTP_OOM_NONE)
                log_warning("HTTP: test fault WIKI_WEB_TEST_HTTP_OOM=%s is on.", v);
        return t;
}
