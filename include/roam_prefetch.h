/*
 * roam_prefetch.h: the C ABI of roam's Informed Mobile Prefetching (IMP; Higgins et al.,
 * "Informed Mobile Prefetching", MobiSys 2012). An application hints what it may need; IMP
 * prefetches it in the background when that pays (given the networks' estimates, the radios'
 * energy and the prices of energy and data), so that fetch time is low while energy and data
 * use end close to, but not over, their budgets.
 *
 * Use with roam_net.h: IMP reads the estimates of a connected multi-socket, and the fetcher
 * sends with the label IMP gives it (MS_LABEL_BG_* for a prefetch, MS_LABEL_FG_* for a demand
 * fetch). Link with libroam_prefetch (static: libroam_prefetch.a, which carries roam-net's
 * ms_* calls too; -lpthread -ldl -lm -lrt).
 *
 * Errors: functions return -1 and set errno; imp_last_error() gives the reason as text.
 */
#ifndef ROAM_PREFETCH_H
#define ROAM_PREFETCH_H

#include <stddef.h>
#include <stdint.h>

#include "roam_net.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A prefetcher; a hint. Negative on error. */
typedef int64_t imp_t;
typedef int64_t imp_hint_t;

/* Fetch one item with `label` (an MS_LABEL_*): set *item to a malloc()ed buffer of *len bytes
 * and return 0, or return -1. Called at most once per hint, on an IMP thread for a prefetch,
 * on the caller's thread for a demand fetch. */
typedef int (*imp_fetcher_t)(void *arg, int label, void **item, size_t *len);

/* A prefetcher over the connected multi-socket `sock`. `interfaces`: the device's radios,
 * "IFACE=PROFILE,..." (profiles: huang2012/lte, huang2012/3g, huang2012/wifi,
 * powertutor-nexus-one/3g-att, ...; WiFi is unmetered). Budgets: `energy_j` joules over
 * `energy_s` seconds, `data_bytes` over `data_s` seconds; an amount of 0 means no such budget
 * (that resource is free; with neither, IMP prefetches every hint). */
imp_t imp_new(ms_socket_t sock, const char *interfaces, double energy_j, double energy_s,
              double data_bytes, double data_s);

/* Hint an item. */
imp_hint_t imp_prefetch(imp_t imp, imp_fetcher_t fetcher, void *arg);
/* Optional: the item's size (else the mean size of items fetched so far stands for it). */
int imp_set_size(imp_hint_t hint, size_t bytes);
/* Optional: the hint's class (hints of one class share an accuracy, e.g. one news feed). */
int imp_set_class(imp_hint_t hint, uint32_t cls);
/* The item: prefetched, or waited for (at most timeout_ms; -1: no limit) while a prefetch is
 * in flight, or fetched now if not started. On 0 the caller owns *item (free() it) and the
 * hint is gone. -1 with errno ETIMEDOUT (the hint stays: call again), EIO (the fetch failed:
 * never retried), EBADF. */
int imp_get(imp_hint_t hint, int timeout_ms, void **item, size_t *len);
/* Withdraw a hint unread (it counts against its class's accuracy). -1 with errno EBADF for a
 * handle that is not a hint (a prefetcher's handle is left open). */
int imp_cancel(imp_hint_t hint);
/* Stop a prefetcher (hints already given still answer imp_get). -1 with errno EBADF for a handle
 * that is not a prefetcher (a hint's handle is left as it was). */
int imp_close(imp_t imp);
/* This thread's last error, as text. */
const char *imp_last_error(void);

#ifdef __cplusplus
}
#endif

#endif
