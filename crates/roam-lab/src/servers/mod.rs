//! Real servers from Debian's packages that studies run in the emulator's server namespace:
//! Dovecot (with a small IMAP client), nginx, MediaWiki (with php-fpm), and PocketSphinx's
//! recognizer.

pub mod dovecot;
pub mod imap;
pub mod mediawiki;
pub mod nginx;
pub mod speech;

use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// Stop a server that has processes of its own (Dovecot's login and mail processes,
/// php-fpm's workers): SIGTERM lets its master stop them (SIGKILL would leave them running);
/// if it has not ended within 5 s it is killed. Then reaped.
pub fn terminate(child: &mut Child) {
    roam_emu::sys::kill(child.id() as i32, 15);
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The Debian version of `package`, as dpkg knows it ("unknown" if it does not): what a
/// report names its servers by.
pub fn package_version(package: &str) -> String {
    Command::new("dpkg-query")
        .args(["-W", "-f", "${Version}", package])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "unknown".into())
}
