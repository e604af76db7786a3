/* planner.c - the memory planner actor: assigns buffers to a schedule, reusing dead temporaries, and fans out compiles. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ast.h"
#include "dtype.h"
#include "hash.h"
#include "map.h"
#include "mem.h"
#include "mpread.h"
#include "pipeline.h"

/*
 * KERNELS from the scheduler gives a schedule and its temporaries: buffers
 * no tensor needs after this realize.  Each kernel goes to a compiler
 * (round robin by kernel index, so the same program always splits the same
 * way), in a COMPILE of several, with a fresh corr each and the executor as
 * the port to reply to, and the whole PLAN, naming each step's corr, goes to the executor
 * under the KERNELS' corr.  The executor awaits the PLAN where the graph's
 * RUN puts it, then each step's PROGRAM in order.  A PLAN always goes, with
 * a failure status when the kernels cannot be planned, so the executor
 * never waits for one that will not come.
 *
 * Reuse: once a temporary's last reader has run, its memory is free; a later
 * temporary output of at most that size takes it over instead of a fresh
 * allocation.  Buffers a live tensor holds are never reused (DESIGN.md trap 7).
 */

typedef struct {
    const uint8_t *ast; /* the packed AST, forwarded to a compiler as is */
    size_t ast_len;
    int nbufs;
    uint64_t bufs[TA_AST_MAX_BUFS];
    uint8_t writes[TA_AST_MAX_BUFS];
    uint64_t bytes[TA_AST_MAX_BUFS];
    int64_t numel;
    uint64_t work; /* iterations: the product of the AST's full shape */
    ta_u64s_t args; /* the argument values, in the KERNELS message */
} s_kernel_t;

/* What the planner needs of a kernel's AST, kept by the digest of its
 * bytes: the same kernel comes every step, and decoding an AST costs more
 * than planning it. */
typedef struct {
    uint64_t h[2];
    uint8_t *ast; /* its bytes: a hit must have the same (a hash can be made to collide) */
    size_t ast_len;
    int64_t numel;
    uint64_t work;
    int nbufs, nargs;
    uint64_t bytes[TA_AST_MAX_BUFS];
} s_head_t;

enum { S_HEADS = 512 };

typedef struct {
    ta_pipeline_t w;
    int configured;
    s_head_t *heads; /* S_HEADS, replaced oldest first */
    int nheads, next_head;
    ta_map_t head_index; /* h[0] -> index in heads */
} s_state_t;

/* The head of the AST in bytes: remembered, or decoded (and checked). */
static int s_head(s_state_t *s, ta_ast_t *ast, const ta_bytes_t bytes, s_head_t *out, ta_error_t *err) {
    uint64_t h[2], i;
    ta_hash128(bytes.ptr, bytes.len, h);
    if (ta_map_get(&s->head_index, h[0], &i) && s->heads[i].h[1] == h[1] && s->heads[i].ast_len == bytes.len &&
        memcmp(s->heads[i].ast, bytes.ptr, bytes.len) == 0) {
        *out = s->heads[i];
        return TACT_OK;
    }
    ta_mpr_t r;
    ta_mpr_init(&r, bytes.ptr, bytes.len);
    int rc = ta_ast_unpack(ast, &r, err);
    if (rc != TACT_OK) return rc;
    memset(out, 0, sizeof *out);
    out->h[0] = h[0], out->h[1] = h[1];
    out->numel = 1;
    out->work = 1;
    for (int d = 0; d < ast->ndim; d++) {
        out->numel *= ast->reduce_mask >> d & 1 ? 1 : ast->shape[d];
        uint64_t dim = (uint64_t)ast->shape[d];
        out->work = dim && out->work > UINT64_MAX / dim ? UINT64_MAX : out->work * dim;
    }
    out->nbufs = ast->nbufs;
    out->nargs = ast->nargs;
    for (int b = 0; b < ast->nbufs; b++) out->bytes[b] = (uint64_t)ast->buf_size[b] * ta_dtype_size(ast->buf_dtype[b]);
    /* Remembered if there is room (a failed allocation only costs time). */
    if (!s->heads && !(s->heads = ta_calloc(S_HEADS, sizeof *s->heads))) return TACT_OK;
    uint8_t *copy = ta_malloc(bytes.len ? bytes.len : 1);
    if (!copy) return TACT_OK;
    memcpy(copy, bytes.ptr, bytes.len);
    s_head_t *slot = &s->heads[s->next_head];
    if (s->nheads == S_HEADS) {
        ta_map_del(&s->head_index, slot->h[0]);
        ta_free(slot->ast);
        memset(slot, 0, sizeof *slot);
    }
    if (ta_map_put(&s->head_index, h[0], (uint64_t)s->next_head) != TACT_OK) {
        ta_free(copy);
        return TACT_OK;
    }
    *slot = *out;
    slot->ast = copy;
    slot->ast_len = bytes.len;
    s->next_head = (s->next_head + 1) % S_HEADS;
    if (s->nheads < S_HEADS) s->nheads++;
    return TACT_OK;
}

