/* actor.h - actors: a thread with a mailbox, one shape for every stage of the pipeline. */
#ifndef TACT_ACTOR_H
#define TACT_ACTOR_H

#include <stddef.h>
#include <stdint.h>

#include "runtime.h"

typedef struct ta_actor ta_actor_t;

/*
 * What makes one actor differ from another.  init runs in the actor's
 * thread before it reports ready (a failure there fails ta_actor_start);
 * handle runs once per message in processing order; fini runs before the
 * actor acknowledges a stop.  A handle that returns an error code makes the
 * runtime reply ERROR(code, message type, text from ta_actor_fail) to the
 * sender, with the request's correlation id, and the actor goes on.  idle,
 * for work of the actor's own that no message brings (a compiler's
 * background builds), runs when the mailbox is empty and returns the
 * milliseconds until it wants to run again, or a negative number when it
 * has nothing left (a message wakes the actor as usual); it sends nothing.
 */
typedef struct ta_actor_ops {
    const char *name;
    int (*init)(ta_actor_t *self, void *arg, ta_error_t *err); /* may be NULL */
    int (*handle)(ta_actor_t *self, ta_msg_t *msg);
    void (*fini)(ta_actor_t *self); /* may be NULL */
    int (*idle)(ta_actor_t *self);  /* may be NULL */
} ta_actor_ops_t;

/*
 * The ordering rule (DESIGN.md §2), the one mechanism every actor uses: what
 * an actor processes next is fixed by what the messages carry, never by
 * which sender's message arrived first.
 *
 * 1. Ordered inputs are the senders that give an actor its work.  Their
 *    messages are merged in (seq, sender id) order; with one ordered input
 *    that is simply its order of sending.  Each such stream ends with EOS.
 * 2. Any other sender's message is a reply: it is processed only when the
 *    actor awaits its correlation id (ta_actor_await), at the point of its
 *    own work where it asked for it.  While an await is pending, nothing
 *    else is processed.  Replies that come early are kept until awaited.
 * 3. An actor without ordered inputs is a service: it processes messages in
 *    arrival order (echo, benchmarks, an actor before its CONFIG).
 *
 * So a stage fed by one upstream actor that asks others for results (the
 * graph asks the scheduler for SCHEDULED; the executor waits for a PLAN and
 * its PROGRAMs where the graph's stream says a realize runs) processes the
 * same messages in the same order in every run, whatever the timing.
 */
/*
 * A thread that several actors share.  Each keeps its mailbox, its order
 * and its log; only the thread is common, so a message from one to another
 * wakes nobody: the thread takes it on its next turn.  A hand-off between
 * two threads costs tens of microseconds in a virtual machine (a sleeping
 * thread woken on another core); light stages that hand work to each other
 * in turn (the graph, gradient engine, scheduler and planner of a context)
 * share one.  A member's handler must never wait for another member.
 * ta_group_stop after every member stopped (ta_actor_stop).
 */
typedef struct ta_group ta_group_t;
int ta_group_start(ta_rt_t *rt, const char *name, ta_group_t **out, ta_error_t *err);
int ta_group_stop(ta_group_t **g, ta_error_t *err);

typedef struct ta_actor_opts {
    const uint32_t *ordered_inputs;
    size_t n_ordered_inputs;
    ta_group_t *group; /* NULL: a thread of its own */
} ta_actor_opts_t;

/*
 * Starts an actor on rt: reserves its port id (in call order), spawns the
 * thread and returns once the thread reported ready (mailbox bound, init
 * done) or the configured timeout passed.  opts may be NULL.  Returns
 * TACT_OK and *out, or the init/bind error (or TACT_ETIMEDOUT) with *out NULL.
 */
int ta_actor_start(ta_rt_t *rt, const ta_actor_ops_t *ops, void *arg, const ta_actor_opts_t *opts,
                   ta_actor_t **out, ta_error_t *err);

/*
 * Stops the actor: sends STOP through its control pipe and waits for the
 * acknowledgement, then joins the thread and frees it.  Returns TACT_OK, or
 * TACT_ETIMEDOUT if the actor did not answer in time (its thread is then
 * detached and its memory abandoned rather than risking a hang).  *a is set
 * to NULL either way; safe with *a == NULL.
 */
int ta_actor_stop(ta_actor_t **a, ta_error_t *err);

uint32_t ta_actor_id(const ta_actor_t *a);
/* The actor's port, for handlers that need a send's detailed error. */
ta_port_t *ta_actor_port(ta_actor_t *a);
const char *ta_actor_name(const ta_actor_t *a);
/* The actor's state pointer, for handlers (set with ta_actor_set_state). */
void *ta_actor_state(ta_actor_t *a);
/* The runtime the actor runs on (NULL for a stage driven by replay). */
ta_rt_t *ta_actor_rt(const ta_actor_t *a);
void ta_actor_set_state(ta_actor_t *a, void *state);
/* Messages processed so far (valid after stop through the STOP_ACK too). */
uint64_t ta_actor_processed(const ta_actor_t *a);

