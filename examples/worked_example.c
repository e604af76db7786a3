/* worked_example.c - the example at the top of tact.h: (a * b + 1).sum() over two 2x3 tensors.
 *
 *   cc worked_example.c $(pkg-config --cflags --libs tact) -o worked_example
 */
#include <stdio.h>

#include <tact.h>

int main(void) {
    tact_ctx *ctx;
    if (tact_ctx_open(&ctx, NULL) != TACT_OK) { /* in-process, on the CPU */
        fprintf(stderr, "tact: %s\n", tact_last_open_error());
        return 1;
    }
    float x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {6, 5, 4, 3, 2, 1};
    int64_t shape[2] = {2, 3};
    tact_tensor *a = tact_from_data(ctx, TACT_FLOAT32, 2, shape, x);
    tact_tensor *b = tact_from_data(ctx, TACT_FLOAT32, 2, shape, y);
    /* Nothing runs yet: the expression is recorded. */
    tact_tensor *s = tact_sum_all(tact_add(tact_mul(a, b), tact_scalar(ctx, 1.0)));
    double v;
    int rc = tact_item(s, &v); /* the first sync point: fused, compiled, run */
    if (rc != TACT_OK)
        fprintf(stderr, "tact: %s\n", tact_error_message(s));
    else
        printf("(a * b + 1).sum() = %g\n", v); /* 62 */
    tact_print(stdout, tact_mul(a, b)); /* shape, dtype, device and values */
    tact_ctx_close(&ctx); /* frees every tensor */
    return rc == TACT_OK ? 0 : 1;
}
