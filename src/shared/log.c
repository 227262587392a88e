/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <systemd/sd-journal.h>

#include "shared/log.h"

static int max_level = LOG_INFO;
static bool to_journal = false;

void log_open(void) {
        const char *e = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;

        to_journal = false;
        if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2)
                return;
        if (fstat(STDERR_FILENO, &st) < 0)
                return;
        to_journal = (unsigned long long) st.st_dev == dev && (unsigned long long) st.st_ino == ino;
}

void log_set_max_level(int level) {
        max_level = level;
}

int log_get_max_level(void) {
        return max_level;
}

_printf_(7, 0) static int log_dispatch(
        int level,
        int error,
        const char *file,
        int line,
        const char *func,
        const char *const *fields,
        const char *format,
        va_list ap) {
        char message[2048];
        size_t n_fields = 0;

        if (error < 0)
                error = -error;
        if (level > max_level)
                return -error;

        (void) vsnprintf(message, sizeof message, format, ap);
        /* One record is one line: the journal keeps multi-line messages but
         * a plain stderr reader would split them. */
        for (char *p = message; *p; p++)
                if (*p == '\n' || *p == '\r')
                        *p = ' ';

        if (fields)
                while (fields[n_fields])
                        n_fields++;

        if (to_journal) {
                char msg_f[sizeof message + 16], prio_f[16], file_f[256], line_f[32], func_f[128], errno_f[32];
                struct iovec iov[8 + 32];
                size_t k = 0;

                snprintf(msg_f, sizeof msg_f, "MESSAGE=%s", message);
                snprintf(prio_f, sizeof prio_f, "PRIORITY=%d", level);
                snprintf(file_f, sizeof file_f, "CODE_FILE=%s", file);
                snprintf(line_f, sizeof line_f, "CODE_LINE=%d", line);
                snprintf(func_f, sizeof func_f, "CODE_FUNC=%s", func);
                iov[k++] = (struct iovec){ msg_f, strlen(msg_f) };
                iov[k++] = (struct iovec){ prio_f, strlen(prio_f) };
                iov[k++] = (struct iovec){ (char *) "SYSLOG_IDENTIFIER=wikiwebd",
                                           STRLEN("SYSLOG_IDENTIFIER=wikiwebd") };
                iov[k++] = (struct iovec){ file_f, strlen(file_f) };
                iov[k++] = (struct iovec){ line_f, strlen(line_f) };
                iov[k++] = (struct iovec){ func_f, strlen(func_f) };
                if (error > 0) {
                        snprintf(errno_f, sizeof errno_f, "ERRNO=%d", error);
                        iov[k++] = (struct iovec){ errno_f, strlen(errno_f) };
                }
                for (size_t i = 0; i < n_fields && k < ELEMENTSOF(iov); i++)
                        iov[k++] = (struct iovec){ (char *) fields[i], strlen(fields[i]) };
                if (sd_journal_sendv(iov, (int) k) >= 0)
                        return -error;
                /* fall back to stderr */
        }

        {
                char line_buf[sizeof message + 1024];
                size_t off = 0;

                off += (size_t) snprintf(line_buf, sizeof line_buf, "%s", message);
                if (error > 0 && off < sizeof line_buf)
                        off += (size_t) snprintf(
                                line_buf + off, sizeof line_buf - off, ": %s", strerror(error));
                for (size_t i = 0; i < n_fields && off < sizeof line_buf; i++)
                        off += (size_t) snprintf(
                                line_buf + off, sizeof line_buf - off, "%s%s", i == 0 ? " [" : " ", fields[i]);
                if (n_fields > 0 && off < sizeof line_buf)
                        (void) snprintf(line_buf + off, sizeof line_buf - off, "]");
                fprintf(stderr, "%s\n", line_buf);
        }
        return -error;
}

int log_internal(int level, int error, const char *file, int line, const char *func, const char *format, ...) {
        va_list ap;
        int r;

        va_start(ap, format);
        r = log_dispatch(level, error, file, line, func, NULL, format, ap);
        va_end(ap);
        return r;
}

int log_fields_internal(
        int level,
        int error,
        const char *file,
        int line,
        const char *func,
        const char *const *fields,
        const char *format,
        ...) {
        va_list ap;
        int r;

        va_start(ap, format);
        r = log_dispatch(level, error, file, line, func, fields, format, ap);
        va_end(ap);
        return r;
}
