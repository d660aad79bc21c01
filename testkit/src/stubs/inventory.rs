//! Inventory stub: `GET /assets/{id}` answers `{"online": <bool>}` from a
//! map the test sets; unknown assets get 404.

use super::server::lock;
use super::stub::{Shared, Stub};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;
use std::collections::HashMap;

pub const ASSET_ROUTE: &str = "/assets/{id}";

/// Which assets the inventory knows, and whether each is online.
#[derive(Debug, Default)]
pub struct InventoryState {
    online: HashMap<String, bool>,
    /// Requests per asset.
    asked: HashMap<String, u32>,
}

pub type InventoryStub = Stub<InventoryState>;

impl InventoryStub {
    pub async fn start() -> std::io::Result<InventoryStub> {
        Stub::serve(InventoryState::default(), &[(ASSET_ROUTE, get(asset))]).await
    }

    pub fn set_online(&self, asset: &str, online: bool) {
        self.state().online.insert(asset.to_owned(), online);
    }

    pub fn asset_calls(&self) -> u64 {
        self.calls(ASSET_ROUTE)
    }

    /// Assets asked about more than once: each is an online check made
    /// twice (a run repeated, or one step of it).
    pub fn assets_asked_twice(&self) -> usize {
        self.state().asked.values().filter(|n| **n > 1).count()
    }
}

async fn asset(State(state): State<Shared<InventoryState>>, Path(id): Path<String>) -> Response {
    let mut state = lock(&state);
    *state.asked.entry(id.clone()).or_default() += 1;
    match state.online.get(&id) {
        Some(online) => Json(json!({"assetId": id, "online": online})).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            Json(json!({"error": "unknown asset"})),
        )
            .into_response(),
    }
}
