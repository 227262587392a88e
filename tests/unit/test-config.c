/* SPDX-License-Identifier: MIT */
#include <ctype.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "shared/config.h"
#include "shared/macro.h"
#include "shared/parse-util.h"
#include "tests.h"

/* A fake environment: NULL-terminated "NAME=value" strings. */
static const char *fake_getenv(const char *name, void *userdata) {
        const char *const *env = userdata;
        size_t n = strlen(name);

        for (; env && *env; env++)
                if (strncmp(*env, name, n) == 0 && (*env)[n] == '=')
                        return *env + n + 1;
        return NULL;
}

static int load(const char *const *env, Config *c, char **err) {
        return config_load(c, fake_getenv, (void *) env, err);
}

TEST(defaults) {
        Config c;
        char *err = NULL;

        ASSERT_OK(load(NULL, &c, &err));
        ASSERT_EQ_INT(c.max_request_bytes, 65536);
        ASSERT_EQ_INT(c.session_max_age_seconds, 2592000);
        ASSERT_TRUE(c.cookie_secure);
        ASSERT_TRUE(c.web_ui);
        ASSERT_TRUE(c.allowed_origins && !c.allowed_origins[0]);
        ASSERT_EQ_INT(c.queue_reservation_seconds, 60);
        ASSERT_EQ_INT(c.queue_heartbeat_seconds, 30);
        ASSERT_EQ_INT(c.queue_max_length, 100);
        ASSERT_EQ_INT(c.queue_slots, 1);
        ASSERT_EQ_INT(c.query_max_steps, 8);
        ASSERT_EQ_INT(c.query_timeout_seconds, 120);
        ASSERT_EQ_INT(c.upstream_max_response_bytes, 8 * 1024 * 1024);
        ASSERT_EQ_INT(c.tool_result_max_bytes, 16384);
        ASSERT_EQ_STR(c.sandbox_runtime, "crun");
        ASSERT_TRUE(!c.sandbox_rootfs);
        ASSERT_EQ_INT(c.sandbox_timeout_seconds, 30);
        ASSERT_EQ_INT(c.sandbox_memory_max_bytes, 536870912);
        ASSERT_EQ_INT(c.sandbox_tasks_max, 64);
        ASSERT_EQ_INT(c.sandbox_output_max_bytes, 16384);
        ASSERT_EQ_INT(c.artifact_max_files, 16);
        ASSERT_EQ_INT(c.artifact_max_bytes, 67108864);
        ASSERT_EQ_INT(c.http_max_connections, 0);
        ASSERT_EQ_INT(c.http_max_connections_per_ip, 64);
        ASSERT_EQ_INT(c.http_request_timeout_seconds, 10);
        ASSERT_TRUE(!c.wiki_password && !c.llm_api_key);
        ASSERT_TRUE(!c.trusted_proxies && c.n_trusted_proxies == 0);
        ASSERT_TRUE(!config_identity_enabled(&c));
        ASSERT_EQ_STR(c.user_header, "X-Remote-User");
        ASSERT_TRUE(c.require_user);
        config_done(&c);
}

static void expect_bad(const char *setting, const char *needle) {
        const char *env[] = { setting, NULL };
        Config c;
        char *err = NULL;

        ASSERT_TRUE(load(env, &c, &err) < 0);
        ASSERT_TRUE(err);
        if (!strstr(err, needle)) {
                fprintf(stderr, "error for %s lacks \"%s\": %s\n", setting, needle, err);
                abort();
        }
        free(err);
}