/* Counters an actor keeps for its owner: statistics only, never part of a
 * message or the log, so they cannot change what a run computes.  Stages
 * count them themselves (BUSY_NS: CPU time spent on their main work; JOBS:
 * units of it, for the scheduler subgraphs; the scheduler keeps both).  Reads and adds are atomic, so the owner may read
 * them while the actor runs (in-process only). */
typedef enum ta_stat { TA_STAT_BUSY_NS, TA_STAT_JOBS, TA_STAT_CACHE_HITS, TA_STAT__COUNT } ta_stat_t;
void ta_actor_count(ta_actor_t *self, ta_stat_t stat, uint64_t n);
uint64_t ta_actor_stat(const ta_actor_t *a, ta_stat_t stat);

/* From a handler: sends m to dest, or replies to req (dest = req's sender,
 * corr = req's corr).  Return what ta_port_send returns. */
int ta_actor_send(ta_actor_t *self, uint32_t dest, ta_msg_t *m);
int ta_actor_reply(ta_actor_t *self, const ta_msg_t *req, ta_msg_t *reply);

/* A fresh correlation id of this actor (unique in its runtime: the port id
 * is in the high bits), for a request whose reply it will await. */
uint64_t ta_actor_new_corr(ta_actor_t *self);

/*
 * From a handler: the next message this actor processes is the reply
 * carrying corr from the port `from` (the actor it asked: a reply with the
 * right corr from anyone else is not it, so a peer cannot answer for
 * another); nothing else is processed until it came (rule 2 above).  One
 * await at a time: a second call replaces the first.  If no such reply
 * comes within the runtime's timeout (a heartbeat of that corr, or of
 * corr 0 from that port, restarts it), the handler is given ERROR(TACT_ETIMEDOUT) with that corr instead
 * (sender 0), and a reply that comes later is dropped and reported.
 */
void ta_actor_await(ta_actor_t *self, uint64_t corr, uint32_t from);

/*
 * A peer: an actor of the same pipeline working beside this one (another
 * executor).  Its replies (copies, which come when it has computed them,
 * maybe before this actor reached their realize) are kept whatever their
 * size and count, outside the limit on replies nobody asked for.  And it
 * hears this actor is alive: every heartbeat of the work this actor
 * awaits is passed on to each peer as a heartbeat of corr 0, and
 * ta_actor_tell_peers sends one; a peer awaiting something of this one
 * then does not give up while this one waits or works itself.  Returns
 * TACT_OK or TACT_ENOMEM.
 */
int ta_actor_add_peer(ta_actor_t *self, uint32_t port);
void ta_actor_tell_peers(ta_actor_t *self);
/* The reply carrying corr from `from` will not be awaited after all (it
 * is known to come): a copy of it held now is dropped, and so is the one
 * that comes later.  TACT_OK or TACT_ENOMEM (then a late one stays held). */
int ta_actor_forget(ta_actor_t *self, uint64_t corr, uint32_t from);


/*
 * Long work and the timeout.  Every wait is bounded by the runtime's
 * timeout, but a wait is for a stage that says nothing, not for one that
 * works: a handler busy for long (a compile, a kernel) calls
 * ta_actor_progress every timeout / 4 or so, which sends PROGRESS (a
 * heartbeat, never logged) for the request it works on; an await of that
 * corr, and a client waiting on its port, then wait on.  ta_actor_stopping
 * says the owner asked the actor to stop: long work gives up (killing what
 * it started) so the stop is answered in time.  ta_actor_timeout_ms is the
 * runtime's timeout (0 for a stage driven by hand).
 */
void ta_actor_progress(ta_actor_t *self, uint32_t dest, uint64_t corr);
int ta_actor_stopping(const ta_actor_t *self);
int ta_actor_timeout_ms(const ta_actor_t *self);

/* From a handler: makes ids the actor's ordered inputs (rule 1 above),
 * replacing any given at start.  A stage calls it when its CONFIG names its
 * upstream.  Returns TACT_OK or TACT_ENOMEM (the inputs are unchanged). */
int ta_actor_set_inputs(ta_actor_t *self, const uint32_t *ids, size_t n);

/* Sends ERROR(code, what, text) with correlation id corr to dest: how a
 * stage tells whoever waits for a piece of work that it failed.  A failed
 * send is reported to the runtime (ta_rt_report).  Returns the send's status. */
int ta_actor_send_error(ta_actor_t *self, uint32_t dest, uint64_t corr, int code, const char *what, const char *text);

/* From a handler: records the text of the error the handler is about to
 * return and returns code, so `return ta_actor_fail(self, TACT_EINVAL, ...)`
 * reads naturally. */
int ta_actor_fail(ta_actor_t *self, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* From a handler: like ta_actor_fail, and the actor answers every later
 * message with this error (TACT_EACTOR) until it is stopped. */
int ta_actor_fatal(ta_actor_t *self, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
