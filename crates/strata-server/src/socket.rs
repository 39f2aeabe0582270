//! A client's socket: TCP (`port`, `tls-port`) or a unix socket
//! (`unixsocket`). The connection loop (`connection.rs`) uses the same
//! readiness-and-try calls on both.

use std::os::fd::{AsRawFd, RawFd};

use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

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

    /// Ends the stream for the peer now (sends FIN), before the socket
    /// is closed: a client that has read QUIT's `+OK` finds the
    /// connection closed at once, as with Redis, rather than after the
    /// connection's task has wound down.
    pub fn shutdown_write(&self) {
        let sock = match self {
            Stream::Tcp(s) => socket2::SockRef::from(s),
            Stream::Unix(s) => socket2::SockRef::from(s),
        };
        // A peer already gone has nothing left to be told.
        let _ = sock.shutdown(std::net::Shutdown::Write);
    }

    /// Holds what is written next until [`Stream::shutdown_write`], so
    /// that the last reply and the end of the stream travel in one TCP
    /// segment: a client that reads the reply has the close with it.
    /// (Written apart, a client read `+OK` and found the socket still
    /// open 1-2 % of the time, and redis-py then sent its next command
    /// down a connection about to close.)
    pub fn hold_until_shutdown(&self) {
        if let Stream::Tcp(s) = self {
            let _ = socket2::SockRef::from(s).set_tcp_cork(true);
        }
    }
}

/// A listening socket: a TCP port or the unix socket.
pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

impl Listener {
    /// The next connection and its peer (unspecified for a unix socket,
    /// whose clients are named by its path).
    pub async fn accept(&self) -> std::io::Result<(Accepted, SocketAddr)> {
        match self {
            Listener::Tcp(listener) => {
                let (stream, peer) = listener.accept().await?;
                Ok((Accepted::Tcp(stream.into_std()?), peer))
            }
            Listener::Unix(listener) => {
                let (stream, _) = listener.accept().await?;
                let unspecified = SocketAddr::from(([0, 0, 0, 0], 0));
                Ok((Accepted::Unix(stream.into_std()?), unspecified))
            }
        }
    }
}
