//! IMP's application interface (IMP thesis §3.2, modelled on Java's ExecutorService and
//! Future): the application hints what it may need ([`Prefetcher::prefetch`]) and gets a
//! [`Handle`]; IMP decides when to fetch it in the background ([`crate::decide`], re-evaluated
//! each second and whenever a hint or the networks change); [`Handle::get`] returns the item,
//! waiting for a prefetch in flight or fetching it on demand (in the foreground) if it has not
//! started. A hint cancelled or dropped unread counts against its class's accuracy.
//!
//! The fetcher is called with the label to use: background for a prefetch, foreground for a
//! demand fetch, small or large by the item's size, so over roam-net a prefetch is a
//! background IROB that never delays a foreground one.
//!
//! The [`Environment`] supplies what the decision needs and this module never reads itself:
//! the time, the networks with their estimates and radios, and the prices of energy and data
//! (from roam-net's estimates and roam-budget's models and controllers in a real client, or a
//! test's fakes).

use std::any::Any;
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use roam_budget::Radio;
use roam_core::{BitRate, Bytes, Time};
use roam_net::Label;
use thiserror::Error;

use crate::accuracy::{Accuracy, Class, DEFAULT_CLASS};
use crate::decision::{Candidate, LongRun, NetworkState, Prices};
use crate::strategy::Strategy;

/// Items up to this size are fetched with a small label, larger ones with a large label.
pub const SMALL_ITEM: Bytes = Bytes(4096);

/// Prefetches running at once, at most (each on its own thread): a batch larger than this
/// starts as earlier prefetches end.
pub const MAX_IN_FLIGHT: usize = 8;

/// How often the decision is made again without any change (the prices move each second).
pub const DECIDE_EVERY: Duration = Duration::from_secs(1);

/// One network as the environment describes it now.
#[derive(Clone, Debug)]
pub struct Network {
    /// Its name.
    pub name: String,
    /// WiFi (else cellular).
    pub wifi: bool,
    /// Whether its bytes count against the data budget.
    pub metered: bool,
    /// Current bandwidth estimate.
    pub bandwidth: BitRate,
    /// Current latency estimate.
    pub latency: Duration,
    /// Its radio as traffic has driven it.
    pub radio: Radio,
}

/// What IMP reads from the world.
pub trait Environment: Send + 'static {
    /// Now.
    fn now(&self) -> Time;
    /// The networks available now.
    fn networks(&self) -> Vec<Network>;
    /// The current prices of energy and data.
    fn prices(&self) -> Prices;
}

/// An environment shared with the application (which reads what was spent, say).
impl<E: Environment + Sync> Environment for Arc<E> {
    fn now(&self) -> Time {
        (**self).now()
    }
    fn networks(&self) -> Vec<Network> {
        (**self).networks()
    }
    fn prices(&self) -> Prices {
        (**self).prices()
    }
}

/// Why [`Handle::get`] returned no item.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum GetError {
    /// The prefetch in flight did not finish within the timeout (the hint stays; `get` may be
    /// called again).
    #[error("the item did not arrive within {0:?}")]
    Timeout(Duration),
    /// The fetcher failed (it is not retried: the error is the fetch's).
    #[error("the fetch failed: {0}")]
    Fetch(String),
    /// The item was already taken by an earlier `get`.
    #[error("the item was already taken")]
    Taken,
}

type Output = Box<dyn Any + Send>;
type FetchFn = Box<dyn FnOnce(Label) -> Result<Output, String> + Send>;

enum Status {
    /// Not started: the fetcher waits here.
    Waiting(FetchFn),
    /// A prefetch or demand fetch is running.
    InFlight,
    /// Fetched (or failed).
    Done(Result<Output, String>),
    /// Taken by `get`.
    Taken,
}

struct Hint {
    class: Class,
    size: Option<Bytes>,
    status: Status,
}

/// What the prefetcher did, for reports and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Prefetches started.
    pub prefetches: u64,
    /// Demand fetches (a `get` of a hint not yet started).
    pub demand_fetches: u64,
    /// `get`s served by a finished prefetch.
    pub prefetch_hits: u64,
    /// Fetches that failed.
    pub failures: u64,
    /// Hints withdrawn unread.
    pub cancelled: u64,
}

