//! The C ABI (`include/roam_prefetch.h`): IMP's interface for C programs, over a roam-net
//! multi-socket from its own C ABI (`ms_socket_t`), like IMP's Java interface over
//! Intentional Networking.
//!
//! Items are byte buffers the fetcher allocates with `malloc`; `imp_get` hands one to the
//! caller, who frees it; one IMP drops (a cancelled hint's prefetch) it frees. Handles are
//! small integers into a table. Errors and panics are handled as roam-net's C calls handle
//! them (`roam_net::capi::{fail, guard}`): `errno` and one error text per thread.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use roam_budget::{profile, Budget, NetworkKind};
use roam_core::{Bytes, Time};
use roam_net::capi::{fail, guard, ms_last_error, multisocket_of, MsSocket};

use crate::device::{DeviceEnvironment, Interface};
use crate::runtime::{GetError, Handle, Prefetcher};

/// `imp_t`: a prefetcher.
pub type ImpHandle = i64;
/// `imp_hint_t`: a hint.
pub type ImpHint = i64;
/// `imp_fetcher_t`: fetch the item with `label` (an `MS_LABEL_*`), set `*item` to a `malloc`ed
/// buffer of `*len` bytes and return 0; or return -1.
pub type ImpFetcher =
    Option<unsafe extern "C" fn(*mut c_void, c_int, *mut *mut c_void, *mut usize) -> c_int>;

/// A `malloc`ed item; freed unless handed to the caller.
struct Item {
    ptr: *mut c_void,
    len: usize,
}

// SAFETY: the buffer is owned by the item alone; C's allocator is thread-safe.
unsafe impl Send for Item {}

impl Drop for Item {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: the fetcher allocated it with malloc and nobody else holds it.
            unsafe { libc::free(self.ptr) };
        }
    }
}

enum Entry {
    Imp(Arc<Prefetcher>),
    Hint(Handle<Item>),
}

fn table() -> &'static Mutex<HashMap<i64, Entry>> {
    static T: OnceLock<Mutex<HashMap<i64, Entry>>> = OnceLock::new();
    T.get_or_init(Default::default)
}

static NEXT: AtomicI64 = AtomicI64::new(1);

/// Take the entry of handle `h` out of the table if `is` accepts it; an entry of the other
/// kind stays where it is (prefetchers and hints share one table and one numbering, so a
/// handle of one kind passed where the other is expected must not remove it: `imp_cancel` on
/// a prefetcher's handle once closed the prefetcher).
fn take(h: i64, is: impl Fn(&Entry) -> bool) -> Option<Entry> {
    let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
    if t.get(&h).is_some_and(is) {
        t.remove(&h)
    } else {
        None
    }
}

fn insert(e: Entry) -> i64 {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    table()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(id, e);
    id
}

/// A budget of `amount` over `seconds` from now, if both are positive; none if `amount` is 0.
fn budget(amount: f64, seconds: f64, what: &str) -> Result<Option<Budget>, String> {
    if amount == 0.0 {
        return Ok(None);
    }
    if !(amount > 0.0 && seconds > 0.0 && amount.is_finite() && seconds.is_finite()) {
        return Err(format!(
            "{what} budget: {amount} over {seconds} s (both must be positive, or the amount 0 \
             for none)"
        ));
    }
    let length = roam_core::seconds(seconds)
        .ok_or_else(|| format!("{what} budget: {seconds} s is too long"))?;
    Ok(Some(Budget {
        total: amount,
        start: Time::ZERO,
        end: Time::ZERO + length,
    }))
}

/// Parse `"wlan0=huang2012/wifi,wwan0=huang2012/3g"`: WiFi profiles are unmetered.
fn interfaces(spec: &str) -> Result<Vec<Interface>, String> {
    spec.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            let (name, p) = s
                .trim()
                .split_once('=')
                .ok_or_else(|| format!("`{s}`: expected IFACE=PROFILE"))?;
            let profile = profile(p).map_err(|e| format!("`{s}`: {e}"))?;
            let wifi = profile.network == NetworkKind::Wifi;
            Ok(Interface {
                name: name.into(),
                profile,
                wifi,
                metered: !wifi,
            })
        })
        .collect()
}

/// `imp_new`: a prefetcher reading the estimates of multi-socket `sock`, with the radios of
/// `interfaces` (`IFACE=PROFILE,...`), an energy budget of `energy_j` joules over
/// `energy_s` seconds and a data budget of `data_bytes` over `data_s` seconds (an amount of 0:
/// no such budget). Returns the handle, or -1 with errno (EBADF, EINVAL).
///
/// # Safety
/// `interfaces` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn imp_new(
    sock: MsSocket,
    interfaces_spec: *const c_char,
    energy_j: f64,
    energy_s: f64,
    data_bytes: f64,
    data_s: f64,
) -> ImpHandle {
    guard(|| {
        if interfaces_spec.is_null() {
            return fail(libc::EINVAL, "interfaces is NULL");
        }
        // SAFETY: the caller passes a NUL-terminated string.
        let spec = match unsafe { CStr::from_ptr(interfaces_spec) }.to_str() {
            Ok(s) => s,
            Err(_) => return fail(libc::EINVAL, "interfaces is not UTF-8"),
        };
        let ms = match multisocket_of(sock) {
            Ok(ms) => ms,
            Err(e) => return fail(libc::EBADF, e),
        };
        let built = (|| {
            let ifaces = interfaces(spec)?;
            let e = budget(energy_j, energy_s, "energy")?;
            let d = budget(data_bytes, data_s, "data")?;
            DeviceEnvironment::new(ifaces, move || ms.estimates(), e, d).map_err(|e| e.to_string())
        })();
        match built {
            Ok(env) => insert(Entry::Imp(Arc::new(Prefetcher::new(env)))),
            Err(e) => fail(libc::EINVAL, e),
        }
    })
}