static int s_parse(s_state_t *s, const ta_recs_t *kernels, s_kernel_t **out, int *nk, ta_error_t *err) {
    uint32_t n = kernels->n;
    s_kernel_t *ks = ta_calloc(n ? n : 1, sizeof *ks);
    ta_ast_t *ast = ta_malloc(sizeof *ast);
    ta_kernel_rec_t *rec = ta_malloc(sizeof *rec);
    int rc = ks && ast && rec ? TACT_OK : ta_error_set(err, TACT_ENOMEM, "planner: out of memory");
    ta_recs_it_t it;
    ta_recs_begin(&it, kernels);
    for (uint32_t q = 0; q < n && rc == TACT_OK; q++) {
        s_kernel_t *k = &ks[q];
        if (!ta_recs_next(&it, rec)) {
            rc = ta_error_set(err, TACT_EPROTO, "planner: malformed kernel %u", q);
            break;
        }
        s_head_t hd;
        if ((rc = s_head(s, ast, rec->ast, &hd, err)) != TACT_OK) break;
        k->ast = rec->ast.ptr;
        k->ast_len = rec->ast.len;
        k->numel = hd.numel;
        k->work = hd.work;
        if ((int)rec->n_bufs != hd.nbufs || rec->n_writes != rec->n_bufs) {
            rc = ta_error_set(err, TACT_EPROTO, "planner: kernel %u has %u buffer ids and %u flags for %d buffers", q, rec->n_bufs,
                              rec->n_writes, hd.nbufs);
            break;
        }
        if (rec->args.n != (uint32_t)hd.nargs) {
            rc = ta_error_set(err, TACT_EPROTO, "planner: kernel %u has %u argument values for %d arguments", q, rec->args.n, hd.nargs);
            break;
        }
        k->args = rec->args;
        k->nbufs = hd.nbufs;
        for (int b = 0; b < k->nbufs; b++) {
            k->bufs[b] = rec->bufs[b];
            k->bytes[b] = hd.bytes[b];
            k->writes[b] = (uint8_t)(rec->writes[b] & 3);
        }
    }
    ta_free(ast);
    ta_free(rec);
    if (rc != TACT_OK) {
        ta_free(ks);
        return rc;
    }
    *out = ks;
    *nk = (int)n;
    return TACT_OK;
}

/* A compiler builds the kernels of one COMPILE in one run of the system
 * compiler (its start-up costs more than a small kernel), so each gets its
 * kernels in batches: 4, then 8, then at most 16 (the executor can start on
 * the first while the rest compile), and at most S_BATCH_BYTES of ASTs.
 * The batches depend on the schedule alone, so the objects, which travel
 * in PROGRAMs and the log, are the same in every run. */
enum { S_BATCH_MAX = 16, S_BATCH_BYTES = 1 << 20 };

static int s_send_compiles(ta_actor_t *self, s_state_t *s, uint64_t realize, const s_kernel_t *ks, int nk, const uint64_t *corrs,
                           ta_error_t *err) {
    ta_job_rec_t jobs[S_BATCH_MAX];
    for (int c = 0; c < s->w.ncompilers; c++) {
        int n = 0, cap = 4;
        size_t bytes = 0;
        for (int q = c; q < nk; q += s->w.ncompilers) {
            jobs[n].index = (uint64_t)q;
            jobs[n].corr = corrs[q];
            jobs[n].ast.ptr = ks[q].ast;
            jobs[n].ast.len = ks[q].ast_len;
            n++;
            bytes += ks[q].ast_len;
            if (n < cap && bytes < S_BATCH_BYTES && q + s->w.ncompilers < nk) continue;
            ta_msg_t msg;
            ta_msg_init(&msg, TA_MSG_COMPILE);
            msg.corr = jobs[0].corr;
            msg.as.compile.realize = realize;
            msg.as.compile.reply_to = s->w.executor;
            msg.as.compile.jobs = ta_recs(TA_REC_JOB, jobs, (size_t)n);
            int rc = ta_actor_send(self, s->w.compiler[c], &msg);
            if (rc != TACT_OK) return ta_error_set(err, rc, "planner: cannot send kernel %d to a compiler", q);
            n = 0;
            bytes = 0;
            cap = cap * 2 < S_BATCH_MAX ? cap * 2 : S_BATCH_MAX;
        }
    }
    return TACT_OK;
}

