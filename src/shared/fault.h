/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* The test-only fault switches, read here and nowhere else. Each is an
 * environment variable that counts only with WIKI_WEB_TEST_FAULTS=1 (the
 * tests' drop-ins set both); without it every switch is off, whatever it
 * says. Each switch that is on is logged as a warning when it is read.
 *
 *   WIKI_WEB_TEST_QUERY_DELAY_MS=N          every query takes N ms and runs
 *                                           no pipeline (0..3600000)
 *   WIKI_WEB_TEST_SANDBOX_UNCONFIRMABLE=N   the next N scope confirmations
 *                                           fail (0..100)
 *   WIKI_WEB_TEST_SANDBOX_DEAF_INIT=1       a container's init is never
 *                                           told to stop
 *   WIKI_WEB_TEST_SANDBOX_STARTING_MS=N     the sandbox is "starting" for
 *                                           N ms after the start, whatever
 *                                           it really is (0..3600000)
 *   WIKI_WEB_TEST_RETENTION_INTERVAL_MS=N   the history's retention runs N ms
 *                                           apart instead of an hour
 *                                           (0..3600000; 0: the hour)
 *   WIKI_WEB_TEST_HTTP_OOM=reply|all|request
 *                                           allocations on the reply path
 *                                           fail (see httpd.c)
 *   SIGUSR2                                 hangs the event loop (the
 *                                           watchdog test)
 *
 * The modules take the values through their own seams (setters, or the
 * server's state); only wikiwebd.c, manager.c and httpd.c call these.
 *
 * They exist only where ENABLE_TEST_FAULTS is 1. meson.build sets it for
 * each target: 1 in the tests' variant (the unit tests and wikiwebd-test,
 * which the e2e and system suites run), 0 in the product (wikiwebd,
 * wikiwebctl, the packages) unless meson's test-faults option (off by
 * default) puts them there too. Where it is 0 the readers
 * below are constant "off", the modules' test setters are not declared,
 * and each check of a switch on a production path is written
 * TEST_FAULT(cond): the compiler drops the code that depends on it, so the
 * packaged daemon has neither the switches' names nor their code. */

typedef enum FaultHttpOom {
        FAULT_HTTP_OOM_NONE,
        FAULT_HTTP_OOM_REPLY,   /* "reply": every response body; the static 500 still works */
        FAULT_HTTP_OOM_ALL,     /* "all": the static 500 too: the connection is closed */
        FAULT_HTTP_OOM_REQUEST, /* "request": the request object itself */
} FaultHttpOom;

#if ENABLE_TEST_FAULTS

/* Whether WIKI_WEB_TEST_FAULTS=1. */
bool fault_enabled(void);

/* A numeric switch: 0 when it is off, 1 with *ret set, or a logged
 * -EINVAL when its value is not a number in 0..max. */
int fault_uint64(const char *name, uint64_t max, uint64_t *ret);

/* A boolean switch: on when its value is "1". */
bool fault_bool(const char *name);

/* WIKI_WEB_TEST_HTTP_OOM; an unknown value is logged and ignored. */
FaultHttpOom fault_http_oom(void);

/* A check of a switch's state on a production path. */
#        define TEST_FAULT(cond) (cond)

#else

static inline bool fault_enabled(void) {
        return false;
}

static inline FaultHttpOom fault_http_oom(void) {
        return FAULT_HTTP_OOM_NONE;
}

/* cond is type-checked, never evaluated: the switch's state is never
 * set in this build. */
#        define TEST_FAULT(cond) ((void) sizeof(cond), false)

#endif
