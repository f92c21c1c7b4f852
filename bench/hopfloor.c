/* The latency floor of extra hops on this machine: one 16-byte message at a time through
 * a chain of relay processes in C joined by loopback TCP (TCP_NODELAY), each relay only
 * reading and writing (no parsing, routing or crypto). One relay stands for one node
 * (publisher -> node -> subscriber), three for A->B->D. bridge_bench.py prints the p50 of
 * both beside raims's, measured in the same run: what the wakeups and loopback TCP of two
 * more processes cost before any work is done.
 *
 * IDLE_BUSY (default 0) gives the relays the daemons' `idle_busy` policy
 * (raims_node/transports/idle_busy.py): after a message a relay polls its input without
 * blocking up to IDLE_BUSY times, yielding the CPU between polls, before it blocks.
 *
 *     hopfloor RELAYS SAMPLES SIZE [IDLE_BUSY]   ->   "p50 P p99 Q" (microseconds)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RELAYS 8

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* A connected loopback TCP pair: fd[0] the connecting end, fd[1] the accepted one. */
static int tcp_pair(int fd[2]) {
    struct sockaddr_in a = {0};
    socklen_t n = sizeof a;
    int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (l < 0 || bind(l, (void *)&a, sizeof a) || listen(l, 1) || getsockname(l, (void *)&a, &n)) return -1;
    fd[0] = socket(AF_INET, SOCK_STREAM, 0);
    if (fd[0] < 0 || connect(fd[0], (void *)&a, sizeof a)) return -1;
    fd[1] = accept(l, NULL, NULL);
    close(l);
    if (fd[1] < 0) return -1;
    setsockopt(fd[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return 0;
}

static void relay(int in, int out, int idle_busy) {
    char buf[4096];
    for (;;) {
        ssize_t k = -1;
        for (int turn = 0; turn < idle_busy && k < 0; turn++) {
            k = recv(in, buf, sizeof buf, MSG_DONTWAIT);
            if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK) _exit(0);
            if (k < 0) sched_yield();
        }
        if (k < 0) k = read(in, buf, sizeof buf);
        if (k <= 0 || write(out, buf, (size_t)k) != k) _exit(0);
    }
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) { fprintf(stderr, "usage: hopfloor RELAYS SAMPLES SIZE [IDLE_BUSY]\n"); return 2; }
    int relays = atoi(argv[1]), samples = atoi(argv[2]), size = atoi(argv[3]);
    int idle_busy = argc == 5 ? atoi(argv[4]) : 0;
    if (relays < 1 || relays > MAX_RELAYS || samples < 1 || size < 1 || size > 4096 || idle_busy < 0) {
        fprintf(stderr, "bad RELAYS, SAMPLES, SIZE or IDLE_BUSY\n");
        return 2;
    }
    /* pair i joins hop i to hop i + 1: the client writes pair 0 and reads pair `relays` */
    int pairs[MAX_RELAYS + 1][2];
    for (int i = 0; i <= relays; i++)
        if (tcp_pair(pairs[i])) { perror("tcp pair"); return 1; }
    alarm(120);  /* bounded: a stuck relay must not hang the bench */
    pid_t pids[MAX_RELAYS];
    for (int i = 0; i < relays; i++)
        if ((pids[i] = fork()) == 0) relay(pairs[i][1], pairs[i + 1][0], idle_busy);
    double *lat = malloc(sizeof(double) * (size_t)samples);
    char *msg = calloc(1, (size_t)size), buf[4096];
    if (!lat || !msg) return 1;
    for (int i = 0; i < samples; i++) {
        double t0 = now_us();
        if (write(pairs[0][0], msg, (size_t)size) != size) { perror("write"); return 1; }
        for (int got = 0; got < size;) {
            ssize_t k = read(pairs[relays][1], buf, sizeof buf);
            if (k <= 0) { perror("read"); return 1; }
            got += (int)k;
        }
        lat[i] = now_us() - t0;
    }
    qsort(lat, (size_t)samples, sizeof lat[0], by_value);
    printf("p50 %.1f p99 %.1f\n", lat[samples / 2], lat[samples * 99 / 100]);
    fflush(stdout);
    for (int i = 0; i < relays; i++) kill(pids[i], SIGTERM);  /* each also holds the pairs open */
    while (wait(NULL) > 0) {}
    return 0;
}