TEST(ranges) {
        const char *ok[] = {
                "WIKI_WEB_QUEUE_RESERVATION_SECONDS=1",
                "WIKI_WEB_QUEUE_HEARTBEAT_SECONDS=3600",
                "WIKI_WEB_QUEUE_MAX_LENGTH=0",
                "WIKI_WEB_COOKIE_SECURE=false",
                "WIKI_WEB_UI=false",
                "WIKI_WEB_ALLOWED_ORIGINS= https://a.example , http://b.example:8080/ ,",
                "WIKI_WEB_ALLOWED_DESTINATIONS=wiki.example,10.0.0.1",
                NULL,
        };
        Config c;
        char *err = NULL;

        ASSERT_OK(load(ok, &c, &err));
        ASSERT_EQ_INT(c.queue_reservation_seconds, 1);
        ASSERT_EQ_INT(c.queue_heartbeat_seconds, 3600);
        ASSERT_EQ_INT(c.queue_max_length, 0);
        ASSERT_TRUE(!c.cookie_secure);
        ASSERT_TRUE(!c.web_ui);
        ASSERT_EQ_STR(c.allowed_origins[0], "https://a.example");
        ASSERT_EQ_STR(c.allowed_origins[1], "http://b.example:8080");
        ASSERT_TRUE(!c.allowed_origins[2]);
        ASSERT_EQ_STR(c.allowed_destinations[1], "10.0.0.1");
        config_done(&c);

        /* The message names the variable and the allowed range. */
        expect_bad("WIKI_WEB_QUEUE_RESERVATION_SECONDS=0", "WIKI_WEB_QUEUE_RESERVATION_SECONDS");
        expect_bad("WIKI_WEB_QUEUE_RESERVATION_SECONDS=3601", "1..3600");
        expect_bad("WIKI_WEB_QUEUE_HEARTBEAT_SECONDS=-1", "1..3600");
        expect_bad("WIKI_WEB_QUEUE_MAX_LENGTH=1000001", "0..1000000");
        expect_bad("WIKI_WEB_QUEUE_MAX_LENGTH= 5", "WIKI_WEB_QUEUE_MAX_LENGTH");
        expect_bad("WIKI_WEB_QUEUE_MAX_LENGTH=0x10", "WIKI_WEB_QUEUE_MAX_LENGTH");
        expect_bad("WIKI_WEB_QUEUE_MAX_LENGTH=", "WIKI_WEB_QUEUE_MAX_LENGTH");
        expect_bad("WIKI_WEB_QUEUE_MAX_LENGTH=99999999999999999999999", "WIKI_WEB_QUEUE_MAX_LENGTH");
        expect_bad("WIKI_WEB_QUEUE_SLOTS=0", "1..256");
        expect_bad("WIKI_WEB_QUEUE_SLOTS=257", "1..256");
        expect_bad("WIKI_WEB_QUEUE_SLOTS=-1", "WIKI_WEB_QUEUE_SLOTS");
        expect_bad("WIKI_WEB_COOKIE_SECURE=maybe", "WIKI_WEB_COOKIE_SECURE");
        expect_bad("WIKI_WEB_UI=maybe", "WIKI_WEB_UI");
        expect_bad("WIKI_WEB_ALLOWED_ORIGINS=ftp://x", "WIKI_WEB_ALLOWED_ORIGINS");
        expect_bad("WIKI_WEB_ALLOWED_ORIGINS=https://x/path", "WIKI_WEB_ALLOWED_ORIGINS");
        expect_bad("WIKI_WEB_WIKI_API_URL=file:///etc/passwd", "WIKI_WEB_WIKI_API_URL");
        expect_bad("WIKI_WEB_LOG_LEVEL=8", "WIKI_WEB_LOG_LEVEL");
        expect_bad("WIKI_WEB_TOOL_RESULT_MAX_BYTES=1023", "1024..1048576");
        expect_bad("WIKI_WEB_SANDBOX_TIMEOUT_SECONDS=0", "1..3600");
        expect_bad("WIKI_WEB_SANDBOX_MEMORY_MAX_BYTES=68719476737", "16777216..68719476736");
        expect_bad("WIKI_WEB_SANDBOX_TASKS_MAX=3", "4..4096");
        expect_bad("WIKI_WEB_SANDBOX_OUTPUT_MAX_BYTES=1048577", "1024..1048576");
        expect_bad("WIKI_WEB_ARTIFACT_MAX_FILES=1001", "0..1000");
        expect_bad("WIKI_WEB_ARTIFACT_MAX_BYTES=17179869185", "0..17179869184");
        expect_bad("WIKI_WEB_SANDBOX_ROOTFS=relative/dir", "WIKI_WEB_SANDBOX_ROOTFS");
        expect_bad("WIKI_WEB_HTTP_MAX_CONNECTIONS=1000001", "0..1000000");
        expect_bad("WIKI_WEB_HTTP_MAX_CONNECTIONS_PER_IP=-1", "0..1000000");
        expect_bad("WIKI_WEB_HTTP_REQUEST_TIMEOUT_SECONDS=0", "1..3600");
        expect_bad("WIKI_WEB_USER_AGENT_CONTACT=not a contact", "WIKI_WEB_USER_AGENT_CONTACT");
        expect_bad("WIKI_WEB_USER_AGENT_CONTACT=\001admin@example.org", "WIKI_WEB_USER_AGENT_CONTACT");
}

