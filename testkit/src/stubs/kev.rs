//! KEV feed stub: `GET /known_exploited_vulnerabilities.json` serves a
//! catalog's bytes verbatim (the real one from the fixtures, or a variant a
//! test derives), replaceable at runtime.

use super::fixtures::{Fixtures, KEV_CATALOG};
use super::server::{StubServer, lock};
use axum::Router;
use axum::extract::State;
use axum::response::IntoResponse;
use axum::routing::get;
use std::ops::Deref;
use std::sync::{Arc, Mutex};

pub const FEED_ROUTE: &str = "/known_exploited_vulnerabilities.json";

#[derive(Debug)]
pub struct KevStub {
    server: StubServer,
    catalog: Arc<Mutex<Arc<Vec<u8>>>>,
}

impl KevStub {
    /// Serves the real catalog from the fixtures.
    pub async fn start() -> std::io::Result<KevStub> {
        KevStub::start_with(Fixtures::locate().read(KEV_CATALOG)?).await
    }

    pub async fn start_with(catalog: Vec<u8>) -> std::io::Result<KevStub> {
        let catalog = Arc::new(Mutex::new(Arc::new(catalog)));
        let router = Router::new()
            .route(FEED_ROUTE, get(feed))
            .with_state(Arc::clone(&catalog));
        Ok(KevStub {
            server: StubServer::start(router, &[FEED_ROUTE]).await?,
            catalog,
        })
    }

    pub fn set_catalog(&self, catalog: Vec<u8>) {
        *lock(&self.catalog) = Arc::new(catalog);
    }

    /// The feed's full URL.
    pub fn feed_url(&self) -> String {
        format!("{}{FEED_ROUTE}", self.server.url())
    }

    pub fn feed_calls(&self) -> u64 {
        self.server.calls(FEED_ROUTE)
    }
}

impl Deref for KevStub {
    type Target = StubServer;

    fn deref(&self) -> &StubServer {
        &self.server
    }
}

async fn feed(State(catalog): State<Arc<Mutex<Arc<Vec<u8>>>>>) -> impl IntoResponse {
    let bytes = lock(&catalog).as_ref().clone();
    ([("content-type", "application/json")], bytes)
}
