//! The C ABI (`include/roam_net.h`): the paper's `ms_*` calls over the blocking API.
//!
//! Handles are small integers into a table. An IROB handle names its multi-socket too, so
//! `ms_irob_send(irob, ...)` needs no socket argument, as in the paper: its high bits number a
//! block of 2^32 ids of one multi-socket in one direction (`handles`), its low 32 bits
//! the id within the block. (Packing the socket handle and the id together, as this once did,
//! let a peer-chosen id of 2^32 or more spill into the socket's bits and name another
//! multi-socket.) Errors set `errno` and a thread-local message (`ms_last_error`). Every entry
//! point catches panics: a bug must not unwind into C.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crate::proto::{Delivery, Deps, Label, SendError};
use crate::runtime::blocking::{Listener, MultiSocket};
use crate::runtime::{Error, Options, Thunk, ThunkHandle};

mod handles;
use handles::{irob_handle, irob_handles, own_irob};

/// `ms_socket_t`.
pub type MsSocket = i64;
/// `irob_id_t`.
pub type IrobHandle = i64;
/// `ms_thunk_t`.
pub type MsThunk = Option<unsafe extern "C" fn(*mut c_void)>;

const MS_DEFERRED: i64 = -2;
const MS_DONTWAIT: c_int = 0x40;

struct Sock {
    ms: MultiSocket,
    pending: Option<Delivery>,
    /// Deferred sends' thunks still waiting, by (function, argument), for `ms_cancel_thunk`.
    thunks: Vec<(usize, usize, ThunkHandle)>,
    efd: Option<Arc<EventFd>>,
    /// What non-blocking sends found full since `ms_poll_fd` last signalled writability.
    want: Arc<WantWrite>,
}

/// The labels (bit `1 << rank`) and the send buffer ([`BUFFER_FULL`]) that a non-blocking send
/// found unavailable; `ms_poll_fd`'s watcher waits for them and then signals the descriptor.
#[derive(Default)]
struct WantWrite {
    bits: std::sync::atomic::AtomicU8,
    notify: tokio::sync::Notify,
}

/// Bit of `WantWrite::bits`: an `ms_irob_send` found the send buffer full.
const BUFFER_FULL: u8 = 1 << 4;

impl WantWrite {
    fn want(&self, bits: u8) {
        self.bits.fetch_or(bits, Ordering::SeqCst);
        self.notify.notify_one();
    }
}

impl Drop for Sock {
    fn drop(&mut self) {
        // End `ms_poll_fd`'s writability watcher, which would otherwise wait for a send that
        // will never come, holding the multi-socket.
        self.want.notify.notify_one();
    }
}

impl Sock {
    /// Record a deferred send's thunk, releasing the records of thunks that have run since (so
    /// that a program deferring a send every second for days holds only the waiting ones).
    fn deferred(&mut self, thunk: MsThunk, arg: *mut c_void, h: ThunkHandle) {
        self.thunks.retain(|(_, _, h)| h.is_pending());
        self.thunks
            .push((thunk.map_or(0, |f| f as usize), arg as usize, h));
    }
}

enum Entry {
    /// From `ms_socket`, with the options `ms_connect` or `ms_listen` will use.
    Fresh(Box<Options>),
    Listening(Arc<Listener>),
    Connected(Arc<Mutex<Sock>>),
}

struct EventFd(c_int);

impl Drop for EventFd {
    fn drop(&mut self) {
        // SAFETY: our own descriptor.
        unsafe { libc::close(self.0) };
    }
}

fn table() -> &'static Mutex<HashMap<i64, Entry>> {
    static T: OnceLock<Mutex<HashMap<i64, Entry>>> = OnceLock::new();
    T.get_or_init(Default::default)
}

static NEXT: AtomicI64 = AtomicI64::new(1);

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Fail a C call: set `errno` and this thread's error text (`ms_last_error`, which other
/// crates' C ABIs share: IMP's `imp_last_error` reads the same), and return -1.
pub fn fail<T: From<i8>>(errno: c_int, msg: impl Into<String>) -> T {
    let msg = msg.into().replace('\0', " ");
    LAST_ERROR.with(|e| *e.borrow_mut() = CString::new(msg).unwrap_or_default());
    // SAFETY: errno is thread-local.
    unsafe { *libc::__errno_location() = errno };
    T::from(-1)
}

