/* keys.c - the CURVE keys of workers and their clients, kept in the user's key folder (keys.h). */
#include "keys.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zmq.h>

#include "msg.h"

int ta_keys_valid(const char *s, size_t len) {
    if (!s || len != TA_KEY_Z85) return 0;
    char z[TA_KEY_Z85 + 1];
    uint8_t bin[32];
    memcpy(z, s, TA_KEY_Z85);
    z[TA_KEY_Z85] = '\0';
    return zmq_z85_decode(bin, z) != NULL;
}

int ta_keys_dir(char *buf, size_t len, ta_error_t *err) {
    const char *dir = getenv("TACT_KEY_DIR"), *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    int n;
    if (dir && *dir) n = snprintf(buf, len, "%s", dir);
    else if (xdg && *xdg == '/') n = snprintf(buf, len, "%s/tact", xdg);
    else if (home && *home) n = snprintf(buf, len, "%s/.config/tact", home);
    else return ta_error_set(err, TACT_EINVAL, "no key folder: set TACT_KEY_DIR or HOME");
    if (n < 0 || (size_t)n >= len) return ta_error_set(err, TACT_EINVAL, "the key folder's name is too long");
    return TACT_OK;
}

/* Makes the folder (and a missing .config above it), mode 0700. */
static int s_mkdirs(const char *dir, ta_error_t *err) {
    char path[1024];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(path, 0700) != 0 && errno != EEXIST) return ta_error_set(err, TACT_EIO, "key folder %s: %s", path, strerror(errno));
        *p = '/';
    }
    if (mkdir(path, 0700) != 0 && errno != EEXIST) return ta_error_set(err, TACT_EIO, "key folder %s: %s", path, strerror(errno));
    return TACT_OK;
}

/* Writes a fresh secret key to path (O_EXCL unless force: a second process
 * making one at the same time loses, and reads the winner's). */
static int s_write_key(const char *path, int force, char public_key[41], char secret_key[41], int *exists, ta_error_t *err) {
    *exists = 0;
    if (zmq_curve_keypair(public_key, secret_key) != 0)
        return ta_error_set(err, TACT_ETRANSPORT, "no CURVE key pair: %s (libzmq without CURVE?)", zmq_strerror(errno));
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return ta_error_set(err, TACT_EIO, "key file %s: %s", tmp, strerror(errno));
    char line[42];
    memcpy(line, secret_key, 40);
    line[40] = '\n';
    int ok = write(fd, line, 41) == 41 && fsync(fd) == 0;
    ok = close(fd) == 0 && ok;
    memset(line, 0, sizeof line);
    /* link() fails when the key exists: an existing key is never replaced
     * by accident; rename() replaces it when asked. */
    if (ok) ok = force ? rename(tmp, path) == 0 : link(tmp, path) == 0;
    int e = errno;
    unlink(tmp);
    *exists = !ok && e == EEXIST;
    if (!ok) return ta_error_set(err, TACT_EIO, "key file %s: %s", path, strerror(e));
    return TACT_OK;
}

static int s_read_key(const char *path, char public_key[41], char secret_key[41], ta_error_t *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return ta_error_set(err, errno == ENOENT ? TACT_ENOTFOUND : TACT_EIO, "key file %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return ta_error_set(err, TACT_EINVAL, "key file %s: not a regular file", path);
    }
    if (st.st_uid != geteuid() || (st.st_mode & 077)) {
        close(fd);
        return ta_error_set(err, TACT_EINVAL, "key file %s: readable by others or not yours (mode %03o); it must be 0600 (chmod 600 %s)", path,
                            (unsigned)(st.st_mode & 0777), path);
    }
    char buf[64];
    ssize_t n = read(fd, buf, sizeof buf);
    close(fd);
    size_t len = n > 0 ? (size_t)n : 0;
    while (len && (buf[len - 1] == '\n' || buf[len - 1] == '\r')) len--;
    int ok = len == TA_KEY_Z85 && ta_keys_valid(buf, len);
    if (ok) {
        memcpy(secret_key, buf, TA_KEY_Z85);
        secret_key[TA_KEY_Z85] = '\0';
        ok = zmq_curve_public(public_key, secret_key) == 0;
    }
    memset(buf, 0, sizeof buf);
    if (!ok) {
        memset(secret_key, 0, TA_KEY_Z85 + 1);
        return ta_error_set(err, TACT_EPROTO, "key file %s: not a CURVE secret key (40 characters of Z85; tact keygen --force makes a new one)", path);
    }
    return TACT_OK;
}

