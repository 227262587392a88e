/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <fcntl.h>
#include <stdarg.h>
#include <strings.h>
#include <sys/stat.h>

#include "shared/config.h"
#include "shared/host.h"
#include "shared/macro.h"
#include "shared/parse-util.h"
#include "shared/strbuf.h"
#include "shared/strv.h"
#include "shared/utf8.h"

#define SECRET_MAX_BYTES 4096
#define LIST_MAX_ITEMS 256
#define STRING_MAX_BYTES 2048

const char *config_getenv_process(const char *name, void *userdata) {
        return getenv(name);
}

size_t config_missing_execution_settings(
        const Config *c, const char *ret[static CONFIG_EXECUTION_SETTINGS_MAX + 1]) {
        size_t n = 0;

        if (!c->wiki_api_url)
                ret[n++] = "WIKI_WEB_WIKI_API_URL";
        if (!c->llm_url)
                ret[n++] = "WIKI_WEB_LLM_URL";
        if (!c->llm_model)
                ret[n++] = "WIKI_WEB_LLM_MODEL";
        ret[n] = NULL;
        return n;
}

void config_done(Config *c) {
        if (!c)
                return;
        c->allowed_origins = strv_free(c->allowed_origins);
        c->allowed_hosts = strv_free(c->allowed_hosts);
        c->allowed_destinations = strv_free(c->allowed_destinations);
        free(c->wiki_api_url);
        free(c->wiki_username);
        free(c->llm_url);
        free(c->llm_model);
        free(c->user_agent_contact);
        free(c->sandbox_runtime);
        free(c->sandbox_rootfs);
        free(c->state_directory);
        free(c->credentials_directory);
        free(c->trusted_proxies);
        strv_free(c->editors);
        free(c->user_header);
        strv_free(c->wiki_user.strip_suffixes);
        strv_free(c->wiki_user.strip_prefixes);
        if (c->wiki_password)
                explicit_bzero(c->wiki_password, strlen(c->wiki_password));
        if (c->llm_api_key)
                explicit_bzero(c->llm_api_key, strlen(c->llm_api_key));
        free(c->wiki_password);
        free(c->llm_api_key);
        *c = (Config){ 0 };
}

DEFINE_TRIVIAL_CLEANUP_FUNC(Config *, config_done);

static int fail(char **ret_error, int r, const char *fmt, ...) _printf_(3, 4);
static int fail(char **ret_error, int r, const char *fmt, ...) {
        va_list ap;

        if (ret_error) {
                va_start(ap, fmt);
                *ret_error = strdup_vprintf(fmt, ap);
                va_end(ap);
        }
        return r;
}

static int load_uint(
        const char *name,
        uint64_t def,
        uint64_t min,
        uint64_t max,
        uint64_t *ret,
        ConfigGetenv g,
        void *u,
        char **ret_error) {
        const char *v = g(name, u);
        int r;

        if (!v) {
                *ret = def;
                return 0;
        }
        r = parse_uint64_range(v, min, max, ret);
        if (r < 0)
                return fail(
                        ret_error,
                        -EINVAL,
                        "%s: invalid value, expected an integer in %" PRIu64 "..%" PRIu64,
                        name,
                        min,
                        max);
        return 0;
}

static int load_string(const char *name, char **ret, ConfigGetenv g, void *u, char **ret_error) {
        const char *v = g(name, u);

        *ret = NULL;
        if (!v || !*v)
                return 0;
        if (strlen(v) > STRING_MAX_BYTES)
                return fail(ret_error, -EINVAL, "%s: longer than %d bytes", name, STRING_MAX_BYTES);
        for (const char *p = v; *p; p++)
                if ((unsigned char) *p < 0x20 || *p == 0x7f)
                        return fail(ret_error, -EINVAL, "%s: contains a control character", name);
        *ret = strdup(v);
        return *ret ? 0 : -ENOMEM;
}

/* The operator's contact for the upstream User-Agent: "user@host" or an
 * http(s) URL; printable ASCII without spaces, parentheses or backslashes
 * (it goes inside the comment of a header), at most 200 bytes. */
#define USER_AGENT_CONTACT_MAX 200

bool config_user_agent_contact_is_valid(const char *v) {
        const char *at;

        if (!v || !*v || strlen(v) > USER_AGENT_CONTACT_MAX)
                return false;
        for (const char *p = v; *p; p++)
                if (*p <= 0x20 || *p >= 0x7f || strchr("()\\\"", *p))
                        return false;
        if (strneq(v, "https://", 8))
                return v[8] != 0 && v[8] != '/';
        if (strneq(v, "http://", 7))
                return v[7] != 0 && v[7] != '/';
        at = strchr(v, '@');
        return at && at != v && at[1] && !strchr(at + 1, '@') && !strchr(v, '/') && !strchr(v, ':') &&
                strchr(at + 1, '.');
}

