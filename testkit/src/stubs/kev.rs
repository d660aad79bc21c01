//! KEV feed stub: `GET /known_exploited_vulnerabilities.json` serves a
//! catalog's bytes verbatim (the real one from the fixtures, or a variant a
//! test derives), replaceable at runtime.

use super::fixtures::{Fixtures, KEV_CATALOG};
use super::server::lock;
use super::stub::{Shared, Stub};
use axum::extract::State;
use axum::response::IntoResponse;
use axum::routing::get;

pub const FEED_ROUTE: &str = "/known_exploited_vulnerabilities.json";

/// The catalog the feed serves, replaced whole by the test.
#[derive(Debug)]
pub struct KevState {
    catalog: Vec<u8>,
}

pub type KevStub = Stub<KevState>;

impl KevStub {
    /// Serves the real catalog from the fixtures.
    pub async fn start() -> std::io::Result<KevStub> {
        KevStub::start_with(Fixtures::locate().read(KEV_CATALOG)?).await
    }

    pub async fn start_with(catalog: Vec<u8>) -> std::io::Result<KevStub> {
        Stub::serve(KevState { catalog }, &[(FEED_ROUTE, get(feed))]).await
    }

    pub fn set_catalog(&self, catalog: Vec<u8>) {
        self.state().catalog = catalog;
    }

    /// The feed's full URL.
    pub fn feed_url(&self) -> String {
        self.url_of(FEED_ROUTE)
    }

    pub fn feed_calls(&self) -> u64 {
        self.calls(FEED_ROUTE)
    }
}

async fn feed(State(state): State<Shared<KevState>>) -> impl IntoResponse {
    let bytes = lock(&state).catalog.clone();
    ([("content-type", "application/json")], bytes)
}
