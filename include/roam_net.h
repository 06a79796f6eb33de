/*
 * roam_net.h: the C ABI of roam's Intentional Networking multi-sockets.
 *
 * The names follow Table 2 of Higgins et al., "Intentional Networking: Opportunistic
 * Exploitation of Mobile Network Diversity" (MobiCom 2010). Porting an application means
 * replacing socket/connect/listen/accept/send/recv with the ms_* calls below and labelling what
 * is sent. Link with libroam_net (static: -l:libroam_net.a -lpthread -ldl -lm -lrt).
 *
 * Errors: functions return -1 (MS_ERROR) and set errno; ms_last_error() gives the reason as text.
 * A send whose label no appropriate network can carry returns MS_DEFERRED when a thunk was
 * given: the thunk then runs once, on a library thread, when that label can be sent again, and
 * owns `arg` from then on. Without a thunk such a send blocks.
 */
#ifndef ROAM_NET_H
#define ROAM_NET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A multi-socket (or listener) handle; negative on error. */
typedef int64_t ms_socket_t;
/* An IROB handle: names the multi-socket, the IROB and whether it is one of ours or one
 * received (ms_recv); positive. A handle of a closed multi-socket names nothing (EBADF). */
typedef int64_t irob_id_t;
/* A thunk: called with its argument when a deferred label can be sent. */
typedef void (*ms_thunk_t)(void *arg);

/* Labels: interactivity x size. */
#define MS_LABEL_FG_SMALL 0
#define MS_LABEL_FG_LARGE 1
#define MS_LABEL_BG_SMALL 2
#define MS_LABEL_BG_LARGE 3

/* Results. */
#define MS_ERROR (-1)
#define MS_DEFERRED (-2)

/* Flags of ms_recv. */
#define MS_DONTWAIT 0x40 /* = MSG_DONTWAIT: return -1 with errno EAGAIN instead of waiting
                           (ms_recv; ms_send without a thunk; ms_irob_send) */

/* A new, unconnected multi-socket handle. */
ms_socket_t ms_socket(void);
/* Connect to a listener at host:port over every local network (interfaces are found by the
 * scout and followed as they come and go). 0 or -1. */
int ms_connect(ms_socket_t s, const char *host, uint16_t port);
/* Make `s` a listener on host:port (port 0: any; see ms_local_port). 0 or -1. */
int ms_listen(ms_socket_t s, const char *host, uint16_t port);
/* TLS (rustls, TLS 1.2/1.3) on every connection, set on a fresh handle before ms_connect or
 * ms_listen; both ends must use it. A client names a PEM file of the certificates it trusts and
 * the name the server's certificate must carry; a listener the PEM files of its certificate
 * chain and private key. 0 or -1 (errno ENOENT etc. for an unreadable file, EINVAL for bad PEM,
 * EBADF for a handle that is not fresh). */
int ms_tls_client(ms_socket_t s, const char *roots_pem_file, const char *server_name);
int ms_tls_server(ms_socket_t s, const char *chain_pem_file, const char *key_pem_file);
/* Meatballs' network selection (Higgins' thesis ch. 4), set on a fresh handle before ms_connect or
 * ms_listen; off unless called. Each small foreground IROB then goes over one network or over
 * two at once, whichever has the least expected weighted cost (time + energy_price * joules +
 * data_price * metered bytes, prices in seconds per joule and per byte) given how wrong each
 * network's time estimates have been; one left unacknowledged is re-evaluated and may be sent
 * over a second network. method: MS_METHOD_EMPIRICAL, MS_METHOD_BOUNDS or MS_METHOD_BAYESIAN.
 * 0 or -1 (EINVAL for an unknown method or a negative or non-finite price, EBADF for a handle
 * that is not fresh). */
#define MS_METHOD_EMPIRICAL 0
#define MS_METHOD_BOUNDS 1
#define MS_METHOD_BAYESIAN 2
int ms_redundancy(ms_socket_t s, int method, double energy_price, double data_price);
/* The port a listener is bound to. */
int ms_local_port(ms_socket_t listener);
/* Wait for the next multi-socket. */
ms_socket_t ms_accept(ms_socket_t listener);

/* Begin an IROB. deps: IROBs of the same multi-socket that must be delivered first (lower ids
 * only). Returns the IROB, MS_DEFERRED (thunk given, label deferred) or MS_ERROR. */
irob_id_t ms_begin_irob(ms_socket_t s, int label, int numdeps, const irob_id_t *deps,
                        ms_thunk_t thunk, void *arg);
/* Append bytes to an open IROB. Returns len or -1; with MS_DONTWAIT, -1 and EAGAIN while the
 * send buffer is full (instead of waiting). */
ssize_t ms_irob_send(irob_id_t irob, const void *buf, size_t len, int flags);
/* End an IROB. 0 or -1. */
int ms_end_irob(irob_id_t irob);
/* One IROB depending on every earlier one ("TCP with labels"). Returns len, MS_DEFERRED or -1.
 * Without a thunk and with MS_DONTWAIT, -1 and EAGAIN when the label cannot be sent now or the
 * send buffer is full (instead of waiting); ms_poll_fd then signals once it can. */
ssize_t ms_send(ms_socket_t s, const void *buf, size_t len, int flags, int label,
                ms_thunk_t thunk, void *arg);
/* Receive bytes of at most one IROB. Sets *label, *irob and *irob_end (1 when these are the
 * IROB's last bytes) when non-NULL. Returns the byte count, 0 at end of stream, or -1. With
 * len 0 (buf may then be NULL) nothing is taken: it returns 0 and sets *label and *irob of the
 * IROB whose bytes come next. */
ssize_t ms_recv(ms_socket_t s, void *buf, size_t len, int flags, int *label, irob_id_t *irob,
                int *irob_end);
/* Cancel pending thunks registered with this (thunk, arg); returns how many were cancelled
 * (their argument is then the caller's again). */
int ms_cancel_thunk(ms_socket_t s, ms_thunk_t thunk, void *arg);
/* A file descriptor for select/poll: readable while ms_recv would not block, and once a send
 * that failed with EAGAIN (MS_DONTWAIT) could proceed. Ask ms_writable which, or just retry. */
int ms_poll_fd(ms_socket_t s);
/* 1 if a send with `label` would be accepted now with room for more (a network can carry it and
 * the send buffer is under three quarters full: what ms_poll_fd signals), 0 if not, -1 on
 * error. */
int ms_writable(ms_socket_t s, int label);
/* Close: no new IROBs; waits up to timeout_ms for everything sent to be acknowledged, then
 * releases the handle (and its IROB handles). 0 when everything was acknowledged, -1
 * otherwise. The multi-socket still finishes sending in the background and ends once both
 * sides have said goodbye, or after 10 s without progress; what arrives meanwhile is
 * dropped. */
int ms_close(ms_socket_t s, int timeout_ms);
/* The calling thread's last error, as text (valid until its next ms_* call). */
const char *ms_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* ROAM_NET_H */
