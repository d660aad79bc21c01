//! OSV API stub: `POST /v1/querybatch` and `GET /v1/vulns/{id}`.
//!
//! Records are served verbatim (bytes from a directory or inserted by the
//! test). Which ids a package has is set by the test per `ecosystem/name` or
//! per unversioned purl: the stub does not evaluate affected ranges, so
//! versions in queries are ignored. With a page size set, results longer than
//! it are paged with `next_page_token`, as osv.dev does past 1000. A canned
//! querybatch answer (e.g. a recorded cassette) can replace all of that.

use super::fixtures::{FixtureDataError, json_files, read_file};
use super::server::lock;
use super::stub::{Shared, Stub};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use std::collections::HashMap;

pub const QUERYBATCH_ROUTE: &str = "/v1/querybatch";
pub const VULN_ROUTE: &str = "/v1/vulns/{id}";

/// The records the OSV stub serves, what it answers for which package, and
/// the querybatch requests it saw.
#[derive(Debug, Default)]
pub struct OsvState {
    records: HashMap<String, Vec<u8>>,
    /// `ecosystem/name` or an unversioned purl → vulnerability ids.
    packages: HashMap<String, Vec<String>>,
    page_size: Option<usize>,
    canned: Option<Value>,
    requests: Vec<Value>,
    /// Queries (packages asked about) over every querybatch request.
    queries: u64,
    /// Keep no request bodies (a long run would hold every one).
    forget_requests: bool,
}

pub type OsvStub = Stub<OsvState>;

impl OsvStub {
    pub async fn start() -> std::io::Result<OsvStub> {
        let routes = [
            (QUERYBATCH_ROUTE, post(querybatch)),
            (VULN_ROUTE, get(vuln)),
        ];
        Stub::serve(OsvState::default(), &routes).await
    }

    /// Serves every `*.json` file of `dir` under its `id`. Returns how many.
    pub fn load_records_dir(&self, dir: &std::path::Path) -> Result<usize, FixtureDataError> {
        let files = json_files(dir)?;
        for path in &files {
            self.insert_record(read_file(path)?)
                .map_err(|e| FixtureDataError::Invalid {
                    path: path.clone(),
                    reason: e.to_string(),
                })?;
        }
        Ok(files.len())
    }

    /// Serves one record (raw JSON bytes, kept verbatim) under its `id`.
    pub fn insert_record(&self, json: Vec<u8>) -> std::io::Result<()> {
        let value: Value = serde_json::from_slice(&json)?;
        let id = value["id"].as_str().ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, "record without id")
        })?;
        self.state().records.insert(id.to_owned(), json);
        Ok(())
    }

    /// Maps every served record to the packages its `affected[].package`
    /// names (`ecosystem/name`), so that queries for those packages find it,
    /// as on osv.dev (versions are still not evaluated). Returns the number
    /// of package entries.
    pub fn index_affected_packages(&self) -> usize {
        let mut state = self.state();
        let mut index: HashMap<String, Vec<String>> = HashMap::new();
        for (id, raw) in &state.records {
            let Ok(record) = serde_json::from_slice::<Value>(raw) else {
                continue;
            };
            for affected in record["affected"].as_array().into_iter().flatten() {
                let package = &affected["package"];
                if let (Some(eco), Some(name)) =
                    (package["ecosystem"].as_str(), package["name"].as_str())
                {
                    let ids = index.entry(format!("{eco}/{name}")).or_default();
                    if !ids.contains(id) {
                        ids.push(id.clone());
                    }
                }
            }
        }
        let count = index.len();
        for (key, mut ids) in index {
            ids.sort();
            state.packages.entry(key).or_default().extend(ids);
        }
        count
    }

    pub fn set_package_vulns(&self, ecosystem: &str, name: &str, ids: &[&str]) {
        self.set_vulns(format!("{ecosystem}/{name}"), ids);
    }

    /// `purl` without version (`pkg:pypi/jinja2`); queries match it with or
    /// without one.
    pub fn set_purl_vulns(&self, purl: &str, ids: &[&str]) {
        self.set_vulns(unversioned_purl(purl), ids);
    }

    fn set_vulns(&self, key: String, ids: &[&str]) {
        let ids = ids.iter().map(|s| s.to_string()).collect();
        self.state().packages.insert(key, ids);
    }

    /// Page results longer than `size` (None: never page).
    pub fn set_page_size(&self, size: Option<usize>) {
        self.state().page_size = size;
    }

    /// Answer every querybatch with this body, whatever the queries.
    pub fn replay_querybatch(&self, response: Value) {
        self.state().canned = Some(response);
    }

    /// The querybatch request bodies received, in order.
    pub fn querybatch_requests(&self) -> Vec<Value> {
        self.state().requests.clone()
    }

    /// Packages asked about over every querybatch request so far.
    pub fn queries_received(&self) -> u64 {
        self.state().queries
    }

    /// Stops keeping request bodies ([`OsvStub::querybatch_requests`] stays
    /// empty); the counts go on.
    pub fn forget_requests(&self) {
        let mut state = self.state();
        state.forget_requests = true;
        state.requests.clear();
    }

    pub fn querybatch_calls(&self) -> u64 {
        self.calls(QUERYBATCH_ROUTE)
    }

    pub fn vuln_calls(&self) -> u64 {
        self.calls(VULN_ROUTE)
    }
}

