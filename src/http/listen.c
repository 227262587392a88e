/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "http/listen.h"
#include "shared/log.h"
#include "shared/macro.h"

/* A listening TCP socket on spec's host and port. */
static int http_listen_on(const char *spec) {
        _cleanup_free_ char *host = NULL;
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
        struct addrinfo *res = NULL;
        const char *colon = strrchr(spec, ':');
        const char *port;
        int fd, r, one = 1;

        if (!colon || colon == spec || !colon[1])
                return -EINVAL;
        port = colon + 1;
        if (spec[0] == '[' && colon[-1] == ']')
                host = strndup(spec + 1, (size_t) (colon - spec - 2));
        else
                host = strndup(spec, (size_t) (colon - spec));
        if (!host)
                return -ENOMEM;

        r = getaddrinfo(host, port, &hints, &res);
        if (r != 0)
                return -EADDRNOTAVAIL;
        fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
                r = negative_errno();
                freeaddrinfo(res);
                return r;
        }
        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, SOMAXCONN) < 0) {
                r = negative_errno();
                freeaddrinfo(res);
                (void) close(fd);
                return r;
        }
        freeaddrinfo(res);
        return fd;
}

int http_listen_acquire(const char *listen_spec, int *ret_metrics_fd) {
        char **names = NULL;
        int n, fd = -1, metrics_fd = -1;

        assert(ret_metrics_fd);

        *ret_metrics_fd = -1;
        n = sd_listen_fds_with_names(true, &names);
        if (n < 0)
                return log_error_errno(n, "Failed to read the sockets passed by systemd");
        for (int i = 0; i < n; i++) {
                if (metrics_fd < 0 && streq(names[i], "metrics"))
                        metrics_fd = SD_LISTEN_FDS_START + i;
                else if (fd < 0 && (n == 1 || streq(names[i], "http")))
                        fd = SD_LISTEN_FDS_START + i;
                else
                        (void) close(SD_LISTEN_FDS_START + i);
        }
        if (metrics_fd >= 0 && sd_is_socket(metrics_fd, AF_UNSPEC, SOCK_STREAM, 1) <= 0) {
                log_warning(
                        "The metrics socket passed by systemd is not a listening stream socket; no metrics.");
                (void) close(metrics_fd);
                metrics_fd = -1;
        }
        *ret_metrics_fd = metrics_fd;
        for (int i = 0; names && i < n; i++)
                free(names[i]);
        free(names);

        if (fd >= 0) {
                if (sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1) <= 0)
                        return log_error_errno(
                                EINVAL, "The socket passed by systemd is not a listening stream socket.");
                log_info("Using the listening socket passed by systemd.");
                return fd;
        }
        if (!listen_spec)
                return log_error_errno(EINVAL, "No socket was passed by systemd and --listen was not given.");
        fd = http_listen_on(listen_spec);
        if (fd < 0)
                return log_error_errno(fd, "Failed to listen on %s", listen_spec);
        log_info("Listening on %s.", listen_spec);
        return fd;
}
