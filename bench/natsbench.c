/* A native pipelined NATS publisher/subscriber pair for bench/bridge_bench.py.
 *
 *   natsbench rate HOST PUB_PORT SUB_PORT COUNT SIZE
 *   natsbench lat  HOST PUB_PORT SUB_PORT COUNT SIZE
 *
 * rate: a reader thread subscribes `bench.x` (sid 1) and `bench.probe` (sid 2) on
 * SUB_PORT; the main thread publishes probes on PUB_PORT until one arrives (the
 * subscription reached the publisher's node), then COUNT messages of SIZE bytes in
 * 64 KB writes. The first 8 payload bytes carry the sequence number: the reader
 * counts gaps (lost) and sequence numbers going back (out of order). Prints one line
 *   rate <msgs/s> received <n> lost <n> disorder <n> secs <s>
 * where the rate runs from the first write to the last delivery. The reader stops
 * after COUNT messages or IDLE_S seconds without one.
 * lat: one message in flight, publish to delivery; prints
 *   lat p50_us <x> p99_us <y>
 * Plain C99 + POSIX threads, no library: the bench compiles it with the system cc.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RBUF (1 << 20)
#define WBUF (1 << 16)
#define IDLE_S 10.0

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what) {
    perror(what);
    exit(2);
}

static void send_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) continue;
            die("send");
        }
        p += w;
        n -= (size_t)w;
    }
}

static int dial(const char *host, int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket");
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) die("inet_pton");
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) die("connect");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* A connection with a read buffer holding unparsed bytes at [off, len). */
typedef struct {
    int fd;
    char *buf;
    size_t off, len;
} Conn;

/* Read more; returns 0 on timeout (ms >= 0), exits on a closed connection. */
static int fill(Conn *c, int ms) {
    if (c->off > 0 && c->off == c->len) c->off = c->len = 0;
    if (c->len == RBUF) {
        memmove(c->buf, c->buf + c->off, c->len - c->off);
        c->len -= c->off;
        c->off = 0;
    }
    if (ms >= 0) {
        struct pollfd p = {c->fd, POLLIN, 0};
        int r = poll(&p, 1, ms);
        if (r == 0) return 0;
        if (r < 0 && errno != EINTR) die("poll");
        if (r < 0) return 0;
    }
    ssize_t got = recv(c->fd, c->buf + c->len, RBUF - c->len, 0);
    if (got == 0) {
        fprintf(stderr, "natsbench: connection closed by the server\n");
        exit(3);
    }
    if (got < 0) {
        if (errno == EINTR) return 0;
        die("recv");
    }
    c->len += (size_t)got;
    return 1;
}

/* The next line (without \r\n) or NULL when not complete yet. */
static char *line(Conn *c, size_t *n) {
    char *start = c->buf + c->off;
    char *end = memmem(start, c->len - c->off, "\r\n", 2);
    if (!end) return NULL;
    *n = (size_t)(end - start);
    return start;
}

static void read_until(Conn *c, const char *token) {
    for (;;) {
        char *hit = memmem(c->buf + c->off, c->len - c->off, token, strlen(token));
        if (hit) {
            c->off = (size_t)(hit - c->buf) + strlen(token);
            return;
        }
        fill(c, -1);
    }
}

static void open_conn(Conn *c, const char *host, int port, int subscriber) {
    c->fd = dial(host, port);
    c->buf = malloc(RBUF);
    if (!c->buf) die("malloc");
    c->off = c->len = 0;
    read_until(c, "\r\n"); /* INFO */
    const char *hello = subscriber
        ? "CONNECT {\"verbose\":false,\"pedantic\":false}\r\nSUB bench.x 1\r\nSUB bench.probe 2\r\nPING\r\n"
        : "CONNECT {\"verbose\":false,\"pedantic\":false}\r\nPING\r\n";
    send_all(c->fd, hello, strlen(hello));
    read_until(c, "PONG\r\n");
}

/* One parsed delivery: sid 1 or 2, payload at c->buf + pay. Returns 0 when more
 * bytes are needed, -1 for a non-MSG line (handled), 1 for a message. */
