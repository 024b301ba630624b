//! Server-sent events (the admin API's `/v1/events`), read line by line with every
//! line and event bounded.

use http_body_util::BodyExt;
use hyper::body::Incoming;

use super::CtlError;

/// The longest line or event accepted (an event of the admin API is a few KiB).
const MAX_EVENT: usize = 1024 * 1024;

/// One event: its `id`, its `event` name and its `data`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `id:` field (empty when the stream sends none).
    pub id: String,
    /// The `event:` field (`message` when the stream sends none).
    pub name: String,
    /// The `data:` lines, joined by newlines.
    pub data: String,
}

/// The events of one response body, in order.
#[derive(Debug)]
pub struct EventStream {
    body: Option<Incoming>,
    parser: Parser,
}

impl EventStream {
    pub(super) fn new(body: Incoming) -> Self {
        Self {
            body: Some(body),
            parser: Parser::default(),
        }
    }

    /// The next event; `None` once the API ended the stream.
    pub async fn next(&mut self) -> Option<Result<SseEvent, CtlError>> {
        loop {
            match self.parser.event() {
                Ok(Some(event)) => return Some(Ok(event)),
                Ok(None) => {}
                Err(e) => return Some(Err(e)),
            }
            let body = self.body.as_mut()?;
            match body.frame().await {
                None => {
                    self.body = None;
                    return None;
                }
                Some(Err(e)) => {
                    self.body = None;
                    return Some(Err(CtlError::Unreachable(format!("the event stream: {e}"))));
                }
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.parser.push(&data);
                    }
                }
            }
        }
    }
}

/// The SSE line protocol over bytes pushed as they come.
#[derive(Debug, Default)]
struct Parser {
    pending: Vec<u8>,
    current: SseEvent,
}

impl Parser {
    fn push(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
    }

    /// The next complete event among the lines pushed so far.
    fn event(&mut self) -> Result<Option<SseEvent>, CtlError> {
        while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if self.current.data.is_empty() && self.current.name.is_empty() {
                    continue;
                }
                let mut event = std::mem::take(&mut self.current);
                if event.name.is_empty() {
                    event.name = "message".into();
                }
                return Ok(Some(event));
            }
            if line.starts_with(':') {
                continue; // a comment: the keep-alive
            }
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "id" => self.current.id = value.to_owned(),
                "event" => self.current.name = value.to_owned(),
                "data" => {
                    if !self.current.data.is_empty() {
                        self.current.data.push('\n');
                    }
                    self.current.data.push_str(value);
                }
                _ => {}
            }
            if self.current.data.len() > MAX_EVENT {
                return Err(CtlError::Protocol(format!(
                    "an event of the stream is over {MAX_EVENT} bytes"
                )));
            }
        }
        if self.pending.len() > MAX_EVENT {
            return Err(CtlError::Protocol(format!(
                "a line of the event stream is over {MAX_EVENT} bytes"
            )));
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_pushes_come_out_whole() {
        let mut p = Parser::default();
        p.push(b": keep-alive\n\nid: 7\nevent: command_event\nda");
        assert_eq!(p.event().unwrap(), None);
        p.push(b"ta: {\"a\":1}\ndata: more\r\n\n");
        let e = p.event().unwrap().unwrap();
        assert_eq!(e.id, "7");
        assert_eq!(e.name, "command_event");
        assert_eq!(e.data, "{\"a\":1}\nmore");
        assert_eq!(p.event().unwrap(), None);
    }

    #[test]
    fn an_endless_line_is_refused_not_buffered() {
        let mut p = Parser::default();
        p.push(&vec![b'x'; MAX_EVENT + 1]);
        assert!(p.event().is_err());
    }
}
