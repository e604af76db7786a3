/* own_symbols.c - a program that defines functions named like tact's internal ones
 * (ta_grow, ta_malloc, ta_hash128) links against libtact.so and both keep
 * their own: tact exports only tact_*, so its calls cannot reach these. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <tact.h>

static int calls;

/* Were libtact.so to export its internals, the dynamic linker would bind
 * tact's own calls to these, and every realize would fail or crash. */
int ta_grow(int x) {
    calls++;
    return x + 1;
}
void *ta_malloc(size_t size) {
    (void)size;
    calls++;
    return NULL;
}
void ta_hash128(const void *bytes, size_t len, uint64_t out[2]) {
    (void)bytes, (void)len;
    calls++;
    out[0] = out[1] = 0;
}

int main(void) {
    tact_ctx *ctx;
    if (tact_ctx_open(&ctx, NULL) != TACT_OK) {
        fprintf(stderr, "tact: %s\n", tact_last_open_error());
        return 1;
    }
    int64_t shape[1] = {1000};
    double v = 0;
    int rc = tact_item(tact_sum(tact_full(ctx, TACT_FLOAT32, 1, shape, 0.5), -1, NULL, 0), &v);
    tact_ctx_close(&ctx);
    int tact_calls = calls, ours = ta_grow(41);
    printf("sum %g, our ta_grow(41) %d, tact called ours %d times\n", v, ours, tact_calls);
    return rc == TACT_OK && v == 500 && ours == 42 && tact_calls == 0 ? 0 : 1;
}
