/* A ported C application: a labelled echo over a multi-socket on loopback.
 * The server echoes every IROB back with its label; the client sends a background bulk IROB
 * and a foreground request that depends on it, checks the echoes, a deferred thunk path and
 * poll() readiness, and prints a summary. Built and run by crates/roam-net/tests/capi.rs. */
#include "roam_net.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int port;

#define CHECK(cond, what)                                                        \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "FAIL %s: %s (errno %d)\n", what, ms_last_error(), errno); \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

static void *server(void *listener_p) {
    ms_socket_t l = *(ms_socket_t *)listener_p;
    ms_socket_t s = ms_accept(l);
    CHECK(s >= 0, "accept");
    static char buf[1 << 20];
    for (;;) {
        size_t have = 0;
        int label = -1, end = 0;
        irob_id_t irob = -1;
        do {
            ssize_t n = ms_recv(s, buf + have, sizeof buf - have, 0, &label, &irob, &end);
            CHECK(n >= 0, "server recv");
            if (n == 0 && !end) { ms_close(s, 1000); return NULL; }
            have += (size_t)n;
        } while (!end);
        irob_id_t r = ms_begin_irob(s, label, 0, NULL, NULL, NULL);
        CHECK(r >= 0, "server begin");
        CHECK(ms_irob_send(r, buf, have, 0) == (ssize_t)have, "server send");
        CHECK(ms_end_irob(r) == 0, "server end");
    }
}

static void never(void *arg) { (void)arg; }

/* Usage: ms_echo [CERT.pem KEY.pem]: with a certificate (for the name roam.test) and its key,
 * both ends use TLS, the client trusting that certificate. */
int main(int argc, char **argv) {
    ms_socket_t l = ms_socket();
    ms_socket_t s = ms_socket();
    if (argc == 3) {
        CHECK(ms_tls_server(l, argv[1], argv[2]) == 0, "TLS server");
        CHECK(ms_tls_client(s, argv[1], "roam.test") == 0, "TLS client");
        CHECK(ms_tls_client(s, "/nonexistent.pem", "roam.test") == -1 && errno == ENOENT,
              "a missing PEM file is an error");
        CHECK(strstr(ms_last_error(), "/nonexistent.pem") != NULL, "error text names the file");
    }
    /* Meatballs' network selection (it has one network here, so it places nothing). */
    CHECK(ms_redundancy(s, 7, 0.0, 0.0) == -1 && errno == EINVAL, "an unknown method is refused");
    CHECK(ms_redundancy(s, MS_METHOD_BOUNDS, -1.0, 0.0) == -1 && errno == EINVAL,
          "a negative price is refused");
    CHECK(ms_redundancy(s, MS_METHOD_EMPIRICAL, 0.01, 0.00001) == 0, "redundancy");
    CHECK(ms_listen(l, "127.0.0.1", 0) == 0, "listen");
    port = ms_local_port(l);
    pthread_t t;
    pthread_create(&t, NULL, server, &l);

    CHECK(ms_connect(s, "127.0.0.1", (uint16_t)port) == 0, "connect");
    CHECK(ms_tls_client(s, "x", "y") == -1 && errno == EBADF, "TLS only on a fresh handle");
    CHECK(ms_redundancy(s, MS_METHOD_BAYESIAN, 0.0, 0.0) == -1 && errno == EBADF,
          "redundancy only on a fresh handle");

    /* Background bulk, then a foreground request that must be delivered after it. */
    static char bulk[200000];
    memset(bulk, 'b', sizeof bulk);
    irob_id_t a = ms_begin_irob(s, MS_LABEL_BG_LARGE, 0, NULL, NULL, NULL);
    CHECK(a >= 0, "begin bulk");
    CHECK(ms_irob_send(a, bulk, sizeof bulk, 0) == (ssize_t)sizeof bulk, "send bulk");
    CHECK(ms_end_irob(a) == 0, "end bulk");
    irob_id_t b = ms_begin_irob(s, MS_LABEL_FG_SMALL, 1, &a, NULL, NULL);
    CHECK(b > a, "begin request");
    CHECK(ms_irob_send(b, "hello", 5, 0) == 5, "send request");
    CHECK(ms_end_irob(b) == 0, "end request");
    /* A dependency on a later IROB is refused. */
    irob_id_t bad = b + 7;
    CHECK(ms_begin_irob(s, MS_LABEL_FG_SMALL, 1, &bad, NULL, NULL) == MS_ERROR, "bad dependency refused");
    CHECK(strstr(ms_last_error(), "lower") != NULL, "error text names the rule");
    /* Nothing to cancel. */
    CHECK(ms_cancel_thunk(s, never, NULL) == 0, "cancel nothing");

    /* Wait for readiness with poll(), then read both echoes (bulk first: the request depends on it). */
    struct pollfd p = {.fd = ms_poll_fd(s), .events = POLLIN};
    CHECK(p.fd >= 0, "poll fd");
    CHECK(poll(&p, 1, 10000) == 1, "poll readable");
    static char buf[1 << 20];
    int got_bulk = 0, got_req = 0;
    while (!got_req || !got_bulk) {
        size_t have = 0;
        int label = -1, end = 0;
        irob_id_t irob = -1;
        do {
            ssize_t n = ms_recv(s, buf + have, sizeof buf - have, 0, &label, &irob, &end);
            CHECK(n > 0 || end, "client recv");
            have += (size_t)n;
        } while (!end);
        if (label == MS_LABEL_BG_LARGE) {
            CHECK(have == sizeof bulk && buf[0] == 'b', "bulk echo intact");
            got_bulk = 1;
        } else {
            CHECK(label == MS_LABEL_FG_SMALL && have == 5 && memcmp(buf, "hello", 5) == 0, "request echo");
            got_req = 1;
        }
    }
    /* Non-blocking: the label is writable, so a MS_DONTWAIT send is taken at once (a full
     * buffer or an unusable label would give EAGAIN, and ms_poll_fd would signal when it
     * clears). */
    CHECK(ms_writable(s, MS_LABEL_FG_SMALL) == 1, "ms_writable");
    ssize_t n = ms_send(s, "x", 1, MS_DONTWAIT, MS_LABEL_FG_SMALL, NULL, NULL);
    CHECK(n == 1, "ms_send");
    /* A foreground IROB may be delivered before its end has arrived (the echo's end can
     * follow its byte in a separate chunk): read until the end. */
    char x = 0;
    int end = 0;
    ssize_t got = 0;
    do {
        ssize_t n = ms_recv(s, &x + got, (size_t)(1 - got), 0, NULL, NULL, &end);
        CHECK(n >= 0 && (n > 0 || end), "ms_send echo recv");
        got += n;
    } while (!end);
    CHECK(got == 1 && x == 'x', "ms_send echo");
    CHECK(ms_recv(s, &x, 1, MS_DONTWAIT, NULL, NULL, NULL) == -1 && errno == EAGAIN, "dontwait");
    printf("ok: bulk %d request %d, port %d%s\n", got_bulk, got_req, port, argc == 3 ? ", TLS" : "");
    CHECK(ms_close(s, 5000) == 0, "close");
    pthread_join(t, NULL);
    return 0;
}