fn from_error<T: From<i8>>(e: Error) -> T {
    let errno = match &e {
        Error::Send(crate::SendError::WouldBlock(_))
        | Error::Send(crate::SendError::BufferFull) => libc::EAGAIN,
        Error::Send(crate::SendError::BadDependency { .. })
        | Error::Send(crate::SendError::TooManyDeps(..)) => libc::EINVAL,
        Error::Send(crate::SendError::TooLarge(..)) => libc::EMSGSIZE,
        Error::Send(crate::SendError::NotOpen(_)) => libc::EBADF,
        Error::Connect { .. } => libc::ECONNREFUSED,
        Error::Io { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
        _ => libc::EPIPE,
    };
    fail(errno, e.to_string())
}

/// Run a C entry point's body, turning a panic into a failed call (a bug must not unwind into
/// C).
pub fn guard<T: From<i8>>(f: impl FnOnce() -> T) -> T {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|_| fail(libc::EIO, "internal error (panic) in roam-net"))
}

fn sock(s: MsSocket) -> Result<Arc<Mutex<Sock>>, String> {
    match table().lock().unwrap().get(&s) {
        Some(Entry::Connected(x)) => Ok(x.clone()),
        Some(_) => Err(format!("handle {s} is not a connected multi-socket")),
        None => Err(format!("no multi-socket {s}")),
    }
}

/// The multi-socket behind the C handle `s`, for other crates' C ABIs (IMP's `imp_new` reads
/// its estimates), or why there is none. The handle returned does not keep the multi-socket
/// open once `ms_close` has released it ([`MultiSocket::watcher`]).
pub fn multisocket_of(s: MsSocket) -> Result<MultiSocket, String> {
    let x = sock(s)?;
    let ms = x.lock().unwrap_or_else(|e| e.into_inner()).ms.watcher();
    Ok(ms)
}

/// The connected socket and the label a sending call names, or the C error to return.
fn sock_and_label<T: From<i8>>(s: MsSocket, label: c_int) -> Result<(Arc<Mutex<Sock>>, Label), T> {
    let x = sock(s).map_err(|e| fail(libc::EBADF, e))?;
    let l = self::label(label).map_err(|e| fail(libc::EINVAL, e))?;
    Ok((x, l))
}

fn addr(host: *const c_char, port: u16) -> Result<SocketAddr, String> {
    if host.is_null() {
        return Err("host is NULL".into());
    }
    // SAFETY: the caller passes a NUL-terminated string.
    let h = unsafe { CStr::from_ptr(host) }
        .to_str()
        .map_err(|_| "host is not UTF-8".to_string())?;
    let ip: IpAddr = h
        .parse()
        .map_err(|_| format!("`{h}` is not an IP address"))?;
    Ok(SocketAddr::new(ip, port))
}

fn label(l: c_int) -> Result<Label, String> {
    u8::try_from(l)
        .ok()
        .and_then(Label::from_wire)
        .ok_or_else(|| format!("label {l} is not one of MS_LABEL_*"))
}

struct SendPtr(*mut c_void);
// SAFETY: ownership of the argument passes to the thunk, as the C API documents.
unsafe impl Send for SendPtr {}

fn make_thunk(thunk: MsThunk, arg: *mut c_void) -> Option<Thunk> {
    let f = thunk?;
    let arg = SendPtr(arg);
    Some(Thunk::new(move || {
        let a = arg;
        // SAFETY: the application gave a valid function for this argument.
        unsafe { f(a.0) }
    }))
}

