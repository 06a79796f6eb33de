//! The session's lock, held ([`Locked`]), and the wake-ups decided under it ([`Wakes`]), made
//! only once it is let go.
//!
//! Waking a task that waits (a writer, a receiver, a blocked sender, the ticker) can wake a
//! runtime worker or an application thread: a futex system call, and a thread that at once
//! asks for the lock it was woken about. Made under the lock, that lengthened every critical
//! section by a system call and had the woken thread find the lock still held, and sleep on it
//! again (issue 48 asks that the session lock be held for bookkeeping only, never across a
//! system call). So [`super::Shared::after`] only records what to wake, and the guard wakes
//! it when it drops, after unlocking.
//!
//! Deferring a wake-up loses none. A waiter woken by `notify_waiters` (receivers, blocked
//! senders, waiters on any change) registers its interest (`Notify::notified`, enabled) before
//! it looks at the session under the lock; the writers and the ticker are woken by
//! `notify_one`, whose permit waits for them. So a change a waiter did not see is followed by
//! a wake-up it will get, later than before but never not at all.

use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::sync::MutexGuard;

use super::out::Held;
use super::{ConnId, Session, Shared};

/// What to wake once the session's lock is let go.
#[derive(Debug, Default)]
pub(super) struct Wakes {
    /// Every connection's writer.
    pub(super) writers: bool,
    /// Receivers waiting for something to take (`Shared::readable`).
    pub(super) readable: bool,
    /// Blocked senders (`Shared::space`).
    pub(super) space: bool,
    /// Waiters on any change (`Shared::changed`).
    pub(super) changed: bool,
    /// The ticker, idle until now.
    pub(super) ticker: bool,
}

impl Wakes {
    /// Wake what was decided, except the writers of `held` connections (whose frames the
    /// holder writes: `out`).
    fn fire(&self, sh: &Shared, held: &[Held]) {
        if self.writers {
            let skip = |c: &ConnId| held.iter().any(|h| h.conn == *c);
            for (_, c) in sh.conns.lock().unwrap().iter().filter(|(c, _)| !skip(c)) {
                c.wake.notify_one();
            }
        }
        if self.readable {
            sh.readable.notify_waiters();
        }
        if self.space {
            sh.space.notify_waiters();
        }
        if self.changed {
            sh.changed.notify_waiters();
        }
        if self.ticker {
            sh.ticker.wake.notify_one();
        }
    }
}

/// The session, locked; derefs to it. Wake-ups recorded in `wakes` are made when it drops,
/// after the lock is let go, and the frames taken for `held` write sides are written then
/// (`out`).
pub(crate) struct Locked<'a> {
    shared: &'a Shared,
    guard: ManuallyDrop<MutexGuard<'a, Session>>,
    pub(super) wakes: Wakes,
    /// Write sides held by this thread ([`Shared::sending`]).
    pub(super) held: Vec<Held>,
}

impl<'a> Locked<'a> {
    pub(super) fn new(shared: &'a Shared, guard: MutexGuard<'a, Session>) -> Locked<'a> {
        Locked {
            shared,
            guard: ManuallyDrop::new(guard),
            wakes: Wakes::default(),
            held: Vec::new(),
        }
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        // SAFETY: the guard is dropped once, here, and not used after.
        unsafe { ManuallyDrop::drop(&mut self.guard) };
        self.wakes.fire(self.shared, &self.held);
        for h in std::mem::take(&mut self.held) {
            h.write(self.shared);
        }
    }
}

impl Deref for Locked<'_> {
    type Target = Session;

    fn deref(&self) -> &Session {
        &self.guard
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut Session {
        &mut self.guard
    }
}

impl std::fmt::Debug for Locked<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Config, Ends, Options};
    use super::*;
    use std::future::Future;
    use std::task::{Context, Poll};

    /// A change's wake-ups wait for the lock to be let go: a receiver and a waiter on any change
    /// registered before `after` are not woken while the session is still locked, and are once
    /// it is not (and find it free).
    #[test]
    fn wake_ups_are_made_once_the_lock_is_let_go() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _in_rt = rt.enter();
        let session = Session::client(Config::default(), 1);
        let sh = Shared::new(
            session,
            Ends::Peer("127.0.0.1:9".parse().unwrap()),
            Options::default(),
        );
        let changed = sh.changed.notified();
        let mut changed = std::pin::pin!(changed);
        changed.as_mut().enable();
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let mut s = sh.session();
        s.close();
        sh.after(&mut s);
        assert!(s.wakes.changed, "after decided on no wake-up");
        assert!(
            changed.as_mut().poll(&mut cx).is_pending(),
            "woken while the session is locked"
        );
        drop(s);
        assert_eq!(changed.as_mut().poll(&mut cx), Poll::Ready(()));
        assert!(sh.session.try_lock().is_ok());
    }
}
