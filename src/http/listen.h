/* SPDX-License-Identifier: MIT */
#pragma once

/* The daemon's listening sockets: the ones systemd passes (socket
 * activation, sd_listen_fds(3)), else the one --listen names. */

/* The API's socket in the return value: the one passed named "http" (or
 * the only one passed that is not "metrics"), else a TCP socket bound to
 * listen_spec ("127.0.0.1:8080", "[::1]:8080", "localhost:8080"; NULL:
 * none). The metrics socket (named "metrics", from wikiwebd-metrics.socket,
 * API.md 12.3) in *ret_metrics_fd, -1 when there is none or it is not a
 * listening stream socket (then logged). Every other socket passed is
 * closed. Both descriptors are the caller's, *ret_metrics_fd even on
 * error. Returns the descriptor, or a negative errno, logged. */
int http_listen_acquire(const char *listen_spec, int *ret_metrics_fd);