static int next_msg(Conn *c, int *sid, size_t *pay, size_t *plen) {
    size_t n;
    char *l = line(c, &n);
    if (!l) return 0;
    if (n >= 4 && memcmp(l, "MSG ", 4) == 0) {
        /* MSG <subject> <sid> [reply] <len> */
        char *f[5];
        int k = 0;
        char *p = l + 4, *e = l + n;
        while (p < e && k < 5) {
            while (p < e && *p == ' ') p++;
            if (p >= e) break;
            f[k++] = p;
            while (p < e && *p != ' ') p++;
        }
        if (k < 3) {
            fprintf(stderr, "natsbench: bad MSG line\n");
            exit(4);
        }
        size_t len = strtoul(f[k - 1], NULL, 10);
        size_t need = n + 2 + len + 2;
        if (c->len - c->off < need) {
            if (need > RBUF) {
                fprintf(stderr, "natsbench: message too large\n");
                exit(4);
            }
            return 0;
        }
        *sid = atoi(f[1]);
        *pay = c->off + n + 2;
        *plen = len;
        c->off += need;
        return 1;
    }
    if (n == 4 && memcmp(l, "PING", 4) == 0) send_all(c->fd, "PONG\r\n", 6);
    if (n >= 4 && memcmp(l, "-ERR", 4) == 0) fprintf(stderr, "natsbench: %.*s\n", (int)n, l);
    c->off += n + 2;
    return -1;
}

typedef struct {
    Conn sub;
    long count;
    volatile int probed;    /* a probe arrived */
    volatile int last_seen; /* the "last" probe arrived */
    long received, lost, disorder;
    double t_last;
} Rate;

static void *reader(void *arg) {
    Rate *r = arg;
    Conn *c = &r->sub;
    uint64_t expect = 0;
    double idle_since = now_s();
    while (r->received < r->count) {
        int sid;
        size_t pay, plen;
        int k = next_msg(c, &sid, &pay, &plen);
        if (k == 0) {
            if (!fill(c, 200)) {
                if (r->last_seen && now_s() - idle_since > IDLE_S) break;
            }
            continue;
        }
        if (k < 0) continue;
        if (sid == 2) {
            r->probed = 1;
            if (plen == 4 && memcmp(c->buf + pay, "last", 4) == 0) r->last_seen = 1;
            idle_since = now_s();
            continue;
        }
        uint64_t seq = 0;
        if (plen >= 8) memcpy(&seq, c->buf + pay, 8);
        if (seq > expect) r->lost += (long)(seq - expect);
        if (seq < expect) r->disorder++;
        else expect = seq + 1;
        r->received++;
        r->t_last = idle_since = now_s();
    }
    return NULL;
}

static size_t pub_cmd(char *out, size_t size, uint64_t seq) {
    int h = sprintf(out, "PUB bench.x %zu\r\n", size);
    memset(out + h, 'x', size);
    if (size >= 8) memcpy(out + h, &seq, 8);
    memcpy(out + h + size, "\r\n", 2);
    return (size_t)h + size + 2;
}

static void probe(int fd, const char *body) {
    char cmd[64];
    int n = sprintf(cmd, "PUB bench.probe %zu\r\n%s\r\n", strlen(body), body);
    send_all(fd, cmd, (size_t)n);
}

