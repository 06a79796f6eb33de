//! One fetch of the dedup lab's reader: curl through the phone's SOCKS5 proxy, and what the
//! server sent, byte for byte, so that the redundancy present is measured on the stream the
//! relay carried.
//!
//! Over HTTP that is the response, headers and body (`curl -i`). Over IMAP curl writes only the
//! message, while the server also sent its greeting, its capabilities, the mailbox's state and
//! the FETCH wrapped around the message: about a kilobyte a connection, nearly the same for
//! every connection, which dd-src's regular cache finds. So for IMAP the server's lines come
//! from curl's `--trace` (each line received, in hex, as a `Recv header` block) and the
//! message, which the trace does not always show whole, from what curl wrote: it goes after
//! the line announcing it (`* 4 FETCH (... BODY[] {120029}`).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

/// The longest one page may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(120);

/// What one fetch got.
pub struct Fetched {
    /// Everything the server sent on the connection.
    pub wire: Vec<u8>,
    /// Where in [`Fetched::wire`] the body is (HTTP), or the body itself (IMAP).
    body: Body,
}

enum Body {
    From(usize),
    Own(Vec<u8>),
}

impl Fetched {
    /// The page or message itself.
    pub fn body(&self) -> &[u8] {
        match &self.body {
            Body::From(at) => &self.wire[*at..],
            Body::Own(b) => b,
        }
    }
}

/// Fetch `url` (`http://` or `imap://`) through the SOCKS5 proxy on `socks_port` (else
/// directly): what it got and how long it took.
pub fn fetch(url: &str, socks_port: Option<u16>) -> (Result<Fetched>, Duration) {
    let started = Instant::now();
    let http = url.starts_with("http://");
    let out = Command::new("curl")
        .args(["-sS", "--max-time", &FETCH_TIMEOUT.as_secs().to_string()])
        .args(if http {
            &["-i"][..]
        } else {
            &["--trace", "/dev/stderr"]
        })
        .args(socks_port.map_or_else(Vec::new, |p| {
            vec!["--socks5-hostname".to_string(), format!("127.0.0.1:{p}")]
        }))
        .arg(url)
        .stdin(Stdio::null())
        .output();
    let took = started.elapsed();
    let r = match out {
        Err(e) => Err(anyhow!("running curl: {e}")),
        Ok(o) if !o.status.success() => Err(anyhow!(
            "curl {url}: {} ({})",
            last_line(&o.stderr),
            o.status
        )),
        Ok(o) if http => http_response(url, o.stdout),
        Ok(o) => imap_wire(&String::from_utf8_lossy(&o.stderr), &o.stdout)
            .with_context(|| format!("reading curl's trace of {url}"))
            .map(|wire| Fetched {
                wire,
                body: Body::Own(o.stdout),
            }),
    };
    (r, took)
}

/// An HTTP response as `curl -i` wrote it: a 200 with its headers' end found, else an error.
fn http_response(url: &str, out: Vec<u8>) -> Result<Fetched> {
    if !out.starts_with(b"HTTP/1.1 200") {
        bail!(
            "curl {url}: {}",
            String::from_utf8_lossy(&out[..out.len().min(40)])
        );
    }
    let at = headers_end(&out)
        .ok_or_else(|| anyhow!("curl {url}: the response has no end of headers"))?;
    Ok(Fetched {
        wire: out,
        body: Body::From(at),
    })
}

/// The last line of curl's standard error (its message, after any trace).
fn last_line(stderr: &[u8]) -> String {
    let s = String::from_utf8_lossy(stderr);
    s.trim().lines().last().unwrap_or("").to_string()
}

/// Where an HTTP response's body begins.
fn headers_end(response: &[u8]) -> Option<usize> {
    response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4)
}

/// What an IMAP server sent: the lines of curl's `--trace` output (its `Recv header` blocks),
/// with `message` after the line that announces a literal of its length.
pub fn imap_wire(trace: &str, message: &[u8]) -> Result<Vec<u8>> {
    let announce = format!("{{{}}}\r\n", message.len());
    let mut out = Vec::new();
    let mut placed = false;
    for line in received_lines(trace)? {
        out.extend_from_slice(&line);
        if !placed && line.ends_with(announce.as_bytes()) {
            out.extend_from_slice(message);
            placed = true;
        }
    }
    if !placed {
        bail!("no line announces the message's {} bytes", message.len());
    }
    Ok(out)
}

