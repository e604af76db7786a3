/* link.h - a client's connection to a tact worker: the worker's executors as routes of the client's runtime (docs/workers.md). */
#ifndef TACT_LINK_H
#define TACT_LINK_H

#include <stdint.h>

#include <zmq.h>

#include "device.h"
#include "runtime.h"

/*
 * The wire between a client (a DEALER) and a worker (a ROUTER), one
 * connection per client and worker, CURVE on tcp.  Each ZeroMQ message is
 * a kind frame, one byte, and what the kind says:
 *   'H' env        client -> worker: HELLO, the first message
 *   'W' env        worker -> client: WELCOME, its answer
 *   'M' env [bulk] a pipeline message passed on unchanged, both ways
 *   'N' env len    the same with a bulk over TA_LINK_CHUNK bytes (len, 8
 *                  bytes little-endian), which follows in 'C' messages
 *   'C' bytes      the next piece of that bulk: the other end sees bytes
 *                  arrive (and heartbeats count) while a large one travels
 *   'P'            a heartbeat, both ways, every TA_LINK_BEAT_MS
 *   'B' text       bye: the other end closes (a worker says why it refuses)
 *   'L' id text    client -> worker: port id (4 bytes, big-endian; another
 *                  worker's executor) is lost, for text: waits for it end
 * An end that hears nothing for TA_LINK_LOST_MS takes the other for gone:
 * a client loses the worker's executors (ta_rt_lose, naming the worker),
 * a worker ends the session and frees everything the client had there.
 */
enum { TA_LINK_BEAT_MS = 200, TA_LINK_LOST_MS = 1500, TA_LINK_MAX_PORTS = 4096, TA_LINK_CHUNK = 1 << 20 };

/* Sends a pipeline message on a link's socket: [rid] 'M' env [bulk], or
 * 'N' and 'C' pieces for a large bulk (rid: a ROUTER's peer, or NULL).
 * env and bulk (bulk may be NULL) are sent without copying; the caller
 * closes them after (what went out is empty by then).  Returns 0, or -1
 * (errno says why). */
int ta_link_put(void *sock, const void *rid, size_t rid_len, zmq_msg_t *env, zmq_msg_t *bulk);

/* Passes what waits in a mailbox (a PULL of pipeline messages, at most
 * 256 of them) on to sock with ta_link_put; sock NULL drops them.
 * Returns how many, or -1 when a send failed (errno says why). */
int ta_link_pass(void *mailbox, void *sock, const void *rid, size_t rid_len);

/* The receiving half: after a kind frame 'M', 'N' or 'C' was read from
 * sock, takes what follows.  Returns 1 with a whole message in *env and
 * *bulk (the caller closes both; bulk of size 0: none), 0 when a piece was
 * kept for a message still coming, or -1 with why (a malformed message, a
 * bulk over max_bulk bytes, a piece nobody announced). */
typedef struct ta_link_rx {
    zmq_msg_t env;
    uint8_t *buf;
    size_t len, got;
    int active;
} ta_link_rx_t;
int ta_link_take(ta_link_rx_t *rx, void *sock, char kind, int more, size_t max_bulk, zmq_msg_t *env, zmq_msg_t *bulk, char *why, size_t len);
void ta_link_rx_fini(ta_link_rx_t *rx);

typedef struct ta_link ta_link_t;

/*
 * A link to the worker at where ("tcp://HOST:PORT", with the worker's
 * public key server_key, or "ipc://PATH" with NULL), on runtime rt: binds
 * the mailbox that the worker's executors' routes point at
 * (ta_link_endpoint).  Errors name it name, or "worker WHERE" when name is
 * NULL.  Nothing is connected until ta_link_hello.
 */
int ta_link_new(ta_rt_t *rt, const char *where, const char *server_key, const char *name, ta_link_t **out, ta_error_t *err);
const char *ta_link_endpoint(const ta_link_t *l);
const char *ta_link_where(const ta_link_t *l);

/*
 * Connects and asks the worker to host the n devices named (its local
 * names, "CPU", "CL:0") as executors with the port ids given (routes of
 * this runtime), beside compilers with the ids given, in a pipeline whose
 * ports go up to ports.  Waits at most timeout_ms for WELCOME, fills
 * infos[0..n) from its DEVICE records, then passes messages both ways in a
 * thread of its own until closed or lost.  Returns TACT_OK, or an error
 * naming the worker (refused keys, no answer, the worker's refusal).
 */
int ta_link_hello(ta_link_t *l, const char *const *devices, const uint32_t *executors, int n, const uint32_t *compilers, int ncompilers,
                  uint32_t ports, ta_device_info_t *infos, int timeout_ms, ta_error_t *err);

/* Says bye to the worker (its session and buffers go), stops the thread and
 * frees the link; *l is set to NULL.  Safe with *l == NULL. */
void ta_link_close(ta_link_t **l);

/*
 * Starts `BIN worker --listen LISTEN --devices DEVICES --print-uri
 * [--threads N]` (bin NULL: the tact command, ta_worker_command) in a
 * process of its own (its standard error the caller's), and reads the
 * URIs it prints (within timeout_ms) into uri.  Returns TACT_OK and *pid,
 * or an error naming what failed (the worker's exit, no line in time).
 */
int ta_worker_spawn(const char *bin, const char *listen, const char *devices, int threads, int timeout_ms, int *pid, char *uri,
                    size_t len, ta_error_t *err);

/* The tact command a library process starts workers with: $TACT_WORKER,
 * else the one installed beside the library, else the build tree's.  NULL
 * when none is there. */
const char *ta_worker_command(void);

/* Stops a worker process started by ta_worker_spawn: SIGTERM, then
 * SIGKILL if it has not ended within timeout_ms; reaps it. */
void ta_worker_stop(int pid, int timeout_ms);

/* Socket options both ends of a link use: no linger, the message size
 * limit, high water marks. */
void ta_link_sockopts(void *sock, size_t max_bytes);

#endif
