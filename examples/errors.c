/* errors.c - how tact reports a mistake: an error tensor that carries the first error,
 * checked once, at the end (no call aborts the program, none returns NULL).
 *
 *   cc errors.c $(pkg-config --cflags --libs tact) -o errors
 */
#include <stdio.h>

#include <tact.h>

int main(void) {
    tact_ctx *ctx;
    if (tact_ctx_open(&ctx, NULL) != TACT_OK) {
        fprintf(stderr, "tact: %s\n", tact_last_open_error());
        return 1;
    }
    int64_t s23[2] = {2, 3}, s24[2] = {2, 4};
    tact_tensor *a = tact_ones(ctx, TACT_FLOAT32, 2, s23);
    tact_tensor *b = tact_ones(ctx, TACT_FLOAT32, 2, s24);

    /* A matmul of 2x3 by 2x4 is wrong; the ops after it pass its error on. */
    tact_tensor *y = tact_sum_all(tact_exp2(tact_matmul(a, b)));
    printf("status: %s\n", tact_status_name(tact_status_of(y)));
    printf("message: %s\n", tact_error_message(y));

    /* A sync point reports the same error, and the context goes on. */
    double v;
    printf("tact_item: %s\n", tact_strerror(tact_item(y, &v)));
    tact_tensor *fixed = tact_sum_all(tact_matmul(tact_permute(a, (int[]){1, 0}), b)); /* 3x2 by 2x4 */
    int rc = tact_item(fixed, &v);
    printf("3x2 by 2x4, summed: %s, %g\n", tact_status_name(rc), v);

    /* Misuse is an error too: a NULL tensor, a bad axis. */
    printf("NULL tensor: %s\n", tact_status_name(tact_status_of(tact_neg(NULL))));
    printf("axis 5 of a 2-d tensor: %s\n", tact_error_message(tact_sum_axis(a, 5)));
    tact_ctx_close(&ctx);
    return 0;
}
