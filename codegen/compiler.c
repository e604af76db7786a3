/* compiler.c - a compiler pool worker: renders a kernel AST as C, compiles it (or finds it cached), reports the program. */
#include <stdio.h>
#include <string.h>

#include "ast.h"
#include "cc.h"
#include "mem.h"
#include "mpread.h"
#include "pipeline.h"
#include "render.h"

/*
 * COMPILE(realize, index, ast) from the planner becomes PROGRAM(realize,
 * index, status, name, path, text) to the planner, which passes programs
 * on to the executor in kernel order: status 0
 * with the shared object's path, or the error (the kernel's name and the
 * compiler's message) in text.  Several workers compile different kernels
 * at once; the executor runs them in schedule order whatever order their
 * programs arrive in.
 */

enum { S_MEMO = 512 };

typedef struct {
    ta_pipeline_t *w;
    ta_ast_t ast;
    /* The in-memory cache: paths of objects this worker built or found, so
     * a kernel seen again skips the disk cache's check and load. */
    char (*memo)[1024];
    int nmemo, next_memo;
} s_state_t;

static int s_init(ta_actor_t *self, void *arg, ta_error_t *err) {
    s_state_t *s = ta_calloc(1, sizeof *s);
    if (!s) return ta_error_set(err, TACT_ENOMEM, "compiler: out of memory");
    s->w = arg;
    ta_actor_set_state(self, s);
    return TACT_OK;
}

static void s_fini(ta_actor_t *self) {
    s_state_t *s = ta_actor_state(self);
    ta_free(s->memo);
    ta_free(s);
}

static int s_memo_has(const s_state_t *s, const char *path) {
    for (int i = 0; i < s->nmemo; i++)
        if (strcmp(s->memo[i], path) == 0) return 1;
    return 0;
}

/* Remembers path, replacing the oldest entry when full. */
static void s_memo_add(s_state_t *s, const char *path) {
    if (!s->memo && !(s->memo = ta_calloc(S_MEMO, sizeof *s->memo))) return;
    snprintf(s->memo[s->next_memo], sizeof s->memo[0], "%s", path);
    s->next_memo = (s->next_memo + 1) % S_MEMO;
    if (s->nmemo < S_MEMO) s->nmemo++;
}

static void s_free_object(void *data, void *owner) {
    (void)owner;
    ta_free(data);
}

static int s_handle(ta_actor_t *self, ta_msg_t *m) {
    s_state_t *s = ta_actor_state(self);
    if (m->type != TA_MSG_COMPILE) return ta_actor_fail(self, TACT_EINVAL, "compiler: cannot handle %s", ta_msg_type_name(m->type));
    ta_error_t err = {0, ""};
    ta_mpr_t r;
    ta_mpr_init(&r, m->as.compile.ast.ptr, m->as.compile.ast.len);
    char *src = NULL, name[64] = "?";
    int64_t align = 1;
    ta_program_t prog;
    memset(&prog, 0, sizeof prog);
    int rc = ta_ast_unpack(&s->ast, &r, &err);
    if (rc == TACT_OK) rc = ta_render_c(&s->ast, &src, name, sizeof name, &align, &err);
    if (rc == TACT_OK && s->w->debug >= 4) fprintf(stderr, "%s\n", src);
    if (rc == TACT_OK) {
        ta_cc_path(s->w->cc, s->w->cache_dir, name, src, prog.path, sizeof prog.path);
        if (s_memo_has(s, prog.path)) {
            prog.cached = 1;
        } else {
            rc = ta_cc_build(s->w->cc, s->w->cache_dir, name, src, &prog, &err);
            if (rc == TACT_OK) s_memo_add(s, prog.path);
        }
    }
    /* Timings stay out of messages, so two runs log the same bytes. */
    if (rc == TACT_OK && s->w->debug >= 2 && !prog.cached) fprintf(stderr, "tact: compiled %s in %.1f ms\n", name, prog.compile_ms);
    ta_cc_unload(&prog); /* loading proved it; the executor loads its own copy */
    /* The object's bytes travel in the message, never its path. */
    uint8_t *obj = NULL;
    size_t obj_len = 0;
    char digest[33] = "";
    if (rc == TACT_OK) rc = ta_cc_read(prog.path, &obj, &obj_len, &err);
    if (rc == TACT_OK) ta_cc_digest(obj, obj_len, digest);
    ta_msg_t out;
    ta_msg_init(&out, TA_MSG_PROGRAM);
    out.bulk.ptr = obj;
    out.bulk.len = obj_len;
    if (obj) out.bulk_free = s_free_object;
    out.corr = m->corr;
    out.as.program.realize = m->as.compile.realize;
    out.as.program.index = m->as.compile.index;
    out.as.program.status = rc;
    out.as.program.name = ta_bytes_str(name);
    out.as.program.digest = ta_bytes_str(digest);
    out.as.program.text = ta_bytes_str(rc == TACT_OK ? "" : err.text);
    out.as.program.align = (uint64_t)align;
    rc = ta_actor_send(self, s->w->planner, &out);
    ta_free(src);
    return rc;
}

const ta_actor_ops_t ta_compiler_ops = {"compiler", s_init, s_handle, s_fini, NULL};
