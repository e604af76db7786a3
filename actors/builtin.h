/* builtin.h - actors every deployment has: the echo actor (health checks, benchmarks, tests). */
#ifndef TACT_BUILTIN_H
#define TACT_BUILTIN_H

#include "actor.h"

/*
 * The echo actor answers ECHO with ECHO_REPLY (same data and bulk bytes),
 * counts DATA messages and their bytes without answering, and answers EOS
 * with TOTAL(count = DATA messages since the last EOS, sum = their bytes).
 * Any other message is an error (TACT_EINVAL) answered with ERROR.
 */
extern const ta_actor_ops_t ta_echo_ops;

#endif
