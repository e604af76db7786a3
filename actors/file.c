/* file.c - opening the files a user names: regular files only, and never an open() that blocks. */
#include "file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int s_not_regular(const char *path, mode_t m, const char *what, ta_error_t *err) {
    const char *kind = S_ISDIR(m) ? "a folder" : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket" : "a device";
    return ta_error_set(err, TACT_EIO, "%s: %s is not a regular file (%s); refusing it", what, path, kind);
}

int ta_file_open(const char *path, int write, unsigned mode, const char *what, ta_error_t *err) {
    if (!path || !*path) return ta_error_set(err, TACT_EIO, "%s: no path given", what);
    /* What is there is looked at before it is opened (opening some
     * devices acts on them), and what was opened is looked at again (the
     * path may have changed in between); only then is a file to write
     * truncated.  O_NONBLOCK makes the open of a FIFO that appeared
     * meanwhile return at once (for reading) or fail with ENXIO (for
     * writing, when nobody reads it); it is cleared again, meaning nothing
     * to a regular file's reads and writes. */
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) return s_not_regular(path, st.st_mode, what, err);
    int flags = (write ? O_WRONLY | O_CREAT : O_RDONLY) | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;
    int fd = open(path, flags, (mode_t)mode);
    if (fd < 0) {
        int e = errno;
        if (e == ENXIO) return ta_error_set(err, TACT_EIO, "%s: %s is not a regular file (a FIFO, socket or device); refusing it", what, path);
        return ta_error_set(err, TACT_EIO, "%s: cannot %s %s: %s", what, write ? "create" : "open", path, strerror(e));
    }
    int e = fstat(fd, &st) != 0 ? errno : 0;
    if (e || !S_ISREG(st.st_mode)) {
        close(fd);
        return e ? ta_error_set(err, TACT_EIO, "%s: cannot stat %s: %s", what, path, strerror(e)) : s_not_regular(path, st.st_mode, what, err);
    }
    /* A private mode holds for a file that was there too, before a byte of
     * it is lost (an older file we cannot make private stays as it was). */
    if (write && !(mode & 077) && fchmod(fd, (mode_t)mode) != 0) {
        e = errno;
        close(fd);
        return ta_error_set(err, TACT_EIO, "%s: cannot make %s private (mode %o): %s", what, path, mode, strerror(e));
    }
    if (write && ftruncate(fd, 0) != 0) {
        e = errno;
        close(fd);
        return ta_error_set(err, TACT_EIO, "%s: cannot empty %s: %s", what, path, strerror(e));
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return fd;
}

FILE *ta_file_fopen(const char *path, int write, unsigned mode, const char *what, ta_error_t *err) {
    int fd = ta_file_open(path, write, mode, what, err);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, write ? "wb" : "rb");
    if (!f) {
        close(fd);
        ta_error_set(err, TACT_ENOMEM, "%s: out of memory opening %s", what, path);
    }
    return f;
}
