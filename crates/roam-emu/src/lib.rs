//! roam's multi-link, trace-driven network emulator (`roam emu`).
//!
//! The kernel here has no `netem`, so, as Mahimahi does, roam emulates links in user space:
//! a client and a server network namespace are joined by one TUN device pair per link, and
//! packets cross a forwarder ([`emulator`]) that applies each link's capacity, delay, loss,
//! drop-tail queue and availability ([`queue`], a sans-IO state machine). Real kernel TCP and
//! MPTCP, and real unmodified programs, run through it ([`run`]).

pub mod baseline_file;
pub mod control;
pub mod emulator;
mod forward;
pub mod pcap;
pub mod queue;
pub mod run;
pub mod scenario;
pub mod scenario_file;
pub mod spec;
pub mod sys;
pub mod testing;
pub mod traffic;

pub use control::{Command, LinkCommand, ScheduledCommand};
pub use emulator::{EmuConfig, EmuError, Emulator, LinkHandle, SERVER_ADDR};
pub use forward::DirCounters;
pub use queue::{Jitter, PacketEvent};
pub use spec::{parse_link, LinkConfig};
