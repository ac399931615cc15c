//! The errors hyper answers itself, before a request reaches the
//! application (414 for a URI over 64 KiB, 431 for too many or too large
//! headers, 400 for a head that does not parse, a NUL in the path
//! included), made ours: the same JSON body and `request_id` as every
//! other error. hyper writes those answers with an empty body and closes
//! the connection; [`OurErrors`] wraps the connection's stream and, when
//! it sees such an answer go out, sends ours instead.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A connection stream whose hyper-made error answers are replaced.
pub struct OurErrors<S> {
    inner: S,
    /// Bytes of a replacement answer still to be written.
    pending: Vec<u8>,
    written: usize,
}

impl<S> OurErrors<S> {
    pub fn new(inner: S) -> Self {
        OurErrors {
            inner,
            pending: Vec::new(),
            written: 0,
        }
    }
}

/// The answer to send instead of `head`, when `head` is one of hyper's
/// own bodiless error answers.
pub fn replacement(head: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(head).ok()?;
    let (status, message) = if text.starts_with("HTTP/1.1 414 ") {
        (414, "The request URI is too long.")
    } else if text.starts_with("HTTP/1.1 431 ") {
        (431, "The request headers are too many or too large.")
    } else if text.starts_with("HTTP/1.1 400 ") {
        (
            400,
            "The request could not be read as HTTP (a malformed request line or header, or a NUL byte).",
        )
    } else {
        return None;
    };
    let lower = text.to_ascii_lowercase();
    if !lower.contains("\r\ncontent-length: 0\r\n")
        || !lower.contains("\r\nconnection: close\r\n")
        || !text.ends_with("\r\n\r\n")
    {
        return None;
    }
    let reason = match status {
        414 => "URI Too Long",
        431 => "Request Header Fields Too Large",
        _ => "Bad Request",
    };
    let request_id = crate::ids::new_id();
    let body = serde_json::json!({
        "status": status,
        "name": reason,
        "message": message,
        "request_id": request_id,
    })
    .to_string();
    Some(
        format!(
            "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\nx-request-id: {request_id}\r\n\
             connection: close\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

impl<S: AsyncWrite + Unpin> OurErrors<S> {
    /// Writes what is left of a replacement answer.
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.pending.len() {
            match Pin::new(&mut self.inner).poll_write(cx, &self.pending[self.written..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => self.written += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for OurErrors<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for OurErrors<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.drain(cx)?.is_pending() {
            return Poll::Pending;
        }
        if let Some(ours) = replacement(buf) {
            this.pending = ours;
            this.written = 0;
            // The whole of hyper's answer counts as written; ours follows.
            let _ = this.drain(cx)?;
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.drain(cx)?.is_pending() {
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.drain(cx)?.is_pending() {
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hypers_bodiless_error_answers_are_replaced() {
        let hyper = b"HTTP/1.1 414 URI Too Long\r\nconnection: close\r\ncontent-length: 0\r\ndate: Wed, 25 Nov 2026 00:17:12 GMT\r\n\r\n";
        let ours = String::from_utf8(replacement(hyper).unwrap()).unwrap();
        let (head, body) = ours.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 414 URI Too Long"));
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let json: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(json["status"], 414);
        assert!(json["request_id"].is_string());
        // An answer of the application (with a body) passes untouched.
        assert!(replacement(
            b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 20\r\n\r\n"
        )
        .is_none());
        assert!(replacement(b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 0\r\n\r\n").is_none());
    }
}