/* Plans the kernels of m (KERNELS): sends their COMPILEs, and packs the
 * plan's steps into sb with the figures in *peak and *unplanned. */
static int s_plan(ta_actor_t *self, s_state_t *s, const ta_msg_t *m, msgpack_sbuffer *sb, uint64_t *peak_out,
                  uint64_t *unplanned_out, ta_error_t *err) {
    s_kernel_t *ks = NULL;
    int nk = 0, rc = s_parse(s, &m->as.kernels.kernels, &ks, &nk, err);
    if (rc != TACT_OK) return rc;
    ta_u64s_it_t it;
    uint32_t nt = m->as.kernels.temps.n;
    ta_u64s_begin(&it, &m->as.kernels.temps);
    /* Per temporary: its id, its size, its last reader; the pool holds the
     * ones whose last reader has run.  dead[] lists the temporaries by last
     * reader (first_dead[q] .. first_dead[q + 1] die after kernel q). */
    ta_map_t index = {0};
    uint64_t *temps = ta_calloc(nt + 1, sizeof *temps), *tbytes = ta_calloc(nt + 1, sizeof *tbytes),
             *pool = ta_calloc(nt + 1, sizeof *pool), *pool_bytes = ta_calloc(nt + 1, sizeof *pool_bytes);
    int *last = ta_calloc(nt + 1, sizeof *last), *dead = ta_calloc(nt + 1, sizeof *dead),
        *first_dead = ta_calloc((size_t)nk + 2, sizeof *first_dead);
    int bad = !temps || !tbytes || !pool || !pool_bytes || !last || !dead || !first_dead;
    for (uint32_t i = 0; i < nt && !bad; i++) {
        ta_u64s_next(&it, &temps[i]);
        last[i] = -1;
        bad = ta_map_put(&index, temps[i], i) != TACT_OK;
    }
    /* Last use of each temporary: its last reader, or the kernel that made
     * it when nothing reads it (it is freed all the same). */
    for (int q = 0; q < nk && !bad; q++)
        for (int b = 0; b < ks[q].nbufs; b++) {
            uint64_t t;
            if (!ta_map_get(&index, ks[q].bufs[b], &t)) continue;
            last[t] = q;
            if (b == 0) tbytes[t] = ks[q].bytes[0];
        }
    for (uint32_t t = 0; t < nt && !bad; t++)
        if (last[t] >= 0) first_dead[last[t] + 1]++;
    for (int q = 0; q < nk && !bad; q++) first_dead[q + 1] += first_dead[q];
    for (uint32_t t = 0; t < nt && !bad; t++)
        if (last[t] >= 0) dead[first_dead[last[t]]++] = (int)t;
    for (int q = nk; q > 0 && !bad; q--) first_dead[q] = first_dead[q - 1];
    if (!bad) first_dead[0] = 0;
    /* Walk the schedule: dead temporaries go to a pool that later outputs take from. */
    uint64_t live = 0, peak = 0, unplanned = 0;
    int npool = 0;
    uint64_t *corrs = ta_calloc((size_t)nk + 1, sizeof *corrs);
    bad = bad || !corrs;
    for (int q = 0; q < nk && !bad; q++) corrs[q] = ta_actor_new_corr(self);
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    bad = bad || ta_recs_pack_header(&pk, (size_t)nk);
    for (int q = 0; q < nk && !bad; q++) {
        s_kernel_t *k = &ks[q];
        uint64_t reuse = 0;
        unplanned += k->bytes[0];
        if (ta_map_get(&index, k->bufs[0], NULL)) {
            int best = -1;
            for (int i = 0; i < npool; i++)
                if (pool_bytes[i] >= k->bytes[0] && (best < 0 || pool_bytes[i] < pool_bytes[best])) best = i;
            if (best >= 0) {
                reuse = pool[best];
                pool[best] = pool[npool - 1];
                pool_bytes[best] = pool_bytes[--npool];
            }
        }
        if (!reuse) live += k->bytes[0];
        if (live > peak) peak = live;
        /* Its memory may hold a later output; the entry keeps its size. */
        for (int d = first_dead[q]; d < first_dead[q + 1]; d++)
            if (tbytes[dead[d]]) {
                pool[npool] = temps[dead[d]];
                pool_bytes[npool++] = tbytes[dead[d]];
            }
        /* The last step frees whatever is left in the pool. */
        ta_step_rec_t st;
        memset(&st, 0, sizeof st);
        st.index = (uint64_t)q;
        st.program = corrs[q];
        st.n_bufs = st.n_bytes = st.n_writes = (uint32_t)k->nbufs;
        for (int b = 0; b < k->nbufs; b++) st.bufs[b] = k->bufs[b], st.bytes[b] = k->bytes[b], st.writes[b] = k->writes[b];
        st.numel = k->numel;
        st.reuse = reuse;
        st.frees = ta_u64s(pool, q == nk - 1 ? (size_t)npool : 0);
        st.work = k->work;
        st.args = k->args;
        bad = ta_rec_pack(TA_REC_STEP, &st, &pk) != 0;
    }
    if (bad) rc = ta_error_set(err, TACT_ENOMEM, "planner: out of memory");
    /* Compiles first, so compilation overlaps the executor's other work;
     * each PROGRAM goes straight to the executor, which awaits it. */
    if (rc == TACT_OK) rc = s_send_compiles(self, s, m->as.kernels.realize, ks, nk, corrs, err);
    *peak_out = peak;
    *unplanned_out = unplanned;
    ta_free(corrs);
    ta_free(ks);
    ta_map_fini(&index);
    ta_free(temps), ta_free(tbytes), ta_free(pool), ta_free(pool_bytes), ta_free(last), ta_free(dead), ta_free(first_dead);
    return rc;
}