/// The lines received, from curl's `--trace` output: each block `<= Recv header, N bytes`,
/// then lines of an offset, up to 16 hex bytes and their text. (`Recv data` blocks are left
/// out: the message's bytes, which the trace may not show whole.)
fn received_lines(trace: &str) -> Result<Vec<Vec<u8>>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    // Bytes still to read of the current block, and whether it is kept.
    let (mut want, mut keep) = (0usize, false);
    for (i, line) in trace.lines().enumerate() {
        let header = line.strip_prefix("<= Recv header, ");
        if let Some(rest) = header.or_else(|| line.strip_prefix("<= Recv data, ")) {
            if want > 0 {
                bail!("line {}: a block began before the last one's bytes", i + 1);
            }
            want = rest
                .split(' ')
                .next()
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| anyhow!("line {}: no byte count in `{line}`", i + 1))?;
            keep = header.is_some();
            if keep {
                out.push(Vec::with_capacity(want));
            }
            continue;
        }
        if want == 0 {
            continue;
        }
        let hex = line
            .split_once(": ")
            .map(|(_, h)| h)
            .ok_or_else(|| anyhow!("line {}: `{line}` is not a line of bytes", i + 1))?;
        let n = want.min(16);
        for k in 0..n {
            let byte = hex
                .get(k * 3..k * 3 + 2)
                .and_then(|p| u8::from_str_radix(p, 16).ok())
                .ok_or_else(|| anyhow!("line {}: byte {k} of `{line}` is not hex", i + 1))?;
            if keep {
                if let Some(block) = out.last_mut() {
                    block.push(byte);
                }
            }
        }
        want -= n;
    }
    if want > 0 {
        bail!("the trace ends {want} bytes short of its last block");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_s_lines_come_from_the_trace_and_the_message_after_its_announcement() {
        let trace = "== Info: Connected\n\
            <= Recv header, 18 bytes (0x12)\n\
            0000: 2a 20 4f 4b 20 5b 43 41 50 41 42 49 4c 49 54 59 * OK [CAPABILITY\n\
            0010: 0d 0a                                           ..\n\
            => Send header, 3 bytes (0x3)\n\
            0000: 41 30 31                                        A01\n\
            <= Recv header, 5 bytes (0x5)\n\
            0000: 7b 32 7d 0d 0a                                  {2}..\n\
            <= Recv data, 1 bytes (0x1)\n\
            0000: 68                                              h\n\
            <= Recv header, 3 bytes (0x3)\n\
            0000: 29 0d 0a                                        )..\n";
        assert_eq!(
            imap_wire(trace, b"hi").unwrap(),
            b"* OK [CAPABILITY\r\n{2}\r\nhi)\r\n"
        );
        let err = imap_wire(trace, b"hello").unwrap_err().to_string();
        assert!(err.contains("5 bytes"), "{err}");
        let short = "<= Recv header, 4 bytes (0x4)\n0000: 68 69 \n";
        assert!(imap_wire(short, b"").is_err());
        let cut = "<= Recv header, 20 bytes (0x14)\n\
                   0000: 68 69 68 69 68 69 68 69 68 69 68 69 68 69 68 69 x\n";
        let err = received_lines(cut).unwrap_err().to_string();
        assert!(err.contains("4 bytes short"), "{err}");
        assert!(received_lines("<= Recv data, many bytes\n").is_err());
        assert_eq!(
            headers_end(b"HTTP/1.1 200 OK\r\nA: b\r\n\r\nbody"),
            Some(25)
        );
        let ok = http_response("u", b"HTTP/1.1 200 OK\r\nA: b\r\n\r\nbody".to_vec()).unwrap();
        assert_eq!((ok.body(), ok.wire.len()), (&b"body"[..], 29));
        assert!(http_response("u", b"HTTP/1.1 404 Not Found\r\n\r\n".to_vec()).is_err());
        assert!(http_response("u", b"HTTP/1.1 200 OK\r\nA: b".to_vec()).is_err());
    }
}
