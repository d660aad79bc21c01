//! Inventory stub: `GET /assets/{id}` answers `{"online": <bool>}` from a
//! map the test sets; unknown assets get 404.

use super::server::{StubServer, lock};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;
use std::collections::HashMap;
use std::ops::Deref;
use std::sync::{Arc, Mutex};

pub const ASSET_ROUTE: &str = "/assets/{id}";

#[derive(Debug)]
pub struct InventoryStub {
    server: StubServer,
    online: Arc<Mutex<HashMap<String, bool>>>,
}

impl InventoryStub {
    pub async fn start() -> std::io::Result<InventoryStub> {
        let online = Arc::new(Mutex::new(HashMap::new()));
        let router = Router::new()
            .route(ASSET_ROUTE, get(asset))
            .with_state(Arc::clone(&online));
        Ok(InventoryStub {
            server: StubServer::start(router, &[ASSET_ROUTE]).await?,
            online,
        })
    }

    pub fn set_online(&self, asset: &str, online: bool) {
        lock(&self.online).insert(asset.to_owned(), online);
    }

    pub fn asset_calls(&self) -> u64 {
        self.server.calls(ASSET_ROUTE)
    }
}

impl Deref for InventoryStub {
    type Target = StubServer;

    fn deref(&self) -> &StubServer {
        &self.server
    }
}

async fn asset(
    State(online): State<Arc<Mutex<HashMap<String, bool>>>>,
    Path(id): Path<String>,
) -> Response {
    match lock(&online).get(&id) {
        Some(online) => Json(json!({"assetId": id, "online": online})).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            Json(json!({"error": "unknown asset"})),
        )
            .into_response(),
    }
}
