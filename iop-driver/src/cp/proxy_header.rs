//! The PROXY protocol (versions 1 and 2, as HAProxy defines it) in front of the Edge
//! listener ([`ServerConfig::proxy_protocol`](crate::ServerConfig::proxy_protocol)).
//!
//! Behind an L4 load balancer every Edge seems to come from the balancer's address:
//! the per-address cap on pending hellos would treat a whole fleet as one peer, and
//! the logs would name the balancer. A balancer that speaks the PROXY protocol writes
//! the connection's real source first; the Control Plane reads it from the peers it
//! trusts (and only from them: anyone else could name any address) and from then on
//! knows the connection by it. A trusted peer must send the header — a connection
//! from it without one, or with a malformed one, or with none within the hello
//! timeout, is closed before anything else is read. Connections from other peers are
//! served as they are. A `LOCAL` (v2) or `UNKNOWN` (v1) header — the balancer's own
//! health check — keeps the balancer's address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use futures_lite::{AsyncRead, AsyncReadExt};

/// The v2 signature.
const V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
/// A v1 header is at most this long, `\r\n` included.
const V1_MAX: usize = 107;
/// The most address and TLV bytes a v2 header may carry here (balancers add a few
/// TLVs: an endpoint id, a TLS summary).
const V2_MAX_BODY: usize = 2_048;

/// Which peers may tell a connection's real source with a PROXY header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyProtocol {
    trusted: Vec<IpRange>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct IpRange {
    net: IpAddr,
    prefix: u8,
}

/// A trusted-proxy range that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{range:?} is not an address or a range of them (10.0.0.0/8, fd00::/8, 192.0.2.7)")]
pub struct ProxyRangeError {
    /// The range as given.
    pub range: String,
}

impl ProxyProtocol {
    /// Trusts the peers in `ranges`: addresses (`192.0.2.7`, `::1`) or CIDR ranges
    /// (`10.0.0.0/8`, `fd00::/8`).
    pub fn trusting<I, S>(ranges: I) -> Result<Self, ProxyRangeError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let trusted = ranges
            .into_iter()
            .map(|r| parse_range(r.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { trusted })
    }

    /// Whether `peer` may send a PROXY header (an IPv4 peer seen as IPv6-mapped is
    /// taken as IPv4).
    pub fn trusts(&self, peer: IpAddr) -> bool {
        let peer = peer.to_canonical();
        self.trusted.iter().any(|r| r.contains(peer))
    }
}

fn parse_range(text: &str) -> Result<IpRange, ProxyRangeError> {
    let error = || ProxyRangeError {
        range: text.to_owned(),
    };
    let (addr, prefix) = match text.split_once('/') {
        Some((addr, prefix)) => (addr, Some(prefix)),
        None => (text, None),
    };
    let net: IpAddr = addr.trim().parse().map_err(|_| error())?;
    let max = if net.is_ipv4() { 32 } else { 128 };
    let prefix = match prefix {
        Some(p) => p
            .trim()
            .parse::<u8>()
            .ok()
            .filter(|p| *p <= max)
            .ok_or_else(error)?,
        None => max,
    };
    Ok(IpRange { net, prefix })
}