/// `imp_prefetch`: hint an item `fetcher(arg, label, &item, &len)` fetches. Returns the hint,
/// or -1 with errno.
#[no_mangle]
pub extern "C" fn imp_prefetch(imp: ImpHandle, fetcher: ImpFetcher, arg: *mut c_void) -> ImpHint {
    guard(|| {
        let Some(f) = fetcher else {
            return fail(libc::EINVAL, "fetcher is NULL");
        };
        let p = match table().lock().unwrap_or_else(|e| e.into_inner()).get(&imp) {
            Some(Entry::Imp(p)) => p.clone(),
            _ => return fail(libc::EBADF, format!("no prefetcher {imp}")),
        };
        let arg = arg as usize;
        let h = p.prefetch(move |label| {
            let mut ptr = std::ptr::null_mut();
            let mut len = 0usize;
            // SAFETY: the C caller's fetcher, called once with its own argument.
            let r = unsafe {
                f(
                    arg as *mut c_void,
                    label.to_wire() as c_int,
                    &mut ptr,
                    &mut len,
                )
            };
            if r == 0 {
                Ok(Item { ptr, len })
            } else {
                let errno = std::io::Error::last_os_error();
                Err(format!("the fetcher returned {r} ({errno})"))
            }
        });
        insert(Entry::Hint(h))
    })
}

fn with_hint<T: From<i8>>(h: ImpHint, f: impl FnOnce(&mut Handle<Item>) -> T) -> T {
    match table()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_mut(&h)
    {
        Some(Entry::Hint(x)) => f(x),
        _ => fail(libc::EBADF, format!("no hint {h}")),
    }
}

/// `imp_set_size`: the item's size in bytes. 0, or -1 with errno.
#[no_mangle]
pub extern "C" fn imp_set_size(hint: ImpHint, bytes: usize) -> c_int {
    guard(|| {
        with_hint(hint, |h| {
            h.set_size(Bytes(bytes as u64));
            0
        })
    })
}

/// `imp_set_class`: the hint's class (hints sharing an accuracy). 0, or -1 with errno.
#[no_mangle]
pub extern "C" fn imp_set_class(hint: ImpHint, class: u32) -> c_int {
    guard(|| {
        with_hint(hint, |h| {
            h.set_class(class);
            0
        })
    })
}

/// `imp_get`: the item, waiting at most `timeout_ms` (-1: no limit) for a prefetch in flight,
/// or fetched now if not started. On 0, `*item` (free it with `free`) and `*len` hold it and
/// the hint is gone; -1 with errno ETIMEDOUT (call again), EIO (the fetch failed) or EBADF.
///
/// # Safety
/// `item` and `len` are valid pointers.
#[no_mangle]
pub unsafe extern "C" fn imp_get(
    hint: ImpHint,
    timeout_ms: c_int,
    item: *mut *mut c_void,
    len: *mut usize,
) -> c_int {
    guard(|| {
        if item.is_null() || len.is_null() {
            return fail(libc::EINVAL, "item or len is NULL");
        }
        // Out of the table while it waits: other calls go on.
        let mut h = match take(hint, |e| matches!(e, Entry::Hint(_))) {
            Some(Entry::Hint(h)) => h,
            _ => return fail(libc::EBADF, format!("no hint {hint}")),
        };
        let timeout = (timeout_ms >= 0).then(|| Duration::from_millis(timeout_ms as u64));
        match h.get(timeout) {
            Ok(mut it) => {
                // SAFETY: checked non-NULL above.
                unsafe {
                    *item = std::mem::replace(&mut it.ptr, std::ptr::null_mut());
                    *len = it.len;
                }
                0
            }
            Err(GetError::Timeout(_)) => {
                table()
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(hint, Entry::Hint(h));
                fail(libc::ETIMEDOUT, "the item did not arrive in time")
            }
            Err(e) => fail(libc::EIO, e.to_string()),
        }
    })
}

/// `imp_cancel`: withdraw the hint (counted as a wrong one). 0, or -1 with errno (EBADF for a
/// handle that is not a hint, which is left as it was).
#[no_mangle]
pub extern "C" fn imp_cancel(hint: ImpHint) -> c_int {
    guard(|| match take(hint, |e| matches!(e, Entry::Hint(_))) {
        Some(Entry::Hint(h)) => {
            h.cancel();
            0
        }
        _ => fail(libc::EBADF, format!("no hint {hint}")),
    })
}

/// `imp_close`: stop a prefetcher (its hints still answer `imp_get`). 0, or -1 with errno
/// (EBADF for a handle that is not a prefetcher, which is left as it was).
#[no_mangle]
pub extern "C" fn imp_close(imp: ImpHandle) -> c_int {
    guard(|| match take(imp, |e| matches!(e, Entry::Imp(_))) {
        Some(Entry::Imp(_)) => 0,
        _ => fail(libc::EBADF, format!("no prefetcher {imp}")),
    })
}

/// `imp_last_error`: the last error of this thread, as text (the same as `ms_last_error`:
/// roam's C calls share one error slot per thread).
#[no_mangle]
pub extern "C" fn imp_last_error() -> *const c_char {
    ms_last_error()
}