static bool is_host_char(char ch) {
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                ch == '-' || ch == '.' || ch == '_' || ch == '[' || ch == ']' || ch == ':';
}

/* "http://host[:port]" or "https://host[:port]", no path, no user info. */
static bool config_origin_is_valid(const char *o) {
        const char *h;

        if (strneq(o, "http://", 7))
                h = o + 7;
        else if (strneq(o, "https://", 8))
                h = o + 8;
        else
                return false;
        if (!*h)
                return false;
        for (const char *p = h; *p; p++)
                if (!is_host_char(*p))
                        return false;
        return true;
}

static bool config_host_is_valid(const char *h) {
        if (!*h || strlen(h) > 253)
                return false;
        for (const char *p = h; *p; p++)
                if (!is_host_char(*p) || *p == ':')
                        return h[0] == '[' ? is_host_char(*p) : false;
        return true;
}

/* A comma-separated list; blanks around items are dropped, empty items
 * ignored. */
static int load_list(
        const char *name, bool (*valid)(const char *), char ***ret, ConfigGetenv g, void *u, char **ret_error) {
        _cleanup_(strv_freep) char **l = NULL;
        const char *v = g(name, u);
        int r;

        *ret = NULL;
        if (v && strlen(v) > STRING_MAX_BYTES * 4)
                return fail(ret_error, -EINVAL, "%s: longer than %d bytes", name, STRING_MAX_BYTES * 4);
        r = strv_split_list(v, &l);
        if (r < 0)
                return r;
        for (size_t n = 0; l[n]; n++) {
                char *item = l[n];
                size_t k = strlen(item);

                if (n >= LIST_MAX_ITEMS)
                        return fail(ret_error, -EINVAL, "%s: more than %d items", name, LIST_MAX_ITEMS);
                /* Trailing "/" on an origin is a common slip; an origin never has one. */
                if (valid == config_origin_is_valid && item[k - 1] == '/')
                        item[k - 1] = 0;
                if (!valid(item))
                        return fail(ret_error, -EINVAL, "%s: invalid item \"%s\"", name, item);
        }
        *ret = TAKE_PTR(l);
        return 0;
}

