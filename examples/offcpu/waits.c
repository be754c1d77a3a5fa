// Known waits for jprof's off-CPU tests and benchmark (docs/off-cpu.md).
//   waits          the main thread sleeps 8 x 125 ms in wait_in_sleeper() while a second
//                  thread spins for 1 s in spin_in_spinner(): 1 s off-CPU vs ~0.
//   waits pingpong N   two threads pass a byte back and forth through two pipes N times:
//                  a context-switch-heavy load (two switches per hop). The threads are pinned
//                  to CPUs 0 and 1 (when there are two), so every hop wakes the other CPU;
//                  `waits pingpong N same` pins both to CPU 0 (a switch per hand-off, far
//                  more switches per second).
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long elapsed_ns(const struct timespec *a, const struct timespec *b) {
    return (b->tv_sec - a->tv_sec) * 1000000000L + (b->tv_nsec - a->tv_nsec);
}

__attribute__((noinline)) void wait_in_sleeper(void) {
    for (int i = 0; i < 8; i++) usleep(125000);
}

__attribute__((noinline)) void *spin_in_spinner(void *arg) {
    (void)arg;
    volatile unsigned long x = 0;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do {
        for (int i = 0; i < 100000; i++) x += i;
        clock_gettime(CLOCK_MONOTONIC, &b);
    } while (elapsed_ns(&a, &b) < 1000000000L);
    return 0;
}

static int ping[2], pong[2];
static long hops;
static int ponger_cpu = 1;

static void pin_to(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);  // best effort: one CPU is fine
}

__attribute__((noinline)) void *echo_in_ponger(void *arg) {
    (void)arg;
    char c;
    pin_to(ponger_cpu);
    for (long i = 0; i < hops; i++) {
        if (read(ping[0], &c, 1) != 1 || write(pong[1], &c, 1) != 1) exit(2);
    }
    return 0;
}

__attribute__((noinline)) void serve_in_pinger(void) {
    char c = 'x';
    for (long i = 0; i < hops; i++) {
        if (write(ping[1], &c, 1) != 1 || read(pong[0], &c, 1) != 1) exit(2);
    }
}

int main(int argc, char **argv) {
    pthread_t t;
    if (argc >= 3 && argv[1][0] == 'p') {
        hops = atol(argv[2]);
        if (argc >= 4 && strcmp(argv[3], "same") == 0) ponger_cpu = 0;
        if (pipe(ping) || pipe(pong)) return 1;
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        pin_to(0);
        pthread_create(&t, 0, echo_in_ponger, 0);
        serve_in_pinger();
        pthread_join(t, 0);
        clock_gettime(CLOCK_MONOTONIC, &b);
        printf("%ld hops in %.3f s\n", hops, elapsed_ns(&a, &b) / 1e9);
        return 0;
    }
    pthread_create(&t, 0, spin_in_spinner, 0);
    wait_in_sleeper();
    pthread_join(t, 0);
    return 0;
}
