//! What a lab needs from the machine, installed as `./scripts/test` installs it: as root, the
//! missing Debian packages with apt-get (saying so first); otherwise one line naming what is
//! missing and how to get it.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

/// One program a lab runs and the Debian package that carries it.
#[derive(Clone, Copy, Debug)]
pub struct Need {
    /// The Debian package to install.
    pub package: &'static str,
    /// Where the program is found once installed (the first that exists counts).
    pub paths: &'static [&'static str],
    /// What needs it, for the messages.
    pub what: &'static str,
}

impl Need {
    /// Whether the program is installed.
    pub fn present(&self) -> bool {
        self.paths.iter().any(|p| Path::new(p).exists())
    }
}

/// `ip`, with which the emulator builds its namespaces and links.
pub const IPROUTE2: Need = Need {
    package: "iproute2",
    paths: &["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"],
    what: "the emulator",
};

/// Dovecot, the mail application's IMAP server.
pub const DOVECOT: Need = Need {
    package: "dovecot-imapd",
    paths: &["/usr/sbin/dovecot", "/usr/local/sbin/dovecot"],
    what: "the mail application",
};

/// nginx, the news reader's web server (`roam lab imp`).
pub const NGINX: Need = Need {
    package: "nginx",
    paths: &["/usr/sbin/nginx", "/usr/local/sbin/nginx"],
    what: "the news reader",
};

/// wget, a baseline of the bulk-transfer lab (`roam lab fasthla`).
pub const WGET: Need = Need {
    package: "wget",
    paths: &["/usr/bin/wget"],
    what: "the bulk-transfer lab's wget baseline",
};

/// curl, the HTTP/1.1 baseline of the bulk-transfer lab.
pub const CURL: Need = Need {
    package: "curl",
    paths: &["/usr/bin/curl"],
    what: "the bulk-transfer lab's curl baseline",
};

/// nghttp, the HTTP/2 baseline of the bulk-transfer lab.
pub const NGHTTP: Need = Need {
    package: "nghttp2-client",
    paths: &["/usr/bin/nghttp"],
    what: "the bulk-transfer lab's HTTP/2 baseline",
};

/// aria2, a baseline of the bulk-transfer lab.
pub const ARIA2: Need = Need {
    package: "aria2",
    paths: &["/usr/bin/aria2c"],
    what: "the bulk-transfer lab's aria2 baseline",
};

/// Install whatever of `needs` is missing. As root with apt-get it installs them (one
/// `apt-get update` and one `apt-get install` for all); otherwise it fails with one line that
/// names the packages.
pub fn ensure(needs: &[Need]) -> Result<()> {
    let can_install = roam_emu::sys::is_root() && Path::new("/usr/bin/apt-get").exists();
    ensure_with(needs, can_install, apt_get_install)
}

/// `ensure` with the decision to install and the installer given.
fn ensure_with(
    needs: &[Need],
    can_install: bool,
    install: impl FnOnce(&[&str]) -> Result<()>,
) -> Result<()> {
    let missing: Vec<&Need> = needs.iter().filter(|n| !n.present()).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let packages: Vec<&str> = missing.iter().map(|n| n.package).collect();
    let list = missing
        .iter()
        .map(|n| format!("{} ({})", n.package, n.what))
        .collect::<Vec<_>>()
        .join(", ");
    if !can_install {
        bail!(
            "missing Debian packages: {list}; install them (apt-get install -y {}) or run as root to let roam do it",
            packages.join(" ")
        );
    }
    eprintln!("installing {list} with apt-get...");
    install(&packages)?;
    if let Some(n) = missing.iter().find(|n| !n.present()) {
        bail!(
            "apt-get installed {} but it is still not at {} (needed by {})",
            n.package,
            n.paths.join(" or "),
            n.what
        );
    }
    Ok(())
}

/// `apt-get update`, then `apt-get install -y` of `packages`.
fn apt_get_install(packages: &[&str]) -> Result<()> {
    let run = |args: &[&str]| -> Result<()> {
        let status = Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .status()
            .with_context(|| format!("running apt-get {}", args.join(" ")))?;
        if !status.success() {
            bail!("apt-get {} failed ({status})", args.join(" "));
        }
        Ok(())
    };
    run(&["update", "-qq"])?;
    let mut install = vec!["install", "-y", "-qq"];
    install.extend(packages);
    run(&install)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HERE: Need = Need {
        package: "here",
        paths: &["/"],
        what: "a test",
    };
    const GONE: Need = Need {
        package: "roam-no-such-package",
        paths: &["/nonexistent/roam"],
        what: "a test",
    };

    #[test]
    fn nothing_missing_installs_nothing() {
        ensure_with(&[HERE], true, |_| panic!("nothing to install")).unwrap();
    }

    #[test]
    fn a_missing_package_is_installed_or_named_in_one_line() {
        // Allowed to install: the installer is asked for exactly the missing packages, and a
        // program still absent afterwards is an error.
        let mut asked = Vec::new();
        let e = ensure_with(&[HERE, GONE], true, |p| {
            asked = p.iter().map(|s| s.to_string()).collect();
            Ok(())
        })
        .unwrap_err()
        .to_string();
        assert_eq!(asked, ["roam-no-such-package"]);
        assert!(e.contains("still not at /nonexistent/roam"), "{e}");
        // Not allowed: one line naming the package and what needs it.
        let e = ensure_with(&[HERE, GONE], false, |_| panic!("may not install"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("roam-no-such-package (a test)"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }
}
