//! SBOM source stub: `GET /sbom/{*path}` answers the document the test put
//! at that path (404 for any other), after that path's delay if it has one;
//! it counts the calls and the body bytes served per path.

use super::server::lock;
use super::stub::{Shared, Stub};
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::collections::HashMap;
use std::time::Duration;

pub const DOCUMENT_ROUTE: &str = "/sbom/{*path}";

/// The documents by path, and what was served.
#[derive(Debug, Default)]
pub struct SbomState {
    documents: HashMap<String, Vec<u8>>,
    delays: HashMap<String, Duration>,
    calls: HashMap<String, u64>,
    bytes: u64,
}

pub type SbomStub = Stub<SbomState>;

impl SbomStub {
    pub async fn start() -> std::io::Result<SbomStub> {
        Stub::serve(SbomState::default(), &[(DOCUMENT_ROUTE, get(document))]).await
    }

    /// The source's `baseUrl`.
    pub fn base_url(&self) -> String {
        self.url_of("/sbom")
    }

    /// Serves `body` at `path` (below the base URL).
    pub fn put(&self, path: &str, body: Vec<u8>) {
        self.state().documents.insert(path.to_owned(), body);
    }

    /// Answers `path` only after `delay` (a slow source).
    pub fn delay(&self, path: &str, delay: Duration) {
        self.state().delays.insert(path.to_owned(), delay);
    }

    /// Calls for `path` so far, answered or not.
    pub fn calls_of(&self, path: &str) -> u64 {
        self.state().calls.get(path).copied().unwrap_or(0)
    }

    /// Calls for any path so far.
    pub fn document_calls(&self) -> u64 {
        self.calls(DOCUMENT_ROUTE)
    }

    /// Body bytes of the documents served so far.
    pub fn bytes_served(&self) -> u64 {
        self.state().bytes
    }
}

async fn document(State(state): State<Shared<SbomState>>, Path(path): Path<String>) -> Response {
    let delay = {
        let mut state = lock(&state);
        *state.calls.entry(path.clone()).or_default() += 1;
        state.delays.get(&path).copied()
    };
    if let Some(delay) = delay {
        tokio::time::sleep(delay).await;
    }
    let mut state = lock(&state);
    match state.documents.get(&path).cloned() {
        Some(body) => {
            state.bytes += body.len() as u64;
            ([(header::CONTENT_TYPE, "application/json")], body).into_response()
        }
        None => (StatusCode::NOT_FOUND, "no such document").into_response(),
    }
}
