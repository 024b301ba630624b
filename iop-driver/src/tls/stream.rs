//! A connection that is plain TCP or TLS, as one `futures-io` stream.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_io::{AsyncRead, AsyncWrite};
use futures_rustls::{client, server};

/// Plain or TLS over the runtime's stream `S`. The TLS states are boxed: rustls keeps
/// a few KiB of state, and a plain connection should not pay for it.
pub(crate) enum MaybeTls<S> {
    Plain(S),
    Server(Box<server::TlsStream<S>>),
    Client(Box<client::TlsStream<S>>),
}

macro_rules! each {
    ($self:ident, $s:ident => $e:expr) => {
        match $self.get_mut() {
            MaybeTls::Plain($s) => {
                let $s = Pin::new($s);
                $e
            }
            MaybeTls::Server($s) => {
                let $s = Pin::new(&mut **$s);
                $e
            }
            MaybeTls::Client($s) => {
                let $s = Pin::new(&mut **$s);
                $e
            }
        }
    };
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for MaybeTls<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        each!(self, s => s.poll_read(cx, buf))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for MaybeTls<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        each!(self, s => s.poll_write(cx, buf))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self, s => s.poll_flush(cx))
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self, s => s.poll_close(cx))
    }
}
