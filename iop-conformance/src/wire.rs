//! One TCP connection to the peer under test: frames out as they are (the tester
//! sends what a broken peer would, caps ignored), frames in through iop's own decoder
//! with the limits of PROTOCOL.md §7, so that a frame the peer must not send is seen.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use iop_proto::{
    Body, Envelope, FrameDecoder, FrameError, Heartbeat, HeartbeatAck, Message,
    PRE_HELLO_MAX_FRAME_LEN, limits::DEFAULT_MAX_FRAME_LEN,
};

/// What reading found.
#[derive(Debug)]
pub enum Got {
    /// A frame.
    Frame(Envelope),
    /// The peer closed the connection (or reset it).
    Closed,
    /// Nothing within the time given.
    Silent,
    /// A frame iop's decoder refuses: the peer sent what it must not (§4.6).
    Refused(FrameError),
}

/// How the tester keeps the session alive while it waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keepalive {
    /// Send nothing on its own.
    None,
    /// As a Control Plane: ack every heartbeat.
    Ack,
    /// As an Edge: a heartbeat every interval.
    Beat(Duration),
}

/// A connection to the peer under test.
pub struct Conn {
    stream: TcpStream,
    decoder: FrameDecoder,
    keepalive: Keepalive,
    next_beat: Instant,
    beat_sequence: u64,
    queue: std::collections::VecDeque<Envelope>,
    closed: bool,
    /// Frames read so far that iop's decoder refused (§4.6), with why.
    pub refused: Vec<String>,
    /// Every byte read, for the redaction check.
    pub read: Vec<u8>,
}

impl Conn {
    /// A connection over `stream`, reading frames of at most the pre-hello limit until
    /// [`accept_frames`](Self::accept_frames) raises it.
    pub fn new(stream: TcpStream) -> Self {
        let _ = stream.set_nodelay(true);
        Self {
            stream,
            decoder: FrameDecoder::new(PRE_HELLO_MAX_FRAME_LEN),
            keepalive: Keepalive::None,
            next_beat: Instant::now(),
            beat_sequence: 0,
            queue: std::collections::VecDeque::new(),
            closed: false,
            refused: Vec::new(),
            read: Vec::new(),
        }
    }

    /// Dials `addr` (at most 5 s).
    pub fn dial(addr: SocketAddr) -> std::io::Result<Self> {
        TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map(Self::new)
    }

    /// Reads frames up to `max_frame_len` (the session's limit, after the hello).
    pub fn accept_frames(&mut self, max_frame_len: u32) {
        let max = if max_frame_len == 0 {
            DEFAULT_MAX_FRAME_LEN
        } else {
            max_frame_len
        };
        self.decoder.set_max_frame_len(max);
    }

    /// Sets how the connection keeps the session alive while reading.
    pub fn keep_alive(&mut self, keepalive: Keepalive) {
        self.keepalive = keepalive;
        self.next_beat = Instant::now();
    }

    /// Sends `envelope` as one frame, whatever its size or content.
    pub fn send(&mut self, envelope: &Envelope) -> std::io::Result<()> {
        self.send_raw(&frame(envelope))
    }

