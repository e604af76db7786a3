/* compiler.c - a compiler pool worker: renders a kernel AST as C, compiles it (or finds it cached), reports the program. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ast.h"
#include "cc.h"
#include "mem.h"
#include "mpread.h"
#include "pipeline.h"
#include "render.h"

/*
 * COMPILE(realize, index, reply_to, ast) from the planner becomes
 * PROGRAM(realize, index, status, name, digest, text, align) with the
 * object's bytes, sent to reply_to (the executor) as the reply to the
 * COMPILE (same corr); on failure, the error (the kernel's name and the
 * compiler's message) is in text.  Several workers compile different
 * kernels at once; the executor awaits their programs in schedule order,
 * whatever order they arrive in.
 */

enum { S_MEMO = 256 };

/* A kernel this worker built or found: its AST's digest (without the fused
 * ids, which differ between graphs computing the same kernel), and what
 * PROGRAM carries for it. */
typedef struct {
    char key[33];
    char name[64];
    int64_t align;
    uint8_t *obj;
    size_t len;
    char digest[33];
} s_memo_t;

typedef struct {
    ta_pipeline_t w;
    ta_stage_local_t local;
    int configured;
    ta_ast_t ast;
    msgpack_sbuffer keybuf;
    s_memo_t *memo; /* S_MEMO entries, replaced oldest first: a kernel seen
                     * again is neither rendered nor looked up on disk */
    int nmemo, next_memo;
} s_state_t;

static int s_init(ta_actor_t *self, void *arg, ta_error_t *err) {
    s_state_t *s = ta_calloc(1, sizeof *s);
    if (!s) return ta_error_set(err, TACT_ENOMEM, "compiler: out of memory");
    msgpack_sbuffer_init(&s->keybuf);
    ta_stage_local(arg, &s->local);
    ta_actor_set_state(self, s);
    return TACT_OK;
}

static void s_fini(ta_actor_t *self) {
    s_state_t *s = ta_actor_state(self);
    for (int i = 0; i < s->nmemo; i++) ta_free(s->memo[i].obj);
    ta_free(s->memo);
    msgpack_sbuffer_destroy(&s->keybuf);
    ta_free(s);
}

static s_memo_t *s_memo_find(s_state_t *s, const char *key) {
    for (int i = 0; i < s->nmemo; i++)
        if (strcmp(s->memo[i].key, key) == 0) return &s->memo[i];
    return NULL;
}

/* Keeps a built kernel (taking obj), replacing the oldest entry when full. */
static void s_memo_add(s_state_t *s, const s_memo_t *e) {
    if (!s->memo && !(s->memo = ta_calloc(S_MEMO, sizeof *s->memo))) {
        ta_free(e->obj);
        return;
    }
    s_memo_t *slot = &s->memo[s->next_memo];
    if (s->nmemo == S_MEMO) ta_free(slot->obj);
    *slot = *e;
    s->next_memo = (s->next_memo + 1) % S_MEMO;
    if (s->nmemo < S_MEMO) s->nmemo++;
}

/* While the system compiler runs: a heartbeat to whoever waits for the
 * program (the executor, and the client waiting for the realize) every
 * quarter of the timeout, and the answer to "stop?". */
typedef struct {
    ta_actor_t *self;
    uint32_t reply_to, client;
    uint64_t corr;
    struct timespec last;
} s_tick_t;

static int s_tick(void *ud) {
    s_tick_t *t = ud;
    if (ta_actor_stopping(t->self)) return 1;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double ms = (double)(now.tv_sec - t->last.tv_sec) * 1e3 + (double)(now.tv_nsec - t->last.tv_nsec) * 1e-6;
    if (ms * 4 >= ta_actor_timeout_ms(t->self)) {
        ta_actor_progress(t->self, t->reply_to, t->corr);
        ta_actor_progress(t->self, t->client, 0);
        t->last = now;
    }
    return 0;
}

/* Renders and builds the kernel in s->ast (or finds it in the disk cache),
 * filling e with what PROGRAM carries. */
static int s_build(s_state_t *s, s_memo_t *e, s_tick_t *tick, ta_error_t *err) {
    char *src = NULL;
    ta_program_t prog;
    memset(&prog, 0, sizeof prog);
    int rc = ta_render_c(&s->ast, &src, e->name, sizeof e->name, &e->align, err);
    if (rc == TACT_OK && s->local.debug >= 4) fprintf(stderr, "%s\n", src);
    /* The object's bytes travel in the message, never its path. */
    if (rc == TACT_OK) rc = ta_cc_build(s->w.cc, s->local.cache_dir, e->name, src, &prog, &e->obj, &e->len, e->digest, s->local.compile_limit_s, s_tick, tick, err);
    /* Timings stay out of messages, so two runs log the same bytes. */
    if (rc == TACT_OK && s->local.debug >= 2 && !prog.cached) fprintf(stderr, "tact: compiled %s in %.1f ms\n", e->name, prog.compile_ms);
    if (rc == TACT_OK && !prog.cached) ta_actor_count(tick->self, TA_STAT_JOBS, 1); /* tact_stats.compiles */
    ta_free(src);
    return rc;
}

