//! What the operator serves for its own operation, as opposed to the
//! providers it calls: `/metrics` (Prometheus text format), `/healthz` (the
//! process serves, also while it waits for Redis at start), `/readyz`
//! (the controller has started and Redis answers), for Prometheus and the
//! kubelet's probes.

use crate::store::TicketStore;
use crate::telemetry::Metrics;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use tokio_util::sync::CancellationToken;

#[derive(Clone)]
struct Probe {
    metrics: Arc<Metrics>,
    /// Set once the controller has started with its store.
    store: Arc<OnceLock<TicketStore>>,
}

/// Serves until `shutdown` fires. Setting `store` turns readiness on.
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    store: Arc<OnceLock<TicketStore>>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let app = Router::new()
        .route("/metrics", get(metrics_text))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .with_state(Probe { metrics, store });
    let listener = tokio::net::TcpListener::bind(addr).await?;
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}

async fn metrics_text(State(probe): State<Probe>) -> impl IntoResponse {
    if let Some(store) = probe.store.get() {
        observe_store(&probe.metrics, store);
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        probe.metrics.encode(),
    )
}

/// Copies what the store counts (its watchdog, its replica wait) into the
/// metrics, as before each scrape.
pub fn observe_store(metrics: &Metrics, store: &TicketStore) {
    let watchdog = store.watchdog();
    metrics.observe_watchdog(watchdog.stats(), watchdog.held());
    if let Some(replicas) = store.replica_stats() {
        metrics.replicas.observe(replicas);
    }
}

async fn ready(State(probe): State<Probe>) -> impl IntoResponse {
    let Some(store) = probe.store.get() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "starting: waiting for redis".to_owned(),
        );
    };
    // After an outage the first command on the old connection fails and
    // starts the reconnect; the second one uses the new connection. Without
    // it, readiness would lag a whole probe period behind Redis.
    let mut result = store.ping().await;
    if result.as_ref().is_err_and(|e| e.is_unavailable()) {
        result = store.ping().await;
    }
    match result {
        Ok(()) => (StatusCode::OK, "ok".to_owned()),
        Err(err) => (StatusCode::SERVICE_UNAVAILABLE, err.to_string()),
    }
}
