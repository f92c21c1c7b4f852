/* The floor one packet per message sets on this machine: a publisher, a relay and a
 * subscriber process in C, joined by two AF_UNIX SOCK_SEQPACKET socket pairs. The
 * publisher hands the kernel BATCH packets per sendmmsg(2); the relay moves every packet
 * it reads with recvmmsg(2) to the subscriber with sendmmsg(2), with no parsing and no
 * routing; the subscriber counts packets with recvmmsg(2). It is what a compiled sbus
 * server could at best reach with native clients (ipc_bench.py prints it).
 *
 *     sbusfloor COUNT SIZE   ->   "rate R received N"
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BATCH 256
#define SLOT 4096

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static char slots[BATCH][SLOT];
static struct mmsghdr hdrs[BATCH];
static struct iovec iov[BATCH];

/* Point every header at its own slot (the receivers) or at one packet (the publisher). */
static void frame(char *one, size_t len) {
    for (int i = 0; i < BATCH; i++) {
        iov[i].iov_base = one ? one : slots[i];
        iov[i].iov_len = len;
        memset(&hdrs[i], 0, sizeof hdrs[i]);
        hdrs[i].msg_hdr.msg_iov = &iov[i];
        hdrs[i].msg_hdr.msg_iovlen = 1;
    }
}

static void send_all(int fd, int n) {
    for (int done = 0; done < n;) {
        int k = sendmmsg(fd, hdrs + done, n - done, 0);
        if (k < 0) { perror("sendmmsg"); _exit(1); }
        done += k;
    }
}

static void publisher(int fd, long count, size_t size) {
    char *packet = calloc(1, size);
    frame(packet, size);
    for (long sent = 0; sent < count;) {
        int k = count - sent < BATCH ? (int)(count - sent) : BATCH;
        send_all(fd, k);
        sent += k;
    }
    _exit(0);
}

static void relay(int in, int out, long count) {
    for (long moved = 0; moved < count;) {
        frame(NULL, SLOT);
        int k = recvmmsg(in, hdrs, BATCH, MSG_WAITFORONE, NULL);
        if (k <= 0) { perror("recvmmsg"); _exit(1); }
        for (int i = 0; i < k; i++) iov[i].iov_len = hdrs[i].msg_len;
        send_all(out, k);
        moved += k;
    }
    _exit(0);
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: sbusfloor COUNT SIZE\n"); return 2; }
    long count = atol(argv[1]);
    size_t size = (size_t)atol(argv[2]);
    if (count <= 0 || size == 0 || size > SLOT) { fprintf(stderr, "bad COUNT or SIZE\n"); return 2; }
    int a[2], b[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, a) || socketpair(AF_UNIX, SOCK_SEQPACKET, 0, b)) {
        perror("socketpair");
        return 1;
    }
    alarm(120);  /* bounded: a stuck child must not hang the bench */
    double t0 = now();
    pid_t pub = fork();
    if (pub == 0) publisher(a[0], count, size);
    pid_t mid = fork();
    if (mid == 0) relay(a[1], b[0], count);
    long got = 0;
    frame(NULL, SLOT);
    while (got < count) {
        int k = recvmmsg(b[1], hdrs, BATCH, MSG_WAITFORONE, NULL);
        if (k <= 0) { perror("recvmmsg"); return 1; }
        got += k;
    }
    double elapsed = now() - t0;
    int status = 0, bad = 0;
    waitpid(pub, &status, 0);
    bad |= !WIFEXITED(status) || WEXITSTATUS(status);
    waitpid(mid, &status, 0);
    bad |= !WIFEXITED(status) || WEXITSTATUS(status);
    printf("rate %.0f received %ld\n", count / elapsed, got);
    return bad;
}
