/* fuzz_ast.c - libFuzzer target: the kernel AST decoder, and the renderer on every AST it accepts. */
#include <stddef.h>
#include <stdint.h>

#include "ast.h"
#include "mem.h"
#include "mpread.h"
#include "render.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static ta_ast_t ast;
    ta_mpr_t r;
    ta_error_t err;
    ta_mpr_init(&r, data, size);
    if (ta_ast_unpack(&ast, &r, &err) == TACT_OK) {
        /* A checked AST must render; the C it gives is not compiled here. */
        char *src = NULL, name[64];
        int64_t align;
        if (ta_render_c(&ast, &src, name, sizeof name, &align, &err) != TACT_OK && err.code != TACT_ENOMEM) __builtin_trap();
        ta_free(src);
    }
    return 0;
}