/* RFC 9110 5.6.2: tchar. */
static bool is_tchar(char ch) {
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

#define USER_HEADER_MAX 64

bool config_user_header_is_valid(const char *v) {
        /* Fields that carry something else: the identity must not be read
         * from the framing, the session, the origin policy or the
         * forwarding headers, nor be confused with them. */
        static const char *const reserved[] = {
                "Host",
                "Cookie",
                "Origin",
                "Content-Length",
                "Content-Type",
                "Transfer-Encoding",
                "Connection",
                "Authorization",
                "Forwarded",
                "X-Forwarded-For",
                "X-Forwarded-Host",
                "X-Forwarded-Proto",
                "X-Real-IP",
                "Sec-Fetch-Site",
                "Accept",
                "Last-Event-ID",
        };

        if (!v || !*v || strlen(v) > USER_HEADER_MAX)
                return false;
        for (const char *p = v; *p; p++)
                if (!is_tchar(*p))
                        return false;
        for (size_t i = 0; i < ELEMENTSOF(reserved); i++)
                if (strcasecmp(v, reserved[i]) == 0)
                        return false;
        return true;
}

/* Whether s is printable ASCII, so that it can be quoted in a message. */
static bool is_printable(const char *s) {
        for (; *s; s++)
                if ((unsigned char) *s < 0x20 || (unsigned char) *s >= 0x7f)
                        return false;
        return true;
}

/* The sign-on's name as a wiki account (API.md "Whose name"). The lists
 * strip a name; an address is the wiki's to match, so they do not go with
 * WIKI_WEB_WIKI_USER_FROM=email. */
static int load_wiki_user(WikiUserMap *m, ConfigGetenv g, void *u, char **ret_error) {
        const char *v = g("WIKI_WEB_WIKI_USER_FROM", u);
        int r;

        m->from = v ? wiki_user_from_from_string(v) : WIKI_USER_FROM_NAME;
        if (m->from < 0)
                return fail(
                        ret_error, -EINVAL, "WIKI_WEB_WIKI_USER_FROM: invalid value, expected name or email");
        r = load_list(
                "WIKI_WEB_WIKI_USER_STRIP_SUFFIXES", wiki_user_suffix_is_valid, &m->strip_suffixes, g, u, ret_error);
        if (r < 0)
                return r;
        r = load_list(
                "WIKI_WEB_WIKI_USER_STRIP_PREFIXES", wiki_user_prefix_is_valid, &m->strip_prefixes, g, u, ret_error);
        if (r < 0)
                return r;
        if (m->from == WIKI_USER_FROM_EMAIL && (m->strip_suffixes[0] || m->strip_prefixes[0]))
                return fail(
                        ret_error,
                        -EINVAL,
                        "WIKI_WEB_WIKI_USER_STRIP_%s: strips a name, not an address: not with "
                        "WIKI_WEB_WIKI_USER_FROM=email",
                        m->strip_suffixes[0] ? "SUFFIXES" : "PREFIXES");
        return 0;
}

/* WIKI_WEB_TRUSTED_PROXIES: comma-separated addresses and prefixes (blanks
 * around items dropped, empty items ignored). Every entry must parse;
 * a wildcard is refused with a message of its own, since it is the one
 * mistake that turns the identity header into anybody's claim. */
static int load_trusted_proxies(Config *c, ConfigGetenv g, void *u, char **ret_error) {
        const char *name = "WIKI_WEB_TRUSTED_PROXIES";
        _cleanup_free_ NetPrefix *l = NULL;
        _cleanup_(strv_freep) char **items = NULL;
        const char *v = g(name, u);
        size_t n = 0;
        int r;

        if (!v || !*v)
                return 0;
        if (strlen(v) > STRING_MAX_BYTES)
                return fail(ret_error, -EINVAL, "%s: longer than %d bytes", name, STRING_MAX_BYTES);
        r = strv_split_list(v, &items);
        if (r < 0)
                return r;
        if (!items[0])
                return 0;
        l = calloc(LIST_MAX_ITEMS, sizeof(NetPrefix));
        if (!l)
                return -ENOMEM;
        for (char **item = items; *item; item++) {
                if (n >= LIST_MAX_ITEMS)
                        return fail(ret_error, -EINVAL, "%s: more than %d items", name, LIST_MAX_ITEMS);
                r = net_prefix_parse(*item, strlen(*item), &l[n]);
                if (r == -EPERM)
                        return fail(
                                ret_error,
                                -EINVAL,
                                "%s: \"%s\" is a wildcard, which would trust every peer; list the "
                                "proxies' own addresses",
                                name,
                                is_printable(*item) ? *item : "(unprintable)");
                if (r < 0)
                        return fail(
                                ret_error,
                                -EINVAL,
                                "%s: invalid item \"%s\", expected an IPv4 or IPv6 address or "
                                "ADDRESS/LENGTH without host bits",
                                name,
                                is_printable(*item) && strlen(*item) <= NET_PREFIX_STRING_MAX ?
                                        *item :
                                        "(unprintable or too long)");
                n++;
        }
        c->trusted_proxies = TAKE_PTR(l);
        c->n_trusted_proxies = n;
        return 0;
}

static int read_secret_file(const char *path, char **ret) {
        _cleanup_close_ int fd = -1;
        char buf[SECRET_MAX_BYTES + 1];
        size_t n = 0;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return negative_errno();
        for (;;) {
                ssize_t k = read(fd, buf + n, sizeof buf - n);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (k == 0)
                        break;
                n += (size_t) k;
                if (n >= sizeof buf) {
                        explicit_bzero(buf, sizeof buf);
                        return -EFBIG;
                }
        }
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
                n--;
        if (memchr(buf, 0, n)) {
                explicit_bzero(buf, sizeof buf);
                return -EBADMSG;
        }
        *ret = strndup(buf, n);
        explicit_bzero(buf, sizeof buf);
        return *ret ? 0 : -ENOMEM;
}

/* A secret comes from $CREDENTIALS_DIRECTORY/<credential> (systemd's
 * LoadCredential=) or from the file named by <file_var>. A missing
 * credential is fine (the secret is optional); an unreadable file is not. */
static int load_secret(
        const char *credential, const char *file_var, char **ret, ConfigGetenv g, void *u, char **ret_error) {
        const char *dir = g("CREDENTIALS_DIRECTORY", u);
        const char *file = g(file_var, u);
        int r;

        *ret = NULL;
        if (file && *file) {
                r = read_secret_file(file, ret);
                if (r < 0)
                        return fail(
                                ret_error,
                                -EINVAL,
                                "%s: cannot read the secret file: %s",
                                file_var,
                                strerror(-r));
                return 0;
        }
        if (dir && *dir) {
                _cleanup_free_ char *path = NULL;

                if (asprintf(&path, "%s/%s", dir, credential) < 0)
                        return -ENOMEM;
                r = read_secret_file(path, ret);
                if (r == -ENOENT)
                        return 0;
                if (r < 0)
                        return fail(
                                ret_error,
                                -EINVAL,
                                "credential %s: cannot read it: %s",
                                credential,
                                strerror(-r));
        }
        return 0;
}

static bool url_is_valid(const char *s) {
        return strneq(s, "http://", 7) || strneq(s, "https://", 8);
}

int config_check_memory(const Config *c, uint64_t memory_bytes, char **ret_error) {
        assert(c);

        if (ret_error)
                *ret_error = NULL;
        /* Both are bounded (256 and 64 GiB): the product cannot overflow. */
        if (memory_bytes == 0 || c->queue_slots * c->sandbox_memory_max_bytes <= memory_bytes)
                return 0;
        return fail(
                ret_error,
                -EINVAL,
                "WIKI_WEB_QUEUE_SLOTS (%" PRIu64 ") times WIKI_WEB_SANDBOX_MEMORY_MAX_BYTES (%" PRIu64
                ") is %" PRIu64 " bytes, more than this machine's memory (%" PRIu64
                " bytes): lower one of them",
                c->queue_slots,
                c->sandbox_memory_max_bytes,
                c->queue_slots * c->sandbox_memory_max_bytes,
                memory_bytes);
}

static const char *const config_read_as_table[_CONFIG_READ_AS_MAX] = {
        [CONFIG_READ_AS_SERVICE] = "service",
        [CONFIG_READ_AS_PERSON] = "person",
};

const char *config_read_as_to_string(ConfigReadAs a) {
        return a >= 0 && a < _CONFIG_READ_AS_MAX ? config_read_as_table[a] : NULL;
}

ConfigReadAs config_read_as_from_string(const char *s) {
        for (ConfigReadAs a = 0; s && a < _CONFIG_READ_AS_MAX; a++)
                if (streq(s, config_read_as_table[a]))
                        return a;
        return _CONFIG_READ_AS_INVALID;
}

/* The numbers, each with its default and range. */
static int load_limits(Config *c, ConfigGetenv g, void *u, char **ret_error) {
        int r;

#define UINT(name, field, def, min, max)                                        \
        do {                                                                    \
                r = load_uint(name, def, min, max, &c->field, g, u, ret_error); \
                if (r < 0)                                                      \
                        return r;                                               \
        } while (0)

        UINT("WIKI_WEB_MAX_REQUEST_BYTES", max_request_bytes, 65536, 256, 16 * 1024 * 1024);
        UINT("WIKI_WEB_SESSION_MAX_AGE_SECONDS", session_max_age_seconds, 2592000, 60, 315360000);
        UINT("WIKI_WEB_QUEUE_RESERVATION_SECONDS", queue_reservation_seconds, 60, 1, 3600);
        UINT("WIKI_WEB_QUEUE_HEARTBEAT_SECONDS", queue_heartbeat_seconds, 30, 1, 3600);
        UINT("WIKI_WEB_QUEUE_MAX_LENGTH", queue_max_length, 100, 0, 1000000);
        UINT("WIKI_WEB_QUEUE_SLOTS", queue_slots, 1, 1, 256);
        /* Days a record is kept, counted from when it was asked; 0: until deleted. */
        UINT("WIKI_WEB_HISTORY_RETENTION_DAYS", history_retention_days, 0, 0, 36500);
        /* The longest life of a personal access token, and its default. */
        UINT("WIKI_WEB_TOKEN_MAX_DAYS", token_max_days, 90, 1, 3650);
        UINT("WIKI_WEB_QUERY_MAX_STEPS", query_max_steps, 8, 1, 64);
        UINT("WIKI_WEB_MODEL_CONTEXT_TOKENS", model_context_tokens, 32768, 256, 10000000);
        UINT("WIKI_WEB_MODEL_MAX_OUTPUT_BYTES", model_max_output_bytes, 65536, 1024, 16 * 1024 * 1024);
        UINT("WIKI_WEB_QUERY_TIMEOUT_SECONDS", query_timeout_seconds, 120, 1, 86400);
        UINT("WIKI_WEB_UPSTREAM_MAX_RESPONSE_BYTES",
             upstream_max_response_bytes,
             8 * 1024 * 1024,
             1024,
             1024 * 1024 * 1024);
        UINT("WIKI_WEB_TOOL_RESULT_MAX_BYTES", tool_result_max_bytes, 16384, 1024, 1048576);
        UINT("WIKI_WEB_SANDBOX_TIMEOUT_SECONDS", sandbox_timeout_seconds, 30, 1, 3600);
        UINT("WIKI_WEB_SANDBOX_MEMORY_MAX_BYTES",
             sandbox_memory_max_bytes,
             UINT64_C(536870912),
             UINT64_C(16777216),
             UINT64_C(68719476736));
        UINT("WIKI_WEB_SANDBOX_TASKS_MAX", sandbox_tasks_max, 64, 4, 4096);
        UINT("WIKI_WEB_SANDBOX_OUTPUT_MAX_BYTES", sandbox_output_max_bytes, 16384, 1024, 1048576);
        UINT("WIKI_WEB_ARTIFACT_MAX_FILES", artifact_max_files, 16, 0, 1000);
        UINT("WIKI_WEB_ARTIFACT_MAX_BYTES", artifact_max_bytes, UINT64_C(67108864), 0, UINT64_C(17179869184));
        UINT("WIKI_WEB_STOP_GRACE_SECONDS", stop_grace_seconds, 90, 1, 3600);
        UINT("WIKI_WEB_STATE_MIN_FREE_BYTES",
             state_min_free_bytes,
             UINT64_C(67108864),
             0,
             UINT64_C(1125899906842624));
        UINT("WIKI_WEB_HTTP_MAX_CONNECTIONS", http_max_connections, 0, 0, 1000000);
        UINT("WIKI_WEB_HTTP_MAX_CONNECTIONS_PER_IP", http_max_connections_per_ip, 64, 0, 1000000);
        UINT("WIKI_WEB_HTTP_REQUEST_TIMEOUT_SECONDS", http_request_timeout_seconds, 10, 1, 3600);
#undef UINT
        return 0;
}

/* The switches, the log level and whose rights the wiki is read with. */
static int load_switches(Config *c, ConfigGetenv g, void *u, char **ret_error) {
        const char *v;
        int r;
        uint64_t level;

        v = g("WIKI_WEB_COOKIE_SECURE", u);
        if (v && parse_boolean(v, &c->cookie_secure) < 0)
                return fail(
                        ret_error, -EINVAL, "WIKI_WEB_COOKIE_SECURE: invalid value, expected true or false");

        v = g("WIKI_WEB_UI", u);
        if (v && parse_boolean(v, &c->web_ui) < 0)
                return fail(ret_error, -EINVAL, "WIKI_WEB_UI: invalid value, expected true or false");

        v = g("WIKI_WEB_MCP", u);
        if (v && parse_boolean(v, &c->mcp) < 0)
                return fail(ret_error, -EINVAL, "WIKI_WEB_MCP: invalid value, expected true or false");

        v = g("WIKI_WEB_LOG_LEVEL", u);
        if (v) {
                if (parse_uint64_range(v, 0, 7, &level) < 0)
                        return fail(
                                ret_error,
                                -EINVAL,
                                "WIKI_WEB_LOG_LEVEL: invalid value, expected an integer in 0..7");
                c->log_level = (int) level;
        }

        v = g("WIKI_WEB_WIKI_READ_AS", u);
        if (v) {
                c->wiki_read_as = config_read_as_from_string(v);
                if (c->wiki_read_as < 0)
                        return fail(
                                ret_error,
                                -EINVAL,
                                "WIKI_WEB_WIKI_READ_AS: invalid value, expected service or person");
                c->wiki_read_as_set = true;
        }

        r = load_wiki_user(&c->wiki_user, g, u, ret_error);
        if (r < 0)
                return r;

        v = g("WIKI_WEB_REQUIRE_USER", u);
        if (v && parse_boolean(v, &c->require_user) < 0)
                return fail(ret_error, -EINVAL, "WIKI_WEB_REQUIRE_USER: invalid value, expected true or false");
        return 0;
}

/* Who the people are: the proxies trusted to name them, the header that
 * carries the name, the editors. */
static int load_identity(Config *c, ConfigGetenv g, void *u, char **ret_error) {
        const char *v;
        int r;

        r = load_trusted_proxies(c, g, u, ret_error);
        if (r < 0)
                return r;
        v = g("WIKI_WEB_USER_HEADER", u);
        if (v && !config_user_header_is_valid(v))
                return fail(
                        ret_error,
                        -EINVAL,
                        "WIKI_WEB_USER_HEADER: expected an HTTP header field name of at most %d bytes, "
                        "not one the daemon reads for something else",
                        USER_HEADER_MAX);
        c->user_header = strdup(v ? v : "X-Remote-User");
        if (!c->user_header)
                return -ENOMEM;

        r = load_list("WIKI_WEB_EDITORS", config_editor_name_is_valid, &c->editors, g, u, ret_error);
        if (r < 0)
                return r;
        /* Without trusted proxies nobody has a name: the list could only
         * ever be mistaken for working. */
        if (c->editors[0] && !config_identity_enabled(c))
                return fail(
                        ret_error,
                        -EINVAL,
                        "WIKI_WEB_EDITORS: needs WIKI_WEB_TRUSTED_PROXIES, without which nobody has a name");
        return 0;
}

/* Where the daemon talks to and from: origins, destinations, the upstreams'
 * URLs, the sandbox's runtime and root, the state directory. */
static int load_endpoints(Config *c, ConfigGetenv g, void *u, char **ret_error) {
        const char *v;
        int r;

        r = load_list("WIKI_WEB_ALLOWED_ORIGINS", config_origin_is_valid, &c->allowed_origins, g, u, ret_error);
        if (r < 0)
                return r;
        r = load_list("WIKI_WEB_ALLOWED_HOSTS", host_pattern_is_valid, &c->allowed_hosts, g, u, ret_error);
        if (r < 0)
                return r;
        r = load_list(
                "WIKI_WEB_ALLOWED_DESTINATIONS", config_host_is_valid, &c->allowed_destinations, g, u, ret_error);
        if (r < 0)
                return r;

        if ((r = load_string("WIKI_WEB_WIKI_API_URL", &c->wiki_api_url, g, u, ret_error)) < 0 ||
            (r = load_string("WIKI_WEB_WIKI_USERNAME", &c->wiki_username, g, u, ret_error)) < 0 ||
            (r = load_string("WIKI_WEB_LLM_URL", &c->llm_url, g, u, ret_error)) < 0 ||
            (r = load_string("WIKI_WEB_LLM_MODEL", &c->llm_model, g, u, ret_error)) < 0 ||
            (r = load_string("WIKI_WEB_USER_AGENT_CONTACT", &c->user_agent_contact, g, u, ret_error)) < 0 ||
            (r = load_string("WIKI_WEB_SANDBOX_RUNTIME", &c->sandbox_runtime, g, u, ret_error)) < 0 ||
            (r = load_string("WIKI_WEB_SANDBOX_ROOTFS", &c->sandbox_rootfs, g, u, ret_error)) < 0 ||
            (r = load_string("WIKI_WEB_STATE_DIRECTORY", &c->state_directory, g, u, ret_error)) < 0)
                return r;
        if (!c->sandbox_runtime) {
                c->sandbox_runtime = strdup("crun");
                if (!c->sandbox_runtime)
                        return -ENOMEM;
        }
        if (c->user_agent_contact && !config_user_agent_contact_is_valid(c->user_agent_contact))
                return fail(
                        ret_error,
                        -EINVAL,
                        "WIKI_WEB_USER_AGENT_CONTACT: not an email address or http(s) URL of at most %d "
                        "printable bytes without spaces or parentheses",
                        USER_AGENT_CONTACT_MAX);
        if (c->sandbox_rootfs && c->sandbox_rootfs[0] != '/')
                return fail(ret_error, -EINVAL, "WIKI_WEB_SANDBOX_ROOTFS: expected an absolute path");
        if (c->wiki_api_url && !url_is_valid(c->wiki_api_url))
                return fail(ret_error, -EINVAL, "WIKI_WEB_WIKI_API_URL: expected an http:// or https:// URL");
        if (c->llm_url && !url_is_valid(c->llm_url))
                return fail(ret_error, -EINVAL, "WIKI_WEB_LLM_URL: expected an http:// or https:// URL");
        v = g("CREDENTIALS_DIRECTORY", u);
        if (v && *v) {
                c->credentials_directory = strdup(v);
                if (!c->credentials_directory)
                        return -ENOMEM;
        }
        if (!c->state_directory) {
                /* systemd's StateDirectory= may list several, colon-separated: take the first. */
                v = g("STATE_DIRECTORY", u);
                if (v && *v) {
                        c->state_directory = strndup(v, strcspn(v, ":"));
                        if (!c->state_directory)
                                return -ENOMEM;
                }
        }
        return 0;
}

int config_load(Config *c, ConfigGetenv g, void *u, char **ret_error) {
        _cleanup_(config_donep) Config *loading = NULL;
        int r;

        assert(c);
        assert(g);

        if (ret_error)
                *ret_error = NULL;
        *c = (Config){ .cookie_secure = true, .web_ui = true, .mcp = true, .log_level = 6, .require_user = true };
        loading = c; /* emptied again on any failure */

        r = load_limits(c, g, u, ret_error);
        if (r < 0)
                return r;
        r = load_switches(c, g, u, ret_error);
        if (r < 0)
                return r;
        r = load_identity(c, g, u, ret_error);
        if (r < 0)
                return r;
        r = load_endpoints(c, g, u, ret_error);
        if (r < 0)
                return r;
        r = load_secret("wiki-password", "WIKI_WEB_WIKI_PASSWORD_FILE", &c->wiki_password, g, u, ret_error);
        if (r < 0)
                return r;
        r = load_secret("llm-api-key", "WIKI_WEB_LLM_API_KEY_FILE", &c->llm_api_key, g, u, ret_error);
        if (r < 0)
                return r;
        TAKE_PTR(loading);
        return 0;
}

static void dump_list(FILE *f, const char *name, char **l) {
        fprintf(f, "%s=", name);
        for (char **p = l; p && *p; p++)
                fprintf(f, "%s%s", p == l ? "" : ",", *p);
        fputc('\n', f);
}

void config_dump(const Config *c, FILE *f) {
        assert(c);
        assert(f);

        fprintf(f, "WIKI_WEB_MAX_REQUEST_BYTES=%" PRIu64 "\n", c->max_request_bytes);
        fprintf(f, "WIKI_WEB_SESSION_MAX_AGE_SECONDS=%" PRIu64 "\n", c->session_max_age_seconds);
        fprintf(f, "WIKI_WEB_COOKIE_SECURE=%s\n", c->cookie_secure ? "true" : "false");
        dump_list(f, "WIKI_WEB_ALLOWED_ORIGINS", c->allowed_origins);
        dump_list(f, "WIKI_WEB_ALLOWED_HOSTS", c->allowed_hosts);
        fprintf(f, "WIKI_WEB_UI=%s\n", c->web_ui ? "true" : "false");
        fprintf(f, "WIKI_WEB_MCP=%s\n", c->mcp ? "true" : "false");
        fprintf(f, "WIKI_WEB_QUEUE_RESERVATION_SECONDS=%" PRIu64 "\n", c->queue_reservation_seconds);
        fprintf(f, "WIKI_WEB_QUEUE_HEARTBEAT_SECONDS=%" PRIu64 "\n", c->queue_heartbeat_seconds);
        fprintf(f, "WIKI_WEB_QUEUE_MAX_LENGTH=%" PRIu64 "\n", c->queue_max_length);
        fprintf(f, "WIKI_WEB_QUEUE_SLOTS=%" PRIu64 "\n", c->queue_slots);
        fprintf(f, "WIKI_WEB_HISTORY_RETENTION_DAYS=%" PRIu64 "\n", c->history_retention_days);
        fprintf(f, "WIKI_WEB_TOKEN_MAX_DAYS=%" PRIu64 "\n", c->token_max_days);
        fprintf(f, "WIKI_WEB_WIKI_API_URL=%s\n", c->wiki_api_url ? c->wiki_api_url : "");
        fprintf(f, "WIKI_WEB_WIKI_USERNAME=%s\n", c->wiki_username ? c->wiki_username : "");
        fprintf(f, "WIKI_WEB_LLM_URL=%s\n", c->llm_url ? c->llm_url : "");
        fprintf(f, "WIKI_WEB_LLM_MODEL=%s\n", c->llm_model ? c->llm_model : "");
        fprintf(f, "WIKI_WEB_USER_AGENT_CONTACT=%s\n", c->user_agent_contact ? c->user_agent_contact : "");
        fprintf(f, "WIKI_WEB_QUERY_MAX_STEPS=%" PRIu64 "\n", c->query_max_steps);
        fprintf(f, "WIKI_WEB_MODEL_CONTEXT_TOKENS=%" PRIu64 "\n", c->model_context_tokens);
        fprintf(f, "WIKI_WEB_MODEL_MAX_OUTPUT_BYTES=%" PRIu64 "\n", c->model_max_output_bytes);
        fprintf(f, "WIKI_WEB_QUERY_TIMEOUT_SECONDS=%" PRIu64 "\n", c->query_timeout_seconds);
        fprintf(f, "WIKI_WEB_UPSTREAM_MAX_RESPONSE_BYTES=%" PRIu64 "\n", c->upstream_max_response_bytes);
        dump_list(f, "WIKI_WEB_ALLOWED_DESTINATIONS", c->allowed_destinations);
        fprintf(f, "WIKI_WEB_TOOL_RESULT_MAX_BYTES=%" PRIu64 "\n", c->tool_result_max_bytes);
        fprintf(f, "WIKI_WEB_WIKI_READ_AS=%s\n", config_read_as_to_string(c->wiki_read_as));
        fprintf(f, "WIKI_WEB_WIKI_USER_FROM=%s\n", wiki_user_from_to_string(c->wiki_user.from));
        dump_list(f, "WIKI_WEB_WIKI_USER_STRIP_SUFFIXES", c->wiki_user.strip_suffixes);
        dump_list(f, "WIKI_WEB_WIKI_USER_STRIP_PREFIXES", c->wiki_user.strip_prefixes);
        fprintf(f, "WIKI_WEB_SANDBOX_RUNTIME=%s\n", c->sandbox_runtime ? c->sandbox_runtime : "");
        fprintf(f, "WIKI_WEB_SANDBOX_ROOTFS=%s\n", c->sandbox_rootfs ? c->sandbox_rootfs : "");
        fprintf(f, "WIKI_WEB_SANDBOX_TIMEOUT_SECONDS=%" PRIu64 "\n", c->sandbox_timeout_seconds);
        fprintf(f, "WIKI_WEB_SANDBOX_MEMORY_MAX_BYTES=%" PRIu64 "\n", c->sandbox_memory_max_bytes);
        fprintf(f, "WIKI_WEB_SANDBOX_TASKS_MAX=%" PRIu64 "\n", c->sandbox_tasks_max);
        fprintf(f, "WIKI_WEB_SANDBOX_OUTPUT_MAX_BYTES=%" PRIu64 "\n", c->sandbox_output_max_bytes);
        fprintf(f, "WIKI_WEB_ARTIFACT_MAX_FILES=%" PRIu64 "\n", c->artifact_max_files);
        fprintf(f, "WIKI_WEB_ARTIFACT_MAX_BYTES=%" PRIu64 "\n", c->artifact_max_bytes);
        fprintf(f, "WIKI_WEB_STATE_DIRECTORY=%s\n", c->state_directory ? c->state_directory : "");
        fprintf(f, "WIKI_WEB_STATE_MIN_FREE_BYTES=%" PRIu64 "\n", c->state_min_free_bytes);
        fprintf(f, "WIKI_WEB_LOG_LEVEL=%d\n", c->log_level);
        fprintf(f, "WIKI_WEB_STOP_GRACE_SECONDS=%" PRIu64 "\n", c->stop_grace_seconds);
        fprintf(f, "WIKI_WEB_HTTP_MAX_CONNECTIONS=%" PRIu64 "\n", c->http_max_connections);
        fprintf(f, "WIKI_WEB_HTTP_MAX_CONNECTIONS_PER_IP=%" PRIu64 "\n", c->http_max_connections_per_ip);
        fprintf(f, "WIKI_WEB_HTTP_REQUEST_TIMEOUT_SECONDS=%" PRIu64 "\n", c->http_request_timeout_seconds);
        fprintf(f, "WIKI_WEB_TRUSTED_PROXIES=");
        for (size_t i = 0; i < c->n_trusted_proxies; i++) {
                char buf[NET_PREFIX_STRING_MAX];

                net_prefix_format(&c->trusted_proxies[i], buf);
                fprintf(f, "%s%s", i > 0 ? "," : "", buf);
        }
        fputc('\n', f);
        fprintf(f, "WIKI_WEB_USER_HEADER=%s\n", c->user_header ? c->user_header : "");
        fprintf(f, "WIKI_WEB_REQUIRE_USER=%s\n", c->require_user ? "true" : "false");
        dump_list(f, "WIKI_WEB_EDITORS", c->editors);
        /* Secrets: only whether they are present. */
        fprintf(f, "credential wiki-password=%s\n", c->wiki_password ? "(set, masked)" : "(unset)");
        fprintf(f, "credential llm-api-key=%s\n", c->llm_api_key ? "(set, masked)" : "(unset)");
}

bool config_editor_name_is_valid(const char *v) {
        size_t n = strlen(v);

        if (n < 1 || n > 256 || !utf8_is_valid(v, n))
                return false;
        for (size_t i = 0; i < n;) {
                uint32_t cp;
                size_t l = utf8_decode((const uint8_t *) v + i, n - i, &cp);

                if (l == 0 || cp < 0x20 || (cp >= 0x7f && cp <= 0x9f))
                        return false;
                i += l;
        }
        return true;
}

bool config_is_editor(const Config *c, const char *user) {
        if (!user || !c->editors)
                return false;
        for (char **e = c->editors; *e; e++)
                if (streq(*e, user))
                        return true;
        return false;
}
