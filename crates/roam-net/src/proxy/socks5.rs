//! The proxy's SOCKS5 server side (RFC 1928): no authentication, `CONNECT` only. The
//! destination is taken as the program wrote it; domain names are passed on to the relay,
//! which resolves them at the server side (where they mean what the program meant).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr};

use super::Error;

/// SOCKS5 reply codes ([`reply`]).
pub(super) mod code {
    /// The connection is open.
    pub const SUCCEEDED: u8 = 0;
    /// General failure (the relay could not be reached).
    pub const GENERAL_FAILURE: u8 = 1;
    /// The target refused (or the relay refused to connect there).
    pub const CONNECTION_REFUSED: u8 = 5;
    /// Not `CONNECT`.
    pub const COMMAND_NOT_SUPPORTED: u8 = 7;
    /// An address type SOCKS5 does not define.
    pub const ADDRESS_TYPE_NOT_SUPPORTED: u8 = 8;
}

/// Negotiate with a program that connected: the destination it asks for, `(HOST, PORT)` with
/// an IPv6 host in brackets. What the program sent wrong is answered (where SOCKS5 has an
/// answer) and returned as the error.
pub fn accept(s: &mut (impl Read + Write)) -> Result<(String, u16), Error> {
    let mut head = [0u8; 2];
    s.read_exact(&mut head)?;
    if head[0] != 5 {
        return Err(Error::NotSocks5 { version: head[0] });
    }
    let mut methods = vec![0u8; head[1] as usize];
    s.read_exact(&mut methods)?;
    if !methods.contains(&0) {
        s.write_all(&[5, 0xff])?;
        return Err(Error::NoMethodWithoutAuth);
    }
    s.write_all(&[5, 0])?;
    let mut req = [0u8; 4];
    s.read_exact(&mut req)?;
    if req[0] != 5 || req[1] != 1 {
        reply(s, code::COMMAND_NOT_SUPPORTED)?;
        return Err(Error::UnsupportedCommand { command: req[1] });
    }
    let host = match req[3] {
        1 => {
            let mut a = [0u8; 4];
            s.read_exact(&mut a)?;
            Ipv4Addr::from(a).to_string()
        }
        3 => {
            let mut n = [0u8; 1];
            s.read_exact(&mut n)?;
            let mut name = vec![0u8; n[0] as usize];
            s.read_exact(&mut name)?;
            String::from_utf8(name).map_err(|_| Error::NameNotText)?
        }
        4 => {
            let mut a = [0u8; 16];
            s.read_exact(&mut a)?;
            format!("[{}]", Ipv6Addr::from(a))
        }
        kind => {
            reply(s, code::ADDRESS_TYPE_NOT_SUPPORTED)?;
            return Err(Error::UnsupportedAddressType { kind });
        }
    };
    let mut port = [0u8; 2];
    s.read_exact(&mut port)?;
    Ok((host, u16::from_be_bytes(port)))
}

/// Answer the program's `CONNECT` with `code` (the bound address left zero).
pub(super) fn reply(s: &mut impl Write, code: u8) -> Result<(), Error> {
    s.write_all(&[5, code, 0, 1, 0, 0, 0, 0, 0, 0])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A program's bytes in, the proxy's answers out.
    struct Conn {
        input: std::io::Cursor<Vec<u8>>,
        output: Vec<u8>,
    }

    impl Read for Conn {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.input.read(buf)
        }
    }

    impl Write for Conn {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.output.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn negotiate(bytes: &[u8]) -> (Result<(String, u16), Error>, Vec<u8>) {
        let mut c = Conn {
            input: std::io::Cursor::new(bytes.to_vec()),
            output: Vec::new(),
        };
        (accept(&mut c), c.output)
    }

    #[test]
    fn connect_to_an_address_or_a_name() {
        let (r, out) = negotiate(&[5, 1, 0, 5, 1, 0, 1, 10, 77, 0, 1, 0x14, 0x51]);
        assert_eq!(r.unwrap(), ("10.77.0.1".to_string(), 5201));
        assert_eq!(out, [5, 0]);
        let mut name = vec![5, 2, 2, 0, 5, 1, 0, 3, 11];
        name.extend_from_slice(b"example.org");
        name.extend_from_slice(&[0, 80]);
        assert_eq!(negotiate(&name).0.unwrap(), ("example.org".to_string(), 80));
        let mut v6 = vec![5, 1, 0, 5, 1, 0, 4];
        v6.extend_from_slice(&"2001:db8::5".parse::<Ipv6Addr>().unwrap().octets());
        v6.extend_from_slice(&[1, 187]);
        assert_eq!(
            negotiate(&v6).0.unwrap(),
            ("[2001:db8::5]".to_string(), 443)
        );
    }

    #[test]
    fn what_is_not_supported_is_answered_and_named() {
        let (r, out) = negotiate(&[4, 1, 0]);
        assert!(matches!(r, Err(Error::NotSocks5 { version: 4 })));
        assert!(out.is_empty());
        let (r, out) = negotiate(&[5, 1, 2]);
        assert!(matches!(r, Err(Error::NoMethodWithoutAuth)));
        assert_eq!(out, [5, 0xff]);
        let (r, out) = negotiate(&[5, 1, 0, 5, 2, 0, 1]);
        assert!(matches!(r, Err(Error::UnsupportedCommand { command: 2 })));
        assert_eq!(out[2..4], [5, code::COMMAND_NOT_SUPPORTED]);
        let (r, _) = negotiate(&[5, 1, 0, 5, 1, 0, 9]);
        assert!(matches!(r, Err(Error::UnsupportedAddressType { kind: 9 })));
        let (r, _) = negotiate(&[5, 1, 0, 5, 1, 0, 1, 10]);
        assert!(matches!(r, Err(Error::Io(_))), "a short request");
    }
}
