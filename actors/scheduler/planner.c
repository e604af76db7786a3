/* planner.c - the memory planner actor: assigns buffers to a schedule, reusing dead temporaries, and gives each executor its plan. */
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
 * no tensor needs after this realize.  Each executor gets a PLAN of its
 * steps, under the KERNELS' corr: a kernel step carries its AST (and the
 * AST's digest), by which the executor finds the program it holds or asks
 * a compiler for one; a copy step the corr its two sides share.  The
 * planner keeps no model of what any executor holds.  A PLAN always goes,
 * with a failure status when the kernels cannot be planned, so the
 * executor never waits for one that will not come.
 *
 * Reuse: once a temporary's last reader has run, its memory is free; a later
 * temporary output of at most that size takes it over instead of a fresh
 * allocation.  Buffers a live tensor holds are never reused (DESIGN.md trap 7).
 */

typedef struct {
    const uint8_t *ast; /* the packed AST, forwarded in its step as is */
    size_t ast_len;
    int nbufs;
    uint64_t bufs[TA_AST_MAX_BUFS];
    uint8_t writes[TA_AST_MAX_BUFS];
    uint64_t bytes[TA_AST_MAX_BUFS];
    int64_t numel;
    uint64_t work; /* iterations: the product of the AST's full shape */
    ta_u64s_t args; /* the argument values, in the KERNELS message */
    int device;     /* where it runs (a copy: where it arrives) */
    int from;       /* a copy's source device, else -1 */
    uint64_t h[2];  /* the digest of its AST's bytes */
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
    for (int d = 0; d < ast->ndim; d++) out->numel *= ast->reduce_mask >> d & 1 ? 1 : ast->shape[d];
    out->work = ta_ast_work(ast);
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
        k->h[0] = hd.h[0], k->h[1] = hd.h[1];
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
        k->device = (int)rec->device;
        k->from = rec->copy ? (int)rec->copy - 1 : -1;
        if (rec->device >= (uint64_t)s->w.ndevices || rec->copy > (uint64_t)s->w.ndevices || k->from == k->device ||
            (k->from >= 0 && hd.nbufs != 2)) {
            rc = ta_error_set(err, TACT_EPROTO, "planner: kernel %u names devices this context does not have", q);
            break;
        }
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

/* What a kernel of the schedule is in one device's plan. */
enum { S_NONE, S_KERNEL, S_SEND, S_RECEIVE };

static int s_role(const s_kernel_t *k, int d) {
    if (k->from < 0) return k->device == d ? S_KERNEL : S_NONE;
    return k->device == d ? S_RECEIVE : k->from == d ? S_SEND : S_NONE;
}

/* The buffers a step of that role touches: a send reads the copy's
 * source (its buffer 1), a receive writes its output (buffer 0). */
static void s_role_bufs(const s_kernel_t *k, int role, int *first, int *end) {
    *first = role == S_SEND ? 1 : 0;
    *end = role == S_RECEIVE ? 1 : k->nbufs;
}

/* The order of device d's steps: the schedule's, but a receive goes
 * right before the first kernel here that reads its buffer (so kernels
 * that do not read it need not wait for it), and a send right after the
 * step that made its buffer (first, if none here did), so a copy waits
 * only for its input.  Every step keeps the schedule's order among the
 * steps it depends on, so two executors never wait on each other.
 * Fills seq (the kernel indices) and returns their count. */
static int s_order(const s_kernel_t *ks, int nk, int d, int *seq, uint64_t *key) {
    int n = 0;
    for (int q = 0; q < nk; q++) {
        int role = s_role(&ks[q], d);
        if (role == S_NONE) continue;
        uint64_t k = 4 * (uint64_t)q + 4; /* a kernel */
        if (role == S_RECEIVE) {
            for (int p = q + 1; p < nk; p++) {
                if (s_role(&ks[p], d) != S_KERNEL) continue;
                int reads = 0;
                for (int b = 1; b < ks[p].nbufs && !reads; b++) reads = ks[p].bufs[b] == ks[q].bufs[0];
                if (reads) {
                    k = 4 * (uint64_t)p + 2;
                    break;
                }
            }
            /* Read here by no kernel (only sent on, or kept): where it is. */
        }
        if (role == S_SEND) {
            k = 0;
            for (int i = n - 1; i >= 0 && !k; i--) {
                const s_kernel_t *pk = &ks[seq[i]];
                int pr = s_role(pk, d);
                if ((pr == S_KERNEL || pr == S_RECEIVE) && pk->bufs[0] == ks[q].bufs[1]) k = key[i] + 1;
            }
        }
        /* Insertion by key, then schedule order: the lists are short. */
        int at = n++;
        while (at > 0 && key[at - 1] > k) seq[at] = seq[at - 1], key[at] = key[at - 1], at--;
        seq[at] = q, key[at] = k;
    }
    return n;
}

/* Packs device d's plan of the kernels ks into sb (STEP records; *nsteps of
 * them) with its figures.  corrs[q] is the corr copy q's two steps share. */
static int s_plan_device(const s_state_t *s, const s_kernel_t *ks, int nk, const ta_u64s_t *temps_in, int d, const uint64_t *corrs,
                         msgpack_sbuffer *sb, uint32_t *nsteps, uint64_t *peak_out, uint64_t *unplanned_out) {
    ta_u64s_it_t it;
    uint32_t nt = temps_in->n;
    ta_u64s_begin(&it, temps_in);
    /* Per temporary: its id, its size, its last use; the pool holds the
     * ones whose last use has run.  dead[] lists the temporaries by the
     * position of their last use (first_dead[i] .. first_dead[i + 1] die
     * after step i). */
    ta_map_t index = {0};
    uint64_t *temps = ta_calloc(nt + 1, sizeof *temps), *tbytes = ta_calloc(nt + 1, sizeof *tbytes),
             *pool = ta_calloc(nt + 1, sizeof *pool), *pool_bytes = ta_calloc(nt + 1, sizeof *pool_bytes),
             *key = ta_calloc((size_t)nk + 1, sizeof *key);
    int *last = ta_calloc(nt + 1, sizeof *last), *dead = ta_calloc(nt + 1, sizeof *dead),
        *first_dead = ta_calloc((size_t)nk + 2, sizeof *first_dead), *seq = ta_calloc((size_t)nk + 1, sizeof *seq);
    int bad = !temps || !tbytes || !pool || !pool_bytes || !key || !last || !dead || !first_dead || !seq;
    for (uint32_t i = 0; i < nt && !bad; i++) {
        ta_u64s_next(&it, &temps[i]);
        last[i] = -1;
        bad = ta_map_put(&index, temps[i], i) != TACT_OK;
    }
    int n = bad ? 0 : s_order(ks, nk, d, seq, key);
    /* Last use of each temporary of this device: its last reader here, or
     * the step that made it when nothing reads it (it is freed all the same). */
    for (int i = 0; i < n && !bad; i++) {
        const s_kernel_t *k = &ks[seq[i]];
        int b0, b1;
        s_role_bufs(k, s_role(k, d), &b0, &b1);
        for (int b = b0; b < b1; b++) {
            uint64_t t;
            if (!ta_map_get(&index, k->bufs[b], &t)) continue;
            last[t] = i;
            if (b == 0) tbytes[t] = k->bytes[0];
        }
    }
    for (uint32_t t = 0; t < nt && !bad; t++)
        if (last[t] >= 0) first_dead[last[t] + 1]++;
    for (int i = 0; i < n && !bad; i++) first_dead[i + 1] += first_dead[i];
    for (uint32_t t = 0; t < nt && !bad; t++)
        if (last[t] >= 0) dead[first_dead[last[t]]++] = (int)t;
    for (int i = n; i > 0 && !bad; i--) first_dead[i] = first_dead[i - 1];
    if (!bad) first_dead[0] = 0;
    /* Walk the steps: dead temporaries go to a pool that later outputs take from. */
    uint64_t live = 0, peak = 0, unplanned = 0;
    int npool = 0;
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    for (int i = 0; i < n && !bad; i++) {
        int q = seq[i];
        const s_kernel_t *k = &ks[q];
        int role = s_role(k, d), b0, b1;
        s_role_bufs(k, role, &b0, &b1);
        uint64_t reuse = 0;
        if (role != S_SEND) {
            unplanned += k->bytes[0];
            if (ta_map_get(&index, k->bufs[0], NULL)) {
                int best = -1;
                for (int j = 0; j < npool; j++)
                    if (pool_bytes[j] >= k->bytes[0] && (best < 0 || pool_bytes[j] < pool_bytes[best])) best = j;
                if (best >= 0) {
                    reuse = pool[best];
                    pool[best] = pool[npool - 1];
                    pool_bytes[best] = pool_bytes[--npool];
                }
            }
            if (!reuse) live += k->bytes[0];
            if (live > peak) peak = live;
        }
        /* Its memory may hold a later output; the entry keeps its size. */
        for (int x = first_dead[i]; x < first_dead[i + 1]; x++)
            if (tbytes[dead[x]]) {
                pool[npool] = temps[dead[x]];
                pool_bytes[npool++] = tbytes[dead[x]];
            }
        /* The last step frees whatever is left in the pool. */
        ta_step_rec_t st;
        memset(&st, 0, sizeof st);
        st.index = (uint64_t)q;
        st.program = role == S_KERNEL ? 0 : corrs[q];
        st.n_bufs = st.n_bytes = st.n_writes = (uint32_t)(b1 - b0);
        for (int b = b0; b < b1; b++) st.bufs[b - b0] = k->bufs[b], st.bytes[b - b0] = k->bytes[b], st.writes[b - b0] = k->writes[b];
        st.numel = k->numel;
        st.reuse = reuse;
        st.frees = ta_u64s(pool, i == n - 1 ? (size_t)npool : 0);
        st.work = k->work;
        if (role == S_KERNEL) st.args = k->args;
        st.copy = role == S_SEND ? 1 : role == S_RECEIVE ? 2 : 0;
        st.peer = role == S_SEND ? s->w.device[k->device].executor : role == S_RECEIVE ? s->w.device[k->from].executor : 0;
        if (role == S_SEND) st.bytes[0] = k->bytes[0]; /* what goes: the copy's output size, from the source's start */
        if (role == S_KERNEL) st.ast0 = k->h[0], st.ast1 = k->h[1], st.ast = (ta_bytes_t){k->ast, k->ast_len};
        bad = ta_rec_pack(TA_REC_STEP, &st, &pk) != 0;
    }
    *nsteps = (uint32_t)n;
    *peak_out = peak;
    *unplanned_out = unplanned;
    ta_map_fini(&index);
    ta_free(temps), ta_free(tbytes), ta_free(pool), ta_free(pool_bytes), ta_free(key);
    ta_free(last), ta_free(dead), ta_free(first_dead), ta_free(seq);
    return bad ? TACT_ENOMEM : TACT_OK;
}

/* Plans the kernels of m (KERNELS): one PLAN to every executor (a device
 * with nothing to do gets one without steps: each executor awaits one per
 * RUN). */
static int s_plan(ta_actor_t *self, s_state_t *s, const ta_msg_t *m) {
    ta_error_t err = {0, ""};
    s_kernel_t *ks = NULL;
    int nk = 0, rc = s_parse(s, &m->as.kernels.kernels, &ks, &nk, &err);
    uint64_t *corrs = rc == TACT_OK ? ta_calloc((size_t)nk + 1, sizeof *corrs) : NULL;
    if (rc == TACT_OK && !corrs) rc = ta_error_set(&err, TACT_ENOMEM, "planner: out of memory");
    int nd = s->w.ndevices;
    /* A copy's two steps share a corr: the receiver awaits the sender's DATA under it. */
    for (int q = 0; rc == TACT_OK && q < nk; q++)
        if (ks[q].from >= 0) corrs[q] = ta_actor_new_corr(self);
    /* Per device: its steps' bytes, their count, the byte counts. */
    struct s_per {
        msgpack_sbuffer sb;
        uint32_t nsteps;
        uint64_t peak, unplanned;
    } *per = ta_calloc((size_t)nd, sizeof *per);
    if (!per) {
        ta_free(corrs);
        ta_free(ks);
        return ta_actor_fail(self, TACT_ENOMEM, "planner: out of memory");
    }
    for (int d = 0; d < nd; d++) {
        msgpack_sbuffer_init(&per[d].sb);
        if (rc != TACT_OK) continue;
        /* The steps, then the list's header in front of them once their count is known. */
        msgpack_sbuffer body;
        msgpack_sbuffer_init(&body);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &per[d].sb, msgpack_sbuffer_write);
        if (s_plan_device(s, ks, nk, &m->as.kernels.temps, d, corrs, &body, &per[d].nsteps, &per[d].peak, &per[d].unplanned) != TACT_OK ||
            ta_recs_pack_header(&pk, per[d].nsteps) || (body.size && msgpack_sbuffer_write(&per[d].sb, body.data, body.size)))
            rc = ta_error_set(&err, TACT_ENOMEM, "planner: out of memory");
        msgpack_sbuffer_destroy(&body);
    }
    int src = TACT_OK;
    for (int d = 0; d < nd; d++) {
        ta_msg_t p;
        ta_msg_init(&p, TA_MSG_PLAN);
        p.corr = m->corr;
        p.as.plan.realize = m->as.kernels.realize;
        p.as.plan.status = rc;
        if (rc == TACT_OK) {
            p.as.plan.steps = ta_recs_raw(TA_REC_STEP, per[d].sb.data, per[d].sb.size, per[d].nsteps);
            p.as.plan.planned_peak = per[d].peak;
            p.as.plan.unplanned = per[d].unplanned;
        } else {
            p.as.plan.text = ta_bytes_str(err.text);
        }
        int r = ta_actor_send(self, s->w.device[d].executor, &p);
        if (r != TACT_OK && src == TACT_OK) src = r;
        msgpack_sbuffer_destroy(&per[d].sb);
    }
    ta_free(per);
    ta_free(corrs);
    ta_free(ks);
    return src;
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
    ta_pipeline_fini(&s->w);
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
    return s_plan(self, s, m);
}

const ta_actor_ops_t ta_planner_ops = {"planner", s_init, s_handle, s_fini, NULL};
