//! `roam transfer get` and `roam hla serve` end to end against Debian's nginx on loopback:
//! fixed-parameter transfers logged to the HLA server, then `--auto` with what it learnt, over
//! HTTP/1.1 and over the HTTP/2 that nginx advertises (`Alt-Svc: h2c`); every file byte for
//! byte; and over HTTPS from nginx with a private authority. Skips with a one-line reason where nginx is not installed (`./scripts/test` installs
//! it as root).

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_listening(addr: SocketAddr) {
    let end = Instant::now() + Duration::from_secs(15);
    while Instant::now() < end {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("nothing listens at {addr}");
}

fn roam(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_roam"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

fn check_copies(files: &[(String, Vec<u8>)], out: &Path) {
    for (name, body) in files {
        let got = std::fs::read(out.join(name)).unwrap_or_default();
        assert!(
            got == *body,
            "{name}: {} of {} bytes, or different",
            got.len(),
            body.len()
        );
    }
}

#[test]
fn transfers_are_logged_learnt_from_and_chosen_automatically() {
    if roam_lab::servers::nginx::binary().is_none() {
        eprintln!("skipped: nginx is not installed (apt-get install -y nginx)");
        return;
    }
    let root = std::env::temp_dir().join(format!("roam-transfer-cli-{}", std::process::id()));
    let _tmp = TempDir(root.clone());
    let www = root.join("site/www");
    std::fs::create_dir_all(&www).unwrap();
    // Pages and a few larger files, their contents distinct.
    let files: Vec<(String, Vec<u8>)> = (0..14u32)
        .map(|i| {
            let n = if i < 10 {
                60_000 + i as usize * 7_001
            } else {
                2_500_000 + i as usize
            };
            let body = (0..n)
                .map(|k| ((k as u32 * 31 + i * 17) % 251) as u8)
                .collect();
            (format!("f{i:02}.bin"), body)
        })
        .collect();
    for (n, b) in &files {
        std::fs::write(www.join(n), b).unwrap();
    }
    let (h1, h2) = (free_port(), free_port());
    let d = root.join("site");
    let servers = format!(
        "server {{ listen 127.0.0.1:{h1}; root {w}; add_header Alt-Svc 'h2c=\":{h2}\"' always; }}\n  \
         server {{ listen 127.0.0.1:{h2} http2; root {w}; }}",
        w = www.display()
    );
    let _nginx = Killed(
        roam_lab::servers::nginx::launch(&d, &servers, SocketAddr::from(([127, 0, 0, 1], h1)))
            .unwrap(),
    );
    wait_listening(SocketAddr::from(([127, 0, 0, 1], h2)));
    let list = root.join("urls.txt");
    let listing: String = files
        .iter()
        .map(|(n, b)| format!("http://127.0.0.1:{h1}/{n} {}\n", b.len()))
        .collect();
    std::fs::write(&list, format!("# the dataset\n{listing}")).unwrap();

    let hla_port = free_port();
    let hla = format!("http://127.0.0.1:{hla_port}");
    let hla_state = root.join("hla");
    // The device's token, listed in the server's token file (uploads need one).
    let (tokens, token) = (root.join("hla-tokens"), root.join("device-token"));
    let out = Command::new(env!("CARGO_BIN_EXE_roam"))
        .args(["hla", "token", "test device", "--token-out"])
        .arg(&token)
        .output()
        .unwrap();
    let line = String::from_utf8(out.stdout).unwrap();
    // The server's file holds the token's hash, not the token.
    let secret = std::fs::read_to_string(&token).unwrap();
    assert!(
        line.starts_with("sha256:") && !line.contains(&secret),
        "{line}"
    );
    std::fs::write(&tokens, &line).unwrap();
    let _hla = Killed(
        Command::new(env!("CARGO_BIN_EXE_roam"))
            .args([
                "hla",
                "serve",
                "--listen",
                &format!("127.0.0.1:{hla_port}"),
                "--tokens",
            ])
            .arg(&tokens)
            .arg("--state")
            .arg(&hla_state)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_listening(SocketAddr::from(([127, 0, 0, 1], hla_port)));
    let state = root.join("broker.json");
    let state_s = state.display().to_string();
    let token_s = token.display().to_string();

    // Every run logs to the HLA server (with the survey's condition) and keeps the broker's
    // state; the bandwidth is above what loopback makes (else the logs are dropped as faster
    // than the path).
    let get = |list: &Path, out: &Path, extra: &[&str]| {
        let (list, out) = (list.display().to_string(), out.display().to_string());
        let mut args = vec![
            "transfer", "get", "--list", &list, "--out", &out, "--hla", &hla,
        ];
        args.extend(["--state", &state_s, "--bandwidth", "100000"]);
        args.extend(["--hla-token-file", &token_s]);
        args.extend(extra);
        roam(&args)
    };
    // Sweep points by hand; HTTP/2 on the URLs themselves (the HTTP/2 port's).
    let h2_list = root.join("urls-h2.txt");
    std::fs::write(
        &h2_list,
        listing.replace(&format!(":{h1}/"), &format!(":{h2}/")),
    )
    .unwrap();
    for (i, (l, extra)) in [
        (&list, ["--cc", "1", "--p", "1"].as_slice()),
        (&list, &["--cc", "4", "--p", "2"]),
        (&h2_list, &["--cc", "8", "--http2"]),
    ]
    .into_iter()
    .enumerate()
    {
        let out = root.join(format!("fixed{i}"));
        let (ok, text) = get(l, &out, extra);
        assert!(ok, "{text}");
        check_copies(&files, &out);
    }
    let logs = std::fs::read_to_string(hla_state.join("logs.jsonl")).unwrap_or_default();
    assert!(logs.lines().count() >= 3, "the HLA server got: {logs}");
    assert!(logs.contains("\"Http2\""), "an HTTP/2 record among: {logs}");

    // FastHLA's choice: the plan per size cluster, its HTTP version named.
    let out = root.join("auto");
    let (ok, text) = get(&list, &out, &["--auto"]);
    assert!(ok, "{text}");
    assert!(
        text.contains("file(s) of") && (text.contains(" http1 (") || text.contains(" http2 (")),
        "{text}"
    );
    assert!(
        text.contains("(the model)") || text.contains("(the cache)"),
        "{text}"
    );
    check_copies(&files, &out);

    // A bad listing line is an error naming it, and nothing is fetched.
    std::fs::write(
        &list,
        format!("{listing}http://127.0.0.1:{h1}/f00.bin many\n"),
    )
    .unwrap();
    let (ok, text) = get(&list, &root.join("bad"), &[]);
    assert!(
        !ok && text.contains("line 15") && text.contains("many"),
        "{text}"
    );
    assert!(!root.join("bad").exists());

    // A file listed twice is refused before anything is fetched (it would be saved twice
    // into one partial file).
    std::fs::write(&list, format!("{listing}http://127.0.0.1:{h1}/f00.bin\n")).unwrap();
    let (ok, text) = get(&list, &root.join("twice"), &[]);
    assert!(!ok && text.contains("f00.bin: listed twice"), "{text}");
    assert!(!root.join("twice").exists());
}

/// `roam transfer get` from nginx over HTTPS (its certificate trusted with `--ca`): in ranges
/// over HTTP/1.1, and over HTTP/2 as nginx's ALPN offers it, byte for byte; without `--ca`
/// the certificate is refused, named.
#[test]
fn https_from_nginx_with_a_private_authority() {
    if roam_lab::servers::nginx::binary().is_none() {
        eprintln!("skipped: nginx is not installed (apt-get install -y nginx)");
        return;
    }
    let root = std::env::temp_dir().join(format!("roam-transfer-https-{}", std::process::id()));
    let _tmp = TempDir(root.clone());
    let www = root.join("site/www");
    std::fs::create_dir_all(&www).unwrap();
    let files: Vec<(String, Vec<u8>)> = (0..3u32)
        .map(|i| {
            let body = (0..3_000_000 + i as usize)
                .map(|k| ((k as u32 * 13 + i * 7) % 253) as u8)
                .collect();
            (format!("g{i}.bin"), body)
        })
        .collect();
    for (n, b) in &files {
        std::fs::write(www.join(n), b).unwrap();
    }
    let c = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let (cert, key) = (root.join("cert.pem"), root.join("key.pem"));
    std::fs::write(&cert, c.cert.pem()).unwrap();
    std::fs::write(&key, c.signing_key.serialize_pem()).unwrap();
    let port = free_port();
    let servers = format!(
        "server {{ listen 127.0.0.1:{port} ssl http2; root {w}; ssl_certificate {c}; \
         ssl_certificate_key {k}; }}",
        w = www.display(),
        c = cert.display(),
        k = key.display()
    );
    let _nginx = Killed(
        roam_lab::servers::nginx::launch(
            &root.join("site"),
            &servers,
            SocketAddr::from(([127, 0, 0, 1], port)),
        )
        .unwrap(),
    );
    let urls: Vec<String> = files
        .iter()
        .map(|(n, _)| format!("https://127.0.0.1:{port}/{n}"))
        .collect();
    let ca = cert.display().to_string();
    for (i, extra) in [["--p", "4"].as_slice(), &["--p", "2", "--http2"]]
        .into_iter()
        .enumerate()
    {
        let out = root.join(format!("out{i}")).display().to_string();
        let mut args = vec!["transfer", "get", "--out", &out, "--ca", &ca];
        args.extend(urls.iter().map(String::as_str));
        args.extend(extra);
        let (ok, text) = roam(&args);
        assert!(ok, "{extra:?}: {text}");
        check_copies(&files, Path::new(&out));
    }
    let out = root.join("untrusted").display().to_string();
    let (ok, text) = roam(&["transfer", "get", "--out", &out, &urls[0]]);
    assert!(
        !ok && text.contains(&urls[0]) && text.contains("certificate"),
        "{text}"
    );
    assert!(!Path::new(&out).join("g0.bin").exists());
}

/// `roam transfer put` to nginx's WebDAV `PUT`: a directory (a subdirectory, a name that
/// needs encoding) and a file, over HTTP/1.1 and HTTP/2, arrive byte for byte; a location
/// that does not take `PUT` is an error naming the URL. Then `roam transfer get DIR/` brings
/// the files of nginx's directory listing back (HTML and JSON indexes).
#[test]
fn uploads_to_nginx_arrive_whole() {
    if roam_lab::servers::nginx::binary().is_none() {
        eprintln!("skipped: nginx is not installed (apt-get install -y nginx)");
        return;
    }
    let root = std::env::temp_dir().join(format!("roam-transfer-put-{}", std::process::id()));
    let _tmp = TempDir(root.clone());
    let (src, www) = (root.join("src"), root.join("site/www"));
    std::fs::create_dir_all(src.join("album/sub")).unwrap();
    std::fs::create_dir_all(&www).unwrap();
    let files: Vec<(&str, Vec<u8>)> = vec![
        (
            "album/a 1.bin",
            (0..2_000_000u32).map(|k| (k % 249) as u8).collect(),
        ),
        (
            "album/sub/b.bin",
            (0..700_000u32).map(|k| (k % 241) as u8).collect(),
        ),
        ("c.bin", (0..50_000u32).map(|k| (k % 239) as u8).collect()),
    ];
    for (n, b) in &files {
        std::fs::write(src.join(n), b).unwrap();
    }
    let (h1, h2) = (free_port(), free_port());
    let dav = "dav_methods PUT; create_full_put_path on; client_max_body_size 0; autoindex on;";
    let servers = format!(
        "server {{ listen 127.0.0.1:{h1}; root {w}; location /up/ {{ {dav} }} }}\n  \
         server {{ listen 127.0.0.1:{h2} http2; root {w}; \
         location /up/ {{ {dav} autoindex_format json; }} }}",
        w = www.display()
    );
    let _nginx = Killed(
        roam_lab::servers::nginx::launch(
            &root.join("site"),
            &servers,
            SocketAddr::from(([127, 0, 0, 1], h1)),
        )
        .unwrap(),
    );
    wait_listening(SocketAddr::from(([127, 0, 0, 1], h2)));
    let (album, c) = (
        src.join("album").display().to_string(),
        src.join("c.bin").display().to_string(),
    );
    for (port, dir, extra) in [(h1, "one", &[][..]), (h2, "two", &["--http2"][..])] {
        let to = format!("http://127.0.0.1:{port}/up/{dir}/");
        let mut args = vec!["transfer", "put", &album, &c, "--to", &to, "--cc", "2"];
        args.extend(extra);
        let (ok, text) = roam(&args);
        assert!(ok, "{extra:?}: {text}");
        for (n, b) in &files {
            let at = www
                .join("up")
                .join(dir)
                .join(n.trim_start_matches("album/"));
            assert!(
                std::fs::read(&at).ok().as_ref() == Some(b),
                "{}",
                at.display()
            );
        }
    }
    let to = format!("http://127.0.0.1:{h1}/elsewhere/");
    let (ok, text) = roam(&["transfer", "put", &c, "--to", &to]);
    assert!(
        !ok && text.contains(&format!("{to}c.bin: HTTP 405")),
        "{text}"
    );

    // The directories back by their listings: the files, not the subdirectory.
    for (port, dir, extra) in [(h1, "one", &[][..]), (h2, "two", &["--http2"][..])] {
        let url = format!("http://127.0.0.1:{port}/up/{dir}/");
        let out = root.join(format!("back-{dir}")).display().to_string();
        let mut args = vec!["transfer", "get", &url, "--out", &out, "--p", "2"];
        args.extend(extra);
        let (ok, text) = roam(&args);
        // HTML links the parent and the subdirectory, JSON lists the subdirectory.
        assert!(
            ok && text.contains("2 file(s) listed; "),
            "{extra:?}: {text}"
        );
        for (n, b) in files.iter().filter(|(n, _)| !n.contains("sub/")) {
            let at = Path::new(&out).join(n.trim_start_matches("album/"));
            assert!(
                std::fs::read(&at).ok().as_ref() == Some(b),
                "{}",
                at.display()
            );
        }
        assert!(!Path::new(&out).join("b.bin").exists());
    }
}