/* SLOTS sandboxes of SANDBOX_MEMORY_MAX_BYTES each must fit in memory. */
TEST(slots_memory) {
        const char *env[] = { "WIKI_WEB_QUEUE_SLOTS=8", "WIKI_WEB_SANDBOX_MEMORY_MAX_BYTES=1073741824", NULL };
        const char *top[] = { "WIKI_WEB_QUEUE_SLOTS=256",
                              "WIKI_WEB_SANDBOX_MEMORY_MAX_BYTES=68719476736",
                              NULL };
        Config c;
        char *err = NULL;

        ASSERT_OK(load(env, &c, &err));
        ASSERT_EQ_INT(c.queue_slots, 8);
        ASSERT_OK(config_check_memory(&c, UINT64_C(8) << 30, &err));
        ASSERT_TRUE(!err);
        ASSERT_EQ_INT(config_check_memory(&c, (UINT64_C(8) << 30) - 1, &err), -EINVAL);
        ASSERT_TRUE(err);
        ASSERT_TRUE(strstr(err, "WIKI_WEB_QUEUE_SLOTS"));
        ASSERT_TRUE(strstr(err, "WIKI_WEB_SANDBOX_MEMORY_MAX_BYTES"));
        free(err);
        /* Unknown memory: nothing refused. */
        ASSERT_OK(config_check_memory(&c, 0, &err));
        config_done(&c);

        /* The largest product (2^44) does not wrap. */
        ASSERT_OK(load(top, &c, &err));
        ASSERT_EQ_INT(config_check_memory(&c, UINT64_C(1) << 40, &err), -EINVAL);
        free(err);
        config_done(&c);
}

TEST(user_agent_contact) {
        static const char *const good[] = {
                "wiki-admin@example.org",
                "https://wiki.example.org/contact",
                "http://example.org",
                "a.b+c@mail.example.co.uk",
        };
        static const char *const bad[] = {
                "admin",
                "admin@",
                "@example.org",
                "admin@localhost",
                "a@b@example.org",
                "admin@example.org/x",
                "mailto:admin@example.org",
                "javascript:alert(1)",
                "ftp://example.org",
                "https://",
                "https:///path",
                "https://example.org/a b",
                "https://example.org/(x)",
                "admin@example.org) evil (",
                "https://example.org/\\",
                "https://example.org/\"",
                "https://example.org/\x7f",
                "https://example.org/\xc3\xa9",
                "",
        };
        char long_url[256];

        for (size_t i = 0; i < ELEMENTSOF(good); i++)
                ASSERT_TRUE(config_user_agent_contact_is_valid(good[i]));
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                ASSERT_TRUE(!config_user_agent_contact_is_valid(bad[i]));
        ASSERT_TRUE(!config_user_agent_contact_is_valid(NULL));

        /* 200 bytes is the most. */
        memset(long_url, 'a', sizeof long_url);
        memcpy(long_url, "https://", 8);
        long_url[200] = 0;
        ASSERT_TRUE(config_user_agent_contact_is_valid(long_url));
        long_url[200] = 'a';
        long_url[201] = 0;
        ASSERT_TRUE(!config_user_agent_contact_is_valid(long_url));

        /* Loaded, and shown by --check-config. */
        {
                const char *env[] = { "WIKI_WEB_USER_AGENT_CONTACT=wiki-admin@example.org", NULL };
                _cleanup_free_ char *err = NULL;
                Config c;

                ASSERT_OK(load(env, &c, &err));
                ASSERT_EQ_STR(c.user_agent_contact, "wiki-admin@example.org");
                config_done(&c);
        }
}

