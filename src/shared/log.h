/* SPDX-License-Identifier: MIT */
#pragma once

#include <syslog.h>

#include "shared/macro.h"

/* Logging, after systemd's log.h, one line per event.
 *
 * When stderr is connected to the journal ($JOURNAL_STREAM matches it),
 * records go to journald with sd_journal_send(), carrying PRIORITY,
 * SYSLOG_IDENTIFIER=wikiwebd, CODE_FILE/LINE/FUNC and any extra "KEY=value"
 * fields; otherwise a plain line goes to stderr.
 *
 * Never pass a secret (session token, password, API key) to any of these.
 * Text that came from an upstream or the sandbox must go through
 * sanitize_message() first. */

void log_open(void);
void log_set_max_level(int level);
int log_get_max_level(void);

/* Returns -abs(error), so "return log_error_errno(r, ...)" works. With a
 * non-zero error, ": <strerror>" is appended to the message: do not use %m
 * (it is not ISO C and would read the wrong errno). */
int log_internal(int level, int error, const char *file, int line, const char *func, const char *format, ...)
        _printf_(6, 7);

/* Like log_internal(), with extra journal fields: a NULL-terminated array of
 * "KEY=value" strings (KEY in upper case, as journald requires). */
int log_fields_internal(
        int level,
        int error,
        const char *file,
        int line,
        const char *func,
        const char *const *fields,
        const char *format,
        ...) _printf_(7, 8);

#define log_full_errno(level, error, ...) \
        log_internal((level), (error), __FILE__, __LINE__, __func__, __VA_ARGS__)

#define log_debug(...) log_full_errno(LOG_DEBUG, 0, __VA_ARGS__)
#define log_info(...) log_full_errno(LOG_INFO, 0, __VA_ARGS__)
#define log_notice(...) log_full_errno(LOG_NOTICE, 0, __VA_ARGS__)
#define log_warning(...) log_full_errno(LOG_WARNING, 0, __VA_ARGS__)
#define log_error(...) log_full_errno(LOG_ERR, 0, __VA_ARGS__)

#define log_debug_errno(error, ...) log_full_errno(LOG_DEBUG, error, __VA_ARGS__)
#define log_info_errno(error, ...) log_full_errno(LOG_INFO, error, __VA_ARGS__)
#define log_warning_errno(error, ...) log_full_errno(LOG_WARNING, error, __VA_ARGS__)
#define log_error_errno(error, ...) log_full_errno(LOG_ERR, error, __VA_ARGS__)

#define log_fields(level, fields, ...) \
        log_fields_internal((level), 0, __FILE__, __LINE__, __func__, (fields), __VA_ARGS__)

/* For out-of-memory paths. */
#define log_oom() log_error_errno(ENOMEM, "Out of memory.")
