/* file.h - opening the files a user names: regular files only, and never an open() that blocks. */
#ifndef TACT_FILE_H
#define TACT_FILE_H

#include <stdio.h>

#include "msg.h"

/*
 * Opens path (what a user, a log or a cache names) for reading, or for
 * writing (created with mode when it does not exist, truncated when it
 * does; a private mode, one with no group or other bits, is also given to
 * a file that was there, before it is truncated).  The open itself never blocks: a FIFO, a device or a folder at
 * path is refused with TACT_EIO saying it is not a regular file (a FIFO
 * would block open() until another process opened its other end, and
 * /dev/zero would be read without end).  Returns the descriptor
 * (close-on-exec, in blocking mode), or TACT_EIO (negative) with err (may
 * be NULL) naming the path and the cause.  what prefixes the message
 * ("load_idx", "log").
 */
int ta_file_open(const char *path, int write, unsigned mode, const char *what, ta_error_t *err);

/* ta_file_open as a stdio stream ("rb" or "wb"); NULL with err set
 * (TACT_EIO, or TACT_ENOMEM). */
FILE *ta_file_fopen(const char *path, int write, unsigned mode, const char *what, ta_error_t *err);

#endif
