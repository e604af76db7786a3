/* file.c - opening the files a user names: regular files only, and never an open() that blocks. */
#include "file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int ta_file_open(const char *path, int write, unsigned mode, const char *what, ta_error_t *err) {
    if (!path || !*path) return ta_error_set(err, TACT_EIO, "%s: no path given", what);
    /* O_NONBLOCK makes the open of a FIFO return at once (for reading) or
     * fail with ENXIO (for writing, when nobody reads it); fstat then tells
     * what was opened.  It is cleared again: it means nothing to a regular
     * file's reads and writes. */
    int flags = (write ? O_WRONLY | O_CREAT | O_TRUNC : O_RDONLY) | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;
    int fd = open(path, flags, (mode_t)mode);
    if (fd < 0) {
        int e = errno;
        if (e == ENXIO) return ta_error_set(err, TACT_EIO, "%s: %s is not a regular file (a FIFO or a device); refusing it", what, path);
        return ta_error_set(err, TACT_EIO, "%s: cannot %s %s: %s", what, write ? "create" : "open", path, strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return ta_error_set(err, TACT_EIO, "%s: cannot stat %s: %s", what, path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        const char *kind = S_ISDIR(st.st_mode) ? "a folder" : S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISSOCK(st.st_mode) ? "a socket" : "a device";
        close(fd);
        return ta_error_set(err, TACT_EIO, "%s: %s is not a regular file (%s); refusing it", what, path, kind);
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
