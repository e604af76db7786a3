/* harness.h - the subcommands of the tact command. */
#ifndef TACT_HARNESS_H
#define TACT_HARNESS_H

#include <stdio.h>

#include "runtime.h"

/* Each returns the process exit status (0 on success) and prints its own errors. */
int h_demo(int argc, char **argv);
int h_bench(int argc, char **argv);
/* `bench pipeline` and `bench kernels`: return 0 when every measurement ran. */
int h_bench_pipeline(int quick);
int h_bench_kernels(int quick);
/* Prints one bench line: {"name","value","unit","peer","peer_value","ratio"}. */
void h_line(const char *name, double value, const char *unit, const char *peer, double peer_value, double ratio);
/* Runs harness/SCRIPT ARGS with the best Python there is for a peer, the
 * first that imports module, and returns its output to read (pclose it),
 * or NULL: the peers' venv (.tools/peers, `make peers`: current PyTorch),
 * else Debian's /usr/bin/python3, else python3 on PATH (tried anyway).
 * *why (when not NULL) is empty, or, when the peer is Debian's
 * python3-torch 1.13, says it is the fallback: to append to its name. */
FILE *h_peer_open(const char *script, const char *module, const char *args, char *why, size_t why_len);
int h_log(int argc, char **argv);
/* `tact worker` and `tact keygen` (worker.c). */
int h_worker(int argc, char **argv);
void h_worker_usage(FILE *f);
int h_keygen(int argc, char **argv);
/* `tact log check --deep`: each executor's buffers followed through its
 * recorded inbox (logverify.c); prints a line per problem and a summary
 * to out, returns the number of problems. */
#include <stdio.h>
struct ta_log;
int h_log_verify(const struct ta_log *log, FILE *out);
/* `tact train` and `tact eval` (train.c). */
int h_train(int argc, char **argv);
int h_eval(int argc, char **argv);
/* The usage of train and eval, with their defaults. */
#include <stdio.h>
void h_train_usage(FILE *f);
/* `bench train`: training steps of the MLP and the CNN against PyTorch. */
int h_bench_train(int quick);
/* Milliseconds per training step of the MLP (cnn 0) or the CNN on one
 * batch of 128 on device (NULL: the default), the best of 3 windows of
 * steps after 3 warm-up steps; *first: the first step's, compiling
 * included.  -1 on failure (said on stderr). */
double h_bench_step(int cnn, const char *device, int steps, int threads, double *first);
/* `bench cuda`: the CUDA device against PyTorch on the same GPU (bench_cuda.c). */
int h_bench_cuda(int quick);

/* Parses a --transport/--log option pair shared by subcommands into cfg;
 * returns 1 if argv[*i] was one (advancing *i), 0 if not, -1 on a bad value. */
int h_runtime_option(int argc, char **argv, int *i, ta_rt_config_t *cfg);

/* Seconds on a monotonic clock. */
double h_now(void);

/* `bench devices`: the OpenCL device against the CPU device (bench_devices.c). */
int h_bench_devices(int quick);
/* From bench_kernels.c: n pseudo-random floats in [-0.5, 0.5) (malloc'd);
 * the best time in seconds of reps realizes of expr over inputs uploaded
 * once, in a context on device (NULL: the default), the first realize
 * (which compiles) not counted, or -1 on failure; expr = a matmul.
 * h_tact_best_with does the same in a context opened with o, the inputs
 * first passed through prep (when not NULL; it may replace them) and
 * realized before any timing. */
#include "tact.h"
float *h_fill(size_t n, unsigned seed);
typedef tact_tensor *(*h_expr_fn)(tact_ctx *ctx, tact_tensor **in);
double h_tact_best(const char *device, int nin, float **data, int64_t (*shapes)[2], const int *ndims, h_expr_fn expr, int reps);
typedef void (*h_prep_fn)(tact_ctx *ctx, tact_tensor **in);
double h_tact_best_with(const tact_options *o, int nin, float **data, int64_t (*shapes)[2], const int *ndims, h_prep_fn prep, h_expr_fn expr,
                        int reps);
tact_tensor *h_matmul(tact_ctx *ctx, tact_tensor **in);

#endif
