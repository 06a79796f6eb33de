//! A real wiki for the dedup lab: Debian's MediaWiki (`apt-get install mediawiki php-fpm
//! php-sqlite3 php-cli`), installed afresh per trial into a directory of its own with its
//! database in SQLite, its articles imported and later edited with MediaWiki's own maintenance
//! scripts, served by php-fpm behind nginx.
//!
//! Nothing of the system's MediaWiki set-up is used or changed: the trial's configuration
//! (`LocalSettings.php`, written by MediaWiki's installer) lives in the trial's directory and
//! reaches every PHP process through `MW_CONFIG_FILE`, which MediaWiki 1.39 honours
//! (`includes/BootstrapHelperFunctions.php`). php-fpm runs in the foreground as the lab's user
//! (`-R` where that is root), listening on a Unix socket in the directory.
//!
//! Two fetches of the same page differ only in what MediaWiki computes per request (the
//! request's id, how long the backend took, and the parser's timings if the page was parsed
//! again): [`masked`] blanks those, so a page that came through the lab's relay and proxy can
//! be compared with the same page fetched directly.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use crate::harness::setup::Need;

/// Where Debian installs MediaWiki.
pub const ROOT: &str = "/usr/share/mediawiki";

/// MediaWiki itself.
pub const MEDIAWIKI: Need = Need {
    package: "mediawiki",
    paths: &["/usr/share/mediawiki/index.php"],
    what: "the dedup lab's wiki",
};
/// php-fpm, which runs MediaWiki's pages for nginx.
pub const PHP_FPM: Need = Need {
    package: "php-fpm",
    paths: &[
        "/usr/sbin/php-fpm8.2",
        "/usr/sbin/php-fpm8.3",
        "/usr/sbin/php-fpm8.4",
    ],
    what: "the dedup lab's wiki",
};
/// PHP's command line, for MediaWiki's installer and maintenance scripts.
pub const PHP_CLI: Need = Need {
    package: "php-cli",
    paths: &["/usr/bin/php"],
    what: "the dedup lab's wiki (its installer and maintenance scripts)",
};
/// PHP's SQLite driver: the wiki's database.
pub const PHP_SQLITE: Need = Need {
    package: "php-sqlite3",
    paths: &[
        "/etc/php/8.2/mods-available/pdo_sqlite.ini",
        "/etc/php/8.3/mods-available/pdo_sqlite.ini",
        "/etc/php/8.4/mods-available/pdo_sqlite.ini",
    ],
    what: "the dedup lab's wiki (its SQLite database)",
};

/// MediaWiki's Debian version, as dpkg knows it ("unknown" if it does not).
pub fn version() -> String {
    super::package_version("mediawiki")
}

/// The wiki's administrator (the user the imports and edits are made as).
const ADMIN: &str = "Admin";

/// One installed wiki.
pub struct Wiki {
    dir: PathBuf,
    imports: usize,
}

impl Wiki {
    /// Install a new wiki in `dir` (created; anything there is removed), reachable as
    /// `http://{server}`, with `articles` (title, wikitext) imported.
    pub fn install(dir: &Path, server: &str, articles: &[(String, String)]) -> Result<Wiki> {
        let _ = std::fs::remove_dir_all(dir);
        let data = dir.join("data");
        std::fs::create_dir_all(&data).with_context(|| format!("creating {}", data.display()))?;
        let mut w = Wiki {
            dir: dir.to_path_buf(),
            imports: 0,
        };
        w.php(&[
            &format!("{ROOT}/maintenance/install.php"),
            "--dbtype",
            "sqlite",
            "--dbpath",
            &data.to_string_lossy(),
            "--dbname",
            "wiki",
            "--server",
            &format!("http://{server}"),
            "--scriptpath",
            "",
            "--confpath",
            &dir.to_string_lossy(),
            "--pass",
            "roam-lab-wiki-admin",
            "--skins",
            "Vector",
            "RoamLab",
            ADMIN,
        ])
        .context("installing MediaWiki")?;
        // Jobs (re-rendering the pages that link to a new one, ...) run after each import
        // (`import`), never during a page view: a page parsed again between two fetches
        // would differ in its parser report's times.
        let mut settings = std::fs::OpenOptions::new()
            .append(true)
            .open(w.settings())
            .with_context(|| format!("opening {}", w.settings().display()))?;
        std::io::Write::write_all(
            &mut settings,
            b"\n# roam lab: jobs run by the lab, not by page views; errors in full.\n\
              $wgJobRunRate = 0;\n$wgShowExceptionDetails = true;\n",
        )?;
        w.import(articles, "the manual's page")?;
        Ok(w)
    }