    /// Writes `bytes` as they are.
    pub fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)?;
        self.stream.flush()
    }

    fn beat(&mut self) {
        if let Keepalive::Beat(every) = self.keepalive
            && Instant::now() >= self.next_beat
        {
            self.beat_sequence += 1;
            let hb = Heartbeat {
                sequence: self.beat_sequence,
                sent_at_unix_ms: unix_ms(),
            };
            let _ = self.send(&Envelope::new(hb));
            self.next_beat = Instant::now() + every;
        }
    }

    /// The next frame within `within`; heartbeats are acked or sent as
    /// [`keep_alive`](Self::keep_alive) says, and given to the caller too.
    pub fn recv(&mut self, within: Duration) -> Got {
        let deadline = Instant::now() + within;
        let mut buf = [0u8; 16 * 1024];
        loop {
            if let Some(env) = self.queue.pop_front() {
                return self.got(env);
            }
            self.beat();
            let now = Instant::now();
            if now >= deadline {
                return Got::Silent;
            }
            let wait = (deadline - now).clamp(Duration::from_millis(1), Duration::from_millis(50));
            let _ = self.stream.set_read_timeout(Some(wait));
            match self.stream.read(&mut buf) {
                Ok(0) => {
                    self.closed = true;
                    return Got::Closed;
                }
                Ok(n) => {
                    self.read.extend_from_slice(&buf[..n]);
                    let mut input = &buf[..n];
                    // Every frame of the read, in order.
                    loop {
                        match self.decoder.decode(&mut input) {
                            Ok(Some(env)) => self.queue.push_back(env),
                            Ok(None) => break,
                            Err(e) => return self.refuse(e),
                        }
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(_) => {
                    self.closed = true;
                    return Got::Closed;
                }
            }
        }
    }

    /// Closes as PROTOCOL.md §4.7 says: the write side first, then reading (at most
    /// `grace`) until the peer closes too. Closing with bytes unread would reset the
    /// connection, and the peer could lose what was sent last (a `GoAway`).
    pub fn finish(&mut self, grace: Duration) {
        self.keepalive = Keepalive::None;
        let _ = self.stream.shutdown(std::net::Shutdown::Write);
        if !self.closed {
            let _ = self.closes_within(grace);
        }
    }

    /// True once the peer closed the connection.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// The next frame `wanted` takes within `within`, past the frames it does not
    /// take (a `GoAway` ends the wait, as a failure saying so).
    pub fn expect<T>(
        &mut self,
        within: Duration,
        mut wanted: impl FnMut(&Envelope) -> Option<T>,
    ) -> Result<T, String> {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.recv(left) {
                Got::Frame(env) => {
                    if let Some(t) = wanted(&env) {
                        return Ok(t);
                    }
                    if matches!(env.body, Some(Body::GoAway(_))) {
                        return Err(format!("got {} instead", describe(&env)));
                    }
                }
                Got::Closed => return Err("the peer closed the connection".into()),
                Got::Silent => return Err(format!("nothing within {} ms", within.as_millis())),
                Got::Refused(e) => return Err(format!("a frame the protocol refuses: {e}")),
            }
        }
    }

    /// Reads until the peer closes, at most `within`: `Ok` with the `GoAway` it sent
    /// first, if any; `Err` with what it did instead (frames other than heartbeats,
    /// acks and a `GoAway` are listed).
    pub fn closes_within(&mut self, within: Duration) -> Result<Option<iop_proto::GoAway>, String> {
        let deadline = Instant::now() + within;
        let mut go_away = None;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.recv(left) {
                Got::Closed => return Ok(go_away),
                Got::Silent => {
                    return Err(format!("still open after {} ms", within.as_millis()));
                }
                Got::Refused(e) => return Err(format!("sent a frame the protocol refuses: {e}")),
                Got::Frame(env) => match env.body {
                    Some(Body::GoAway(g)) => go_away = go_away.or(Some(g)),
                    Some(Body::Heartbeat(_) | Body::HeartbeatAck(_)) => {}
                    _ => {}
                },
            }
        }
    }

    /// Reads for `how_long`, keeping the session alive; the frames other than
    /// heartbeats and acks, or why the session ended.
    pub fn idle(&mut self, how_long: Duration) -> Result<Vec<Envelope>, String> {
        let deadline = Instant::now() + how_long;
        let mut frames = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(frames);
            }
            match self.recv(left) {
                Got::Silent => return Ok(frames),
                Got::Closed => return Err("the peer closed the connection".into()),
                Got::Refused(e) => return Err(format!("a frame the protocol refuses: {e}")),
                Got::Frame(env) => {
                    if !matches!(env.body, Some(Body::Heartbeat(_) | Body::HeartbeatAck(_))) {
                        frames.push(env);
                    }
                }
            }
        }
    }

    fn got(&mut self, env: Envelope) -> Got {
        if self.keepalive == Keepalive::Ack
            && let Some(Body::Heartbeat(hb)) = &env.body
        {
            let ack = HeartbeatAck {
                sequence: hb.sequence,
            };
            let _ = self.send(&Envelope::new(ack));
        }
        Got::Frame(env)
    }

    fn refuse(&mut self, e: FrameError) -> Got {
        self.refused.push(e.to_string());
        Got::Refused(e)
    }
}

/// A frame of `env`, whatever it holds (caps ignored: the tester sends what a broken
/// peer would).
pub fn frame(env: &Envelope) -> Vec<u8> {
    let body = env.encode_to_vec();
    let mut out = u32::try_from(body.len())
        .unwrap_or(u32::MAX)
        .to_be_bytes()
        .to_vec();
    out.extend_from_slice(&body);
    out
}

/// A frame in a few words, for a failure's detail.
pub fn describe(env: &Envelope) -> String {
    match &env.body {
        Some(Body::GoAway(g)) => format!("GoAway {} {:?}", g.reason().as_str_name(), g.message),
        Some(Body::HelloResponse(r)) if !r.accepted => {
            format!("hello rejected {}", r.reject_reason().as_str_name())
        }
        Some(Body::CommandResponse(r)) if !r.accepted => format!(
            "command_response {:?} rejected {}",
            r.command_id,
            r.reject_reason().as_str_name()
        ),
        Some(body) => body.kind().as_str().to_owned(),
        None => "a frame with no known body".to_owned(),
    }
}

/// Now, as Unix ms.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A listener the Edge under test dials.
pub struct Listener {
    listener: TcpListener,
}

impl Listener {
    /// Listens on `addr`.
    pub fn bind(addr: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        Ok(Self { listener })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The next connection within `within`, and when it came.
    pub fn accept(&self, within: Duration) -> Option<(Conn, Instant)> {
        let deadline = Instant::now() + within;
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    let _ = stream.set_nonblocking(false);
                    return Some((Conn::new(stream), Instant::now()));
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        return None;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(_) => return None,
            }
        }
    }
}
