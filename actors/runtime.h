/* runtime.h - the actor runtime: configuration, the id registry, transports and ports (mailboxes). */
#ifndef TACT_RUNTIME_H
#define TACT_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "msg.h"

typedef enum ta_transport { TA_TRANSPORT_INPROC, TA_TRANSPORT_IPC, TA_TRANSPORT_TCP } ta_transport_t;

/* A key other than the runtime's own that may connect over tcp (a worker
 * process), and the port ids it may send as: a message whose envelope
 * names another sender is refused. */
typedef struct ta_curve_peer {
    char public_key[41]; /* Z85, 40 characters */
    uint32_t first_id, last_id;
} ta_curve_peer_t;

typedef struct ta_rt_config {
    ta_transport_t transport; /* how mailboxes are reached; inproc by default */
    /* tcp is authenticated and encrypted with CURVE: every mailbox is a
     * CURVE server, and a ZAP handler of the runtime admits only its own
     * key and the peers' (fail closed: without the handler nothing
     * connects).  Plain tcp needs insecure_tcp set: anyone who can reach
     * the port can then send as anyone. */
    int insecure_tcp;
    const char *curve_secret_key;         /* Z85; NULL: a fresh key pair for this runtime */
    const ta_curve_peer_t *curve_peers;   /* copied */
    size_t ncurve_peers;
    int timeout_ms;           /* bound on every blocking wait (default 5000) */
    size_t max_msg_bytes;     /* largest envelope accepted (default 16 MiB) */
    size_t max_bulk_bytes;    /* largest bulk frame accepted (default 1 GiB) */
    const char *log_path;     /* record every message to this file; NULL: off */
    ta_bytes_t log_header;    /* the log's run header: a packed msgpack map (empty: none) */
    const char *ipc_dir;      /* folder for ipc:// sockets (default /tmp) */
} ta_rt_config_t;

typedef struct ta_rt ta_rt_t;
typedef struct ta_port ta_port_t;

/* Fills c with the defaults above. */
void ta_rt_config_default(ta_rt_config_t *c);

/* Parses "inproc", "ipc" or "tcp"; returns 0, or -1 if the name is unknown. */
int ta_transport_parse(const char *name, ta_transport_t *out);
const char *ta_transport_name(ta_transport_t t);

/*
 * Creates a runtime (a ZeroMQ context, the id registry and, if cfg->log_path
 * is set, the recorder).  cfg may be NULL for the defaults; it is copied.
 * Returns TACT_OK and *out, or an error with *out NULL and err filled.
 */
int ta_rt_new(ta_rt_t **out, const ta_rt_config_t *cfg, ta_error_t *err);

/*
 * Destroys the runtime: every port and actor must be gone.  With recording
 * on, writes the log file first.  Returns TACT_OK or the log's write error;
 * *rt is freed and set to NULL either way.  Safe with *rt == NULL.  If an
 * actor was abandoned (see ta_rt_abandon), returns TACT_ETIMEDOUT without
 * waiting for it, so destroying never hangs.  If ports are still open,
 * returns TACT_EINVAL and leaves *rt untouched (destroy them and retry).
 */
int ta_rt_destroy(ta_rt_t **rt, ta_error_t *err);

const ta_rt_config_t *ta_rt_config(const ta_rt_t *rt);
void *ta_rt_zmq(ta_rt_t *rt);

/* Reserves the next port id (ids start at 1, in call order, so a program
 * that creates its actors in the same order gets the same ids).  Returns 0
 * when the registry cannot grow. */
uint32_t ta_rt_reserve_id(ta_rt_t *rt, const char *name);

/* Counts an actor whose thread did not answer in time and was left running.
 * ta_rt_destroy then cannot wait for its sockets: it shuts the transport
 * down, leaves the runtime's memory to the stray thread and reports it. */
void ta_rt_abandon(ta_rt_t *rt);
/* A teardown begins: from now on a send that finds no room fails at once
 * (TACT_ETIMEDOUT) instead of waiting out the timeout.  Actors stop one
 * by one, and a send to one that has stopped (its mailbox closed) would
 * otherwise hold its sender past the stop's own timeout. */
void ta_rt_ending(ta_rt_t *rt);

/* Copies the endpoint port id's mailbox is bound on ("tcp://127.0.0.1:4711")
 * into buf; returns 0, or -1 if no such port is bound. */
int ta_rt_endpoint(ta_rt_t *rt, uint32_t id, char *buf, size_t len);