static int s_handle(ta_actor_t *self, ta_msg_t *m) {
    s_state_t *s = ta_actor_state(self);
    if (m->type == TA_MSG_CONFIG) {
        int rc = ta_pipeline_configure(self, m, &s->w, &s->configured, TA_ROLE_COMPILER);
        return rc != TACT_OK ? rc : ta_pipeline_ack(self, m);
    }
    if (m->type != TA_MSG_COMPILE || !s->configured)
        return ta_actor_fail(self, TACT_EINVAL, "compiler: cannot handle %s%s", ta_msg_type_name(m->type), s->configured ? "" : " before CONFIG");
    if (!m->as.compile.reply_to || m->as.compile.reply_to > UINT32_MAX)
        return ta_actor_fail(self, TACT_EPROTO, "compiler: COMPILE names no port to reply to");
    ta_error_t err = {0, ""};
    ta_mpr_t r;
    ta_mpr_init(&r, m->as.compile.ast.ptr, m->as.compile.ast.len);
    s_memo_t e;
    memset(&e, 0, sizeof e);
    snprintf(e.name, sizeof e.name, "?");
    e.align = 1;
    int rc = ta_ast_unpack(&s->ast, &r, &err);
    s_memo_t *hit = NULL;
    if (rc == TACT_OK) {
        int nfused = s->ast.nfused;
        s->ast.nfused = 0;
        msgpack_sbuffer_clear(&s->keybuf);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &s->keybuf, msgpack_sbuffer_write);
        if (ta_ast_pack(&s->ast, &pk) != 0) rc = ta_error_set(&err, TACT_ENOMEM, "compiler: out of memory");
        s->ast.nfused = nfused;
        ta_cc_digest(s->keybuf.data, s->keybuf.size, e.key);
        if (rc == TACT_OK && !(hit = s_memo_find(s, e.key))) {
            s_tick_t tick = {self, (uint32_t)m->as.compile.reply_to, s->w.client, m->corr, {0, 0}};
            clock_gettime(CLOCK_MONOTONIC, &tick.last);
            rc = s_build(s, &e, &tick, &err);
            if (rc == TACT_OK) {
                s_memo_add(s, &e);
                if (!(hit = s_memo_find(s, e.key))) rc = ta_error_set(&err, TACT_ENOMEM, "compiler: out of memory keeping kernel %s", e.name);
            } else {
                ta_free(e.obj);
            }
        }
    }
    ta_msg_t out;
    ta_msg_init(&out, TA_MSG_PROGRAM);
    out.corr = m->corr;
    out.as.program.realize = m->as.compile.realize;
    out.as.program.index = m->as.compile.index;
    out.as.program.status = rc;
    out.as.program.name = ta_bytes_str(hit ? hit->name : e.name);
    out.as.program.digest = ta_bytes_str(hit ? hit->digest : "");
    out.as.program.text = ta_bytes_str(rc == TACT_OK ? "" : err.text);
    out.as.program.align = (uint64_t)(hit ? hit->align : e.align);
    out.as.program.nargs = rc == TACT_OK ? (uint64_t)s->ast.nargs : 0;
    if (hit) { /* copied into the frame: the memo keeps its bytes */
        out.bulk.ptr = hit->obj;
        out.bulk.len = hit->len;
    }
    uint32_t dest = (uint32_t)m->as.compile.reply_to;
    int src = ta_actor_send(self, dest, &out);
    if (src != TACT_OK && src != TACT_ENOTFOUND) {
        /* The executor awaits an answer: the failure, without the bytes. */
        char text[300];
        snprintf(text, sizeof text, "kernel %s: its program could not be sent: %s", hit ? hit->name : e.name, tact_strerror(src));
        out.as.program.status = src;
        out.as.program.digest = ta_bytes_str("");
        out.as.program.text = ta_bytes_str(text);
        out.bulk.ptr = NULL;
        out.bulk.len = 0;
        ta_actor_send(self, dest, &out);
    }
    return TACT_OK; /* an error goes to the executor, never to the planner, which waits for none */
}

const ta_actor_ops_t ta_compiler_ops = {"compiler", s_init, s_handle, s_fini};