static int run_rate(const char *host, int pport, int sport, long count, size_t size) {
    static Rate r;
    memset(&r, 0, sizeof r);
    r.count = count;
    open_conn(&r.sub, host, sport, 1);
    Conn pub;
    open_conn(&pub, host, pport, 0);
    pthread_t th;
    if (pthread_create(&th, NULL, reader, &r)) die("pthread_create");
    double deadline = now_s() + 30;
    while (!r.probed) {
        if (now_s() > deadline) {
            fprintf(stderr, "natsbench: the subscription never reached the publisher's node\n");
            return 5;
        }
        probe(pub.fd, "p");
        usleep(50000);
    }
    probe(pub.fd, "last"); /* every earlier probe is delivered before it */
    while (!r.last_seen) usleep(1000);
    /* one template command, the sequence number patched per message */
    char one[128 + 65536];
    if (size > 65536) size = 65536;
    size_t clen = pub_cmd(one, size, 0);
    size_t seq_at = clen - size - 2;
    size_t per = WBUF / clen ? WBUF / clen : 1;
    char *batch = malloc(per * clen);
    if (!batch) die("malloc");
    for (size_t i = 0; i < per; i++) memcpy(batch + i * clen, one, clen);
    double t0 = now_s();
    uint64_t seq = 0;
    while ((long)seq < count) {
        size_t k = 0;
        for (; k < per && (long)seq < count; k++, seq++)
            if (size >= 8) memcpy(batch + k * clen + seq_at, &seq, 8);
        send_all(pub.fd, batch, k * clen);
    }
    pthread_join(th, NULL);
    double secs = r.t_last > t0 ? r.t_last - t0 : 1e-9;
    long lost = r.lost + (count - r.received - r.lost > 0 ? count - r.received - r.lost : 0);
    printf("rate %.0f received %ld lost %ld disorder %ld secs %.4f\n",
           r.received / secs, r.received, lost, r.disorder, secs);
    return 0;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int run_lat(const char *host, int pport, int sport, long count, size_t size) {
    Conn sub, pub;
    open_conn(&sub, host, sport, 1);
    open_conn(&pub, host, pport, 0);
    double deadline = now_s() + 30;
    int probed = 0;
    while (!probed) { /* wait for the subscription to reach the publisher's node */
        if (now_s() > deadline) {
            fprintf(stderr, "natsbench: the subscription never reached the publisher's node\n");
            return 5;
        }
        probe(pub.fd, "p");
        if (!fill(&sub, 50)) continue;
        int sid;
        size_t pay, plen;
        int k;
        while ((k = next_msg(&sub, &sid, &pay, &plen)) != 0)
            if (k > 0 && sid == 2) probed = 1;
    }
    probe(pub.fd, "last");
    for (int seen = 0; !seen;) {
        int sid;
        size_t pay, plen;
        int k = next_msg(&sub, &sid, &pay, &plen);
        if (k == 0) fill(&sub, -1);
        else if (k > 0 && sid == 2 && plen == 4 && memcmp(sub.buf + pay, "last", 4) == 0) seen = 1;
    }
    char cmd[128 + 65536];
    if (size > 65536) size = 65536;
    double *t = malloc(sizeof(double) * (size_t)count);
    if (!t) die("malloc");
    for (long i = 0; i < count; i++) {
        size_t n = pub_cmd(cmd, size, (uint64_t)i);
        double t0 = now_s();
        send_all(pub.fd, cmd, n);
        for (int got = 0; !got;) {
            int sid;
            size_t pay, plen;
            int k = next_msg(&sub, &sid, &pay, &plen);
            if (k == 0) {
                if (!fill(&sub, (int)(IDLE_S * 1000))) {
                    fprintf(stderr, "natsbench: message %ld never arrived\n", i);
                    return 6;
                }
            } else if (k > 0 && sid == 1) {
                got = 1;
            }
        }
        t[i] = (now_s() - t0) * 1e6;
    }
    qsort(t, (size_t)count, sizeof(double), cmp_d);
    printf("lat p50_us %.1f p99_us %.1f\n", t[count / 2], t[count * 99 / 100]);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: natsbench rate|lat HOST PUB_PORT SUB_PORT COUNT SIZE\n");
        return 1;
    }
    long count = atol(argv[5]);
    size_t size = strtoul(argv[6], NULL, 10);
    if (count <= 0) return 1;
    if (strcmp(argv[1], "rate") == 0) return run_rate(argv[2], atoi(argv[3]), atoi(argv[4]), count, size);
    if (strcmp(argv[1], "lat") == 0) return run_lat(argv[2], atoi(argv[3]), atoi(argv[4]), count, size);
    return 1;
}
