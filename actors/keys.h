/* keys.h - the CURVE keys of workers and their clients: the user's key pair, the clients a worker admits, the workers a client knows. */
#ifndef TACT_KEYS_H
#define TACT_KEYS_H

#include <stddef.h>
#include <stdint.h>

#include "msg.h"

/*
 * Everything lives in one folder of the user's (docs/workers.md):
 * $TACT_KEY_DIR, else $XDG_CONFIG_HOME/tact, else $HOME/.config/tact.
 *   key              the user's secret key, 40 characters of Z85 and a
 *                    newline; mode 0600, owned by the user (anything else
 *                    is refused, as ssh refuses a readable private key)
 *   authorized_keys  public keys a worker admits besides the user's own,
 *                    one per line ('#' starts a comment)
 *   known_workers    "tcp://HOST:PORT KEY" lines: the public key of a
 *                    worker whose device URIs carry none
 * Secret keys never leave the file: not in URIs, arguments, the
 * environment or logs.
 */
enum { TA_KEY_Z85 = 40 };

/* The key folder into buf; TACT_OK, or TACT_EINVAL when no variable names
 * one (no HOME) or it does not fit. */
int ta_keys_dir(char *buf, size_t len, ta_error_t *err);

/* The user's key pair (Z85, NUL-terminated), created (folder 0700, file
 * 0600, never overwritten) when there is none and create is set.  Returns
 * TACT_OK, or an error naming the file: unreadable, malformed, or readable
 * by others. */
int ta_keys_own(char public_key[TA_KEY_Z85 + 1], char secret_key[TA_KEY_Z85 + 1], int create, ta_error_t *err);

/* Makes a fresh key pair in the folder's key file; refuses to replace one
 * unless force is set.  The public key into public_key. */
int ta_keys_generate(int force, char public_key[TA_KEY_Z85 + 1], ta_error_t *err);

/* Whether the 32-byte public key may connect to this user's workers: the
 * user's own, or a line of authorized_keys.  Reads the files each time (a
 * key added is admitted at once).  Returns 1 or 0. */
int ta_keys_admitted(const uint8_t key[32]);

/* The known public key of a worker at where ("tcp://HOST:PORT"), from
 * known_workers; TACT_OK, or TACT_ENOTFOUND. */
int ta_keys_known_worker(const char *where, char key[TA_KEY_Z85 + 1]);

/* Whether s is 40 characters of Z85 that decode to a CURVE key. */
int ta_keys_valid(const char *s, size_t len);

#endif