/// The address for `ms_connect`/`ms_listen` on handle `s`, which must be fresh; or the C
/// return value of the error.
/// The address and options of a fresh handle about to connect or listen.
fn fresh_target(
    s: MsSocket,
    host: *const c_char,
    port: u16,
) -> Result<(SocketAddr, Options), c_int> {
    let options = match table().lock().unwrap().get(&s) {
        Some(Entry::Fresh(o)) => (**o).clone(),
        _ => {
            return Err(fail(
                libc::EBADF,
                format!("handle {s} is not a fresh ms_socket()"),
            ))
        }
    };
    let a = addr(host, port).map_err(|e| fail::<c_int>(libc::EINVAL, e))?;
    Ok((a, options))
}

/// A C string argument, or the error to return naming it.
fn c_str<'a>(p: *const c_char, what: &str) -> Result<&'a str, c_int> {
    if p.is_null() {
        return Err(fail(libc::EINVAL, format!("{what} is NULL")));
    }
    // SAFETY: the caller passes a NUL-terminated string that outlives the call.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| fail(libc::EINVAL, format!("{what} is not UTF-8")))
}

/// The contents of a PEM file named by the C string `path`, or the error to return.
fn pem_file(path: *const c_char, what: &str) -> Result<Vec<u8>, c_int> {
    let p = c_str(path, what)?;
    std::fs::read(p).map_err(|e| {
        fail(
            e.raw_os_error().unwrap_or(libc::EIO),
            format!("reading {what} {p}: {e}"),
        )
    })
}

/// Set TLS on a fresh handle (`ms_tls_client`, `ms_tls_server`) from what `make` builds out of
/// the two C string arguments.
fn set_tls(
    s: MsSocket,
    make: impl FnOnce() -> Result<std::io::Result<crate::runtime::Tls>, c_int>,
) -> c_int {
    let not_fresh = || {
        fail(
            libc::EBADF,
            format!("handle {s} is not a fresh ms_socket() (set TLS before connect or listen)"),
        )
    };
    if !matches!(table().lock().unwrap().get(&s), Some(Entry::Fresh(_))) {
        return not_fresh();
    }
    let tls = match make() {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => return fail(libc::EINVAL, e.to_string()),
        Err(r) => return r,
    };
    match table().lock().unwrap().get_mut(&s) {
        Some(Entry::Fresh(o)) => {
            o.tls = Some(tls);
            0
        }
        _ => not_fresh(),
    }
}

/// `ms_tls_client`: TLS on every connection of a multi-socket about to connect, trusting the
/// certificates in the PEM file `roots_pem_file` and expecting `server_name` in the server's.
#[no_mangle]
pub extern "C" fn ms_tls_client(
    s: MsSocket,
    roots_pem_file: *const c_char,
    server_name: *const c_char,
) -> c_int {
    guard(|| {
        set_tls(s, || {
            let roots = pem_file(roots_pem_file, "roots_pem_file")?;
            let name = c_str(server_name, "server_name")?;
            Ok(crate::runtime::Tls::client(&roots, name))
        })
    })
}

/// `ms_tls_server`: TLS on every connection a listener accepts, presenting the certificate
/// chain and private key in the PEM files given.
#[no_mangle]
pub extern "C" fn ms_tls_server(
    s: MsSocket,
    chain_pem_file: *const c_char,
    key_pem_file: *const c_char,
) -> c_int {
    guard(|| {
        set_tls(s, || {
            let chain = pem_file(chain_pem_file, "chain_pem_file")?;
            let key = pem_file(key_pem_file, "key_pem_file")?;
            Ok(crate::runtime::Tls::server(&chain, &key))
        })
    })
}

