/* SPDX-License-Identifier: MIT */
/* Personal access tokens through the Manager (manager-tokens.c) on its
 * real store (store/tokens.c) in a temporary state directory, with a fake
 * key of a person (the transport's session_key_from_user() is main's to
 * pass in): made, listed, used, expired, revoked, revoked all, the
 * refusals, and the person's name sealed under the token in the file. */
#include <dirent.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include "manager/manager-ops.h"
#include "manager/manager.h"
#include "sandbox/files.h"
#include "shared/config.h"
#include "shared/macro.h"
#include "store/tokens.h"
#include "tests.h"

static const char *no_env(const char *name, void *userdata) {
        return NULL;
}

/* A key per name: its first byte, its length, and a marker. */
static int fake_user_key(const char *user, SessionKey *ret) {
        memset(ret->bytes, 0xa5, sizeof ret->bytes);
        ret->bytes[0] = (uint8_t) user[0];
        ret->bytes[1] = (uint8_t) strlen(user);
        return 0;
}

typedef struct Fixture {
        char *dir;
        Config config;
        sd_event *event;
        Manager *manager;
} Fixture;

static void fixture_start(Fixture *f, bool with_key) {
        _cleanup_free_ char *cfg_error = NULL;

        *f = (Fixture){ .dir = strdup("/tmp/test-manager-tokens-XXXXXX") };
        ASSERT_TRUE(f->dir && mkdtemp(f->dir));
        ASSERT_OK(config_load(&f->config, no_env, NULL, &cfg_error));
        free(f->config.state_directory);
        f->config.state_directory = strdup(f->dir);
        free(f->config.sandbox_runtime);
        f->config.sandbox_runtime = strdup("/nonexistent/crun");
        ASSERT_TRUE(f->config.state_directory && f->config.sandbox_runtime);
        ASSERT_OK(sd_event_new(&f->event));
        ASSERT_OK(manager_new(f->event, &f->config, &f->manager));
        if (with_key)
                manager_set_user_key_function(f->manager, fake_user_key);
}

static void fixture_stop(Fixture *f) {
        f->manager = manager_free(f->manager);
        f->event = sd_event_unref(f->event);
        config_done(&f->config);
        ASSERT_OK(sandbox_rm_rf(AT_FDCWD, f->dir));
        free(f->dir);
}

static ManagerTokenCreated create(Fixture *f, const char *user, const char *name, unsigned days) {
        ManagerTokenCreated t;
        ManagerError e;

        ASSERT_OK(manager_token_create(f->manager, user, name, days, &t, &e));
        return t;
}

/* Whether a file of the state directory (the database, its WAL and
 * shared memory, the user key) holds the n bytes at b. */
static bool store_holds_bytes(Fixture *f, const void *b, size_t n) {
        DIR *d = opendir(f->dir);
        struct dirent *de;
        bool found = false;

        ASSERT_TRUE(d);
        while (!found && (de = readdir(d))) {
                _cleanup_free_ char *p = NULL, *data = NULL;
                size_t size;

                if (de->d_type != DT_REG)
                        continue;
                ASSERT_TRUE(asprintf(&p, "%s/%s", f->dir, de->d_name) > 0);
                data = test_read_file(p, &size);
                found = memmem(data, size, b, n) != NULL;
        }
        ASSERT_TRUE(closedir(d) == 0);
        return found;
}

static bool store_holds(Fixture *f, const char *s) {
        return store_holds_bytes(f, s, strlen(s));
}

static void sql(Fixture *f, const char *statement) {
        _cleanup_free_ char *p = NULL;
        sqlite3 *db;

        ASSERT_TRUE(asprintf(&p, "%s/history.sqlite3", f->dir) > 0);
        ASSERT_TRUE(sqlite3_open(p, &db) == SQLITE_OK);
        ASSERT_TRUE(sqlite3_exec(db, statement, NULL, NULL, NULL) == SQLITE_OK);
        ASSERT_TRUE(sqlite3_close(db) == SQLITE_OK);
}