struct State {
    hints: BTreeMap<u64, Hint>,
    next_id: u64,
    accuracy: Accuracy,
    long_run: LongRun,
    /// Mean size of the items fetched so far (the size of a hint that gives none).
    mean_size: (u64, f64),
    stats: Stats,
    /// Something changed: decide now rather than at the next second.
    dirty: bool,
    /// Prefetches running.
    in_flight: usize,
    closed: bool,
}

struct Shared {
    state: Mutex<State>,
    cv: Condvar,
    env: Mutex<Box<dyn Environment>>,
    strategy: Strategy,
}

/// One application's prefetcher. Dropping it stops its decision thread; prefetches in flight
/// finish on their own threads.
pub struct Prefetcher {
    shared: Arc<Shared>,
    decider: Option<std::thread::JoinHandle<()>>,
}

/// A hint's handle, typed by its item. Dropped without [`Handle::get`], the hint is cancelled.
pub struct Handle<T> {
    id: u64,
    shared: Arc<Shared>,
    done: bool,
    _item: PhantomData<fn() -> T>,
}

fn label(size: Bytes, background: bool) -> Label {
    match (background, size.0 <= SMALL_ITEM.0) {
        (false, true) => Label::ForegroundSmall,
        (false, false) => Label::ForegroundLarge,
        (true, true) => Label::BackgroundSmall,
        (true, false) => Label::BackgroundLarge,
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The size a hint stands for.
    fn size_of(st: &State, h: &Hint) -> Bytes {
        h.size
            .unwrap_or(Bytes(st.mean_size.1.round() as u64).max(Bytes(1)))
    }

    /// A prefetch finished: one fewer in flight, and decide again.
    fn prefetched(&self, id: u64, r: Result<Output, String>, bytes: Option<Bytes>) {
        {
            let mut st = self.lock();
            st.in_flight = st.in_flight.saturating_sub(1);
            st.dirty = true;
        }
        self.finish(id, r, bytes);
    }

    /// A fetch finished: store its result and learn the item's size.
    fn finish(&self, id: u64, r: Result<Output, String>, bytes: Option<Bytes>) {
        let mut st = self.lock();
        if r.is_err() {
            st.stats.failures += 1;
        }
        if let Some(b) = bytes {
            let (n, m) = st.mean_size;
            st.mean_size = (n + 1, m + (b.0 as f64 - m) / (n + 1) as f64);
        }
        if let Some(h) = st.hints.get_mut(&id) {
            h.status = Status::Done(r);
        }
        self.cv.notify_all();
    }

    /// Decide once, and start the prefetches that pay.
    fn decide_once(self: &Arc<Self>) {
        let (now, nets, prices) = {
            let env = self.env.lock().unwrap_or_else(|e| e.into_inner());
            (env.now(), env.networks(), env.prices())
        };
        let mut st = self.lock();
        st.dirty = false;
        let views: Vec<NetworkState> = nets
            .iter()
            .map(|n| NetworkState {
                name: &n.name,
                wifi: n.wifi,
                metered: n.metered,
                bandwidth: n.bandwidth,
                latency: n.latency,
                radio: &n.radio,
            })
            .collect();
        st.long_run.observe(now, &views);
        let candidates: Vec<Candidate> = st
            .hints
            .iter()
            .filter(|(_, h)| matches!(h.status, Status::Waiting(_)))
            .map(|(id, h)| Candidate {
                id: *id,
                class: h.class,
                size: h.size,
            })
            .collect();
        let default = Bytes(st.mean_size.1.round().max(1.0) as u64);
        let d = self.strategy.choose(
            now,
            &candidates,
            &views,
            &st.accuracy,
            &st.long_run,
            prices,
            default,
        );
        // At most MAX_IN_FLIGHT prefetches at once: the rest of the batch starts as they end
        // (each end wakes the decision).
        let room = MAX_IN_FLIGHT.saturating_sub(st.in_flight);
        for id in d.start.into_iter().take(room) {
            let size = match st.hints.get(&id) {
                Some(h) => Shared::size_of(&st, h),
                None => continue,
            };
            let Some(h) = st.hints.get_mut(&id) else {
                continue;
            };
            let Status::Waiting(f) = std::mem::replace(&mut h.status, Status::InFlight) else {
                continue;
            };
            st.stats.prefetches += 1;
            st.in_flight += 1;
            let shared = self.clone();
            std::thread::spawn(move || {
                let r = f(label(size, true));
                let bytes = r.is_ok().then_some(size);
                shared.prefetched(id, r, bytes);
            });
        }
    }
}

impl Prefetcher {
    /// A prefetcher reading `env`, deciding each second and on every change, as IMP.
    pub fn new(env: impl Environment) -> Prefetcher {
        Prefetcher::with_strategy(env, Strategy::Imp)
    }

    /// A prefetcher choosing by `strategy` (IMP, or one of the thesis's baselines).
    pub fn with_strategy(env: impl Environment, strategy: Strategy) -> Prefetcher {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                hints: BTreeMap::new(),
                next_id: 1,
                accuracy: Accuracy::new(),
                long_run: LongRun::default(),
                mean_size: (0, 16_384.0),
                stats: Stats::default(),
                dirty: false,
                in_flight: 0,
                closed: false,
            }),
            cv: Condvar::new(),
            env: Mutex::new(Box::new(env)),
            strategy,
        });
        let s = shared.clone();
        let decider = std::thread::spawn(move || loop {
            s.decide_once();
            let st = s.lock();
            let (st, _) =
                s.cv.wait_timeout_while(st, DECIDE_EVERY, |st| !st.dirty && !st.closed)
                    .unwrap_or_else(|e| e.into_inner());
            if st.closed {
                return;
            }
        });
        Prefetcher {
            shared,
            decider: Some(decider),
        }
    }

    /// Hint that the application may need what `fetcher` fetches. The fetcher is called at
    /// most once, with the label to use: background when IMP prefetches, foreground when
    /// `get` finds it not started.
    pub fn prefetch<T, F>(&self, fetcher: F) -> Handle<T>
    where
        T: Send + 'static,
        F: FnOnce(Label) -> Result<T, String> + Send + 'static,
    {
        let f: FetchFn = Box::new(move |l| fetcher(l).map(|t| Box::new(t) as Output));
        let mut st = self.shared.lock();
        let id = st.next_id;
        st.next_id += 1;
        st.hints.insert(
            id,
            Hint {
                class: DEFAULT_CLASS,
                size: None,
                status: Status::Waiting(f),
            },
        );
        st.dirty = true;
        self.shared.cv.notify_all();
        Handle {
            id,
            shared: self.shared.clone(),
            done: false,
            _item: PhantomData,
        }
    }

    /// Decide again now (say, a network came or went).
    pub fn networks_changed(&self) {
        self.shared.lock().dirty = true;
        self.shared.cv.notify_all();
    }

    /// What it has done so far.
    pub fn stats(&self) -> Stats {
        self.shared.lock().stats
    }

    /// The accuracy learned for `class`.
    pub fn accuracy(&self, class: Class) -> f64 {
        self.shared.lock().accuracy.of(class)
    }
}