/// `ms_redundancy`: Meatballs' network selection for small foreground IROBs
/// ([`crate::proto::session::Config::redundancy`]) on a fresh handle: `method` 0 empirical, 1
/// bounds, 2 Bayesian; prices in seconds per joule and per byte (0: free).
#[no_mangle]
pub extern "C" fn ms_redundancy(
    s: MsSocket,
    method: c_int,
    energy_price: f64,
    data_price: f64,
) -> c_int {
    guard(|| {
        let method = match method {
            0 => roam_decide::Method::Empirical,
            1 => roam_decide::Method::Bounds,
            2 => roam_decide::Method::Bayesian,
            m => {
                return fail(
                    libc::EINVAL,
                    format!(
                    "ms_redundancy: method {m} is not 0 (empirical), 1 (bounds) or 2 (Bayesian)"
                ),
                )
            }
        };
        for (what, v) in [("energy_price", energy_price), ("data_price", data_price)] {
            if !(v.is_finite() && v >= 0.0) {
                return fail(
                    libc::EINVAL,
                    format!("ms_redundancy: {what} {v} is not a finite number >= 0"),
                );
            }
        }
        let prices = roam_decide::Prices {
            energy: energy_price,
            data: data_price,
        };
        match table().lock().unwrap().get_mut(&s) {
            Some(Entry::Fresh(o)) => {
                o.config.redundancy = Some(crate::proto::session::Redundancy::new(method, prices));
                0
            }
            _ => fail(
                libc::EBADF,
                format!("handle {s} is not a fresh ms_socket() (set redundancy before connect or listen)"),
            ),
        }
    })
}

fn insert_connected(id: MsSocket, ms: MultiSocket) {
    let x = Sock {
        ms,
        pending: None,
        thunks: vec![],
        efd: None,
        want: Arc::default(),
    };
    table()
        .lock()
        .unwrap()
        .insert(id, Entry::Connected(Arc::new(Mutex::new(x))));
}

/// See `roam_net.h`.
#[no_mangle]
pub extern "C" fn ms_socket() -> MsSocket {
    guard(|| {
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        table()
            .lock()
            .unwrap()
            .insert(id, Entry::Fresh(Box::default()));
        id
    })
}

/// See `roam_net.h`.
#[no_mangle]
pub extern "C" fn ms_connect(s: MsSocket, host: *const c_char, port: u16) -> c_int {
    guard(|| {
        let (a, options) = match fresh_target(s, host, port) {
            Ok(t) => t,
            Err(r) => return r,
        };
        match MultiSocket::connect(a, options) {
            Ok(ms) => {
                insert_connected(s, ms);
                0
            }
            Err(e) => from_error(e),
        }
    })
}

/// See `roam_net.h`.
#[no_mangle]
pub extern "C" fn ms_listen(s: MsSocket, host: *const c_char, port: u16) -> c_int {
    guard(|| {
        let (a, options) = match fresh_target(s, host, port) {
            Ok(t) => t,
            Err(r) => return r,
        };
        match Listener::bind(a, options) {
            Ok(l) => {
                table()
                    .lock()
                    .unwrap()
                    .insert(s, Entry::Listening(Arc::new(l)));
                0
            }
            Err(e) => from_error(e),
        }
    })
}

/// See `roam_net.h`.
#[no_mangle]
pub extern "C" fn ms_local_port(l: MsSocket) -> c_int {
    guard(|| match table().lock().unwrap().get(&l) {
        Some(Entry::Listening(x)) => x.local_addr().port() as c_int,
        _ => fail(libc::EBADF, format!("handle {l} is not a listener")),
    })
}

/// See `roam_net.h`.
#[no_mangle]
pub extern "C" fn ms_accept(l: MsSocket) -> MsSocket {
    guard(|| {
        let listener = match table().lock().unwrap().get(&l) {
            Some(Entry::Listening(x)) => x.clone(),
            _ => return fail(libc::EBADF, format!("handle {l} is not a listener")),
        };
        match listener.accept() {
            Ok(ms) => {
                let id = NEXT.fetch_add(1, Ordering::Relaxed);
                insert_connected(id, ms);
                id
            }
            Err(e) => from_error(e),
        }
    })
}

/// Copy the caller's `len` bytes at `buf` (NULL only with `len` 0), or the C error return.
///
/// # Safety
/// `buf` points to `len` readable bytes.
unsafe fn input(buf: *const c_void, len: usize) -> Result<Vec<u8>, isize> {
    if len == 0 {
        return Ok(Vec::new());
    }
    if buf.is_null() {
        return Err(fail(libc::EINVAL, "buf is NULL"));
    }
    // SAFETY: as the caller promises.
    Ok(unsafe { std::slice::from_raw_parts(buf as *const u8, len) }.to_vec())
}

