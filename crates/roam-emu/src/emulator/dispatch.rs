//! Changing links while they run: a [`Dispatcher`] delivers a [`Command`] to both forwarding
//! threads of its link, from three sources — the program ([`Emulator::command`]), the scripted
//! events of [`EmuConfig::events`] (a thread that sleeps until each is due), and the control
//! socket of [`EmuConfig::control_socket`] (one line per command, answered `ok` or
//! `error: ...`; the language is [`crate::control`]'s).
//!
//! A forwarder spends its time blocked in `ppoll`, so a command is sent in two moves: onto the
//! thread's channel, then a ring of its eventfd to wake it, after which it drains the channel.
//!
//! [`Emulator::command`]: super::Emulator::command
//! [`EmuConfig::events`]: super::EmuConfig::events
//! [`EmuConfig::control_socket`]: super::EmuConfig::control_socket

use super::config::{io_err, EmuError};
use crate::control::{Command, LinkCommand, ScheduledCommand};
use crate::sys::EventFd;
use roam_core::{Clock, Time};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How to reach one forwarding thread: its command channel and the eventfd that wakes it.
pub(super) struct Mailbox {
    pub(super) tx: Sender<LinkCommand>,
    pub(super) wake: Arc<EventFd>,
}

/// Routes commands to the forwarding threads of each link.
#[derive(Clone)]
pub(super) struct Dispatcher {
    clock: Clock,
    links: Arc<HashMap<String, Vec<Mailbox>>>,
}

impl Dispatcher {
    /// A dispatcher to `mailboxes` (each link's, by name), timing events on `clock`.
    pub(super) fn new(clock: Clock, mailboxes: HashMap<String, Vec<Mailbox>>) -> Dispatcher {
        Dispatcher {
            clock,
            links: Arc::new(mailboxes),
        }
    }

    /// Deliver `c` to both directions of its link; an unknown link is an error naming the
    /// links there are.
    pub(super) fn send(&self, c: &Command) -> Result<(), String> {
        let boxes = self.links.get(&c.link).ok_or_else(|| {
            let mut names: Vec<&String> = self.links.keys().collect();
            names.sort();
            format!("no link `{}` (links: {names:?})", c.link)
        })?;
        for b in boxes {
            let _ = b.tx.send(c.action.clone());
            b.wake.notify();
        }
        Ok(())
    }
}

/// Start the thread that plays `events` (if there are any) at their times; an event that
/// cannot be delivered becomes a warning.
pub(super) fn start_events(
    events: &[ScheduledCommand],
    d: &Dispatcher,
    stop: &Arc<AtomicBool>,
    warnings: &Arc<Mutex<Vec<String>>>,
) -> Option<JoinHandle<()>> {
    if events.is_empty() {
        return None;
    }
    let d = d.clone();
    let stop = stop.clone();
    let events = events.to_vec();
    let warn = warnings.clone();
    Some(std::thread::spawn(move || {
        run_events(d, events, stop, warn)
    }))
}

/// Listen on the control socket at `path` (if any), replacing a stale socket file there, and
/// start the thread that accepts its connections.
pub(super) fn start_control(
    path: Option<&Path>,
    d: &Dispatcher,
    stop: &Arc<AtomicBool>,
) -> Result<Option<JoinHandle<()>>, EmuError> {
    let Some(path) = path else {
        return Ok(None);
    };
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path)
        .map_err(io_err(format!("binding control socket {}", path.display())))?;
    // Non-blocking, so that the accepting thread sees the stop flag within 20 ms.
    listener
        .set_nonblocking(true)
        .map_err(io_err("control socket"))?;
    let d = d.clone();
    let stop = stop.clone();
    Ok(Some(std::thread::spawn(move || {
        run_control(listener, d, stop)
    })))
}

/// Send the events in list order, each once the clock reaches its time (an event listed after
/// a later one waits for it), waking at least every 20 ms to see the stop flag.
fn run_events(
    d: Dispatcher,
    events: Vec<ScheduledCommand>,
    stop: Arc<AtomicBool>,
    warnings: Arc<Mutex<Vec<String>>>,
) {
    for e in events {
        let at = Time::ZERO + e.at;
        loop {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let now = d.clock.now();
            if now >= at {
                break;
            }
            std::thread::sleep((at - now).min(Duration::from_millis(20)));
        }
        if let Err(msg) = d.send(&e.command) {
            warnings
                .lock()
                .unwrap()
                .push(format!("event at {:?}: {msg}", e.at));
        }
    }
}

/// Accept control connections until stopped, each served on a thread of its own.
fn run_control(listener: UnixListener, d: Dispatcher, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                let d = d.clone();
                std::thread::spawn(move || serve_control(stream, d));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Read commands from one control connection, a line each, and answer each line with `ok` or
/// `error: <why>`, until the peer closes it.
fn serve_control(stream: std::os::unix::net::UnixStream, d: Dispatcher) {
    let _ = stream.set_nonblocking(false);
    let mut out = match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    };
    for line in BufReader::new(stream).lines() {
        let Ok(line) = line else { break };
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.is_empty() {
            continue;
        }
        let reply = crate::control::parse_command(&words)
            .and_then(|c| d.send(&c))
            .map(|_| "ok".to_string())
            .unwrap_or_else(|e| format!("error: {e}"));
        if writeln!(out, "{reply}").is_err() {
            break;
        }
    }
}
