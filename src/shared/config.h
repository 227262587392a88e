/* SPDX-License-Identifier: MIT */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "shared/netprefix.h"
#include "shared/wiki-user.h"

/* The daemon's configuration: the WIKI_WEB_* environment variables of
 * API.md, with their defaults and ranges, plus the two secrets read from
 * systemd credentials ($CREDENTIALS_DIRECTORY/wiki-password and
 * .../llm-api-key) or from the files named by WIKI_WEB_WIKI_PASSWORD_FILE and
 * WIKI_WEB_LLM_API_KEY_FILE. A secret is never printed: config_dump() masks it.
 *
 * A Config owns all its strings; config_done() frees them. */

/* Whose read permissions decide what a query may use (WIKI_WEB_WIKI_READ_AS,
 * API.md "Whose permissions"). */
typedef enum ConfigReadAs {
        CONFIG_READ_AS_SERVICE, /* the service account's: whatever it may read */
        CONFIG_READ_AS_PERSON,  /* the asking person's, checked by the wiki (WikiwebReadCheck) */
        _CONFIG_READ_AS_MAX,
        _CONFIG_READ_AS_INVALID = -EINVAL,
} ConfigReadAs;

/* "service", "person"; NULL out of range. And back: _CONFIG_READ_AS_INVALID
 * for anything else. */
const char *config_read_as_to_string(ConfigReadAs a);
ConfigReadAs config_read_as_from_string(const char *s);

typedef struct Config {
        /* HTTP (API.md 1, 3, 4) */
        uint64_t max_request_bytes;
        uint64_t session_max_age_seconds;
        bool cookie_secure;
        char **allowed_origins; /* NULL-terminated, normalised "scheme://host[:port]" */
        char **allowed_hosts;   /* WIKI_WEB_ALLOWED_HOSTS: names and "*.name", NULL-terminated */
        bool web_ui;            /* WIKI_WEB_UI: serve the page of API.md 13 at / */
        bool mcp;               /* WIKI_WEB_MCP: serve the MCP face at /mcp (API.md "MCP") */

        /* Admission (API.md 5) */
        uint64_t queue_reservation_seconds;
        uint64_t queue_heartbeat_seconds;
        uint64_t queue_max_length;
        uint64_t queue_slots; /* queries that run at once, 1..256 */

        /* Query (API.md 8) */
        char *wiki_api_url;       /* NULL when unset */
        char *wiki_username;      /* NULL when unset */
        char *llm_url;            /* NULL when unset */
        char *llm_model;          /* NULL when unset */
        char *user_agent_contact; /* NULL when unset: an email address or http(s) URL */
        uint64_t query_max_steps;
        uint64_t history_retention_days; /* 0: kept until deleted */
        uint64_t token_max_days;         /* a personal access token's longest life, and its default */
        uint64_t model_context_tokens;
        uint64_t model_max_output_bytes;
        uint64_t query_timeout_seconds;
        uint64_t upstream_max_response_bytes;
        char **allowed_destinations; /* NULL-terminated hosts */
        uint64_t tool_result_max_bytes;
        ConfigReadAs wiki_read_as; /* WIKI_WEB_WIKI_READ_AS, default service */
        bool wiki_read_as_set;     /* given explicitly (the start warns with identity and without it) */
        /* WIKI_WEB_WIKI_USER_FROM, _STRIP_SUFFIXES, _STRIP_PREFIXES: the
         * sign-on's name as a wiki account (API.md "Whose name"); the lists
         * never NULL once loaded */
        WikiUserMap wiki_user;

        /* Sandbox (API.md 8.3, 8.8) */
        char *sandbox_runtime; /* "crun" by default; a name on PATH or an absolute path */
        char *sandbox_rootfs;  /* NULL: a generated skeleton with the host's /usr read-only */
        uint64_t sandbox_timeout_seconds;
        uint64_t sandbox_memory_max_bytes;
        uint64_t sandbox_tasks_max;
        uint64_t sandbox_output_max_bytes;
        uint64_t artifact_max_files;
        uint64_t artifact_max_bytes;

        /* Daemon (extensions) */
        char *state_directory;       /* WIKI_WEB_STATE_DIRECTORY, else $STATE_DIRECTORY, else NULL */
        char *credentials_directory; /* $CREDENTIALS_DIRECTORY (systemd's), NULL when unset */
        int log_level;               /* WIKI_WEB_LOG_LEVEL: syslog level 0..7, default 6 (info) */
        uint64_t stop_grace_seconds; /* WIKI_WEB_STOP_GRACE_SECONDS: how long a stop waits for a query */
        /* WIKI_WEB_STATE_MIN_FREE_BYTES: less free space is storage "degraded"; 0: never */
        uint64_t state_min_free_bytes;

        /* HTTP connections (extensions) */
        uint64_t http_max_connections;         /* WIKI_WEB_HTTP_MAX_CONNECTIONS: 0 = from RLIMIT_NOFILE */
        uint64_t http_max_connections_per_ip;  /* WIKI_WEB_HTTP_MAX_CONNECTIONS_PER_IP: 0 = no limit */
        uint64_t http_request_timeout_seconds; /* WIKI_WEB_HTTP_REQUEST_TIMEOUT_SECONDS: whole request */

        /* Identity (API.md "Identity", extensions) */
        NetPrefix *trusted_proxies; /* WIKI_WEB_TRUSTED_PROXIES; NULL and 0: no identity */
        size_t n_trusted_proxies;
        char *user_header; /* WIKI_WEB_USER_HEADER: a header field name, "X-Remote-User" */
        bool require_user; /* WIKI_WEB_REQUIRE_USER: with trusted proxies, no identity is 403 */
        char **editors; /* WIKI_WEB_EDITORS: identity names who may read the unanswered report; never NULL */

        /* Secrets: never log, never print. NULL when absent. */
        char *wiki_password;
        char *llm_api_key;
} Config;

