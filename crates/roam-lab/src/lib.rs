//! The lab: the papers' applications, run unmodified and with roam over the emulator's links,
//! against the papers' baselines and today's alternatives, with reports that put our numbers
//! beside the papers'.
//!
//! - [`system`]: roam, Linux MPTCP and the three one-link baselines (§5 of the Intentional
//!   Networking paper);
//! - [`channel`]: labelled messages over a multi-socket or one ordinary connection;
//! - [`sensing`], [`fs`], [`mail`]: the applications ([`dovecot`] and [`imap`] serve the
//!   mail application);
//! - [`variant`]: parameter sweeps (queue, RTT, rate) of any scenario;
//! - [`bulk`], [`fasthla_lab`]: bulk transfers (FastHLA against wget, curl and aria2);
//! - [`trial`], [`ends`], [`matrix`], [`lab`], [`outcome`], [`report`], [`chart`], [`stats`], [`paper`]: running the
//!   matrix (one trial: an emulator, the application's server and client ends) and writing it
//!   up.

pub mod bulk;
pub mod channel;
pub mod chart;
pub mod dovecot;
pub mod ends;
pub mod fasthla_lab;
pub mod fs;
pub mod horatio_lab;
mod horatio_report;
pub mod imap;
pub mod imp_client;
pub mod imp_lab;
pub mod imp_mail;
pub mod imp_news;
pub mod lab;
pub mod mail;
pub mod matrix;
pub mod meatballs_lab;
pub mod meatballs_net;
pub mod meatballs_speech;
pub mod nginx;
pub mod outcome;
pub mod paper;
pub mod report;
pub mod selection;
pub mod sensing;
pub mod setup;
pub mod speech;
pub mod stats;
pub mod system;
pub mod trial;
pub mod variant;