TEST(create_use_list_revoke) {
        _cleanup_free_ char *user = NULL;
        HistoryToken *list = NULL;
        ManagerTokenCreated t, t2;
        ManagerError e;
        size_t n;
        Fixture f;

        fixture_start(&f, true);
        t = create(&f, "alice", "laptop", 0);
        ASSERT_TRUE(strneq(t.token, "wwp_", 4));
        ASSERT_EQ_INT(strlen(t.token), 47);
        ASSERT_TRUE(strneq(t.id, "tk_", 3));
        ASSERT_EQ_INT(strlen(t.id), 35);
        ASSERT_TRUE(t.expires_at == t.created_at + 90 * 24 * 3600 * USEC_PER_SEC);
        t2 = create(&f, "alice", "phone", 3);
        ASSERT_TRUE(!streq(t.token, t2.token));
        ASSERT_TRUE(t2.expires_at == t2.created_at + 3 * 24 * 3600 * USEC_PER_SEC);
        /* Only the digest is kept. */
        ASSERT_TRUE(!store_holds(&f, t.token));
        ASSERT_TRUE(!store_holds(&f, t.token + 4));

        ASSERT_OK(manager_token_authenticate(f.manager, t.token, &user));
        ASSERT_EQ_STR(user, "alice");

        ASSERT_OK(manager_tokens_list(f.manager, "alice", &list, &n, &e));
        ASSERT_EQ_INT(n, 2);
        ASSERT_EQ_STR(list[0].id, t.id);
        ASSERT_EQ_STR(list[0].name, "laptop");
        ASSERT_TRUE(list[0].last_used_at != USEC_INFINITY);
        ASSERT_EQ_STR(list[1].name, "phone");
        ASSERT_TRUE(list[1].last_used_at == USEC_INFINITY);
        history_tokens_free(list, n);
        ASSERT_OK(manager_tokens_list(f.manager, "bob", &list, &n, &e));
        ASSERT_EQ_INT(n, 0);
        history_tokens_free(list, n);

        /* Another's id is no token of theirs. */
        ASSERT_EQ_INT(manager_token_revoke(f.manager, "bob", t.id, &e), -ENOENT);
        ASSERT_EQ_INT(e.api_error, API_ERROR_NOT_FOUND);
        ASSERT_OK(manager_token_revoke(f.manager, "alice", t.id, &e));
        ASSERT_EQ_INT(manager_token_revoke(f.manager, "alice", t.id, &e), -ENOENT);
        ASSERT_EQ_INT(manager_token_authenticate(f.manager, t.token, &user), -EACCES);
        fixture_stop(&f);
}

TEST(refused_tokens) {
        _cleanup_free_ char *user = NULL;
        ManagerTokenCreated t;
        char bad[MANAGER_TOKEN_MAX + 1];
        Fixture f;

        fixture_start(&f, true);
        t = create(&f, "alice", "laptop", 1);
        /* Malformed, one character changed, one more, unknown. */
        ASSERT_EQ_INT(manager_token_authenticate(f.manager, "", &user), -EACCES);
        ASSERT_EQ_INT(manager_token_authenticate(f.manager, "wwp_", &user), -EACCES);
        ASSERT_EQ_INT(manager_token_authenticate(f.manager, t.token + 4, &user), -EACCES);
        memcpy(bad, t.token, sizeof t.token);
        bad[10] = bad[10] == 'A' ? 'B' : 'A';
        ASSERT_EQ_INT(manager_token_authenticate(f.manager, bad, &user), -EACCES);
        memcpy(bad, t.token, sizeof t.token);
        bad[MANAGER_TOKEN_MAX - 1] = 'x';
        bad[MANAGER_TOKEN_MAX] = 0;
        ASSERT_EQ_INT(manager_token_authenticate(f.manager, bad, &user), -EACCES);
        memcpy(bad, t.token, sizeof t.token);
        bad[20] = '+';
        ASSERT_EQ_INT(manager_token_authenticate(f.manager, bad, &user), -EACCES);
        ASSERT_TRUE(!user);

        /* Expired: the store's clock is the realtime one. */
        sql(&f, "UPDATE tokens SET expires_at = 1");
        ASSERT_EQ_INT(manager_token_authenticate(f.manager, t.token, &user), -EACCES);
        fixture_stop(&f);
}

TEST(limits) {
        ManagerTokenCreated t;
        ManagerError e;
        Fixture f;

        fixture_start(&f, true);
        /* More days than WIKI_WEB_TOKEN_MAX_DAYS allows. */
        ASSERT_EQ_INT(manager_token_create(f.manager, "alice", "x", 91, &t, &e), -ERANGE);
        ASSERT_EQ_INT(e.api_error, API_ERROR_INVALID_INPUT);
        for (unsigned i = 0; i < HISTORY_TOKENS_MAX; i++)
                (void) create(&f, "alice", "x", 90);
        ASSERT_EQ_INT(manager_token_create(f.manager, "alice", "x", 1, &t, &e), -E2BIG);
        ASSERT_EQ_INT(e.api_error, API_ERROR_INVALID_INPUT);
        (void) create(&f, "bob", "x", 1);
        fixture_stop(&f);
}

TEST(revoke_all_of_a_person) {
        _cleanup_free_ char *user = NULL;
        ManagerTokenCreated a1, a2, b;
        ManagerError e;
        SessionKey k;
        Fixture f;

        fixture_start(&f, true);
        a1 = create(&f, "alice", "one", 1);
        a2 = create(&f, "alice", "two", 1);
        b = create(&f, "bob", "one", 1);
        ASSERT_EQ_INT(manager_tokens_revoke_user(f.manager, "alice", &e), 2);
        ASSERT_EQ_INT(manager_tokens_revoke_user(f.manager, "alice", &e), 0);
        ASSERT_EQ_INT(manager_token_authenticate(f.manager, a1.token, &user), -EACCES);
        ASSERT_EQ_INT(manager_token_authenticate(f.manager, a2.token, &user), -EACCES);
        ASSERT_OK(manager_token_authenticate(f.manager, b.token, &user));
        ASSERT_EQ_STR(user, "bob");
        /* The store's own, for the erasure of a person: by their key. */
        ASSERT_OK(manager_user_key(f.manager, "bob", &k));
        ASSERT_EQ_INT(history_tokens_delete_user(manager_get_history(f.manager), &k), 1);
        fixture_stop(&f);
}

