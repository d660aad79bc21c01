//! What the operator serves for its own operation, as opposed to the
//! providers it calls: `/metrics` (Prometheus text format), `/healthz` (the
//! process serves), `/readyz` (Redis answers and the controller has
//! started), for Prometheus and the kubelet's probes.

use crate::store::TicketStore;
use crate::telemetry::Metrics;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio_util::sync::CancellationToken;

#[derive(Clone)]
struct Probe {
    metrics: Arc<Metrics>,
    store: TicketStore,
    started: Arc<AtomicBool>,
}

/// Serves until `shutdown` fires. `started` turns readiness on.
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    store: TicketStore,
    started: Arc<AtomicBool>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let app = Router::new()
        .route("/metrics", get(metrics_text))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .with_state(Probe {
            metrics,
            store,
            started,
        });
    let listener = tokio::net::TcpListener::bind(addr).await?;
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}

async fn metrics_text(State(probe): State<Probe>) -> impl IntoResponse {
    let watchdog = probe.store.watchdog();
    probe
        .metrics
        .observe_watchdog(watchdog.stats(), watchdog.held());
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        probe.metrics.encode(),
    )
}

async fn ready(State(probe): State<Probe>) -> impl IntoResponse {
    if !probe.started.load(Ordering::Relaxed) {
        return (StatusCode::SERVICE_UNAVAILABLE, "starting".to_owned());
    }
    // After an outage the first command on the old connection fails and
    // starts the reconnect; the second one uses the new connection. Without
    // it, readiness would lag a whole probe period behind Redis.
    let mut result = probe.store.ping().await;
    if result.as_ref().is_err_and(|e| e.is_unavailable()) {
        result = probe.store.ping().await;
    }
    match result {
        Ok(()) => (StatusCode::OK, "ok".to_owned()),
        Err(err) => (StatusCode::SERVICE_UNAVAILABLE, err.to_string()),
    }
}
