/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "shared/macro.h"

/* The one owner of SIGCHLD in the daemon. wikiwebd is a subreaper
 * (PR_SET_CHILD_SUBREAPER): the container processes of a runtime that died
 * become its children, so every pid is reaped here, watched or not
 * (waitpid(-1, WNOHANG) until none is left: zombies would count against
 * RLIMIT_NPROC of the next run). A watch reports the exit of one pid. */

typedef struct Reaper Reaper;
typedef struct ReaperWatch ReaperWatch;

/* status as from waitpid() (WIFEXITED/WIFSIGNALED). */
typedef void (*ReaperHandler)(pid_t pid, int status, void *userdata);

/* Blocks SIGCHLD and adds a signal source to event (borrowed). */
int reaper_new(sd_event *event, Reaper **ret);
/* Frees the watches' memory too; their handlers are never called again. */
Reaper *reaper_free(Reaper *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(Reaper *, reaper_free);

/* Call handler once when pid exits (from the event loop). The watch is
 * owned by the reaper until the handler has run, after which it is gone;
 * reaper_unwatch() before that cancels it (the pid is still reaped). */
int reaper_watch(Reaper *r, pid_t pid, ReaperHandler handler, void *userdata, ReaperWatch **ret);
void reaper_unwatch(ReaperWatch *w);

/* Reap now without waiting for the signal (tests, and after a fork in
 * the same iteration). */
void reaper_reap(Reaper *r);
