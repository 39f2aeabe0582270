//! A client's socket: TCP (`port`, `tls-port`) or a unix socket
//! (`unixsocket`). The connection loop (`connection.rs`) uses the same
//! readiness-and-try calls on both.

use std::os::fd::{AsRawFd, RawFd};

use std::net::{SocketAddr, TcpListener as StdListener};

use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

use crate::log_notice;

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

    /// After a read that took less than it offered: the receive queue was
    /// empty, so the socket is no longer readable until new bytes arrive,
    /// which epoll (edge-triggered) reports as a new event. Forgetting the
    /// readiness now spares the next wait a read that could only fail
    /// with `EAGAIN` (one `recvfrom` in two per unpipelined request
    /// before). Tokio's own `poll_read` does the same after a short read;
    /// `try_read_buf` does not. Safe on the current-thread runtimes the
    /// connections run on: the I/O driver runs between task polls, so no
    /// event can have been recorded since the read within this poll.
    pub fn forget_readable(&self) {
        let not_ready = || Err::<(), _>(std::io::ErrorKind::WouldBlock.into());
        let _ = match self {
            Stream::Tcp(s) => s.try_io(tokio::io::Interest::READABLE, not_ready),
            Stream::Unix(s) => s.try_io(tokio::io::Interest::READABLE, not_ready),
        };
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

/// Listeners on each of `addresses` (a leading `-`: optional), on `port`
/// (0: a free one, the same for all); the port bound.
pub fn bind_addresses(
    addresses: &[String],
    backlog: u32,
    port: u16,
) -> Result<(Vec<StdListener>, u16), String> {
    listen_on(addresses, port, |addr| bind_one(addr, backlog))
}

/// [`bind_addresses`], each listener made by `open`.
fn listen_on(
    addresses: &[String],
    mut port: u16,
    mut open: impl FnMut(SocketAddr) -> std::io::Result<StdListener>,
) -> Result<(Vec<StdListener>, u16), String> {
    let mut listeners = Vec::new();
    for address in addresses {
        let (optional, host) = match address.strip_prefix('-') {
            Some(host) => (true, host),
            None => (false, address.as_str()),
        };
        let ip: std::net::IpAddr = match host.parse() {
            Ok(ip) => ip,
            Err(_) if host == "*" => std::net::Ipv4Addr::UNSPECIFIED.into(),
            Err(_) => return Err(format!("Invalid bind address '{host}'")),
        };
        let addr = SocketAddr::new(ip, port);
        match open(addr) {
            Ok(listener) => {
                port = listener.local_addr().map(|a| a.port()).unwrap_or(port);
                listeners.push(listener);
            }
            Err(e) if optional => log_notice!("Skipping optional bind address {addr}: {e}"),
            Err(e) => {
                return Err(format!(
                    "Could not create server TCP listening socket {addr}: {e}"
                ));
            }
        }
    }
    if listeners.is_empty() {
        return Err("Failed listening on any bind address".into());
    }
    Ok((listeners, port))
}

pub fn bind_one(addr: SocketAddr, backlog: u32) -> std::io::Result<StdListener> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        None,
    )?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.bind(&addr.into())?;
    socket.listen(backlog.min(i32::MAX as u32) as i32)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Where CONFIG SET `port` / `bind` hands the new plain TCP listeners to
/// the accept loop, which stops accepting on the old ones (connections
/// made through them stay) and says when they are closed: CONFIG SET
/// answers only then, as Redis closes the old port before its reply (a
/// client connecting there after the reply is refused, not reset). CONFIG SET binds them itself, so a port in
/// use is its error and changes nothing; an address it listens on
/// already keeps its socket (a duplicate of it goes to the new set), so
/// `bind` can add or drop addresses on the same port.
/// New listeners for the accept loop, and where it says the old ones
/// are closed.
pub type Replacement = (Vec<StdListener>, std::sync::mpsc::Sender<()>);

#[derive(Default)]
pub struct Relisten {
    sender: parking_lot::Mutex<Option<tokio::sync::mpsc::UnboundedSender<Replacement>>>,
    /// Duplicates of the plain TCP listeners in use.
    current: parking_lot::Mutex<Vec<StdListener>>,
}

impl Relisten {
    /// The accept loop's end, with the listeners it starts with.
    pub fn connect(
        &self,
        listening: &[StdListener],
    ) -> tokio::sync::mpsc::UnboundedReceiver<Replacement> {
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        *self.sender.lock() = Some(sender);
        *self.current.lock() = listening
            .iter()
            .filter_map(|l| l.try_clone().ok())
            .collect();
        receiver
    }

    /// Listeners on `addresses` at `port` (none for port 0: no TCP, as
    /// in Redis), reusing the sockets that listen there already.
    pub fn prepare(
        &self,
        addresses: &[String],
        backlog: u32,
        port: u16,
    ) -> Result<Vec<StdListener>, String> {
        if port == 0 {
            return Ok(Vec::new());
        }
        let current = self.current.lock();
        let open =
            |addr: SocketAddr| match current.iter().find(|l| l.local_addr().ok() == Some(addr)) {
                Some(listening) => listening.try_clone(),
                None => bind_one(addr, backlog),
            };
        Ok(listen_on(addresses, port, open)?.0)
    }

    /// Hands `listeners` over to the accept loop, and waits (a second
    /// at most) until the old ones are closed.
    pub fn replace(&self, listeners: Vec<StdListener>) {
        *self.current.lock() = listeners
            .iter()
            .filter_map(|l| l.try_clone().ok())
            .collect();
        let (closed, wait) = std::sync::mpsc::channel();
        let sent = match self.sender.lock().as_ref() {
            Some(sender) => sender.send((listeners, closed)).is_ok(),
            None => false,
        };
        if sent {
            let _ = wait.recv_timeout(std::time::Duration::from_secs(1));
        }
    }
}
