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

typedef struct {
    ta_pipeline_t *w;
    ta_ast_t ast;
} s_state_t;

static int s_init(ta_actor_t *self, void *arg, ta_error_t *err) {
    s_state_t *s = ta_calloc(1, sizeof *s);
    if (!s) return ta_error_set(err, TACT_ENOMEM, "compiler: out of memory");
    s->w = arg;
    ta_actor_set_state(self, s);
    return TACT_OK;
}

static void s_fini(ta_actor_t *self) { ta_free(ta_actor_state(self)); }

static int s_handle(ta_actor_t *self, ta_msg_t *m) {
    s_state_t *s = ta_actor_state(self);
    if (m->type != TA_MSG_COMPILE) return ta_actor_fail(self, TACT_EINVAL, "compiler: cannot handle %s", ta_msg_type_name(m->type));
    ta_error_t err = {0, ""};
    ta_mpr_t r;
    ta_mpr_init(&r, m->as.compile.ast.ptr, m->as.compile.ast.len);
    char *src = NULL, name[64] = "?";
    ta_program_t prog;
    memset(&prog, 0, sizeof prog);
    int rc = ta_ast_unpack(&s->ast, &r, &err);
    if (rc == TACT_OK) rc = ta_render_c(&s->ast, &src, name, sizeof name, &err);
    if (rc == TACT_OK && s->w->debug >= 4) fprintf(stderr, "%s\n", src);
    if (rc == TACT_OK) rc = ta_cc_build(name, src, &prog, &err);
    /* Timings stay out of messages, so two runs log the same bytes. */
    if (rc == TACT_OK && s->w->debug >= 2 && !prog.cached) fprintf(stderr, "tact: compiled %s in %.1f ms\n", name, prog.compile_ms);
    ta_cc_unload(&prog); /* loading proved it; the executor loads its own */
    ta_msg_t out;
    ta_msg_init(&out, TA_MSG_PROGRAM);
    out.corr = m->corr;
    out.as.program.realize = m->as.compile.realize;
    out.as.program.index = m->as.compile.index;
    out.as.program.status = rc;
    out.as.program.name = ta_bytes_str(name);
    out.as.program.path = ta_bytes_str(rc == TACT_OK ? prog.path : "");
    out.as.program.text = ta_bytes_str(rc == TACT_OK ? "" : err.text);
    rc = ta_actor_send(self, s->w->planner, &out);
    ta_free(src);
    return rc;
}

const ta_actor_ops_t ta_compiler_ops = {"compiler", s_init, s_handle, s_fini, NULL};
