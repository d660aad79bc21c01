//! The server's life: serving until stopped, and for an outage going down
//! (the port refuses connections, open watches are cut), waiting for the
//! outage to end and coming back on the same address with its watch cache
//! restarted.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::faults::{Availability, Faults, Outage};
use super::routes;
use super::shared::Shared;

/// Serves until stopped, going down and coming back for outages.
pub async fn serve(
    shared: Arc<Shared>,
    listener: tokio::net::TcpListener,
    addr: SocketAddr,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let app = routes::router(shared.clone());
    let faults = shared.faults.clone();
    let mut listener = Some(listener);
    loop {
        let listener = match listener.take() {
            Some(l) => l,
            None => match rebind(addr, &mut stop).await {
                Some(l) => l,
                None => return,
            },
        };
        faults.set_availability(Availability::Serving);
        let mut outage = faults.outage_requests();
        let mut stopping = stop.clone();
        // Stops accepting at once (the port refuses connections), then waits
        // for open connections: watches are cut by the outage, idle ones closed.
        let ended = async move {
            tokio::select! {
                _ = outage.wait_for(|o| *o != Outage::None) => {}
                _ = stopping.wait_for(|s| *s) => {}
            }
        };
        if let Err(e) = axum::serve(listener, app.clone())
            .with_graceful_shutdown(ended)
            .await
        {
            tracing::error!(error = %e, "kube-emulator server failed");
        }
        if *stop.borrow() {
            return;
        }
        faults.set_availability(Availability::Down);
        if !outage_over(&faults, &mut stop).await {
            return;
        }
        shared.lock().store.restart_watch_cache();
    }
}

/// Waits for the outage to end (its time, or `end_outage`); false when the
/// emulator stops meanwhile.
async fn outage_over(faults: &Faults, stop: &mut tokio::sync::watch::Receiver<bool>) -> bool {
    let mut requests = faults.outage_requests();
    loop {
        let current = *requests.borrow_and_update();
        let deadline = match current {
            Outage::None => return true,
            Outage::Until(deadline) => deadline,
        };
        let timer = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = timer => {
                faults.end_outage();
                return true;
            }
            changed = requests.changed() => if changed.is_err() { return false },
            _ = stop.wait_for(|s| *s) => return false,
        }
    }
}

/// Listens on the same address again after an outage. The port was ours a
/// moment ago; should another process have taken it, keep trying.
async fn rebind(
    addr: SocketAddr,
    stop: &mut tokio::sync::watch::Receiver<bool>,
) -> Option<tokio::net::TcpListener> {
    loop {
        match tokio::net::TcpListener::bind(addr).await {
            Ok(l) => return Some(l),
            Err(e) => tracing::warn!(error = %e, %addr, "kube-emulator cannot listen again yet"),
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = stop.wait_for(|s| *s) => return None,
        }
    }
}
