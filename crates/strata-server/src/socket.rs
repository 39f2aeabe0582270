//! A client's socket: TCP (`port`, `tls-port`) or a unix socket
//! (`unixsocket`). The connection loop (`connection.rs`) uses the same
//! readiness-and-try calls on both.

use std::os::fd::{AsRawFd, RawFd};

use tokio::net::{TcpStream, UnixStream};

/// An accepted socket on its way to a network thread.
pub enum Accepted {
    Tcp(std::net::TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

impl Accepted {
    pub fn as_raw_fd(&self) -> RawFd {
        match self {
            Accepted::Tcp(stream) => stream.as_raw_fd(),
            Accepted::Unix(stream) => stream.as_raw_fd(),
        }
    }

    /// Sends a refusal (max clients, protected mode) before closing.
    pub fn refuse(&mut self, message: &[u8]) {
        use std::io::Write;
        let _ = match self {
            Accepted::Tcp(stream) => stream
                .set_nonblocking(false)
                .and_then(|()| stream.write_all(message)),
            Accepted::Unix(stream) => stream
                .set_nonblocking(false)
                .and_then(|()| stream.write_all(message)),
        };
    }

    /// The socket registered with this thread's runtime.
    pub fn into_tokio(self) -> std::io::Result<Stream> {
        match self {
            Accepted::Tcp(stream) => {
                stream.set_nonblocking(true)?;
                Ok(Stream::Tcp(TcpStream::from_std(stream)?))
            }
            Accepted::Unix(stream) => {
                stream.set_nonblocking(true)?;
                Ok(Stream::Unix(UnixStream::from_std(stream)?))
            }
        }
    }
}

pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    pub async fn readable(&self) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.readable().await,
            Stream::Unix(s) => s.readable().await,
        }
    }

    pub async fn writable(&self) -> std::io::Result<()> {
        match self {
            Stream::Tcp(s) => s.writable().await,
            Stream::Unix(s) => s.writable().await,
        }
    }

    pub fn try_read(&self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.try_read(buf),
            Stream::Unix(s) => s.try_read(buf),
        }
    }

    pub fn try_read_buf(&self, buf: &mut bytes::BytesMut) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.try_read_buf(buf),
            Stream::Unix(s) => s.try_read_buf(buf),
        }
    }

    pub fn try_write(&self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.try_write(buf),
            Stream::Unix(s) => s.try_write(buf),
        }
    }

    pub fn as_raw_fd(&self) -> RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
        }
    }
}
