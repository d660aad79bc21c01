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
}

async fn asset(State(state): State<Shared<InventoryState>>, Path(id): Path<String>) -> Response {
    match lock(&state).online.get(&id) {
        Some(online) => Json(json!({"assetId": id, "online": online})).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            Json(json!({"error": "unknown asset"})),
        )
            .into_response(),
    }
}