TEST(no_user_key) {
        ManagerTokenCreated t;
        ManagerError e;
        Fixture f;

        fixture_start(&f, false);
        ASSERT_EQ_INT(manager_token_create(f.manager, "alice", "x", 1, &t, &e), -EOPNOTSUPP);
        ASSERT_EQ_INT(e.api_error, API_ERROR_INTERNAL_ERROR);
        fixture_stop(&f);
}

/* The person's name is in no file of the state directory: the table
 * holds it sealed under the token, which it does not hold. The token
 * still acts as them, a name of the most bytes too; the sealed name
 * changed, another token's, or beside another person's key, acts as
 * nobody. */
TEST(name_sealed_under_the_token) {
        const char *person = "Zebulon Quackenbush";
        char longest[USER_NAME_MAX_BYTES + 1];
        _cleanup_free_ char *user = NULL;
        ManagerTokenCreated t, t2, t3, t4, t5;
        SessionKey k;
        Fixture f;

        fixture_start(&f, true);
        t = create(&f, person, "laptop", 1);
        t2 = create(&f, "bob", "phone", 1);
        memset(longest, 'n', USER_NAME_MAX_BYTES);
        longest[USER_NAME_MAX_BYTES] = 0;
        t3 = create(&f, longest, "x", 1);
        t4 = create(&f, "bob", "tablet", 1);
        t5 = create(&f, "bob", "desk", 1);
        /* The files as they are, and after a checkpoint into the database. */
        ASSERT_TRUE(!store_holds(&f, person));
        ASSERT_TRUE(!store_holds(&f, "Zebulon"));
        ASSERT_TRUE(!store_holds(&f, "nnnnnnnnnnnnnnnn"));
        ASSERT_TRUE(store_holds(&f, "laptop"));
        sql(&f, "PRAGMA wal_checkpoint(TRUNCATE)");
        ASSERT_TRUE(!store_holds(&f, person));
        ASSERT_TRUE(!store_holds(&f, "nnnnnnnnnnnnnnnn"));
        ASSERT_OK(manager_user_key(f.manager, person, &k));
        ASSERT_TRUE(store_holds_bytes(&f, k.bytes, sizeof k.bytes));

        ASSERT_OK(manager_token_authenticate(f.manager, t.token, &user));
        ASSERT_EQ_STR(user, person);
        user = mfree(user);
        ASSERT_OK(manager_token_authenticate(f.manager, t3.token, &user));
        ASSERT_EQ_STR(user, longest);
        user = mfree(user);
        ASSERT_OK(manager_token_authenticate(f.manager, t4.token, &user));
        ASSERT_EQ_STR(user, "bob");
        user = mfree(user);

        /* A byte of the sealed name changed, in the name or in its
         * padding; another token's sealed name: no name of theirs comes
         * out. */
        sql(&f,
            "UPDATE tokens SET user_sealed = CAST(CASE WHEN substr(user_sealed, 1, 1) = x'00'"
            " THEN x'01' ELSE x'00' END || substr(user_sealed, 2) AS BLOB) WHERE name = 'phone'");
        ASSERT_EQ_INT(manager_token_authenticate(f.manager, t2.token, &user), -EACCES);
        sql(&f,
            "UPDATE tokens SET user_sealed = CAST(substr(user_sealed, 1, 199) || CASE WHEN"
            " substr(user_sealed, 200, 1) = x'00' THEN x'01' ELSE x'00' END || substr(user_sealed, 201)"
            " AS BLOB) WHERE name = 'tablet'");
        ASSERT_EQ_INT(manager_token_authenticate(f.manager, t4.token, &user), -EACCES);
        sql(&f,
            "UPDATE tokens SET user_sealed = (SELECT user_sealed FROM tokens WHERE name = 'x')"
            " WHERE name = 'desk'");
        ASSERT_EQ_INT(manager_token_authenticate(f.manager, t5.token, &user), -EACCES);
        ASSERT_TRUE(!user);
        /* A valid name sealed under the token, but beside another's key. */
        sql(&f,
            "UPDATE tokens SET user_key = (SELECT user_key FROM tokens WHERE name = 'x')"
            " WHERE name = 'laptop'");
        ASSERT_EQ_INT(manager_token_authenticate(f.manager, t.token, &user), -EACCES);
        ASSERT_TRUE(!user);
        ASSERT_OK(manager_token_authenticate(f.manager, t3.token, &user));
        ASSERT_EQ_STR(user, longest);
        fixture_stop(&f);
}

DEFINE_TEST_MAIN()