TEST(identity) {
        const char *env[] = {
                "WIKI_WEB_TRUSTED_PROXIES= 127.0.0.2/32 ,, ::1, ::ffff:10.0.0.0/104,fd00::/8 ",
                "WIKI_WEB_USER_HEADER=X-Auth-Request-User",
                "WIKI_WEB_REQUIRE_USER=false",
                NULL,
        };
        char buf[NET_PREFIX_STRING_MAX];
        Config c;
        char *err = NULL;

        ASSERT_OK(load(env, &c, &err));
        ASSERT_TRUE(config_identity_enabled(&c));
        ASSERT_EQ_INT(c.n_trusted_proxies, 4);
        net_prefix_format(&c.trusted_proxies[0], buf);
        ASSERT_EQ_STR(buf, "127.0.0.2/32");
        net_prefix_format(&c.trusted_proxies[1], buf);
        ASSERT_EQ_STR(buf, "::1/128");
        net_prefix_format(&c.trusted_proxies[2], buf);
        ASSERT_EQ_STR(buf, "10.0.0.0/8");
        ASSERT_EQ_STR(c.user_header, "X-Auth-Request-User");
        ASSERT_TRUE(!c.require_user);
        config_done(&c);

        /* Wildcards, however written: refused, naming the setting. */
        expect_bad("WIKI_WEB_TRUSTED_PROXIES=*", "wildcard");
        expect_bad("WIKI_WEB_TRUSTED_PROXIES=127.0.0.2,0.0.0.0/0", "wildcard");
        expect_bad("WIKI_WEB_TRUSTED_PROXIES=::/0", "wildcard");
        expect_bad("WIKI_WEB_TRUSTED_PROXIES=::ffff:0.0.0.0/96", "wildcard");
        expect_bad("WIKI_WEB_TRUSTED_PROXIES=0.0.0.0", "wildcard");
        /* Malformed entries. */
        expect_bad("WIKI_WEB_TRUSTED_PROXIES=127.0.0.2,localhost", "invalid item \"localhost\"");
        expect_bad("WIKI_WEB_TRUSTED_PROXIES=10.0.0.1/8", "invalid item");
        expect_bad("WIKI_WEB_TRUSTED_PROXIES=127.1", "invalid item");
        expect_bad("WIKI_WEB_TRUSTED_PROXIES=fe80::1%lo", "invalid item");
        expect_bad("WIKI_WEB_TRUSTED_PROXIES=127.0.0.1\x01", "(unprintable");
        expect_bad("WIKI_WEB_REQUIRE_USER=maybe", "expected true or false");
        expect_bad("WIKI_WEB_USER_HEADER=", "WIKI_WEB_USER_HEADER");
        expect_bad("WIKI_WEB_USER_HEADER=X Remote User", "WIKI_WEB_USER_HEADER");
        expect_bad("WIKI_WEB_USER_HEADER=X-Remote-User:", "WIKI_WEB_USER_HEADER");
        expect_bad("WIKI_WEB_USER_HEADER=cookie", "WIKI_WEB_USER_HEADER");
        expect_bad("WIKI_WEB_USER_HEADER=X-Forwarded-For", "WIKI_WEB_USER_HEADER");
        ASSERT_TRUE(config_user_header_is_valid("X-Remote-User"));
        ASSERT_TRUE(config_user_header_is_valid("Remote-User"));
        ASSERT_TRUE(!config_user_header_is_valid("Host"));
        /* The sign-ons' own names (oauth2-proxy, nginx auth_request, Authelia). */
        ASSERT_TRUE(config_user_header_is_valid("X-Forwarded-Email"));
        ASSERT_TRUE(config_user_header_is_valid("X-Forwarded-User"));
        ASSERT_TRUE(config_user_header_is_valid("X-Auth-Request-Email"));
        ASSERT_TRUE(config_user_header_is_valid("Remote-Email"));
        ASSERT_TRUE(!config_user_header_is_valid("x-forwarded-host"));
        ASSERT_TRUE(!config_user_header_is_valid("X-Forwarded-Proto"));
}

/* WIKI_WEB_WIKI_USER_FROM, _STRIP_SUFFIXES, _STRIP_PREFIXES (API.md "Whose
 * name"): name and no lists by default; each bad value refused naming it. */
