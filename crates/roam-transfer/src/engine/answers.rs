//! Reading hyper's answers and errors: the causes of a client error, whether a failure means the
//! server speaks another protocol, and each answer's `Content-Range` and `Content-Length`
//! checked against what was asked (a server is not trusted: see the engine's module docs).

use hyper::body::Incoming;
use hyper::Response;

use super::Protocol;
use crate::error::{with_causes, TransferError};

/// Whether `e` says the server answered in something other than the HTTP asked for: an
/// HTTP/2-only port asked in HTTP/1.1 answers with HTTP/2 frames (hyper cannot parse a
/// response), an HTTP/1.1 server asked in HTTP/2 with a `400` line, which h2 reads as a frame
/// of impossible size (an error h2 finds in what arrived, not one the peer sent or the socket
/// gave). The same server gives the same answer however often it is asked, so it is no failure
/// of the network to be asked again ([`STREAM_RETRIES`]).
fn other_http(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if c.downcast_ref::<hyper::Error>()
            .is_some_and(|h| h.is_parse())
        {
            return true;
        }
        if let Some(h) = c.downcast_ref::<h2::Error>() {
            let garbled = [
                h2::Reason::PROTOCOL_ERROR,
                h2::Reason::FRAME_SIZE_ERROR,
                h2::Reason::COMPRESSION_ERROR,
            ];
            if h.is_library() && h.reason().is_some_and(|r| garbled.contains(&r)) {
                return true;
            }
        }
        cause = c.source();
    }
    false
}

/// Why a request that failed with `e` (asked in `asked`) is not to be sent again, if it is
/// not: the server cannot be reached at all (unreachable, the port closed), or it answers in
/// another HTTP ([`other_http`]). Every other failure (a connection cut, a stream reset) is
/// the network's, asked again as [`STREAM_RETRIES`] says. Downloads and uploads both sort
/// their failures here.
pub(super) fn final_failure(
    e: &hyper_util::client::legacy::Error,
    asked: Protocol,
) -> Option<String> {
    if e.is_connect() {
        Some(with_causes(e))
    } else if other_http(e) {
        Some(format!("{}: {}", other_answer(asked), with_causes(e)))
    } else {
        None
    }
}

/// What an answer in another HTTP than `asked` ([`other_http`]) says of the server.
fn other_answer(asked: Protocol) -> &'static str {
    match asked {
        Protocol::Http1 => "the answer is not HTTP/1.1 (a port that speaks only HTTP/2?)",
        Protocol::Http2 => {
            "the answer is not HTTP/2 (a server that speaks only HTTP/1.1, or HTTP/2 only over TLS?)"
        }
    }
}

/// A range's end meaning "to the end of the file" (`bytes=A-`).
pub(super) const OPEN_END: u64 = u64::MAX;

/// `(a, b, N)` of a `Content-Range: bytes a-b/N` (b inclusive).
pub(super) fn content_range(r: &Response<Incoming>) -> Option<(u64, u64, u64)> {
    let v = r
        .headers()
        .get(hyper::header::CONTENT_RANGE)?
        .to_str()
        .ok()?;
    let (range, total) = v.trim().strip_prefix("bytes ")?.split_once('/')?;
    let (a, b) = range.split_once('-')?;
    let (a, b, n) = (
        a.trim().parse().ok()?,
        b.trim().parse().ok()?,
        total.trim().parse().ok()?,
    );
    (a <= b).then_some((a, b, n))
}

/// Refuse an answer whose `Content-Length`, if it has one, is not `len` (the range's).
pub(super) fn length_is(r: &Response<Incoming>, url: &str, len: u64) -> Result<(), TransferError> {
    match content_length(r) {
        Some(n) if n != len => Err(TransferError::Network {
            url: url.into(),
            why: format!("a Content-Length of {n} for a range of {len} bytes"),
        }),
        _ => Ok(()),
    }
}

/// The size a one-byte probe's `206` gives: its `Content-Range` must be `bytes 0-0/N` and its
/// `Content-Length`, if any, 1.
pub(super) fn probed(r: &Response<Incoming>, url: &str) -> Result<u64, TransferError> {
    match content_range(r) {
        Some((0, 0, n)) => {
            length_is(r, url, 1)?;
            Ok(n)
        }
        other => Err(TransferError::Network {
            url: url.into(),
            why: format!(
                "asked for bytes 0-0, the answer's Content-Range says {}",
                other.map_or("nothing usable".to_string(), |(a, z, n)| format!(
                    "bytes {a}-{z}/{n}"
                ))
            ),
        }),
    }
}

/// The error for a body of more than the `len` bytes asked for (`n` seen when cut off).
pub(super) fn longer(url: &str, n: u64, len: u64) -> TransferError {
    TransferError::Network {
        url: url.into(),
        why: format!("a body longer than the {len} byte(s) asked for ({n} seen): cut off"),
    }
}

/// The total size in a `Content-Range: bytes a-b/N` (or `bytes */N`).
pub(super) fn total_of(r: &Response<Incoming>) -> Option<u64> {
    let v = r
        .headers()
        .get(hyper::header::CONTENT_RANGE)?
        .to_str()
        .ok()?;
    v.rsplit('/').next()?.trim().parse().ok()
}

pub(super) fn content_length(r: &Response<Incoming>) -> Option<u64> {
    r.headers()
        .get(hyper::header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}
