//! Just enough IMAP4rev1 (RFC 3501) framing for the mail application: where a server response
//! ends, so that a proxy or relay can handle whole responses without understanding them.
//!
//! A server response to a command is any number of untagged lines (`* ...`, `+ ...`) followed
//! by one tagged completion line (`a7 OK ...`). Any line may carry literals, `{n}\r\n` followed
//! by exactly `n` bytes (a message body), and continues after them. The commands the lab sends
//! never carry literals.

use std::io::BufRead;

use anyhow::{anyhow, bail, Context, Result};

/// Largest response accepted (the mailbox's largest message is 256 KB).
pub const MAX_RESPONSE: usize = 16 << 20;

/// One complete server response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// Tag of the command it completes (`*` for the server greeting).
    pub tag: String,
    /// Every byte of it, the completion line included.
    pub bytes: Vec<u8>,
}

impl Response {
    /// Whether the command succeeded (`OK`).
    pub fn ok(&self) -> bool {
        completion(&self.bytes).is_some_and(|(_, status)| status.eq_ignore_ascii_case("OK"))
    }

    /// The completion line, for error messages.
    pub fn status_line(&self) -> String {
        let end = self.bytes.len().saturating_sub(2);
        let start = self.bytes[..end]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1);
        String::from_utf8_lossy(&self.bytes[start..end]).into_owned()
    }
}

/// Tag and status of the last line of a complete response.
fn completion(bytes: &[u8]) -> Option<(&str, &str)> {
    let body = bytes.strip_suffix(b"\r\n")?;
    let start = body.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
    let line = std::str::from_utf8(&body[start..]).ok()?;
    let mut words = line.split(' ');
    Some((words.next()?, words.next()?))
}

/// The tag of a complete response (the first word of its last line).
pub fn response_tag(bytes: &[u8]) -> Result<String> {
    completion(bytes)
        .map(|(tag, _)| tag.to_string())
        .ok_or_else(|| anyhow!("a response does not end with a CRLF-terminated tagged line"))
}

/// The tag of a command line (`a7 UID FETCH ...`).
pub fn command_tag(cmd: &[u8]) -> Result<String> {
    let end = cmd
        .iter()
        .position(|&b| b == b' ')
        .ok_or_else(|| anyhow!("a command has no tag"))?;
    let tag = std::str::from_utf8(&cmd[..end]).context("a command's tag is not UTF-8")?;
    if tag.is_empty() || tag == "*" || tag == "+" {
        bail!("a command has an invalid tag `{tag}`");
    }
    if !cmd.ends_with(b"\r\n") {
        bail!("command `{tag}` does not end with CRLF");
    }
    Ok(tag.to_string())
}

/// Append one logical line (with its literals) to `out`; false at a clean end of stream.
fn read_line<R: BufRead>(r: &mut R, out: &mut Vec<u8>) -> Result<bool> {
    let mut first = true;
    loop {
        let start = out.len();
        let n = r
            .read_until(b'\n', out)
            .context("reading from the IMAP server")?;
        if n == 0 {
            if first {
                return Ok(false);
            }
            bail!("the IMAP connection ended inside a line");
        }
        first = false;
        if !out.ends_with(b"\r\n") {
            bail!("the IMAP connection ended inside a line");
        }
        if out.len() > MAX_RESPONSE {
            bail!("an IMAP response exceeds {MAX_RESPONSE} bytes");
        }
        // A literal announcement ends the line: `{123}\r\n` (or `{123+}` in LITERAL+).
        let line = &out[start..(out.len() - 2).max(start)];
        let Some(open) = line
            .strip_suffix(b"}")
            .and_then(|l| l.iter().rposition(|&b| b == b'{'))
        else {
            return Ok(true);
        };
        let digits = &line[open + 1..line.len() - 1];
        let digits = digits.strip_suffix(b"+").unwrap_or(digits);
        let n: usize = std::str::from_utf8(digits)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| {
                anyhow!(
                    "bad literal length in `{}`",
                    String::from_utf8_lossy(&line[open..])
                )
            })?;
        if out.len() + n > MAX_RESPONSE {
            bail!("an IMAP literal of {n} bytes exceeds the {MAX_RESPONSE}-byte response limit");
        }
        let at = out.len();
        out.resize(at + n, 0);
        r.read_exact(&mut out[at..])
            .context("the IMAP connection ended inside a literal")?;
    }
}