static int s_init(ta_actor_t *self, void *arg, ta_error_t *err) {
    (void)arg;
    s_state_t *s = ta_calloc(1, sizeof *s);
    if (!s) return ta_error_set(err, TACT_ENOMEM, "planner: out of memory");
    ta_actor_set_state(self, s);
    return TACT_OK;
}

static void s_fini(ta_actor_t *self) {
    s_state_t *s = ta_actor_state(self);
    for (int i = 0; s->heads && i < S_HEADS; i++) ta_free(s->heads[i].ast);
    ta_free(s->heads);
    ta_map_fini(&s->head_index);
    ta_free(s);
}

static int s_handle(ta_actor_t *self, ta_msg_t *m) {
    s_state_t *s = ta_actor_state(self);
    if (m->type == TA_MSG_CONFIG) {
        int rc = ta_pipeline_configure(self, m, &s->w, &s->configured, TA_ROLE_PLANNER);
        return rc != TACT_OK ? rc : ta_pipeline_ack(self, m);
    }
    if (m->type != TA_MSG_KERNELS || !s->configured)
        return ta_actor_fail(self, TACT_EINVAL, "planner: cannot handle %s%s", ta_msg_type_name(m->type), s->configured ? "" : " before CONFIG");
    ta_error_t err = {0, ""};
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    uint64_t peak = 0, unplanned = 0;
    int rc = s_plan(self, s, m, &sb, &peak, &unplanned, &err);
    ta_msg_t p;
    ta_msg_init(&p, TA_MSG_PLAN);
    p.corr = m->corr;
    p.as.plan.realize = m->as.kernels.realize;
    p.as.plan.status = rc;
    if (rc == TACT_OK) {
        p.as.plan.steps = ta_recs_raw(TA_REC_STEP, sb.data, sb.size, (size_t)m->as.kernels.kernels.n);
        p.as.plan.planned_peak = peak;
        p.as.plan.unplanned = unplanned;
    } else {
        p.as.plan.text = ta_bytes_str(err.text);
    }
    int src = ta_actor_send(self, s->w.executor, &p);
    msgpack_sbuffer_destroy(&sb);
    return src;
}

const ta_actor_ops_t ta_planner_ops = {"planner", s_init, s_handle, s_fini};
