/* transport.c - choosing how the actors talk and recording the run:
 *
 *   ./transport [inproc|ipc|tcp|tcp-insecure] [LOG]
 *
 * Every transport computes the same bits.  With a log path, every message
 * is recorded; `tact replay LOG` runs the recording again and checks it.
 *
 *   cc transport.c $(pkg-config --cflags --libs tact) -o transport
 */
#include <stdio.h>

#include <tact.h>

int main(int argc, char **argv) {
    tact_options o;
    tact_options_default(&o);
    o.transport = argc > 1 ? argv[1] : "ipc"; /* inproc is the default */
    o.log_path = argc > 2 ? argv[2] : NULL;
    o.cpu_threads = 2;
    tact_ctx *ctx;
    if (tact_ctx_open(&ctx, &o) != TACT_OK) {
        fprintf(stderr, "tact: %s\n", tact_last_open_error());
        return 1;
    }
    /* 0 + 1 + ... + 99 and its square root, in one realize. */
    tact_tensor *n = tact_arange(ctx, 0, 100, 1, TACT_FLOAT32);
    tact_tensor *total = tact_sum_all(n);
    tact_tensor *root = tact_sqrt(total);
    tact_tensor *both[2] = {total, root};
    int rc = tact_realize(ctx, 2, both);
    double t = 0, r = 0;
    if (rc == TACT_OK) rc = tact_item(total, &t);
    if (rc == TACT_OK) rc = tact_item(root, &r);
    if (rc != TACT_OK) {
        fprintf(stderr, "tact: %s\n", tact_ctx_error(ctx));
        tact_ctx_close(&ctx);
        return 1;
    }
    printf("over %s: sum %g, its square root %.6f\n", o.transport, t, r);
    rc = tact_ctx_close(&ctx); /* the log is complete once the context is closed */
    if (o.log_path && rc == TACT_OK) printf("recorded in %s: `tact replay %s` runs it again\n", o.log_path, o.log_path);
    return rc == TACT_OK ? 0 : 1;
}