    /// `LocalSettings.php` of this wiki.
    fn settings(&self) -> PathBuf {
        self.dir.join("LocalSettings.php")
    }

    /// Run PHP's command line with `args` for this wiki.
    fn php(&self, args: &[&str]) -> Result<String> {
        let bin = PHP_CLI
            .paths
            .iter()
            .find(|p| Path::new(p).exists())
            .ok_or_else(|| {
                anyhow!("PHP's command line is not installed (apt-get install php-cli)")
            })?;
        let out = Command::new(bin)
            .args(args)
            .env("MW_CONFIG_FILE", self.settings())
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running {bin}"))?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            let tail = |s: &str| {
                let lines: Vec<&str> = s.lines().collect();
                lines[lines.len().saturating_sub(5)..].join(" / ")
            };
            bail!(
                "{} failed ({}): {} {}",
                args.first().copied().unwrap_or("php"),
                out.status,
                tail(&text),
                tail(&String::from_utf8_lossy(&out.stderr))
            );
        }
        Ok(text)
    }

    /// Save `articles` (title, wikitext) as new revisions, with edit summary `summary`, by
    /// MediaWiki's `importTextFiles.php` (an article whose text is unchanged gets no revision),
    /// then run the jobs the import queued (`runJobs.php`).
    pub fn import(&mut self, articles: &[(String, String)], summary: &str) -> Result<()> {
        if articles.is_empty() {
            return Ok(());
        }
        self.imports += 1;
        let staging = self.dir.join(format!("import-{}", self.imports));
        std::fs::create_dir_all(&staging)?;
        let mut files = Vec::new();
        for (title, text) in articles {
            if title.is_empty() || title.contains('/') || title.starts_with('.') {
                bail!("{title:?} cannot be a wiki article's file name");
            }
            // importTextFiles.php names an article by its file name without the extension.
            let f = staging.join(format!("{title}.txt"));
            std::fs::write(&f, text).with_context(|| format!("writing {}", f.display()))?;
            files.push(f.to_string_lossy().into_owned());
        }
        let script = format!("{ROOT}/maintenance/importTextFiles.php");
        let mut args: Vec<&str> = vec![&script, "--overwrite", "-s", summary, "-u", ADMIN];
        args.extend(files.iter().map(String::as_str));
        let out = self
            .php(&args)
            .context("importing articles into MediaWiki")?;
        let _ = std::fs::remove_dir_all(&staging);
        if !out.contains("Done!") {
            bail!("importTextFiles.php did not finish: {}", out.trim());
        }
        self.php(&[&format!("{ROOT}/maintenance/runJobs.php")])
            .context("running the jobs MediaWiki queued")?;
        Ok(())
    }

    /// php-fpm's socket.
    fn fpm_socket(&self) -> PathBuf {
        self.dir.join("fpm.sock")
    }

    /// The Unix socket nginx also listens on (see [`Wiki::nginx_server`]): fetching through it
    /// reaches the wiki from any namespace without crossing the emulator's links.
    pub fn direct_socket(&self) -> PathBuf {
        self.dir.join("direct.sock")
    }

    /// Start php-fpm for this wiki, once its socket exists (at most 15 s), else the error it
    /// gave. It stops, workers and all, when the [`Fpm`] is dropped.
    pub fn serve(&self) -> Result<Fpm> {
        let bin = PHP_FPM
            .paths
            .iter()
            .find(|p| Path::new(p).exists())
            .ok_or_else(|| anyhow!("php-fpm is not installed (apt-get install php-fpm)"))?;
        let d = self.dir.display();
        let conf = self.dir.join("php-fpm.conf");
        std::fs::write(
            &conf,
            format!(
                "[global]\npid = {d}/fpm.pid\nerror_log = {d}/fpm.log\ndaemonize = no\n\
                 [wiki]\nlisten = {}\npm = static\npm.max_children = 4\nclear_env = yes\n\
                 env[MW_CONFIG_FILE] = {}\n",
                self.fpm_socket().display(),
                self.settings().display()
            ),
        )?;
        let _ = std::fs::remove_file(self.fpm_socket());
        let mut cmd = Command::new(bin);
        cmd.args(["-F", "-y"]).arg(&conf);
        if roam_emu::sys::is_root() {
            cmd.arg("-R");
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child =
            roam_emu::run::spawn_lasting(cmd).with_context(|| format!("starting {bin}"))?;
        let deadline = Instant::now() + Duration::from_secs(15);
        while !self.fpm_socket().exists() {
            if let Some(status) = child.try_wait()? {
                let log = std::fs::read_to_string(self.dir.join("fpm.log")).unwrap_or_default();
                bail!("php-fpm exited at start ({status}): {}", log.trim());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!("php-fpm made no socket within 15 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Fpm { child })
    }

    /// nginx's `server` block for the wiki (and a `map` before it, in nginx's `http` block):
    /// `listen` on `at` and on [`Wiki::direct_socket`], PHP entry points to php-fpm,
    /// MediaWiki's static files from its install. A request over the Unix socket has no
    /// client address, which MediaWiki refuses ("Unable to determine IP"): it is given
    /// 127.0.0.1. Articles link to each other as `/index.php/Title` (MediaWiki's default
    /// `$wgArticlePath`), so a PHP script's path may continue (`PATH_INFO`), as a browser
    /// following those links needs. PHP may take 5 minutes over a page (nginx's default, 60 s, answered a first
    /// view with 504 on a machine running a dozen emulators besides).
    pub fn nginx_server(&self, at: &str) -> String {
        format!(
            "map $remote_addr $wiki_client {{ \"unix:\" 127.0.0.1; default $remote_addr; }} \
             server {{ listen {at}; listen unix:{direct}; root {ROOT}; \
             location ~ \\.php(/|$) {{ include /etc/nginx/fastcgi_params; \
             fastcgi_split_path_info ^(.+?\\.php)(/.*)$; \
             fastcgi_param PATH_INFO $fastcgi_path_info; \
             fastcgi_param REMOTE_ADDR $wiki_client; \
             fastcgi_param SCRIPT_FILENAME $document_root$fastcgi_script_name; \
             fastcgi_read_timeout 300s; fastcgi_pass unix:{fpm}; }} }}",
            direct = self.direct_socket().display(),
            fpm = self.fpm_socket().display()
        )
    }
}

/// A running php-fpm. Dropping it stops the master with SIGTERM, which stops its workers
/// (SIGKILL would leave them running), then kills it if it has not ended within 5 s.
pub struct Fpm {
    child: Child,
}

impl Drop for Fpm {
    fn drop(&mut self) {
        super::terminate(&mut self.child);
    }
}

/// The request path of article `title`.
pub fn page_path(title: &str) -> String {
    let mut p = String::from("index.php?title=");
    for b in title.bytes() {
        if b.is_ascii_alphanumeric() || b"-._".contains(&b) {
            p.push(b as char);
        } else if b == b' ' {
            p.push('_');
        } else {
            p.push_str(&format!("%{b:02X}"));
        }
    }
    p
}

/// `page` with what MediaWiki computes per request blanked, so two fetches of one revision
/// compare equal: its HTML comments dropped (the parser's limit report and parser-cache note,
/// with their times; an article cannot make a comment, its `<` is escaped) and, inside
/// `<script>` elements only, the values of `wgRequestId`, `wgBackendResponseTime`, and the
/// parser report's `cputime`, `walltime`, `timingprofile` and cache `timestamp`. Everything
/// else, the article above all, must match byte for byte.
pub fn masked(page: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(page.len());
    let mut rest = page;
    while let Some(i) = find(rest, b"<!--") {
        let Some(j) = find(&rest[i + 4..], b"-->") else {
            break; // not closed: left as it is, to be compared
        };
        out.extend_from_slice(&rest[..i]);
        rest = &rest[i + 4 + j + 3..];
    }
    out.extend_from_slice(rest);
    let mut masked = Vec::with_capacity(out.len());
    let mut rest = &out[..];
    while let Some(i) = find(rest, b"<script") {
        let Some(j) = find(&rest[i..], b"</script>") else {
            break;
        };
        masked.extend_from_slice(&rest[..i]);
        masked.extend_from_slice(&mask_values(&rest[i..i + j]));
        rest = &rest[i + j..];
    }
    masked.extend_from_slice(rest);
    masked
}

/// `script` with the values of the per-request keys removed (a string to its closing quote, a
/// list to its `]`, anything else to the next `,` or `}`).
fn mask_values(script: &[u8]) -> Vec<u8> {
    let mut out = script.to_vec();
    for key in [
        &b"\"wgRequestId\":"[..],
        b"\"wgBackendResponseTime\":",
        b"\"cputime\":",
        b"\"walltime\":",
        b"\"timingprofile\":",
        b"\"timestamp\":",
    ] {
        let mut from = 0;
        while let Some(i) = find(&out[from..], key) {
            let start = from + i + key.len();
            let v = &out[start..];
            let len = match v.first() {
                Some(b'"') => v[1..].iter().position(|&c| c == b'"').map(|k| k + 2),
                Some(b'[') => v.iter().position(|&c| c == b']').map(|k| k + 1),
                _ => v.iter().position(|&c| c == b',' || c == b'}'),
            }
            .unwrap_or(v.len());
            out.splice(start..start + len, std::iter::empty());
            from = start;
        }
    }
    out
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masking_blanks_only_what_changes_per_request() {
        let a = br#"<p>"cputime":"1",x</p><script>RLCONF={"wgRequestId":"e65698be","wgCSPNonce":false};"limitreport":{"cputime":"0.007","walltime":"0.008","timingprofile":["100.00%    0.000      1 -total","x"]},"cachereport":{"timestamp":"20261128235106","ttl":86400}mw.config.set({"wgBackendResponseTime":622});</script><!--
NewPP limit report
CPU time usage: 0.007 seconds
--><p>end</p>"#;
        let b = br#"<p>"cputime":"1",x</p><script>RLCONF={"wgRequestId":"b8368880","wgCSPNonce":false};"limitreport":{"cputime":"0.009","walltime":"0.010","timingprofile":["99.00%    0.001      1 -total","y"]},"cachereport":{"timestamp":"20261128235107","ttl":86400}mw.config.set({"wgBackendResponseTime":107});</script><!--
NewPP limit report
CPU time usage: 0.009 seconds
--><p>end</p>"#;
        assert_eq!(masked(a), masked(b));
        let m = String::from_utf8(masked(a)).unwrap();
        assert!(
            m.contains(r#""wgCSPNonce":false"#) && m.contains(r#""ttl":86400"#),
            "{m}"
        );
        // The article's text is never masked, only the scripts' values.
        assert!(
            m.starts_with(r#"<p>"cputime":"1",x</p>"#) && m.ends_with("<p>end</p>"),
            "{m}"
        );
        let text = String::from_utf8(a.to_vec()).unwrap();
        let c = text.replace(r#""wgCSPNonce":false"#, r#""wgCSPNonce":true"#);
        assert_ne!(masked(a), masked(c.as_bytes()));
        let d = text.replace("<p>end", "<p>End");
        assert_ne!(masked(a), masked(d.as_bytes()));
        // Odd input: keys at the end, comments and scripts never closed.
        for odd in [
            &br#"<script>"wgRequestId":"#[..],
            b"<!-- x",
            br#"<script>"timestamp":"1"#,
            b"<script>",
        ] {
            let _ = masked(odd);
        }
    }

    #[test]
    fn page_paths_encode_titles() {
        assert_eq!(page_path("Sql-select"), "index.php?title=Sql-select");
        assert_eq!(page_path("A b&c"), "index.php?title=A_b%26c");
    }

    /// The wiki installs, imports, serves a page through php-fpm and nginx, and an edit shows.
    /// Needs MediaWiki, php-fpm and nginx (skips with the reason otherwise).
    #[test]
    fn a_wiki_installs_serves_and_shows_an_edit() {
        let missing: Vec<&str> = [
            MEDIAWIKI,
            PHP_FPM,
            PHP_CLI,
            PHP_SQLITE,
            crate::harness::setup::NGINX,
        ]
        .iter()
        .filter(|n| !n.present())
        .map(|n| n.package)
        .collect();
        if !missing.is_empty() {
            eprintln!("skipped: missing Debian packages {}", missing.join(" "));
            return;
        }
        let dir = std::env::temp_dir().join(format!("roam-wiki-test-{}", std::process::id()));
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = probe.local_addr().unwrap().port();
        drop(probe);
        let at = format!("127.0.0.1:{port}");
        let mut w = Wiki::install(
            &dir,
            &at,
            &[("Alpha".into(), "== Head ==\n\nfirst words\n".into())],
        )
        .unwrap();
        let fpm = w.serve().unwrap();
        let ng = crate::servers::nginx::launch(
            &dir.join("nginx"),
            &w.nginx_server(&at),
            at.parse().unwrap(),
        )
        .unwrap();
        let socket = w.direct_socket();
        let get_at = |path: &str| {
            let out = Command::new("curl")
                .args(["-sS", "--unix-socket"])
                .arg(&socket)
                .arg(format!("http://{at}/{path}"))
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let get = || get_at(&page_path("Alpha"));
        let first = get();
        assert!(
            first.contains("first words") && first.contains("</html>"),
            "{first}"
        );
        // The form the wiki's own links take, as a browser follows them.
        let linked = get_at("index.php/Alpha");
        assert!(linked.contains("first words"), "{linked}");
        assert_eq!(masked(first.as_bytes()), masked(get().as_bytes()));
        w.import(
            &[("Alpha".into(), "== Head ==\n\nsecond words\n".into())],
            "edit",
        )
        .unwrap();
        let second = get();
        assert!(second.contains("second words"), "{second}");
        let mut ng = ng;
        let _ = ng.kill();
        let _ = ng.wait();
        // Stopping php-fpm stops its workers too.
        let master = fpm.child.id();
        let workers: Vec<String> =
            std::fs::read_to_string(format!("/proc/{master}/task/{master}/children"))
                .unwrap_or_default()
                .split_whitespace()
                .map(String::from)
                .collect();
        drop(fpm);
        std::thread::sleep(Duration::from_millis(300));
        for w in workers {
            let state = std::fs::read_to_string(format!("/proc/{w}/stat")).unwrap_or_default();
            let running = state
                .rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().next())
                .is_some_and(|s| s != "Z");
            assert!(
                !running,
                "php-fpm's worker {w} outlived its master: {state}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
