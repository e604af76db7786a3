/* mlp.c - the forward pass of a two-layer perceptron, softmax(relu(x W1 + b1) W2 + b2),
 * checked against the same computation as a plain C loop.
 *
 *   cc mlp.c $(pkg-config --cflags --libs tact) -lm -o mlp
 */
#include <math.h>
#include <stdio.h>

#include <tact.h>

enum { N = 4, IN = 3, HID = 5, OUT = 2 };

/* The same network in double precision, one loop at a time. */
static void reference(const float *x, const float *w1, const float *b1, const float *w2, const float *b2, double *out) {
    for (int n = 0; n < N; n++) {
        double h[HID], z[OUT], zmax = -INFINITY, total = 0;
        for (int j = 0; j < HID; j++) {
            h[j] = b1[j];
            for (int i = 0; i < IN; i++) h[j] += (double)x[n * IN + i] * w1[i * HID + j];
            if (h[j] < 0) h[j] = 0;
        }
        for (int k = 0; k < OUT; k++) {
            z[k] = b2[k];
            for (int j = 0; j < HID; j++) z[k] += h[j] * w2[j * OUT + k];
            if (z[k] > zmax) zmax = z[k];
        }
        for (int k = 0; k < OUT; k++) total += exp(z[k] - zmax);
        for (int k = 0; k < OUT; k++) out[n * OUT + k] = exp(z[k] - zmax) / total;
    }
}

int main(void) {
    static const float x[N * IN] = {1, 2, 3, -1, 0.5f, 2, 0, 0, 1, 3, -2, 0.25f};
    static const float w1[IN * HID] = {0.5f, -1, 0.25f, 1, -0.5f, 1, 0.5f, -0.75f, 0, 0.25f, -0.25f, 0.5f, 1, -1, 0.75f};
    static const float b1[HID] = {0.1f, 0, -0.2f, 0.3f, 0};
    static const float w2[HID * OUT] = {1, -1, 0.5f, 0.5f, -0.25f, 1, 0.75f, -0.5f, 0, 1};
    static const float b2[OUT] = {0.05f, -0.05f};

    tact_ctx *ctx;
    if (tact_ctx_open(&ctx, NULL) != TACT_OK) {
        fprintf(stderr, "tact: %s\n", tact_last_open_error());
        return 1;
    }
    int64_t sx[2] = {N, IN}, sw1[2] = {IN, HID}, sb1[1] = {HID}, sw2[2] = {HID, OUT}, sb2[1] = {OUT};
    tact_tensor *tx = tact_from_data(ctx, TACT_FLOAT32, 2, sx, x);
    tact_tensor *tw1 = tact_from_data(ctx, TACT_FLOAT32, 2, sw1, w1), *tb1 = tact_from_data(ctx, TACT_FLOAT32, 1, sb1, b1);
    tact_tensor *tw2 = tact_from_data(ctx, TACT_FLOAT32, 2, sw2, w2), *tb2 = tact_from_data(ctx, TACT_FLOAT32, 1, sb2, b2);

    /* tact_linear is x W + b with W (in, out), the bias broadcast over the batch. */
    tact_tensor *h = tact_relu(tact_linear(tx, tw1, tb1));
    tact_tensor *probs = tact_softmax(tact_linear(h, tw2, tb2), -1);

    float got[N * OUT];
    if (tact_read(probs, got, sizeof got) != TACT_OK) {
        fprintf(stderr, "tact: %s\n", tact_error_message(probs));
        tact_ctx_close(&ctx);
        return 1;
    }
    double want[N * OUT], worst = 0;
    reference(x, w1, b1, w2, b2, want);
    for (int n = 0; n < N; n++) {
        printf("row %d: p = [%.4f, %.4f], class %d\n", n, got[n * OUT], got[n * OUT + 1], got[n * OUT + 1] > got[n * OUT]);
        for (int k = 0; k < OUT; k++) worst = fmax(worst, fabs(got[n * OUT + k] - want[n * OUT + k]));
    }
    printf("agrees with a plain C loop within 1e-6: %s\n", worst <= 1e-6 ? "yes" : "NO");
    tact_ctx_close(&ctx);
    return worst <= 1e-6 ? 0 : 1;
}
