//! EPSS stub: `GET /epss?cve=A,B` answers in FIRST's format, numbers as
//! strings, from a map the test fills. Like the real API it returns at most
//! 100 rows (with `total` saying how many matched), omits unknown CVEs, and
//! records every `cve` parameter so tests can check the 2000-character split.

use super::server::lock;
use super::stub::{Shared, Stub};
use axum::Json;
use axum::extract::{Query, State};
use axum::routing::get;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};

pub const EPSS_ROUTE: &str = "/epss";

/// Rows per answer, FIRST's default `limit`.
const PAGE: usize = 100;

/// What the EPSS stub serves and saw.
#[derive(Debug, Default)]
pub struct EpssState {
    /// cve → (epss, percentile, date), as strings.
    scores: BTreeMap<String, (String, String, String)>,
    cve_params: Vec<String>,
}

pub type EpssStub = Stub<EpssState>;

impl EpssStub {
    pub async fn start() -> std::io::Result<EpssStub> {
        Stub::serve(EpssState::default(), &[(EPSS_ROUTE, get(epss))]).await
    }

    pub fn set_score(&self, cve: &str, epss: &str, percentile: &str, date: &str) {
        self.state().scores.insert(
            cve.to_owned(),
            (epss.to_owned(), percentile.to_owned(), date.to_owned()),
        );
    }

    /// Adds the `data` rows of a response in FIRST's format (e.g. the docs
    /// example in the fixtures). Returns how many.
    pub fn load_response(&self, json: &[u8]) -> std::io::Result<usize> {
        let response: Value = serde_json::from_slice(json)?;
        let rows = response["data"].as_array().cloned().unwrap_or_default();
        for row in &rows {
            let text = |key: &str| row[key].as_str().unwrap_or_default().to_owned();
            self.set_score(
                &text("cve"),
                &text("epss"),
                &text("percentile"),
                &text("date"),
            );
        }
        Ok(rows.len())
    }

    /// Every `cve` parameter received, in order.
    pub fn cve_params(&self) -> Vec<String> {
        self.state().cve_params.clone()
    }

    pub fn epss_calls(&self) -> u64 {
        self.calls(EPSS_ROUTE)
    }
}

async fn epss(
    State(state): State<Shared<EpssState>>,
    Query(query): Query<HashMap<String, String>>,
) -> Json<Value> {
    let mut state = lock(&state);
    let param = query.get("cve").cloned().unwrap_or_default();
    state.cve_params.push(param.clone());
    let rows: Vec<Value> = param
        .split(',')
        .filter_map(|cve| {
            let (epss, percentile, date) = state.scores.get(cve.trim())?;
            Some(json!({"cve": cve.trim(), "epss": epss, "percentile": percentile, "date": date}))
        })
        .collect();
    let total = rows.len();
    Json(json!({
        "status": "OK",
        "status-code": 200,
        "version": "1.0",
        "access": "private, no-cache",
        "total": total,
        "offset": 0,
        "limit": PAGE,
        "data": rows.into_iter().take(PAGE).collect::<Vec<_>>(),
    }))
}