/// See `roam_net.h`.
///
/// # Safety
/// `deps` points to `numdeps` IROB handles (or is NULL when `numdeps` is 0).
#[no_mangle]
pub unsafe extern "C" fn ms_begin_irob(
    s: MsSocket,
    label: c_int,
    numdeps: c_int,
    deps: *const IrobHandle,
    thunk: MsThunk,
    arg: *mut c_void,
) -> IrobHandle {
    guard(|| {
        let (x, l) = match sock_and_label(s, label) {
            Ok(v) => v,
            Err(r) => return r,
        };
        if numdeps < 0 || (numdeps > 0 && deps.is_null()) {
            return fail(libc::EINVAL, "numdeps is negative, or deps is NULL");
        }
        // SAFETY: the caller passes numdeps handles.
        let handles = if numdeps == 0 {
            &[][..]
        } else {
            unsafe { std::slice::from_raw_parts(deps, numdeps as usize) }
        };
        let mut ids = Vec::with_capacity(handles.len());
        for &h in handles {
            match own_irob(h) {
                Ok((hs, id)) if hs == s => ids.push(id),
                Ok(_) => {
                    return fail(
                        libc::EINVAL,
                        format!("dependency {h} belongs to another multi-socket"),
                    )
                }
                Err(e) => return fail(libc::EINVAL, format!("dependency: {e}")),
            }
        }
        let ms = x.lock().unwrap().ms.clone();
        match ms.begin_irob(l, Deps::List(ids), make_thunk(thunk, arg)) {
            Ok(id) => irob_handle(s, false, id).unwrap_or_else(|e| e),
            Err(Error::Deferred(h)) => {
                x.lock().unwrap().deferred(thunk, arg, h);
                MS_DEFERRED
            }
            Err(e) => from_error(e),
        }
    })
}

/// See `roam_net.h`.
///
/// # Safety
/// `buf` points to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn ms_irob_send(
    irob: IrobHandle,
    buf: *const c_void,
    len: usize,
    flags: c_int,
) -> isize {
    guard(|| {
        let (x, id) = match own_irob(irob).and_then(|(s, id)| Ok((sock(s)?, id))) {
            Ok(v) => v,
            Err(e) => return fail(libc::EBADF, e),
        };
        // SAFETY: the caller passes len readable bytes.
        let data = match unsafe { input(buf, len) } {
            Ok(d) => d,
            Err(r) => return r,
        };
        let ms = x.lock().unwrap().ms.clone();
        let r = if flags & MS_DONTWAIT != 0 {
            let r = ms.try_irob_send(id, data);
            let g = x.lock().unwrap();
            // Clear the descriptor before asking for the writability signal, which may come
            // at once: cleared after, that signal would be lost.
            rearm(&g);
            if matches!(r, Err(Error::Send(SendError::BufferFull))) {
                g.want.want(BUFFER_FULL);
            }
            r
        } else {
            ms.irob_send(id, data)
        };
        match r {
            Ok(()) => len as isize,
            Err(e) => from_error(e),
        }
    })
}

/// See `roam_net.h`.
#[no_mangle]
pub extern "C" fn ms_end_irob(irob: IrobHandle) -> c_int {
    guard(|| {
        let (x, id) = match own_irob(irob).and_then(|(s, id)| Ok((sock(s)?, id))) {
            Ok(v) => v,
            Err(e) => return fail(libc::EBADF, e),
        };
        let ms = x.lock().unwrap().ms.clone();
        match ms.end_irob(id) {
            Ok(()) => 0,
            Err(e) => from_error(e),
        }
    })
}

