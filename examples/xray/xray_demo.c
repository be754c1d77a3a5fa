/* jprof example: an LLVM XRay-instrumented C program with a known call structure, for
 * `jprof record -- ./xray_demo` (samples + XRay call logs on one timeline).
 *
 * Build: clang -fxray-instrument -fxray-instruction-threshold=1 -O1 -pthread \
 *            -o xray_demo examples/xray/xray_demo.c
 *
 *   main -> outer -> middle -> leaf_hash -> spin     (and middle -> spin)
 *   worker (1 pthread) -> outer -> ...               (the same shape)
 *
 * Every function is noinline, so each is a real, instrumented call. `spin` is a dependency
 * chain of multiplications the compiler cannot fold, so nearly all CPU time is in `spin`,
 * in calls of tens of microseconds: long next to the sampling period's uncertainty, short
 * enough that a run makes thousands of calls. Clang omits frame pointers at -O1, so a
 * frame-pointer unwind from `spin` stops early: XRay's stacks complete those samples.
 * Argument: rounds (default 200, about 0.5 s of CPU per thread).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static volatile uint64_t sink;

__attribute__((noinline)) static uint64_t spin(uint64_t x, int n) {
    for (int i = 0; i < n; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        x ^= x >> 29;
    }
    return x;
}

__attribute__((noinline)) uint64_t leaf_hash(uint64_t seed) { return spin(seed, 12000); }

__attribute__((noinline)) uint64_t middle(uint64_t seed) {
    uint64_t acc = 0;
    for (int i = 0; i < 4; i++) acc += leaf_hash(seed + (uint64_t)i);
    return spin(acc, 8000);
}

__attribute__((noinline)) uint64_t outer(int rounds, uint64_t seed) {
    uint64_t acc = seed;
    for (int r = 0; r < rounds; r++)
        for (int j = 0; j < 5; j++) acc ^= middle(acc + (uint64_t)j);
    return acc;
}

static int rounds = 200;

__attribute__((noinline)) void *worker(void *arg) {
    sink = outer(rounds, (uint64_t)(uintptr_t)arg);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) rounds = atoi(argv[1]);
    pthread_t t;
    pthread_create(&t, NULL, worker, (void *)7);
    sink ^= outer(rounds, 3);
    pthread_join(t, NULL);
    printf("xray_demo: %llu\n", (unsigned long long)sink);
    return 0;
}
