//! What reached a listener: the proof that a connection was, or was not,
//! attempted (an egress policy's refusals, a bound on dials).

use std::io;
use tokio::net::{TcpListener, TcpStream};

/// Whether anything connected to `listener` since the last call. The
/// caller's own connection is accepted first only if nothing else is
/// queued before it; everything up to it is accepted, so the next call
/// starts afresh.
pub async fn dialled_before(listener: &TcpListener) -> io::Result<bool> {
    let ours = TcpStream::connect(listener.local_addr()?).await?;
    let ours = ours.local_addr()?;
    let mut others = false;
    while listener.accept().await?.1 != ours {
        others = true;
    }
    Ok(others)
}