/// The server's greeting (one untagged line).
pub fn read_greeting<R: BufRead>(r: &mut R) -> Result<Response> {
    let mut bytes = Vec::new();
    if !read_line(r, &mut bytes)? {
        bail!("the IMAP server closed the connection without a greeting");
    }
    if !bytes.starts_with(b"* OK") && !bytes.starts_with(b"* PREAUTH") {
        bail!(
            "unexpected IMAP greeting `{}`",
            String::from_utf8_lossy(&bytes).trim_end()
        );
    }
    Ok(Response {
        tag: "*".into(),
        bytes,
    })
}

/// The next complete response; `None` at a clean end of stream between responses.
pub fn read_response<R: BufRead>(r: &mut R) -> Result<Option<Response>> {
    let mut bytes = Vec::new();
    loop {
        let start = bytes.len();
        if !read_line(r, &mut bytes)? {
            if start == 0 {
                return Ok(None);
            }
            bail!("the IMAP connection ended inside a response");
        }
        let line = &bytes[start..];
        if line.starts_with(b"* ") || line.starts_with(b"+ ") || line == b"+\r\n" {
            continue;
        }
        let tag = response_tag(&bytes)?;
        return Ok(Some(Response { tag, bytes }));
    }
}

/// The logical lines (each with its literals) of complete response bytes.
pub fn logical_lines(mut bytes: &[u8]) -> Result<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    loop {
        let mut line = Vec::new();
        if !read_line(&mut bytes, &mut line)? {
            return Ok(out);
        }
        out.push(line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_with_literals_ends_at_its_tagged_line() {
        // The body literal holds a line that looks like a completion; it must not end the
        // response.
        let body = "x1 OK fake\r\nmore\r\n";
        let wire = format!(
            "* 1 FETCH (UID 7 BODY[] {{{}}}\r\n{body})\r\n* 2 FETCH (UID 8 BODY[] {{0}}\r\n)\r\nx1 OK Fetch completed.\r\nx2 NO nope\r\n",
            body.len()
        );
        let mut r = std::io::Cursor::new(wire.into_bytes());
        let a = read_response(&mut r).unwrap().unwrap();
        assert_eq!(a.tag, "x1");
        assert!(a.ok());
        assert!(String::from_utf8_lossy(&a.bytes).contains(body));
        let b = read_response(&mut r).unwrap().unwrap();
        assert_eq!(b.tag, "x2");
        assert!(!b.ok());
        assert_eq!(b.status_line(), "x2 NO nope");
        assert!(read_response(&mut r).unwrap().is_none());
    }

    #[test]
    fn truncated_and_malformed_input_is_an_error() {
        for bad in [
            "* 1 FETCH (BODY[] {10}\r\nabc",
            "* 1 FETCH (BODY[] {1x}\r\nabc\r\n",
            "a1 OK done",
            "* OK\r\n",
            // A literal ending in CR, its line's LF after it.
            "* 1 FETCH (BODY[] {1}\r\n\r\n",
        ] {
            let mut r = std::io::Cursor::new(bad.as_bytes().to_vec());
            assert!(read_response(&mut r).is_err(), "{bad:?}");
        }
        let mut r = std::io::Cursor::new(b"* 1 FETCH {99999999999}\r\n".to_vec());
        let e = read_response(&mut r).unwrap_err();
        assert!(format!("{e:#}").contains("limit"), "{e:#}");
    }

    #[test]
    fn greetings_and_tags() {
        let mut r = std::io::Cursor::new(b"* OK [CAPABILITY IMAP4rev1] ready\r\n".to_vec());
        assert_eq!(read_greeting(&mut r).unwrap().tag, "*");
        let mut r = std::io::Cursor::new(b"HTTP/1.1 200 OK\r\n".to_vec());
        assert!(read_greeting(&mut r).is_err());
        assert_eq!(command_tag(b"a9 NOOP\r\n").unwrap(), "a9");
        assert!(command_tag(b"* NOOP\r\n").is_err());
        assert!(command_tag(b"a9 NOOP").is_err());
        assert_eq!(response_tag(b"* 1 EXISTS\r\na3 OK x\r\n").unwrap(), "a3");
    }
}