/// See `roam_net.h`.
///
/// # Safety
/// `buf` points to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn ms_send(
    s: MsSocket,
    buf: *const c_void,
    len: usize,
    flags: c_int,
    label: c_int,
    thunk: MsThunk,
    arg: *mut c_void,
) -> isize {
    guard(|| {
        let (x, l) = match sock_and_label(s, label) {
            Ok(v) => v,
            Err(r) => return r,
        };
        // SAFETY: the caller passes len readable bytes.
        let data = match unsafe { input(buf, len) } {
            Ok(d) => d,
            Err(r) => return r,
        };
        let ms = x.lock().unwrap().ms.clone();
        let r = if flags & MS_DONTWAIT != 0 && thunk.is_none() {
            let r = ms.try_send(l, data);
            let g = x.lock().unwrap();
            rearm(&g); // before asking for the signal, as in `ms_irob_send`
            if matches!(r, Err(Error::Send(SendError::WouldBlock(_)))) {
                g.want.want(1 << l.rank());
            }
            r
        } else {
            ms.send(l, data, make_thunk(thunk, arg))
        };
        match r {
            Ok(_) => len as isize,
            Err(Error::Deferred(h)) => {
                x.lock().unwrap().deferred(thunk, arg, h);
                MS_DEFERRED as isize
            }
            Err(e) => from_error(e),
        }
    })
}

/// See `roam_net.h`.
///
/// # Safety
/// `buf` points to `len` writable bytes; the out pointers are NULL or valid.
#[no_mangle]
pub unsafe extern "C" fn ms_recv(
    s: MsSocket,
    buf: *mut c_void,
    len: usize,
    flags: c_int,
    label: *mut c_int,
    irob: *mut IrobHandle,
    irob_end: *mut c_int,
) -> isize {
    guard(|| {
        let x = match sock(s) {
            Ok(x) => x,
            Err(e) => return fail(libc::EBADF, e),
        };
        if buf.is_null() && len > 0 {
            return fail(libc::EINVAL, "buf is NULL");
        }
        let (ms, pending) = {
            let mut g = x.lock().unwrap();
            (g.ms.clone(), g.pending.take())
        };
        let d = match pending {
            Some(d) => d,
            None => {
                let r = if flags & MS_DONTWAIT != 0 {
                    ms.try_recv()
                } else {
                    ms.recv()
                };
                match r {
                    Ok(Some(d)) => d,
                    Ok(None) if flags & MS_DONTWAIT != 0 && !ms.peer_closed() => {
                        return fail(libc::EAGAIN, "nothing to receive now");
                    }
                    Ok(None) => return 0,
                    Err(e) => return from_error(e),
                }
            }
        };
        let handle = match irob_handle(s, true, d.irob) {
            Ok(h) => h,
            Err(r) => {
                x.lock().unwrap().pending = Some(d);
                return r;
            }
        };
        let n = d.data.len().min(len);
        if n > 0 {
            // SAFETY: buf has len writable bytes (checked non-NULL above when len > 0); n <=
            // len. (With n = 0 nothing is copied: `buf` may be NULL, which even a copy of
            // nothing may not be given.)
            unsafe { std::ptr::copy_nonoverlapping(d.data.as_ptr(), buf as *mut u8, n) };
        }
        let rest = Delivery {
            offset: d.offset + n as u64,
            data: d.data.slice(n..),
            ..d.clone()
        };
        let end = d.end && rest.data.is_empty();
        // SAFETY: out pointers are NULL or valid, as documented.
        unsafe {
            if !label.is_null() {
                *label = d.label.to_wire() as c_int;
            }
            if !irob.is_null() {
                *irob = handle;
            }
            if !irob_end.is_null() {
                *irob_end = end as c_int;
            }
        }
        let mut g = x.lock().unwrap();
        if !rest.data.is_empty() {
            g.pending = Some(rest);
        }
        rearm(&g);
        n as isize
    })
}

/// After a call that may have consumed what `ms_poll_fd` signalled: clear the descriptor, and
/// signal it again if a receive would still not block (a writability the watcher is waiting
/// for signals it when it comes).
fn rearm(g: &Sock) {
    if let Some(e) = &g.efd {
        let mut v = 0u64;
        // SAFETY: draining our nonblocking eventfd.
        unsafe { libc::read(e.0, (&mut v as *mut u64).cast(), 8) };
        if g.pending.is_some() || g.ms.as_async().readable_now() {
            signal(e.0);
        }
    }
}

fn signal(fd: c_int) {
    let one = 1u64;
    // SAFETY: writing 8 bytes to our eventfd.
    unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}

