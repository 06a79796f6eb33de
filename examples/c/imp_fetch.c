/* IMP from C: a client hints three items it may read, fetched from a server over a
 * multi-socket on loopback (each request an IROB with the label IMP gives), reads two and
 * cancels the third. Without budgets IMP prefetches every hint in the background, so the reads
 * find their items there. Built and run by crates/roam-prefetch/tests/capi.rs. */
#include "roam_prefetch.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(cond, what)                                                                \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "FAIL %s: %s / %s (errno %d)\n", what, imp_last_error(),    \
                    ms_last_error(), errno);                                             \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

static ms_socket_t sock;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int labels[8];
static int fetches;

/* The server: answers each request "item N" with "body of item N". */
static void *server(void *listener_p) {
    ms_socket_t s = ms_accept(*(ms_socket_t *)listener_p);
    CHECK(s >= 0, "accept");
    char buf[256], out[300];
    for (;;) {
        int label = -1, end = 0;
        irob_id_t irob = -1;
        ssize_t n = ms_recv(s, buf, sizeof buf - 1, 0, &label, &irob, &end);
        if (n <= 0) return NULL;
        buf[n] = 0;
        int len = snprintf(out, sizeof out, "body of %s", buf);
        CHECK(ms_send(s, out, (size_t)len, 0, label, NULL, NULL) == len, "reply");
    }
}

/* The fetcher: one request and its reply, with the label IMP gives. */
static int fetch(void *arg, int label, void **item, size_t *len) {
    char req[32];
    int n = snprintf(req, sizeof req, "item %ld", (long)(intptr_t)arg);
    pthread_mutex_lock(&lock);
    labels[fetches++] = label;
    if (ms_send(sock, req, (size_t)n, 0, label, NULL, NULL) != n) {
        pthread_mutex_unlock(&lock);
        return -1;
    }
    char *buf = malloc(300);
    int l = -1, end = 0;
    irob_id_t irob = -1;
    ssize_t got = ms_recv(sock, buf, 299, 0, &l, &irob, &end);
    pthread_mutex_unlock(&lock);
    if (got <= 0) { free(buf); return -1; }
    buf[got] = 0;
    *item = buf;
    *len = (size_t)got;
    return 0;
}

int main(void) {
    ms_socket_t l = ms_socket();
    sock = ms_socket();
    CHECK(ms_listen(l, "127.0.0.1", 0) == 0, "listen");
    pthread_t t;
    pthread_create(&t, NULL, server, &l);
    CHECK(ms_connect(sock, "127.0.0.1", (uint16_t)ms_local_port(l)) == 0, "connect");

    CHECK(imp_new(999999, "lo=huang2012/wifi", 0, 0, 0, 0) == -1 && errno == EBADF,
          "a prefetcher needs a multi-socket");
    CHECK(imp_new(sock, "lo=nowhere/x", 0, 0, 0, 0) == -1 && errno == EINVAL, "bad profile");
    CHECK(strstr(imp_last_error(), "nowhere") != NULL, "the error names the profile");
    imp_t imp = imp_new(sock, "lo=huang2012/wifi", 0, 0, 0, 0);
    CHECK(imp >= 0, "imp_new");

    imp_hint_t h[3];
    for (long i = 0; i < 3; i++) {
        h[i] = imp_prefetch(imp, fetch, (void *)(intptr_t)i);
        CHECK(h[i] >= 0, "imp_prefetch");
        CHECK(imp_set_size(h[i], 20) == 0, "imp_set_size");
        CHECK(imp_set_class(h[i], 1) == 0, "imp_set_class");
    }
    /* The user reads later: meanwhile IMP prefetches. */
    struct timespec later = {0, 300 * 1000 * 1000};
    nanosleep(&later, NULL);
    for (int i = 0; i < 2; i++) {
        void *item = NULL;
        size_t len = 0;
        CHECK(imp_get(h[i], 5000, &item, &len) == 0, "imp_get");
        char want[32];
        snprintf(want, sizeof want, "body of item %d", i);
        CHECK(len == strlen(want) && memcmp(item, want, len) == 0, "the item's bytes");
        free(item);
        CHECK(imp_get(h[i], 0, &item, &len) == -1 && errno == EBADF, "a hint is read once");
    }
    CHECK(imp_cancel(h[2]) == 0, "imp_cancel");
    CHECK(imp_close(imp) == 0, "imp_close");
    pthread_mutex_lock(&lock);
    int background = 0;
    for (int i = 0; i < fetches; i++) background += labels[i] == MS_LABEL_BG_SMALL;
    CHECK(background >= 2, "the items read were prefetched in the background");
    printf("ok: %d fetches, %d in the background\n", fetches, background);
    pthread_mutex_unlock(&lock);
    ms_close(sock, 1000);
    return 0;
}
