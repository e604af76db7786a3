/* fashion_mlp.c - trains a two-layer perceptron on Fashion-MNIST (the Debian package dataset-fashion-mnist) for one
 * epoch of shuffled minibatches, then reports its test accuracy.  cc fashion_mlp.c $(pkg-config --cflags --libs tact) */
#include <stdio.h>

#include <tact.h>

#define DATA "/usr/share/datasets/fashion-mnist/"

/* uint8 pixels (n, 28, 28) as float rows (n, 784) in [0, 1]. */
static tact_tensor *rows(tact_tensor *px) {
    tact_tensor *x = tact_div(tact_cast(px, TACT_FLOAT32), tact_scalar(tact_tensor_ctx(px), 255.0));
    return tact_reshape(x, 2, (int64_t[]){tact_dim(px, 0), 784});
}

static tact_tensor *forward(tact_layer *l, tact_tensor *x, int training) {
    return tact_layer_forward(&l[1], tact_relu(tact_layer_forward(&l[0], x, training)), training);
}

int main(void) {
    tact_ctx *ctx;
    if (tact_ctx_open(&ctx, NULL) != TACT_OK) return fprintf(stderr, "%s\n", tact_last_open_error()), 1;
    tact_tensor *data[4] = {tact_load_idx(ctx, DATA "train-images-idx3-ubyte.gz"), tact_load_idx(ctx, DATA "train-labels-idx1-ubyte.gz"),
                            tact_load_idx(ctx, DATA "t10k-images-idx3-ubyte.gz"), tact_load_idx(ctx, DATA "t10k-labels-idx1-ubyte.gz")};
    tact_layer l[2];
    tact_params params = {0}; /* a list starts zeroed */
    tact_layer_linear(&l[0], ctx, 784, 128, 1);
    tact_layer_linear(&l[1], ctx, 128, 10, 1);
    tact_layer_params(&l[0], "l1", &params);
    tact_layer_params(&l[1], "l2", &params);
    tact_optim *opt;
    tact_optim_options oo;
    tact_optim_options_default(&oo, TACT_OPTIM_ADAM);
    oo.lr = 0.002;
    tact_loader *train;
    tact_loader_options lo;
    tact_loader_options_default(&lo);
    lo.batch = 128;
    if (tact_optim_new(&opt, ctx, &oo, params.n, params.tensors) != TACT_OK || tact_loader_new(&train, ctx, 2, data, &lo) != TACT_OK)
        return fprintf(stderr, "%s\n", tact_ctx_error(ctx)), 1;
    tact_tensor *b[2];
    while (tact_loader_next(train, b) == 1) { /* one epoch */
        tact_scope_begin(ctx);
        tact_tensor *loss = tact_cross_entropy(forward(l, rows(b[0]), 1), tact_cast(b[1], TACT_INT32));
        if (tact_backward(loss, NULL) != TACT_OK || tact_optim_step(opt) != TACT_OK) return fprintf(stderr, "%s\n", tact_ctx_error(ctx)), 1;
        tact_optim_zero_grad(opt);
        tact_scope_end(ctx);
    }
    tact_set_no_grad(ctx, 1); /* the test set in one batch */
    tact_tensor *pred = tact_argmax(forward(l, rows(data[2]), 0), 1, 0);
    double right = 0;
    if (tact_item(tact_sum_all(tact_eq(pred, tact_cast(data[3], TACT_INT32))), &right) != TACT_OK)
        return fprintf(stderr, "%s\n", tact_ctx_error(ctx)), 1;
    printf("%lld training batches; test accuracy above 80%%: %s\n", (long long)tact_loader_batches(train), right > 8000 ? "yes" : "NO");
    tact_loader_free(&train);
    tact_optim_free(&opt);
    tact_params_free(&params);
    tact_ctx_close(&ctx);
    return right > 8000 ? 0 : 1;
}
