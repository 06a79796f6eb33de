//! Real servers from Debian's packages that studies run in the emulator's server namespace:
//! Dovecot (with a small IMAP client), nginx, MediaWiki (with php-fpm), and PocketSphinx's
//! recognizer.

pub mod dovecot;
pub mod imap;
pub mod mediawiki;
pub mod nginx;
pub mod speech;
