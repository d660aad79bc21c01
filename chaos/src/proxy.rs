//! An API server outage as the operators see it: they reach the emulator
//! through this TCP proxy, and during an outage the proxy cuts every open
//! connection (watches included) and stops listening, so new connections
//! are refused. When it ends, the proxy listens on the same port again and
//! the emulator behind it answers with all its data, as an API server does
//! after a restart.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub struct ApiProxy {
    addr: SocketAddr,
    down: watch::Sender<bool>,
    cut: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl ApiProxy {
    /// Listens on a free loopback port and relays to `upstream`.
    pub async fn start(upstream: SocketAddr) -> io::Result<ApiProxy> {
        let listener = listen(SocketAddr::from(([127, 0, 0, 1], 0)))?;
        let addr = listener.local_addr()?;
        let (down, watching) = watch::channel(false);
        let cut = Arc::new(AtomicUsize::new(0));
        let task = tokio::spawn(serve(listener, upstream, watching, Arc::clone(&cut)));
        Ok(ApiProxy {
            addr,
            down,
            cut,
            task,
        })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Cuts every connection and refuses new ones until [`ApiProxy::end_outage`].
    pub fn begin_outage(&self) {
        self.down.send_replace(true);
    }

    pub fn end_outage(&self) {
        self.down.send_replace(false);
    }

    /// Connections cut by outages so far.
    pub fn connections_cut(&self) -> usize {
        self.cut.load(Ordering::SeqCst)
    }
}

impl Drop for ApiProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A listening socket with `SO_REUSEADDR`, so that the port can be taken
/// again right after an outage while cut connections sit in `TIME_WAIT`.
fn listen(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

async fn serve(
    listener: TcpListener,
    upstream: SocketAddr,
    mut down: watch::Receiver<bool>,
    cut: Arc<AtomicUsize>,
) {
    let Ok(addr) = listener.local_addr() else {
        return;
    };
    let mut listening = Some(listener);
    loop {
        match &listening {
            Some(listener) => tokio::select! {
                accepted = listener.accept() => {
                    if let Ok((client, _)) = accepted {
                        tokio::spawn(relay(client, upstream, down.clone(), Arc::clone(&cut)));
                    }
                }
                changed = down.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    if *down.borrow() {
                        // Closing the listener: connects are refused.
                        listening = None;
                    }
                }
            },
            None => {
                if down.wait_for(|down| !*down).await.is_err() {
                    return;
                }
                // The port was ours a moment ago; retry briefly if the
                // kernel is slow to let it go.
                for _ in 0..100 {
                    if let Ok(listener) = listen(addr) {
                        listening = Some(listener);
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                if listening.is_none() {
                    return;
                }
            }
        }
    }
}

async fn relay(
    mut client: TcpStream,
    upstream: SocketAddr,
    mut down: watch::Receiver<bool>,
    cut: Arc<AtomicUsize>,
) {
    let Ok(mut server) = TcpStream::connect(upstream).await else {
        return;
    };
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
        outage = down.wait_for(|down| *down) => {
            if outage.is_ok() {
                cut.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// An echo server behind the proxy: relayed, cut, refused, then relayed
    /// again on the same port.
    #[tokio::test]
    async fn an_outage_cuts_refuses_and_ends() {
        let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upstream = echo.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 64];
                    while let Ok(n) = conn.read(&mut buf).await {
                        if n == 0 || conn.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        let proxy = ApiProxy::start(upstream).await.unwrap();
        let addr = proxy.url().trim_start_matches("http://").to_owned();
        let mut conn = TcpStream::connect(&addr).await.unwrap();
        conn.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        conn.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping");

        proxy.begin_outage();
        let mut rest = Vec::new();
        let read = conn.read_to_end(&mut rest).await;
        assert!(
            read.is_err() || rest.is_empty(),
            "the open connection is cut"
        );
        let refused = loop {
            match TcpStream::connect(&addr).await {
                Err(e) => break e,
                // The listener closes asynchronously; a connection that
                // slipped in is cut at once.
                Ok(_) => tokio::task::yield_now().await,
            }
        };
        assert_eq!(refused.kind(), io::ErrorKind::ConnectionRefused);
        assert!(proxy.connections_cut() >= 1);

        proxy.end_outage();
        let mut again = loop {
            if let Ok(conn) = TcpStream::connect(&addr).await {
                break conn;
            }
            tokio::task::yield_now().await;
        };
        again.write_all(b"pong").await.unwrap();
        again.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"pong");
    }
}