impl Drop for Prefetcher {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.cv.notify_all();
        if let Some(d) = self.decider.take() {
            let _ = d.join();
        }
    }
}

impl<T: Send + 'static> Handle<T> {
    /// The item's size, if known (otherwise the mean of the items fetched so far stands for it).
    pub fn set_size(&self, size: Bytes) {
        let mut st = self.shared.lock();
        if let Some(h) = st.hints.get_mut(&self.id) {
            h.size = Some(size);
        }
        st.dirty = true;
        self.shared.cv.notify_all();
    }

    /// The hint's class: hints of one class share an accuracy (one news feed, one mailbox).
    pub fn set_class(&self, class: Class) {
        let mut st = self.shared.lock();
        if let Some(h) = st.hints.get_mut(&self.id) {
            h.class = class;
        }
        st.dirty = true;
        self.shared.cv.notify_all();
    }

    /// The item: at once if prefetched; after waiting (at most `timeout`, if given) for a
    /// prefetch in flight; or fetched now, in the foreground, if not started. The hint counts
    /// as consumed.
    pub fn get(&mut self, timeout: Option<Duration>) -> Result<T, GetError> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut st = self.shared.lock();
        loop {
            let size = match st.hints.get(&self.id) {
                Some(h) => Shared::size_of(&st, h),
                None => return Err(GetError::Taken),
            };
            let h = st.hints.get_mut(&self.id).expect("just found");
            match std::mem::replace(&mut h.status, Status::Taken) {
                Status::Taken => return Err(GetError::Taken),
                Status::Done(r) => {
                    let class = h.class;
                    st.hints.remove(&self.id);
                    st.accuracy.consumed(class);
                    self.done = true;
                    if r.is_ok() {
                        st.stats.prefetch_hits += 1;
                    }
                    return take(r);
                }
                Status::Waiting(f) => {
                    h.status = Status::InFlight;
                    st.stats.demand_fetches += 1;
                    drop(st);
                    let r = f(label(size, false));
                    let bytes = r.is_ok().then_some(size);
                    self.shared.finish(self.id, r, bytes);
                    st = self.shared.lock();
                    // A demand fetch is not a prefetch hit.
                    if let Some(h) = st.hints.remove(&self.id) {
                        st.accuracy.consumed(h.class);
                        self.done = true;
                        if let Status::Done(r) = h.status {
                            return take(r);
                        }
                    }
                    return Err(GetError::Taken);
                }
                Status::InFlight => {
                    h.status = Status::InFlight;
                    let wait = match deadline {
                        Some(d) => {
                            let left = d.saturating_duration_since(Instant::now());
                            if left.is_zero() {
                                return Err(GetError::Timeout(timeout.unwrap_or_default()));
                            }
                            left
                        }
                        None => Duration::from_secs(3600),
                    };
                    st = self
                        .shared
                        .cv
                        .wait_timeout(st, wait)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
        }
    }

    /// Withdraw the hint: the item is not needed (it counts against its class's accuracy). A
    /// prefetch in flight finishes and is dropped.
    pub fn cancel(self) {
        // Dropping it withdraws the hint.
    }
}

