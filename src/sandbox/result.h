/* SPDX-License-Identifier: MIT */
#pragma once

#include <errno.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shared/artifact.h"
#include "shared/time-util.h"

/* The result of one run_python (API.md 8.6): the one shape of it from the
 * sandbox, which fills it (sandbox.h, the done callback of a run), to the
 * agent, which tells the model (query/agent.h), and the query's event
 * stream, which summarizes it (API.md 11.2 "tool_result"). Its JSON is
 * built in one place, sandbox_result_to_json(). */

typedef struct SandboxResult {
        bool has_exit_code;
        int exit_code;      /* when has_exit_code */
        const char *signal; /* "SIGKILL", ... or NULL (static) */
        bool timed_out;     /* WIKI_WEB_SANDBOX_TIMEOUT_SECONDS was reached */
        bool cancelled;     /* sandbox_run_cancel() */
        /* What the code wrote, head and tail when cut: the sandbox's are
         * sanitized (output.h); any bytes are made valid UTF-8 in the JSON.
         * NULL (size 0) stands for "". */
        char *stdout_text;
        size_t stdout_size;
        char *stderr_text;
        size_t stderr_size;
        uint64_t stdout_bytes, stderr_bytes; /* as written by the code */
        Artifact *files; /* top-level regular files in /out after the run: name and size_bytes */
        size_t n_files;
        bool cleanup_confirmed; /* false: cleanup_failed, retried with backoff */
        usec_t run_usec;        /* from the start to the end of the container */
        usec_t cleanup_usec;    /* the first cleanup attempt */
} SandboxResult;

/* Frees what the result owns and resets it to empty. */
void sandbox_result_done(SandboxResult *r);

typedef enum SandboxResultShape {
        SANDBOX_RESULT_TOOL,    /* the tool result the model sees (API.md 8.6) */
        SANDBOX_RESULT_SUMMARY, /* the stream's tool_result summary (API.md 11.2) */
        _SANDBOX_RESULT_SHAPE_MAX,
        _SANDBOX_RESULT_SHAPE_INVALID = -EINVAL,
} SandboxResultShape;

/* SANDBOX_RESULT_TOOL: {"exit_code": int or null, "signal": string or null,
 * "timed_out", "stdout", "stderr", "files": [{"name", "size_bytes"}]}, in
 * that order; SANDBOX_RESULT_SUMMARY: the same without "stdout" and
 * "stderr". Strings made valid UTF-8 without NUL (json_string_bytes()).
 * Returns 0 and a new object in *ret, or -ENOMEM. */
int sandbox_result_to_json(const SandboxResult *r, SandboxResultShape shape, json_object **ret);
