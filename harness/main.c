/* main.c - the tact command: demo, bench, log tools and whole-run replay. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "rerun.h"
#include "tact.h"

void h_line(const char *name, double value, const char *unit, const char *peer, double peer_value, double ratio) {
    printf("{\"name\":\"%s\",\"value\":%.4g,\"unit\":\"%s\",\"peer\":\"%s\",\"peer_value\":%.4g,\"ratio\":%.3f}\n", name,
           value, unit, peer, peer_value, ratio);
    fflush(stdout);
}

double h_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int h_runtime_option(int argc, char **argv, int *i, ta_rt_config_t *cfg) {
    const char *opt = argv[*i];
    if (strcmp(opt, "--transport") != 0 && strcmp(opt, "--log") != 0 && strcmp(opt, "--timeout-ms") != 0) return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "tact: %s needs a value\n", opt);
        return -1;
    }
    const char *val = argv[++*i];
    if (strcmp(opt, "--transport") == 0 && ta_transport_parse(val, &cfg->transport) != 0) {
        fprintf(stderr, "tact: unknown transport '%s' (inproc, ipc or tcp)\n", val);
        return -1;
    }
    if (strcmp(opt, "--log") == 0) cfg->log_path = val;
    if (strcmp(opt, "--timeout-ms") == 0 && sscanf(val, "%d", &cfg->timeout_ms) != 1) {
        fprintf(stderr, "tact: --timeout-ms needs a number of milliseconds\n");
        return -1;
    }
    return 1;
}

static void s_usage(FILE *f) {
    fprintf(f,
            "usage: tact <command> [options]\n"
            "  train [--model mlp|cnn] [--epochs N] ...           train a classifier on Fashion-MNIST (tact train --help)\n"
            "  eval  MODEL.safetensors                           its test accuracy\n"
            "  demo  [--transport inproc|ipc|tcp] [--log FILE]   run work through a few actors\n"
            "  bench runtime|pipeline|kernels|train|devices [--quick]  measurements with their peers (JSON lines)\n"
            "  log   check FILE | dump [-v] FILE                 validate or print a message log (-v: every payload record)\n"
            "  replay FILE                                       run a recorded run again and check every stage\n"
            "  devices                                           the devices present, with their limits\n"
            "  version\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        s_usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "demo") == 0) return h_demo(argc - 2, argv + 2);
    if (strcmp(cmd, "bench") == 0) return h_bench(argc - 2, argv + 2);
    if (strcmp(cmd, "log") == 0) return h_log(argc - 2, argv + 2);
    if (strcmp(cmd, "train") == 0) return h_train(argc - 2, argv + 2);
    if (strcmp(cmd, "eval") == 0) return h_eval(argc - 2, argv + 2);
    if (strcmp(cmd, "devices") == 0) {
        tact_device_info d[16];
        int n = tact_devices(d, 16);
        for (int i = 0; i < n && i < 16; i++)
            printf("%-6s %s%s%s\n       %d compute units, %.1f GiB, largest buffer %.1f GiB, work groups up to %lld, fp16 %s\n", d[i].name,
                   d[i].model, d[i].driver[0] ? " | " : "", d[i].driver, d[i].compute_units, (double)d[i].memory / (1u << 30),
                   (double)d[i].max_buffer / (1u << 30), (long long)d[i].max_group, d[i].fp16 ? "yes" : "no");
        printf("%d device%s (virtual CPU devices CPU:0..CPU:7 share the CPU)\n", n, n == 1 ? "" : "s");
        return 0;
    }
    if (strcmp(cmd, "replay") == 0) {
        if (argc != 3) {
            fprintf(stderr, "usage: tact replay FILE\n");
            return 2;
        }
        char verdict[1024];
        int rc = ta_rerun(argv[2], verdict, sizeof verdict);
        printf("%s: %s\n", argv[2], verdict);
        return rc == TACT_OK ? 0 : 1;
    }
    if (strcmp(cmd, "version") == 0) {
        printf("tact %s\n", tact_version());
        return 0;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0) {
        s_usage(stdout);
        return 0;
    }
    fprintf(stderr, "tact: unknown command '%s'\n", cmd);
    s_usage(stderr);
    return 2;
}