TEST(wiki_user) {
        const char *none[] = { NULL };
        const char *email[] = { "WIKI_WEB_WIKI_USER_FROM=email", NULL };
        const char *strip[] = { "WIKI_WEB_WIKI_USER_STRIP_SUFFIXES= @CORP.EXAMPLE , @corp.test",
                                "WIKI_WEB_WIKI_USER_STRIP_PREFIXES=CORP\\",
                                NULL };
        Config c;
        char *err = NULL;

        ASSERT_OK(load(none, &c, &err));
        ASSERT_EQ_INT(c.wiki_user.from, WIKI_USER_FROM_NAME);
        ASSERT_TRUE(c.wiki_user.strip_suffixes && !c.wiki_user.strip_suffixes[0]);
        ASSERT_TRUE(c.wiki_user.strip_prefixes && !c.wiki_user.strip_prefixes[0]);
        config_done(&c);
        ASSERT_OK(load(email, &c, &err));
        ASSERT_EQ_INT(c.wiki_user.from, WIKI_USER_FROM_EMAIL);
        config_done(&c);
        ASSERT_OK(load(strip, &c, &err));
        ASSERT_EQ_STR(c.wiki_user.strip_suffixes[0], "@CORP.EXAMPLE");
        ASSERT_EQ_STR(c.wiki_user.strip_suffixes[1], "@corp.test");
        ASSERT_TRUE(!c.wiki_user.strip_suffixes[2]);
        ASSERT_EQ_STR(c.wiki_user.strip_prefixes[0], "CORP\\");
        config_done(&c);
        expect_bad(
                "WIKI_WEB_WIKI_USER_FROM=Email",
                "WIKI_WEB_WIKI_USER_FROM: invalid value, expected name or email");
        expect_bad("WIKI_WEB_WIKI_USER_FROM=sub", "WIKI_WEB_WIKI_USER_FROM");
        expect_bad("WIKI_WEB_WIKI_USER_STRIP_SUFFIXES=CORP.EXAMPLE", "WIKI_WEB_WIKI_USER_STRIP_SUFFIXES");
        expect_bad("WIKI_WEB_WIKI_USER_STRIP_SUFFIXES=@", "WIKI_WEB_WIKI_USER_STRIP_SUFFIXES");
        expect_bad("WIKI_WEB_WIKI_USER_STRIP_SUFFIXES=@a b", "WIKI_WEB_WIKI_USER_STRIP_SUFFIXES");
        expect_bad("WIKI_WEB_WIKI_USER_STRIP_PREFIXES=CORP", "WIKI_WEB_WIKI_USER_STRIP_PREFIXES");
        expect_bad("WIKI_WEB_WIKI_USER_STRIP_PREFIXES=\\", "WIKI_WEB_WIKI_USER_STRIP_PREFIXES");
}

/* WIKI_WEB_WIKI_READ_AS (API.md "Whose permissions"): service by default
 * and not "set", person when given, anything else refused naming it. */
TEST(wiki_read_as) {
        const char *person[] = { "WIKI_WEB_WIKI_READ_AS=person", NULL };
        const char *service[] = { "WIKI_WEB_WIKI_READ_AS=service", NULL };
        const char *none[] = { NULL };
        Config c;
        char *err = NULL;

        ASSERT_OK(load(none, &c, &err));
        ASSERT_EQ_INT(c.wiki_read_as, CONFIG_READ_AS_SERVICE);
        ASSERT_TRUE(!c.wiki_read_as_set);
        config_done(&c);
        ASSERT_OK(load(service, &c, &err));
        ASSERT_EQ_INT(c.wiki_read_as, CONFIG_READ_AS_SERVICE);
        ASSERT_TRUE(c.wiki_read_as_set);
        config_done(&c);
        ASSERT_OK(load(person, &c, &err));
        ASSERT_EQ_INT(c.wiki_read_as, CONFIG_READ_AS_PERSON);
        config_done(&c);
        expect_bad(
                "WIKI_WEB_WIKI_READ_AS=", "WIKI_WEB_WIKI_READ_AS: invalid value, expected service or person");
        expect_bad("WIKI_WEB_WIKI_READ_AS=Person", "WIKI_WEB_WIKI_READ_AS");
        expect_bad("WIKI_WEB_WIKI_READ_AS=person ", "WIKI_WEB_WIKI_READ_AS");
        expect_bad("WIKI_WEB_WIKI_READ_AS=user", "WIKI_WEB_WIKI_READ_AS");
        ASSERT_EQ_STR(config_read_as_to_string(CONFIG_READ_AS_PERSON), "person");
        ASSERT_TRUE(!config_read_as_to_string(_CONFIG_READ_AS_MAX));
        ASSERT_EQ_INT(config_read_as_from_string(NULL), _CONFIG_READ_AS_INVALID);
}