/// `pkg:deb/ubuntu/openssh@1:8.9p1?arch=source` → `pkg:deb/ubuntu/openssh?arch=source`.
fn unversioned_purl(purl: &str) -> String {
    match purl.find('@') {
        None => purl.to_owned(),
        Some(at) => {
            let rest = &purl[at..];
            let end = rest.find(['?', '#']).map_or(purl.len(), |i| at + i);
            format!("{}{}", &purl[..at], &purl[end..])
        }
    }
}

fn error(status: StatusCode, code: u16, message: &str) -> Response {
    (status, Json(json!({"code": code, "message": message}))).into_response()
}

async fn querybatch(State(state): State<Shared<OsvState>>, body: Bytes) -> Response {
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return error(StatusCode::BAD_REQUEST, 3, "invalid JSON");
    };
    let mut state = lock(&state);
    state.queries += request["queries"].as_array().map_or(0, |q| q.len() as u64);
    if !state.forget_requests {
        state.requests.push(request.clone());
    }
    if let Some(canned) = &state.canned {
        return Json(canned.clone()).into_response();
    }
    let Some(queries) = request["queries"].as_array() else {
        return error(StatusCode::BAD_REQUEST, 3, "queries missing");
    };
    let results: Vec<Value> = queries.iter().map(|q| answer(&state, q)).collect();
    Json(json!({"results": results})).into_response()
}

/// One query's result: `{}` without hits, else a page of `{id, modified}`.
fn answer(state: &OsvState, query: &Value) -> Value {
    let package = &query["package"];
    let key = match (
        package["purl"].as_str(),
        package["ecosystem"].as_str(),
        package["name"].as_str(),
    ) {
        (Some(purl), _, _) => unversioned_purl(purl),
        (None, Some(ecosystem), Some(name)) => format!("{ecosystem}/{name}"),
        _ => return json!({}),
    };
    let ids = state
        .packages
        .get(&key)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let offset: usize = query["page_token"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or(0);
    let end = state
        .page_size
        .map_or(ids.len(), |size| ids.len().min(offset + size));
    let page = ids.get(offset..end).unwrap_or_default();
    if page.is_empty() {
        return json!({});
    }
    let vulns: Vec<Value> = page
        .iter()
        .map(|id| json!({"id": id, "modified": modified(state, id)}))
        .collect();
    let mut result = json!({"vulns": vulns});
    if end < ids.len() {
        result["next_page_token"] = json!(end.to_string());
    }
    result
}

/// The served record's `modified`, as osv.dev reports it in batch results.
fn modified(state: &OsvState, id: &str) -> Value {
    state
        .records
        .get(id)
        .and_then(|bytes| serde_json::from_slice::<Value>(bytes).ok())
        .map_or(json!("1970-01-01T00:00:00Z"), |record| {
            record["modified"].clone()
        })
}

async fn vuln(State(state): State<Shared<OsvState>>, Path(id): Path<String>) -> Response {
    match lock(&state).records.get(&id) {
        Some(bytes) => ([("content-type", "application/json")], bytes.clone()).into_response(),
        None => error(StatusCode::NOT_FOUND, 5, "Vulnerability not found"),
    }
}

#[cfg(test)]
mod tests {
    use super::unversioned_purl;

    #[test]
    fn purls_lose_their_version_only() {
        assert_eq!(unversioned_purl("pkg:pypi/jinja2@3.1.4"), "pkg:pypi/jinja2");
        assert_eq!(
            unversioned_purl("pkg:deb/ubuntu/openssh@1:8.9p1-3ubuntu0.10?arch=source&distro=jammy"),
            "pkg:deb/ubuntu/openssh?arch=source&distro=jammy"
        );
        assert_eq!(unversioned_purl("pkg:golang/stdlib"), "pkg:golang/stdlib");
    }
}