impl<T> Drop for Handle<T> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        let mut st = self.shared.lock();
        if let Some(h) = st.hints.remove(&self.id) {
            st.accuracy.wrong(h.class);
            st.stats.cancelled += 1;
        }
    }
}

fn take<T: 'static>(r: Result<Output, String>) -> Result<T, GetError> {
    match r {
        Ok(b) => b
            .downcast::<T>()
            .map(|b| *b)
            .map_err(|_| GetError::Fetch("the fetcher returned another type".into())),
        Err(e) => Err(GetError::Fetch(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roam_budget::profile;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A fixed world: one network (WiFi or 3G) and fixed prices; time is the wall clock's.
    struct Fake {
        wifi: bool,
        prices: Prices,
        start: Instant,
    }

    impl Environment for Fake {
        fn now(&self) -> Time {
            Time::from_nanos(self.start.elapsed().as_nanos() as u64)
        }
        fn networks(&self) -> Vec<Network> {
            let (name, p) = if self.wifi {
                ("wifi", "huang2012/wifi")
            } else {
                ("cell", "huang2012/3g")
            };
            vec![Network {
                name: name.into(),
                wifi: self.wifi,
                metered: !self.wifi,
                bandwidth: BitRate::mbps(2),
                latency: Duration::from_millis(50),
                radio: Radio::new(Arc::new(profile(p).unwrap()), Time::ZERO),
            }]
        }
        fn prices(&self) -> Prices {
            self.prices
        }
    }

    fn prefetcher(wifi: bool, energy_price: f64) -> Prefetcher {
        Prefetcher::new(Fake {
            wifi,
            prices: Prices {
                energy: energy_price,
                data: 0.0,
            },
            start: Instant::now(),
        })
    }

    /// Wait (at most 5 s) until `done` holds of the prefetcher's stats.
    fn until(p: &Prefetcher, done: impl Fn(Stats) -> bool) -> Stats {
        let end = Instant::now() + Duration::from_secs(5);
        loop {
            let s = p.stats();
            if done(s) || Instant::now() > end {
                return s;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn with_no_constraint_hints_are_prefetched_in_the_background() {
        let p = prefetcher(true, 0.0);
        let calls = Arc::new(Mutex::new(Vec::new()));
        let mut handles: Vec<Handle<u32>> = (0..3)
            .map(|i| {
                let c = calls.clone();
                let h = p.prefetch(move |l| {
                    c.lock().unwrap().push(l);
                    Ok(i)
                });
                h.set_size(Bytes(100_000));
                h
            })
            .collect();
        assert_eq!(until(&p, |s| s.prefetches == 3).prefetches, 3);

        for (i, h) in handles.iter_mut().enumerate() {
            assert_eq!(h.get(None), Ok(i as u32));
            assert_eq!(h.get(None), Err(GetError::Taken));
        }
        assert_eq!(*calls.lock().unwrap(), vec![Label::BackgroundLarge; 3]);
        let s = p.stats();
        assert_eq!((s.prefetch_hits, s.demand_fetches), (3, 0));
        assert!((p.accuracy(DEFAULT_CLASS) - 0.8).abs() < 1e-12);
    }

    #[test]
    fn a_large_batch_runs_a_few_prefetches_at_a_time() {
        let p = prefetcher(true, 0.0);
        let running = Arc::new(AtomicU32::new(0));
        let most = Arc::new(AtomicU32::new(0));
        let hs: Vec<Handle<u8>> = (0..30)
            .map(|_| {
                let (r, m) = (running.clone(), most.clone());
                p.prefetch(move |_| {
                    let now = r.fetch_add(1, Ordering::SeqCst) + 1;
                    m.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(20));
                    r.fetch_sub(1, Ordering::SeqCst);
                    Ok(1)
                })
            })
            .collect();
        assert_eq!(until(&p, |s| s.prefetches == 30).prefetches, 30);
        let most = most.load(Ordering::SeqCst) as usize;
        assert!(most <= MAX_IN_FLIGHT && most > 1, "{most} at once");
        drop(hs);
    }

    #[test]
    fn an_unstarted_hint_is_fetched_on_demand_in_the_foreground() {
        // An idle 3G radio and dear energy: a lone prefetch never pays.
        let p = prefetcher(false, 100.0);
        let mut h = p.prefetch(Ok);
        h.set_size(Bytes(1000));
        std::thread::sleep(Duration::from_millis(50));
        p.networks_changed();
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(p.stats().prefetches, 0);
        assert_eq!(h.get(None), Ok(Label::ForegroundSmall));
        assert_eq!(p.stats().demand_fetches, 1);
    }

    #[test]
    fn get_waits_for_a_prefetch_in_flight_or_times_out() {
        let p = prefetcher(true, 0.0);
        let mut h = p.prefetch(|_| {
            std::thread::sleep(Duration::from_millis(300));
            Ok("item")
        });
        until(&p, |s| s.prefetches == 1);
        let t = Duration::from_millis(30);
        assert_eq!(h.get(Some(t)), Err(GetError::Timeout(t)));
        assert_eq!(h.get(None), Ok("item"));
    }

    #[test]
    fn a_failing_fetcher_surfaces_its_error_and_is_not_retried() {
        let p = prefetcher(true, 0.0);
        let n = Arc::new(AtomicU32::new(0));
        let c = n.clone();
        let mut h: Handle<()> = p.prefetch(move |_| {
            c.fetch_add(1, Ordering::SeqCst);
            Err("the server said 503".into())
        });
        assert_eq!(
            h.get(Some(Duration::from_secs(5))),
            Err(GetError::Fetch("the server said 503".into()))
        );
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(n.load(Ordering::SeqCst), 1);
        assert_eq!(p.stats().failures, 1);
    }

    #[test]
    fn cancelled_and_dropped_hints_count_against_their_class() {
        let p = prefetcher(false, 100.0);
        let hs: Vec<Handle<u8>> = (0..3).map(|_| p.prefetch(|_| Ok(1))).collect();
        for h in &hs {
            h.set_class(7);
        }
        let mut it = hs.into_iter();
        it.next().unwrap().cancel();
        drop(it.next().unwrap());
        assert_eq!(it.next().unwrap().get(None), Ok(1));
        assert!((p.accuracy(7) - 0.4).abs() < 1e-12, "{}", p.accuracy(7));
        assert_eq!(p.stats().cancelled, 2);
    }
}
