//! Fuzz the proxy's SOCKS5 handshake (`roam_net::proxy::socks5_accept`, the server side of
//! RFC 1928 a program talks to): arbitrary bytes from the program give a destination or a
//! clean error, never a panic; an accepted handshake was answered with exactly the method
//! choice (`5 0`; the `CONNECT` answer comes once the relay answers), a refused one with at
//! most the method choice and one SOCKS5 answer; and the destination accepted, written back
//! as the program would send it, is the bytes the program sent.
#![no_main]
use libfuzzer_sys::fuzz_target;
use roam_net::proxy::socks5_accept;
use std::io::{Cursor, Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr};

/// The program's bytes in, the proxy's answers out.
struct Conn<'a> {
    input: Cursor<&'a [u8]>,
    output: Vec<u8>,
}

impl Read for Conn<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.input.read(buf)
    }
}

impl Write for Conn<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.output.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    let mut c = Conn {
        input: Cursor::new(data),
        output: Vec::new(),
    };
    match socks5_accept(&mut c) {
        Ok((host, port)) => {
            assert_eq!(c.output, [5, 0]);
            let n = data[1] as usize;
            let (reserved, kind) = (data[2 + n + 2], data[2 + n + 3]);
            let mut sent = vec![5, n as u8];
            sent.extend_from_slice(&data[2..2 + n]);
            sent.extend_from_slice(&[5, 1, reserved, kind]);
            match kind {
                1 => sent.extend(host.parse::<Ipv4Addr>().expect("an IPv4 host").octets()),
                3 => {
                    sent.push(host.len() as u8);
                    sent.extend(host.as_bytes());
                }
                4 => {
                    let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
                    let v6 = bare.and_then(|h| h.parse::<Ipv6Addr>().ok());
                    sent.extend(v6.expect("an IPv6 host in brackets").octets());
                }
                _ => panic!("address type {kind} accepted"),
            }
            sent.extend(port.to_be_bytes());
            assert!(data.starts_with(&sent), "{host}:{port} is not what was sent");
        }
        Err(_) => assert!(c.output.len() <= 2 + 10, "{:?}", c.output),
    }
});