int ta_keys_own(char public_key[41], char secret_key[41], int create, ta_error_t *err) {
    char dir[900], path[1000];
    int rc = ta_keys_dir(dir, sizeof dir, err);
    if (rc != TACT_OK) return rc;
    snprintf(path, sizeof path, "%s/key", dir);
    rc = s_read_key(path, public_key, secret_key, err);
    if (rc != TACT_ENOTFOUND || !create) return rc;
    if ((rc = s_mkdirs(dir, err)) != TACT_OK) return rc;
    int exists;
    rc = s_write_key(path, 0, public_key, secret_key, &exists, err);
    if (exists) rc = s_read_key(path, public_key, secret_key, err);
    return rc;
}

int ta_keys_generate(int force, char public_key[41], ta_error_t *err) {
    char dir[900], path[1000], secret[41];
    int rc = ta_keys_dir(dir, sizeof dir, err);
    if (rc == TACT_OK) rc = s_mkdirs(dir, err);
    if (rc != TACT_OK) return rc;
    snprintf(path, sizeof path, "%s/key", dir);
    int exists;
    rc = s_write_key(path, force, public_key, secret, &exists, err);
    memset(secret, 0, sizeof secret);
    if (exists) ta_error_set(err, rc, "%s exists already (tact keygen --force replaces it; clients and workers using it must then be given the new public key)", path);
    return rc;
}

/* Calls fn on each non-comment line of DIR/name (first word, length),
 * until it returns nonzero; returns that, or 0. */
static int s_lines(const char *name, int (*fn)(const char *w, size_t n, const char *rest, void *ud), void *ud) {
    char dir[900], path[1000];
    if (ta_keys_dir(dir, sizeof dir, NULL) != TACT_OK) return 0;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "re");
    if (!f) return 0;
    char line[512];
    int r = 0;
    while (!r && fgets(line, sizeof line, f)) {
        char *p = line + strspn(line, " \t");
        if (*p == '#' || *p == '\n' || !*p) continue;
        size_t n = strcspn(p, " \t\r\n");
        char *rest = p + n;
        rest += strspn(rest, " \t");
        rest[strcspn(rest, " \t\r\n")] = '\0';
        r = fn(p, n, rest, ud);
    }
    fclose(f);
    return r;
}

static int s_same_key(const char *w, size_t n, const char *rest, void *ud) {
    (void)rest;
    uint8_t bin[32];
    char z[41];
    if (n != TA_KEY_Z85) return 0;
    memcpy(z, w, 40);
    z[40] = '\0';
    return zmq_z85_decode(bin, z) && memcmp(bin, ud, 32) == 0;
}

int ta_keys_admitted(const uint8_t key[32]) {
    char pub[41], sec[41];
    uint8_t own[32];
    int mine = ta_keys_own(pub, sec, 0, NULL) == TACT_OK && zmq_z85_decode(own, pub) && memcmp(own, key, 32) == 0;
    memset(sec, 0, sizeof sec);
    return mine || s_lines("authorized_keys", s_same_key, (void *)key);
}

typedef struct {
    const char *where;
    char *key;
} s_known_t;

static int s_known(const char *w, size_t n, const char *rest, void *ud) {
    s_known_t *k = ud;
    if (strlen(k->where) != n || strncmp(w, k->where, n) != 0 || !ta_keys_valid(rest, strlen(rest))) return 0;
    memcpy(k->key, rest, 40);
    k->key[40] = '\0';
    return 1;
}

int ta_keys_known_worker(const char *where, char key[41]) {
    s_known_t k = {where, key};
    return s_lines("known_workers", s_known, &k) ? TACT_OK : TACT_ENOTFOUND;
}