/* Where settings come from: getenv() in the daemon, a table in tests. */
typedef const char *(*ConfigGetenv)(const char *name, void *userdata);

/* Fill *c from the environment. Returns 0, or a negative errno with a
 * human-readable message naming the variable and its allowed range in
 * *ret_error (owned by the caller). On failure *c is left freed. */
int config_load(Config *c, ConfigGetenv getenv_fn, void *userdata, char **ret_error);

void config_done(Config *c);

/* The settings without which no query can run (API.md 6, health's
 * "missing_settings"): the names of those of WIKI_WEB_WIKI_API_URL,
 * WIKI_WEB_LLM_URL and WIKI_WEB_LLM_MODEL that are unset, in that order,
 * in ret (static strings, NULL-terminated). Returns how many. */
#define CONFIG_EXECUTION_SETTINGS_MAX 3
size_t config_missing_execution_settings(
        const Config *c, const char *ret[static CONFIG_EXECUTION_SETTINGS_MAX + 1]);

/* Print the effective configuration, one "NAME=value" line each, secrets
 * shown as "(set)" or "(unset)". */
void config_dump(const Config *c, FILE *f);
/* Whether v is a WIKI_WEB_USER_AGENT_CONTACT: an email address or an http(s)
 * URL of printable ASCII without spaces, parentheses or backslashes. */
bool config_user_agent_contact_is_valid(const char *v);

/* Whether the sandboxes of every slot fit in memory_bytes (the machine's
 * memory): WIKI_WEB_QUEUE_SLOTS runs of WIKI_WEB_SANDBOX_MEMORY_MAX_BYTES
 * each may be under way at once. 0, or -EINVAL with a message naming both
 * settings in *ret_error (owned by the caller). memory_bytes 0: unknown,
 * nothing is refused. */
int config_check_memory(const Config *c, uint64_t memory_bytes, char **ret_error);
/* Whether v is a WIKI_WEB_USER_HEADER: an HTTP field name (RFC 9110
 * token characters, 1 to 64 bytes) that is none of the fields the daemon
 * or a proxy gives another meaning (Host, Cookie, Origin, Forwarded, ...). */
bool config_user_header_is_valid(const char *v);
/* Whether identity is on: trusted proxies are set. */
static inline bool config_identity_enabled(const Config *c) {
        return c->n_trusted_proxies > 0;
}

/* Whether v is an identity name as WIKI_WEB_EDITORS lists it: 1 to 256
 * bytes of valid UTF-8 without control characters (API.md "Identity"). */
bool config_editor_name_is_valid(const char *v);
/* Whether user (NULL: anonymous) is one of WIKI_WEB_EDITORS, compared
 * exactly, as names are. */
bool config_is_editor(const Config *c, const char *user);

/* The getenv() adapter for config_load(). */
const char *config_getenv_process(const char *name, void *userdata);
