/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shared/log.h"
#include "shared/macro.h"
#include "shared/random-util.h"
#include "shared/sha256.h"
#include "shared/user-key.h"
#include "shared/utf8.h"

bool user_name_is_valid(const char *s, size_t len) {
        if (!s || len == 0 || len > USER_NAME_MAX_BYTES)
                return false;
        for (size_t i = 0; i < len;) {
                size_t n;

                /* C0 and DEL here; C1 and malformed sequences below. */
                if ((unsigned char) s[i] < 0x20 || s[i] == 0x7f)
                        return false;
                n = utf8_decode_no_c1((const uint8_t *) s + i, len - i);
                if (n == 0)
                        return false;
                i += n;
        }
        return true;
}

#define USER_KEY_DOMAIN "wikiweb-user"

int user_key_from_name(const char *user, SessionKey *ret) {
        _cleanup_(sha256_done) Sha256Ctx ctx = { 0 };
        uint8_t d[SHA256_DIGEST_SIZE];
        int r;

        assert(user);
        assert(ret);

        _Static_assert(sizeof ret->bytes == SHA256_DIGEST_SIZE, "SessionKey is a SHA-256 digest");
        /* The domain with its NUL, then the name: names contain no NUL, so
         * no two names are the same bytes. */
        r = sha256_init(&ctx);
        if (r < 0)
                return r;
        r = sha256_update(&ctx, USER_KEY_DOMAIN, sizeof(USER_KEY_DOMAIN));
        if (r < 0)
                return r;
        r = sha256_update(&ctx, user, strlen(user));
        if (r < 0)
                return r;
        r = sha256_final(&ctx, d);
        if (r < 0)
                return r;
        memcpy(ret->bytes, d, sizeof d);
        return 0;
}

int user_key_seal(const UserKeySecret *secret, const SessionKey *key, SessionKey *ret) {
        uint8_t d[SHA256_DIGEST_SIZE];
        int r;

        assert(secret);
        assert(key);
        assert(ret);

        r = hmac_sha256(secret->bytes, sizeof secret->bytes, key->bytes, sizeof key->bytes, d);
        if (r < 0)
                return r;
        memcpy(ret->bytes, d, sizeof d);
        return 0;
}

/* Up to max bytes of the file at path into buf: how many, or a negative
 * errno (-EINVAL: not a regular file, or longer than max). */
static ssize_t user_key_read(const char *path, uint8_t *buf, size_t max) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW);
        struct stat st;
        size_t n = 0;

        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || (uint64_t) st.st_size > max)
                return -EINVAL;
        while (n < max) {
                ssize_t k = read(fd, buf + n, max - n);

                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        break;
                n += (size_t) k;
        }
        return (ssize_t) n;
}

/* A new secret in directory/USER_KEY_FILE, or the one a racing daemon
 * made first. */
static int user_key_create(const char *directory, const char *path, UserKeySecret *ret, bool *ret_new) {
        _cleanup_free_ char *tmp = NULL;
        _cleanup_close_ int fd = -EBADF, dir = -EBADF;
        UserKeySecret s;
        size_t n = 0;
        int r;

        if (asprintf(&tmp, "%s/.%s.XXXXXX", directory, USER_KEY_FILE) < 0)
                return -ENOMEM;
        fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0)
                return log_error_errno(errno, "Cannot create the user key in %s", directory);
        r = random_bytes(s.bytes, sizeof s.bytes);
        if (r >= 0 && fchmod(fd, 0600) < 0)
                r = -errno;
        while (r >= 0 && n < sizeof s.bytes) {
                ssize_t k = write(fd, s.bytes + n, sizeof s.bytes - n);

                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        r = -errno;
                else
                        n += (size_t) k;
        }
        if (r >= 0 && fsync(fd) < 0)
                r = -errno;
        /* link(), not rename(): it never replaces a key that is there. */
        if (r >= 0 && link(tmp, path) < 0)
                r = -errno;
        (void) unlink(tmp);
        if (r == -EEXIST) {
                explicit_bzero(&s, sizeof s);
                *ret_new = false;
                return 0; /* read the one that won */
        }
        if (r < 0) {
                explicit_bzero(&s, sizeof s);
                return log_error_errno(r, "Cannot create the user key %s", path);
        }
        dir = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir >= 0)
                (void) fsync(dir);
        *ret = s;
        explicit_bzero(&s, sizeof s);
        *ret_new = true;
        return 0;
}

int user_key_secret_load(
        const char *state_directory,
        const char *credentials_directory,
        UserKeySecret *ret,
        const char **ret_source) {
        uint8_t buf[USER_KEY_CREDENTIAL_MAX];
        _cleanup_free_ char *path = NULL;
        ssize_t n;
        bool made = false;
        int r;

        assert(state_directory);
        assert(ret);

        if (credentials_directory && *credentials_directory) {
                if (asprintf(&path, "%s/%s", credentials_directory, USER_KEY_CREDENTIAL) < 0)
                        return -ENOMEM;
                n = user_key_read(path, buf, sizeof buf);
                if (n >= 0 && n < USER_KEY_CREDENTIAL_MIN) {
                        explicit_bzero(buf, sizeof buf);
                        log_error(
                                "The credential %s holds %zd bytes; the user key needs at least %d.",
                                USER_KEY_CREDENTIAL,
                                n,
                                USER_KEY_CREDENTIAL_MIN);
                        return -EINVAL;
                }
                if (n >= 0) {
                        _Static_assert(USER_KEY_SECRET_BYTES == SHA256_DIGEST_SIZE, "the secret is a digest");
                        r = sha256(buf, (size_t) n, ret->bytes);
                        explicit_bzero(buf, sizeof buf);
                        if (r < 0)
                                return r;
                        if (ret_source)
                                *ret_source = "credential";
                        return 0;
                }
                if (n != -ENOENT)
                        return log_error_errno((int) n, "Cannot read the credential %s", USER_KEY_CREDENTIAL);
                path = mfree(path);
        }

        if (asprintf(&path, "%s/%s", state_directory, USER_KEY_FILE) < 0)
                return -ENOMEM;
        n = user_key_read(path, buf, sizeof buf);
        if (n == -ENOENT) {
                r = user_key_create(state_directory, path, ret, &made);
                if (r < 0)
                        return r;
                if (made) {
                        if (ret_source)
                                *ret_source = "new";
                        return 0;
                }
                n = user_key_read(path, buf, sizeof buf);
        }
        if (n >= 0 && n != USER_KEY_SECRET_BYTES) {
                explicit_bzero(buf, sizeof buf);
                log_error(
                        "The user key %s holds %zd bytes, not %d: it is not wikiweb's (restore it from the "
                        "backup of the state directory, wikiwebd(8) \"Backups\").",
                        path,
                        n,
                        USER_KEY_SECRET_BYTES);
                return -EINVAL;
        }
        if (n < 0)
                return log_error_errno((int) n, "Cannot read the user key %s", path);
        memcpy(ret->bytes, buf, USER_KEY_SECRET_BYTES);
        explicit_bzero(buf, sizeof buf);
        if (ret_source)
                *ret_source = "file";
        return 0;
}
