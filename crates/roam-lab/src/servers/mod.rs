//! Real servers from Debian's packages that studies run in the emulator's server namespace:
//! Dovecot (with a small IMAP client), nginx, and PocketSphinx's recognizer.

pub mod dovecot;
pub mod imap;
pub mod nginx;
pub mod speech;