/// See `roam_net.h`.
#[no_mangle]
pub extern "C" fn ms_cancel_thunk(s: MsSocket, thunk: MsThunk, arg: *mut c_void) -> c_int {
    guard(|| {
        let x = match sock(s) {
            Ok(x) => x,
            Err(e) => return fail(libc::EBADF, e),
        };
        let key = (thunk.map_or(0, |f| f as usize), arg as usize);
        let mut g = x.lock().unwrap();
        let mut n = 0;
        g.thunks.retain(|(f, a, h)| {
            if (*f, *a) == key {
                if h.cancel() {
                    n += 1;
                }
                false
            } else {
                true
            }
        });
        n
    })
}

/// See `roam_net.h`.
#[no_mangle]
pub extern "C" fn ms_poll_fd(s: MsSocket) -> c_int {
    guard(|| {
        let x = match sock(s) {
            Ok(x) => x,
            Err(e) => return fail(libc::EBADF, e),
        };
        let mut g = x.lock().unwrap();
        if let Some(e) = &g.efd {
            return e.0;
        }
        // SAFETY: creating an eventfd.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return fail(libc::EMFILE, "eventfd failed");
        }
        let efd = Arc::new(EventFd(fd));
        g.efd = Some(efd.clone());
        // The watchers' handles do not keep the multi-socket from being released by
        // `ms_close` (they end once the descriptor is gone).
        let ms = g.ms.as_async().watcher();
        let weak = Arc::downgrade(&efd);
        let rt = crate::runtime::blocking::runtime();
        let (ms2, weak2, want) = (ms.clone(), weak.clone(), g.want.clone());
        rt.spawn(async move {
            loop {
                ms.readable().await;
                let Some(e) = weak.upgrade() else { return };
                signal(e.0);
                drop(e);
                if ms.ended() {
                    // Readable for good (`rearm` keeps the descriptor signalled): nothing
                    // more to wait for, and waiting would hold the multi-socket for ever.
                    return;
                }
                // Re-arm once the application has consumed what was ready.
                ms.consumed().await;
            }
        });
        // Writability: once a non-blocking send found a label or the buffer unavailable, wait
        // until it is available and signal.
        rt.spawn(async move {
            loop {
                want.notify.notified().await;
                if weak2.strong_count() == 0 {
                    return; // the handle was closed (`Sock`'s drop wakes us)
                }
                let bits = want.bits.swap(0, Ordering::SeqCst);
                // Signalled once any of them can go (one label that never can, say one kept
                // off the only, metered, network, must not hold up the others).
                let labels: Vec<Label> = Label::ALL
                    .into_iter()
                    .filter(|l| bits & (1 << l.rank()) != 0)
                    .collect();
                match (labels.is_empty(), bits & BUFFER_FULL != 0) {
                    (false, true) => {
                        tokio::select! {
                            _ = ms2.sendable_any(&labels) => {}
                            _ = ms2.send_buffer_room() => {}
                        }
                    }
                    (false, false) => ms2.sendable_any(&labels).await,
                    (true, true) => ms2.send_buffer_room().await,
                    (true, false) => continue,
                }
                let Some(e) = weak2.upgrade() else { return };
                signal(e.0);
            }
        });
        fd
    })
}

/// See `roam_net.h`.
#[no_mangle]
pub extern "C" fn ms_writable(s: MsSocket, label: c_int) -> c_int {
    guard(|| {
        let (x, l) = match sock_and_label(s, label) {
            Ok(v) => v,
            Err(r) => return r,
        };
        let ms = x.lock().unwrap().ms.clone();
        ms.writable(l) as c_int
    })
}

/// See `roam_net.h`.
#[no_mangle]
pub extern "C" fn ms_close(s: MsSocket, timeout_ms: c_int) -> c_int {
    guard(|| {
        let entry = table().lock().unwrap().remove(&s);
        irob_handles()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .forget(s);
        match entry {
            Some(Entry::Connected(x)) => {
                let ms = x.lock().unwrap().ms.clone();
                if ms.close(Duration::from_millis(timeout_ms.max(0) as u64)) {
                    0
                } else {
                    fail(
                        libc::ETIMEDOUT,
                        "not everything sent was acknowledged before the timeout",
                    )
                }
            }
            Some(_) => 0,
            None => fail(libc::EBADF, format!("no multi-socket {s}")),
        }
    })
}