impl IpRange {
    fn contains(&self, ip: IpAddr) -> bool {
        match (self.net, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// Why a trusted peer's connection was closed before its first frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProxyHeaderError {
    /// It did not begin with a PROXY header.
    #[error("no PROXY header from a trusted proxy")]
    Missing,
    /// A v1 header that does not parse.
    #[error("malformed PROXY v1 header")]
    MalformedV1,
    /// A v1 header without its `\r\n` within 107 bytes.
    #[error("PROXY v1 header longer than 107 bytes")]
    TooLongV1,
    /// A v2 header that does not parse (version, command, family or lengths).
    #[error("malformed PROXY v2 header")]
    MalformedV2,
    /// A v2 header carrying more than this Control Plane reads.
    #[error("PROXY v2 header of {0} bytes, past the 2 048 read")]
    TooLongV2(usize),
    /// No whole header within the hello timeout.
    #[error("no PROXY header within the hello timeout")]
    TimedOut,
    /// The connection failed while the header was read.
    #[error("connection failed while reading its PROXY header: {0}")]
    Io(String),
}

/// Reads the PROXY header at the start of `stream`, nothing past it: the source it
/// names (`None`: the proxy's own connection, `LOCAL` or `UNKNOWN`).
pub(crate) async fn read_header<S: AsyncRead + Unpin>(
    stream: &mut S,
) -> Result<Option<SocketAddr>, ProxyHeaderError> {
    let io = |e: std::io::Error| ProxyHeaderError::Io(e.to_string());
    let mut start = [0u8; 6];
    stream.read_exact(&mut start).await.map_err(io)?;
    if &start == b"PROXY " {
        let mut line = start.to_vec();
        while !line.ends_with(b"\r\n") {
            if line.len() >= V1_MAX {
                return Err(ProxyHeaderError::TooLongV1);
            }
            let mut byte = [0u8; 1];
            stream.read_exact(&mut byte).await.map_err(io)?;
            line.push(byte[0]);
        }
        return parse_v1(&line);
    }
    if start != V2_SIGNATURE[..6] {
        return Err(ProxyHeaderError::Missing);
    }
    let mut head = [0u8; 16];
    head[..6].copy_from_slice(&start);
    stream.read_exact(&mut head[6..]).await.map_err(io)?;
    let len = usize::from(u16::from_be_bytes([head[14], head[15]]));
    if len > V2_MAX_BODY {
        return Err(ProxyHeaderError::TooLongV2(len));
    }
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).await.map_err(io)?;
    parse_v2(&head, &body)
}

/// A whole v1 line, `PROXY ` to `\r\n`.
pub(crate) fn parse_v1(line: &[u8]) -> Result<Option<SocketAddr>, ProxyHeaderError> {
    let bad = ProxyHeaderError::MalformedV1;
    let text = std::str::from_utf8(line).map_err(|_| bad.clone())?;
    let text = text.strip_suffix("\r\n").ok_or(bad.clone())?;
    let mut parts = text.split(' ');
    if parts.next() != Some("PROXY") {
        return Err(bad);
    }
    let family = parts.next().ok_or(bad.clone())?;
    if family == "UNKNOWN" {
        return Ok(None);
    }
    let fields: Vec<&str> = parts.collect();
    let [src, dst, sport, dport] = fields[..] else {
        return Err(bad);
    };
    let port = |p: &str| {
        // Decimal, no sign, no leading zero (the specification's form).
        let plain = !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
        let leading_zero = p.len() > 1 && p.starts_with('0');
        (plain && !leading_zero)
            .then(|| p.parse::<u16>().ok())
            .flatten()
    };
    let (Some(sport), Some(_)) = (port(sport), port(dport)) else {
        return Err(bad);
    };
    let src: IpAddr = match family {
        "TCP4" => IpAddr::V4(src.parse::<Ipv4Addr>().map_err(|_| bad.clone())?),
        "TCP6" => IpAddr::V6(src.parse::<Ipv6Addr>().map_err(|_| bad.clone())?),
        _ => return Err(bad),
    };
    let dst_ok = match family {
        "TCP4" => dst.parse::<Ipv4Addr>().is_ok(),
        _ => dst.parse::<Ipv6Addr>().is_ok(),
    };
    if !dst_ok {
        return Err(bad);
    }
    Ok(Some(SocketAddr::new(src, sport)))
}

/// The first `N` bytes of `bytes`, or a malformed v2 header.
fn fixed<const N: usize>(bytes: &[u8]) -> Result<[u8; N], ProxyHeaderError> {
    bytes
        .get(..N)
        .and_then(|b| b.try_into().ok())
        .ok_or(ProxyHeaderError::MalformedV2)
}

/// A v2 header: its 16 fixed bytes and the `len` bytes after them.
pub(crate) fn parse_v2(
    head: &[u8; 16],
    body: &[u8],
) -> Result<Option<SocketAddr>, ProxyHeaderError> {
    let bad = ProxyHeaderError::MalformedV2;
    if head[..12] != V2_SIGNATURE
        || usize::from(u16::from_be_bytes([head[14], head[15]])) != body.len()
    {
        return Err(bad);
    }
    let (version, command) = (head[12] >> 4, head[12] & 0x0f);
    if version != 2 {
        return Err(bad);
    }
    let (family, transport) = (head[13] >> 4, head[13] & 0x0f);
    match command {
        // LOCAL: the proxy's own connection (a health check); the rest is ignored.
        0 => return Ok(None),
        1 => {}
        _ => return Err(bad),
    }
    if transport > 2 {
        return Err(bad);
    }
    match family {
        // AF_UNSPEC, AF_UNIX: no address this Control Plane can use.
        0 | 3 => Ok(None),
        // Source address, destination address, source port, destination port.
        1 => {
            let a: [u8; 12] = fixed(body)?;
            let [s0, s1, s2, s3, _, _, _, _, p0, p1, _, _] = a;
            let ip = Ipv4Addr::new(s0, s1, s2, s3);
            Ok(Some(SocketAddr::new(
                IpAddr::V4(ip),
                u16::from_be_bytes([p0, p1]),
            )))
        }
        2 => {
            let a: [u8; 36] = fixed(body)?;
            let (source, rest) = a.split_at(16);
            let octets: [u8; 16] = fixed(source)?;
            let ports: [u8; 2] = fixed(rest.get(16..).unwrap_or_default())?;
            Ok(Some(SocketAddr::new(
                IpAddr::V6(Ipv6Addr::from(octets)),
                u16::from_be_bytes(ports),
            )))
        }
        _ => Err(bad),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(bytes: &[u8]) -> (Result<Option<SocketAddr>, ProxyHeaderError>, Vec<u8>) {
        let mut stream = futures_lite::io::Cursor::new(bytes.to_vec());
        let result = futures_lite::future::block_on(read_header(&mut stream));
        let pos = stream.position() as usize;
        (result, bytes[pos..].to_vec())
    }

    fn v2(command: u8, family: u8, body: &[u8]) -> Vec<u8> {
        let mut h = V2_SIGNATURE.to_vec();
        h.push(0x20 | command);
        h.push(family << 4 | 1);
        h.extend_from_slice(&(body.len() as u16).to_be_bytes());
        h.extend_from_slice(body);
        h
    }

    #[test]
    fn v1_headers_name_their_source_and_nothing_after_them_is_read() {
        let (r, rest) = read(b"PROXY TCP4 203.0.113.7 192.0.2.1 51000 7700\r\nHELLO");
        assert_eq!(r, Ok(Some("203.0.113.7:51000".parse().unwrap())));
        assert_eq!(rest, b"HELLO");
        let (r, _) = read(b"PROXY TCP6 2001:db8::7 2001:db8::1 443 7700\r\n");
        assert_eq!(r, Ok(Some("[2001:db8::7]:443".parse().unwrap())));
        let (r, rest) = read(b"PROXY UNKNOWN\r\nX");
        assert_eq!((r, rest), (Ok(None), b"X".to_vec()));
    }

    #[test]
    fn v2_headers_name_their_source_and_skip_their_tlvs() {
        let mut body = vec![198, 51, 100, 9, 192, 0, 2, 1, 0xc3, 0x50, 0x1e, 0x14];
        body.extend_from_slice(&[0x04, 0x00, 0x02, b'i', b'd']); // a TLV
        let mut bytes = v2(1, 1, &body);
        bytes.extend_from_slice(b"FRAME");
        let (r, rest) = read(&bytes);
        assert_eq!(r, Ok(Some("198.51.100.9:50000".parse().unwrap())));
        assert_eq!(rest, b"FRAME");
        let mut six = [0u8; 36];
        six[15] = 1;
        six[32..34].copy_from_slice(&8080u16.to_be_bytes());
        assert_eq!(
            read(&v2(1, 2, &six)).0,
            Ok(Some("[::1]:8080".parse().unwrap()))
        );
        // LOCAL: the proxy's own health check.
        assert_eq!(read(&v2(0, 0, &[])).0, Ok(None));
    }

    #[test]
    fn anything_else_is_a_typed_refusal() {
        use ProxyHeaderError::*;
        let cases: [(&[u8], ProxyHeaderError); 7] = [
            (b"\x00\x00\x00\x10hello", Missing),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 99999 1\r\n", MalformedV1),
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 012 1\r\n", MalformedV1),
            (b"PROXY TCP5 1.2.3.4 5.6.7.8 1 1\r\n", MalformedV1),
            (b"PROXY TCP4 ::1 5.6.7.8 1 1\r\n", MalformedV1),
            // No \r\n: the line runs on to the end of what was sent.
            (b"PROXY TCP4 1.2.3.4 5.6.7.8 1 1\n", Io("early eof".into())),
            (b"PROXY TCP4", Io("early eof".into())),
        ];
        for (bytes, want) in cases {
            let (got, _) = read(bytes);
            match (&got, &want) {
                (Err(Io(_)), Io(_)) => {}
                _ => assert_eq!(got, Err(want), "{:?}", String::from_utf8_lossy(bytes)),
            }
        }
        let long = [b"PROXY ".as_slice(), &[b'x'; 200]].concat();
        assert_eq!(read(&long).0, Err(TooLongV1));
        let mut wrong_version = v2(1, 1, &[0; 12]);
        wrong_version[12] = 0x11;
        assert_eq!(read(&wrong_version).0, Err(MalformedV2));
        assert_eq!(
            read(&v2(1, 1, &[0; 4])).0,
            Err(MalformedV2),
            "short address"
        );
        let mut huge = V2_SIGNATURE.to_vec();
        huge.extend_from_slice(&[0x21, 0x11, 0xff, 0xff]);
        assert_eq!(read(&huge).0, Err(TooLongV2(65_535)));
    }

    #[test]
    fn ranges_trust_their_addresses_only() {
        let p = ProxyProtocol::trusting(["10.0.0.0/8", "192.0.2.7", "fd00::/8"]).unwrap();
        for ok in ["10.1.2.3", "192.0.2.7", "fd12::1", "::ffff:10.0.0.1"] {
            assert!(p.trusts(ok.parse().unwrap()), "{ok}");
        }
        for no in ["11.0.0.1", "192.0.2.8", "fe80::1", "127.0.0.1"] {
            assert!(!p.trusts(no.parse().unwrap()), "{no}");
        }
        assert!(
            ProxyProtocol::trusting(["0.0.0.0/0"])
                .unwrap()
                .trusts("8.8.8.8".parse().unwrap())
        );
        for bad in ["10.0.0.0/33", "nope", "10.0.0.0/", "::/129"] {
            assert!(ProxyProtocol::trusting([bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_nor_read_past_the_bounds() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 64) as usize;
            let mut bytes: Vec<u8> = (0..len)
                .map(|i| (seed.rotate_left(i as u32 * 7) & 0xff) as u8)
                .collect();
            // Half of them start as a header would.
            if seed.is_multiple_of(2) {
                let prefix: &[u8] = if seed.is_multiple_of(4) {
                    b"PROXY "
                } else {
                    &V2_SIGNATURE
                };
                bytes.splice(0..0, prefix.iter().copied());
            }
            let (_, rest) = read(&bytes);
            assert!(bytes.len() - rest.len() <= 16 + V2_MAX_BODY);
        }
    }
}