TEST(secrets) {
        char dir[] = "/tmp/wikiweb-test-config-XXXXXX";
        char path[256], env_dir[300], env_file[300];
        FILE *f;
        Config c;
        char *err = NULL;
        char *dump = NULL;
        size_t dump_size = 0;

        ASSERT_TRUE(mkdtemp(dir));
        snprintf(path, sizeof path, "%s/llm-api-key", dir);
        f = fopen(path, "w");
        ASSERT_TRUE(f);
        fputs("sk-test-secret-value-1234567890\n", f);
        fclose(f);
        snprintf(env_dir, sizeof env_dir, "CREDENTIALS_DIRECTORY=%s", dir);
        {
                const char *env[] = { env_dir, NULL };

                ASSERT_OK(load(env, &c, &err));
                ASSERT_EQ_STR(c.llm_api_key, "sk-test-secret-value-1234567890");
                ASSERT_TRUE(!c.wiki_password); /* absent credential: fine */

                /* --check-config output never shows the secret. */
                f = open_memstream(&dump, &dump_size);
                ASSERT_TRUE(f);
                config_dump(&c, f);
                fclose(f);
                ASSERT_TRUE(!strstr(dump, "sk-test-secret"));
                ASSERT_TRUE(strstr(dump, "llm-api-key=(set, masked)"));
                free(dump);
                config_done(&c);
        }

        /* An explicit *_FILE that cannot be read is an error, not silence. */
        snprintf(env_file, sizeof env_file, "WIKI_WEB_WIKI_PASSWORD_FILE=%s/missing", dir);
        {
                const char *env[] = { env_file, NULL };

                ASSERT_TRUE(load(env, &c, &err) < 0);
                ASSERT_TRUE(strstr(err, "WIKI_WEB_WIKI_PASSWORD_FILE"));
                free(err);
        }
        (void) unlink(path);
        (void) rmdir(dir);
}

TEST(parse_uint) {
        uint64_t v;

        ASSERT_OK(parse_uint64_range("0", 0, 5, &v));
        ASSERT_EQ_INT(v, 0);
        ASSERT_OK(parse_uint64_range("18446744073709551615", 0, UINT64_MAX, &v));
        ASSERT_TRUE(v == UINT64_MAX);
        ASSERT_EQ_INT(parse_uint64_range("18446744073709551616", 0, UINT64_MAX, &v), -ERANGE);
        ASSERT_EQ_INT(parse_uint64_range("6", 0, 5, &v), -ERANGE);
        ASSERT_EQ_INT(parse_uint64_range("+1", 0, 5, &v), -EINVAL);
        ASSERT_EQ_INT(parse_uint64_range("1 ", 0, 5, &v), -EINVAL);
        ASSERT_EQ_INT(parse_uint64_range("", 0, 5, &v), -EINVAL);
        ASSERT_EQ_INT(parse_uint64_range(NULL, 0, 5, &v), -EINVAL);
}

TEST(unhexchar) {
        static const char digits[] = "0123456789abcdef";

        for (int i = 0; i < 16; i++) {
                ASSERT_EQ_INT(unhexchar(digits[i]), i);
                ASSERT_EQ_INT(unhexchar((char) toupper((unsigned char) digits[i])), i);
        }
        for (const char *p = "gG/:@`xX \x7f"; *p; p++)
                ASSERT_EQ_INT(unhexchar(*p), -EINVAL);
        ASSERT_EQ_INT(unhexchar((char) 0xc3), -EINVAL);
        ASSERT_EQ_INT(unhexchar(0), -EINVAL);
}

DEFINE_TEST_MAIN()
