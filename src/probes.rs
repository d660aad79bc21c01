//! What the operator serves for its own operation, as opposed to the
//! providers it calls: `/metrics` (Prometheus text format), `/healthz` (the
//! process serves, also while it waits for Redis at start), `/readyz`
//! (the controller has started and Redis answers), for Prometheus and the
//! kubelet's probes.
//!
//! Served over TLS, with `/metrics` (and every route but the probes) for
//! callers the API server authenticates and authorizes
//! ([`crate::http_access`]); or, when the operator is told so, over plain
//! HTTP to anyone.
//!
//! `/readyz` sends nothing to Redis: it answers from the outcome of the
//! replica's latest command ([`crate::store::RedisHealth`]). A replica with
//! no traffic for [`IDLE_CHECK`] sends one PING of its own, so the answer is
//! never older than that, however often the probes come.

use crate::http_access::{AccessGuard, Peer, require_access, tls::TlsListener};
use crate::store::TicketStore;
use crate::telemetry::Metrics;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use rustls::ServerConfig;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long the replica may go without a Redis command before readiness
/// checks with a PING of its own.
pub const IDLE_CHECK: Duration = Duration::from_secs(2);

#[derive(Clone)]
struct Probe {
    metrics: Arc<Metrics>,
    /// Set once the controller has started with its store.
    store: Arc<OnceLock<TicketStore>>,
}

/// How the port is served.
pub enum Exposure {
    /// Plain HTTP, `/metrics` to anyone who reaches the port.
    Plain,
    /// TLS, `/metrics` to callers `guard` lets in.
    Secured {
        tls: Arc<ServerConfig>,
        guard: AccessGuard,
    },
}

/// Serves until `shutdown` fires. Setting `store` turns readiness on.
pub async fn serve(
    addr: SocketAddr,
    exposure: Exposure,
    metrics: Arc<Metrics>,
    store: Arc<OnceLock<TicketStore>>,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let mut guarded = Router::new().route("/metrics", get(metrics_text));
    if let Exposure::Secured { guard, .. } = &exposure {
        let guard = guard.clone().counted_in(&metrics.access_reviews);
        guarded = guarded.route_layer(axum::middleware::from_fn_with_state(guard, require_access));
    }
    // The kubelet's probes carry no token: they stay outside the guard.
    let app = guarded
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .with_state(Probe {
            metrics,
            store: store.clone(),
        });
    tokio::spawn(check_when_idle(store, shutdown.clone()));
    let tcp = tokio::net::TcpListener::bind(addr).await?;
    let stop = async move { shutdown.cancelled().await };
    // Each request knows its TCP peer: the access checks budget their
    // reviews per caller address.
    let app = app.into_make_service_with_connect_info::<Peer>();
    match exposure {
        Exposure::Plain => axum::serve(tcp, app).with_graceful_shutdown(stop).await,
        Exposure::Secured { tls, .. } => {
            axum::serve(TlsListener::new(tcp, tls)?, app)
                .with_graceful_shutdown(stop)
                .await
        }
    }
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
    match store.redis_health().latest() {
        Ok(()) => (StatusCode::OK, "ok".to_owned()),
        Err(err) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("redis unavailable: {err}"),
        ),
    }
}

/// Until `shutdown`: whenever the store has been idle for [`IDLE_CHECK`],
/// a PING, whose outcome readiness then answers from.
async fn check_when_idle(store: Arc<OnceLock<TicketStore>>, shutdown: CancellationToken) {
    let mut ticks = tokio::time::interval(IDLE_CHECK / 2);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let Some(store) = store.get() else { continue };
        if store.redis_health().age() < IDLE_CHECK {
            continue;
        }
        // After an outage the first command on the old connection fails and
        // starts the reconnect; the second one uses the new connection.
        // Without it, readiness would lag a whole period behind Redis.
        if store.ping().await.is_err_and(|e| e.is_unavailable()) {
            let _ = store.ping().await;
        }
    }
}