/// See `roam_net.h`.
#[no_mangle]
pub extern "C" fn ms_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// Environment variables (or their prefixes) that cargo sets for a test it runs, describing
/// that test's package; a nested build must not inherit them.
const SET_FOR_TESTS: &[&str] = &[
    "CARGO_PKG_",
    "CARGO_MANIFEST_",
    "CARGO_CRATE_NAME",
    "CARGO_BIN_",
    "CARGO_PRIMARY_PACKAGE",
    "CARGO_TARGET_TMPDIR",
    "CARGO_RUSTC_CURRENT_DIR",
    "OUT_DIR",
];

/// Build the C program `source` (under the repository root) against `include/` and the static
/// library of `package` (built here first, in the profile the calling test runs in), for tests
/// of a C ABI. `Ok(None)` when no C compiler is installed (the test skips, saying so).
///
/// The library is built with `cargo build -p PACKAGE --lib`, which resolves the dependencies'
/// features for that package alone: under `cargo test --workspace` they differ (tokio, ring,
/// syn, ...), and the dependencies would compile a second time. With
/// `ROAM_CAPI_BUILD=workspace` (set by `scripts/test`, which runs the whole workspace's
/// tests) it is built as `cargo build --workspace --lib --tests`, the selection whose features
/// are those `cargo test --workspace` built with, so that nothing compiles again. Either way
/// the build runs without the variables cargo set for the test ([`SET_FOR_TESTS`]).
pub fn build_c_program(package: &str, source: &str) -> Result<Option<std::path::PathBuf>, String> {
    use std::process::Command;
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    if Command::new(&cc).arg("--version").output().is_err() {
        eprintln!("skipped: no C compiler ({cc})");
        return Ok(None);
    }
    // target/<profile>/deps/<test>-<hash> -> target/<profile>
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let profile_dir = exe
        .parent()
        .and_then(|p| p.parent())
        .ok_or("the test's executable is not under target/<profile>/deps")?
        .to_path_buf();
    let mut build = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    build.args(["build", "-q"]);
    match std::env::var("ROAM_CAPI_BUILD").as_deref() {
        Ok("workspace") => build.args(["--workspace", "--lib", "--tests"]),
        Ok(other) if !other.is_empty() => {
            return Err(format!(
                "ROAM_CAPI_BUILD={other}: the only value is `workspace` (or unset)"
            ))
        }
        _ => build.args(["-p", package, "--lib"]),
    };
    // What cargo sets for the running test names the test's package (CARGO_PKG_NAME, ...).
    // Build scripts that watch those (ring's does: `rerun-if-env-changed=CARGO_PKG_NAME`)
    // would see them changed, run again, and their crates and every dependent compile again.
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if SET_FOR_TESTS.iter().any(|p| key.starts_with(p)) {
            build.env_remove(&*key);
        }
    }
    build.env(
        "CARGO_TARGET_DIR",
        profile_dir.parent().unwrap_or(&profile_dir),
    );
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        build.arg("--release");
    }
    if !build.status().map_err(|e| e.to_string())?.success() {
        return Err(format!("building the static library of {package} failed"));
    }
    let lib = profile_dir.join(format!("lib{}.a", package.replace('-', "_")));
    if !lib.exists() {
        return Err(format!("{} missing after the build", lib.display()));
    }
    let name = std::path::Path::new(source)
        .file_stem()
        .map_or("c-program".into(), |s| s.to_string_lossy().into_owned());
    let out = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
    let status = Command::new(&cc)
        .args([
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-D_GNU_SOURCE",
            "-o",
        ])
        .arg(&out)
        .arg(root.join(source))
        .arg("-I")
        .arg(root.join("include"))
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm", "-lrt", "-lgcc_s", "-lc"])
        .status()
        .map_err(|e| e.to_string())?;
    if !status.success() {
        return Err(format!("compiling {source} failed"));
    }
    Ok(Some(out))
}
