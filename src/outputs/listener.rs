//! Bounds on the daemon's own listener: at most `[server] max_connections` connections at once
//! (512 by default), a request's headers within [`HEADER_READ_TIMEOUT`] of its first byte (and
//! the first request within it of the connection), and a connection that moves no byte either
//! way for [`IDLE_TIMEOUT`] closed.
//!
//! axum's `serve` gives hyper no timer, so hyper applies no header timeout of its own; without
//! these, 3,000 slowloris connections stayed open indefinitely and a scraper that never reads
//! held its connection for good (issue 15). The bounds live in the connection's I/O, so they
//! hold for plain HTTP and, wrapped around the TLS listener, for HTTPS after the handshake
//! (which `tls` bounds itself).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

pub(crate) use crate::counters::CLOSE_REASONS;
pub use crate::counters::ListenerStats;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};

/// A request's headers must be complete this long after its first byte (the first request's
/// after the connection opened).
pub(crate) const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// A connection that moves no byte either way (a kept-alive connection between requests, or a
/// client that stopped reading its response) for this long is closed.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Connections served at once on the probe port (`[server] probe_listen`), which serves only
/// /healthz and /readyz: a kubelet opens one or two at a time.
pub(crate) const PROBE_MAX_CONNECTIONS: usize = 64;
/// The probe port's timeouts: a probe sends its request at once and is answered in
/// microseconds, so a connection that does neither gives its slot back quickly.
pub(crate) const PROBE_TIMEOUTS: Timeouts =
    Timeouts { header_read: Duration::from_secs(2), idle: Duration::from_secs(5) };

/// A listener whose connections carry the bounds above.
pub struct Bounded<L> {
    inner: L,
    slots: Arc<Semaphore>,
    stats: Arc<ListenerStats>,
    timeouts: Timeouts,
}

/// The timeouts of a [`Bounded`] listener (shorter in tests).
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// See [`HEADER_READ_TIMEOUT`].
    pub header_read: Duration,
    /// See [`IDLE_TIMEOUT`].
    pub idle: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts { header_read: HEADER_READ_TIMEOUT, idle: IDLE_TIMEOUT }
    }
}

impl<L> Bounded<L> {
    /// Bounds `inner`'s connections; connections and closures are counted in `stats`.
    pub fn new(inner: L, stats: Arc<ListenerStats>, max_connections: usize, timeouts: Timeouts) -> Self {
        Bounded { inner, slots: Arc::new(Semaphore::new(max_connections.max(1))), stats, timeouts }
    }
}

impl<L> axum::serve::Listener for Bounded<L>
where
    L: axum::serve::Listener,
    L::Io: Unpin,
{
    type Io = BoundedIo<L::Io>;
    type Addr = L::Addr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let permit = self.slots.clone().acquire_owned().await.expect("the semaphore is never closed");
        let (io, addr) = self.inner.accept().await;
        self.stats.connections.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let io = BoundedIo {
            inner: io,
            _permit: permit,
            stats: self.stats.clone(),
            timeouts: self.timeouts,
            header_deadline: Some(Box::pin(tokio::time::sleep_until(now + self.timeouts.header_read))),
            idle: Box::pin(tokio::time::sleep_until(now + self.timeouts.idle)),
            tail: [0; 3],
            responded: false,
        };
        (io, addr)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// A connection with the bounds of [`Bounded`].
pub struct BoundedIo<T> {
    inner: T,
    _permit: OwnedSemaphorePermit,
    stats: Arc<ListenerStats>,
    timeouts: Timeouts,
    /// Set while a request's headers are being read.
    header_deadline: Option<Pin<Box<Sleep>>>,
    idle: Pin<Box<Sleep>>,
    /// The last bytes read, to find the blank line that ends the headers across reads.
    tail: [u8; 3],
    /// Whether a response was written since the last headers ended (the next bytes read are a
    /// new request).
    responded: bool,
}

impl<T> BoundedIo<T> {
    /// The connection inside.
    pub(crate) fn get_ref(&self) -> &T {
        &self.inner
    }
}

impl<T> Drop for BoundedIo<T> {
    fn drop(&mut self) {
        self.stats.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

impl<T> BoundedIo<T> {
    fn timed_out(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        let reason = if self.header_deadline.as_mut().is_some_and(|d| d.as_mut().poll(cx).is_ready()) {
            0
        } else if self.idle.as_mut().poll(cx).is_ready() {
            1
        } else {
            return None;
        };
        self.stats.closed[reason].fetch_add(1, Ordering::Relaxed);
        Some(io::Error::new(io::ErrorKind::TimedOut, CLOSE_REASONS[reason]))
    }

    fn progressed(&mut self) {
        let now = Instant::now();
        self.idle.as_mut().reset(now + self.timeouts.idle);
    }

    /// What a write to the connection says about it: bytes out are progress (and, once the
    /// request's headers are in, a response under way); a write that waits may have timed out.
    fn after_write(
        &mut self,
        cx: &mut Context<'_>,
        written: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        match written {
            Poll::Ready(Ok(n)) => {
                if n > 0 {
                    self.progressed();
                    if self.header_deadline.is_none() {
                        self.responded = true;
                    }
                }
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => match self.timed_out(cx) {
                Some(e) => Poll::Ready(Err(e)),
                None => Poll::Pending,
            },
        }
    }

    /// Looks for the end of a request's headers in `bytes` just read.
    fn scan(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        if self.header_deadline.is_none() && self.responded {
            // The first bytes of the next request on a kept-alive connection.
            self.responded = false;
            self.tail = [0; 3];
            self.header_deadline =
                Some(Box::pin(tokio::time::sleep_until(Instant::now() + self.timeouts.header_read)));
        }
        if self.header_deadline.is_none() {
            return;
        }
        let mut window = [self.tail[0], self.tail[1], self.tail[2], 0];
        for &b in bytes {
            window = [window[1], window[2], window[3], b];
            if window == *b"\r\n\r\n" || window[2..] == *b"\n\n" {
                self.header_deadline = None;
                break;
            }
        }
        self.tail = [window[1], window[2], window[3]];
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for BoundedIo<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let read = buf.filled()[before..].to_vec();
                if !read.is_empty() {
                    this.progressed();
                    this.scan(&read);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => match this.timed_out(cx) {
                Some(e) => Poll::Ready(Err(e)),
                None => Poll::Pending,
            },
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for BoundedIo<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.inner).poll_write(cx, data);
        this.after_write(cx, written)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_flush(cx) {
            Poll::Pending => match this.timed_out(cx) {
                Some(e) => Poll::Ready(Err(e)),
                None => Poll::Pending,
            },
            other => other,
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.after_write(cx, written)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