/*
 * Ports of another process (a worker's executors in a client, the client's
 * stages in a worker) are routes: an id reserved in call order like any
 * other, whose endpoint is a link's mailbox (actors/link.h), which carries
 * what is sent there to the other process.  ta_rt_route reserves one (0:
 * out of memory); ta_rt_is_route says whether id is one.
 */
uint32_t ta_rt_route(ta_rt_t *rt, const char *name, const char *endpoint);
int ta_rt_is_route(ta_rt_t *rt, uint32_t id);

/* A route whose process is gone (a worker died or stopped answering):
 * from now on sends to id fail at once with text, and so do the waits for
 * a message from id (ta_port_wait_from, ta_port_request to it, an actor's
 * await of it), within 100 ms of the loss.  Losses are numbered from 1 in
 * the order they happen: ta_rt_lost returns id's number with the text in
 * buf once it is lost, else 0; ta_rt_losses how many there were so far
 * (a loss numbered at most that came before). */
void ta_rt_lose(ta_rt_t *rt, uint32_t id, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int ta_rt_lost(ta_rt_t *rt, uint32_t id, char *buf, size_t len);
int ta_rt_losses(ta_rt_t *rt);

/* A PUSH socket connected to port id's mailbox as the runtime's ports
 * connect (CURVE with the runtime's key over tcp), for a link that passes
 * messages on unchanged.  Returns TACT_OK and *sock (the caller closes it),
 * or TACT_ENOTFOUND/TACT_ETRANSPORT in err. */
int ta_rt_connect(ta_rt_t *rt, uint32_t id, void **sock, ta_error_t *err);

/* Reads the rest of a multipart ZeroMQ message (a bad one is consumed whole). */
void ta_zmq_drain(void *sock);

/* Answers one ZAP request (ZeroMQ RFC 27) waiting on rep: a CURVE client
 * whose 32-byte key admit accepts (writing its user id into user) is
 * admitted, anything else refused.  Returns 1 admitted, 0 refused, -1
 * when nothing could be read.  The runtime's handler and a worker's use it. */
int ta_zap_answer(void *rep, int (*admit)(const uint8_t key[32], char *user, size_t len, void *ud), void *ud);

/* The runtime's CURVE public key (Z85, 40 characters and a NUL) into buf:
 * what a peer needs to connect to its tcp mailboxes.  Returns 0, or -1 when
 * the runtime does not use CURVE. */
int ta_rt_public_key(const ta_rt_t *rt, char buf[41]);

/* A failure that breaks the pipeline for good (a stage that ran out of
 * memory lost a message, or could not do its work): the first is kept, and
 * every port's waits (ta_port_wait, ta_port_request) return its code and
 * text within 100 ms instead of waiting for an answer that cannot come.
 * ta_rt_failure returns the code (0: none) with the text in buf. */
void ta_rt_fail(ta_rt_t *rt, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int ta_rt_failure(ta_rt_t *rt, char *buf, size_t len);

/* Problems no caller can be told of (an undecodable message with no sender,
 * a stalled input) are counted here with the latest text. */
void ta_rt_report(ta_rt_t *rt, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
uint64_t ta_rt_reports(ta_rt_t *rt, char *last, size_t last_len);

/*
 * Creates a port: a mailbox bound on the configured transport, plus the
 * sockets it sends through.  A port is used by one thread at a time.
 * ta_port_new reserves a fresh id; ta_port_open binds one reserved earlier.
 * Returns TACT_OK and *out, or an error (*out NULL).
 */
int ta_port_new(ta_rt_t *rt, const char *name, ta_port_t **out, ta_error_t *err);
int ta_port_open(ta_rt_t *rt, uint32_t id, ta_port_t **out, ta_error_t *err);

/*
 * Creates a port with no sockets whose sends are handed to capture instead
 * (stage replay).  rt may be NULL.  Returns TACT_OK or TACT_ENOMEM.
 */
typedef int (*ta_capture_fn)(void *ud, const ta_msg_t *m);
int ta_port_new_capture(uint32_t id, ta_capture_fn capture, void *ud, ta_port_t **out);

/* Closes the port's sockets and frees it; *p is set to NULL. */
void ta_port_destroy(ta_port_t **p);

uint32_t ta_port_id(const ta_port_t *p);
ta_rt_t *ta_port_rt(const ta_port_t *p);

/*
 * Sends m to port dest: sets m->sender, m->dest and the next m->seq for that
 * destination, encodes and sends it (with the bulk frame, zero-copy when
 * m->bulk_free is set: the bytes then belong to the transport, which frees
 * them even when the send fails).  Waits at most timeout_ms for room.
 * Returns TACT_OK, TACT_ENOTFOUND (no such port), TACT_ETIMEDOUT, or
 * TACT_ETRANSPORT/TACT_ENOMEM/TACT_ETOOBIG; err says which.
 */
int ta_port_send(ta_port_t *p, uint32_t dest, ta_msg_t *m, ta_error_t *err);

/*
 * Receives the next message into m (released first; one kept by an earlier
 * ta_port_wait comes first), waiting at most
 * timeout_ms (< 0: the configured timeout).  Returns TACT_OK, TACT_ETIMEDOUT,
 * or TACT_EPROTO/TACT_ETOOBIG/TACT_EVERSION for a bad message (which is
 * consumed; the port keeps working).  The caller releases m.
 */
int ta_port_recv(ta_port_t *p, ta_msg_t *m, int timeout_ms, ta_error_t *err);

/*
 * Sends req to dest with a fresh correlation id and waits (timeout_ms, < 0:
 * configured) for the message carrying it; other messages that arrive
 * meanwhile are kept for later ta_port_recv calls.  An ERROR reply is
 * returned in *reply with its code as the result and its text in err.
 */
int ta_port_request(ta_port_t *p, uint32_t dest, ta_msg_t *req, ta_msg_t *reply, int timeout_ms,
                    ta_error_t *err);

/* ta_port_request whose wait ends, with the loss's text, when port watch
 * is lost, or with TA_WATCH_LOSSES when any port is lost while it waits
 * (a request whose answer may come from any device: a READ). */
#define TA_WATCH_LOSSES UINT32_MAX
int ta_port_request_watching(ta_port_t *p, uint32_t dest, uint32_t watch, ta_msg_t *req, ta_msg_t *reply, int timeout_ms, ta_error_t *err);

/* A fresh correlation id of this port: the port id in the high bits, so
 * ids are unique within the runtime.  ta_port_send_request uses it. */
uint64_t ta_port_new_corr(ta_port_t *p);

/* The two halves of ta_port_request: send req with a fresh correlation id
 * (left in req->corr), and later wait for the message carrying corr (one
 * that came meanwhile was kept).  Several requests may be outstanding. */
int ta_port_send_request(ta_port_t *p, uint32_t dest, ta_msg_t *req, ta_error_t *err);
int ta_port_wait(ta_port_t *p, uint64_t corr, ta_msg_t *reply, int timeout_ms, ta_error_t *err);

/* Drops kept messages answering this port's requests up to corr (the
 * owner waited for those already: a late or second answer is noise). */
void ta_port_forget(ta_port_t *p, uint64_t upto);

/* A PROGRESS heartbeat (a stage still working) restarts ta_port_wait's
 * timeout; with ta_port_wait_within the whole wait is at most timeout_ms,
 * heartbeats or not (closing does not wait for long work). */
int ta_port_wait_within(ta_port_t *p, uint64_t corr, ta_msg_t *reply, int timeout_ms, ta_error_t *err);

/* ta_port_wait (extend 1) or ta_port_wait_within (extend 0) for the
 * message carrying corr from port from: several ports answering one
 * request (a realize on several executors) are taken in a fixed order. */
int ta_port_wait_from(ta_port_t *p, uint64_t corr, uint32_t from, ta_msg_t *reply, int timeout_ms, int extend, ta_error_t *err);

/* For actors: the mailbox socket (to poll), a receive that does not record,
 * and the recording of a message when it is processed. */
void *ta_port_mailbox(ta_port_t *p);
int ta_port_recv_raw(ta_port_t *p, ta_msg_t *m, ta_error_t *err);
void ta_port_record_in(ta_port_t *p, const ta_msg_t *m);
/* With recording on, a note on the port's latest record, kept beside the
 * log (ta_log_stream_note); 1 when the port is recorded (a caller may
 * skip measuring otherwise), 0 when not. */
int ta_port_recorded(const ta_port_t *p);
void ta_port_note(ta_port_t *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Gives to the bulk bytes of from, a received message, without copying
 * them: the frame moves into to, which frees it once sent (or when its
 * send fails); from keeps no bulk.  For a message not received from a
 * port, to only points at the bytes (the send copies them). */
void ta_msg_pass_bulk(ta_msg_t *from, ta_msg_t *to);

#endif
