//! Answers as HTTP: JSON bodies with `Warning` headers, `Status` errors
//! (with `Retry-After` where the error carries one), metadata-only
//! renderings, and the plain-text 404 of paths outside the API.

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::error::ApiError;
use super::request::Reply;
use super::table;

pub fn json_response(code: u16, body: &Value, warnings: &[String]) -> Response {
    let mut resp = Response::new(Body::from(body.to_string()));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    for w in warnings {
        let value = format!("299 - {w:?}");
        if let Ok(v) = HeaderValue::from_str(&value) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    resp
}

pub fn error_response(err: &ApiError) -> Response {
    let mut resp = json_response(err.code(), &err.to_status(), &[]);
    if let Some(secs) = err.retry_after()
        && let Ok(v) = HeaderValue::from_str(&secs.to_string())
    {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    resp
}

pub fn reply(accept: &str, result: Result<Reply, ApiError>) -> Response {
    match result {
        Ok(r) if table::wants_metadata(accept) => {
            json_response(r.code, &table::as_metadata(&r.body), &r.warnings)
        }
        Ok(r) => json_response(r.code, &r.body, &r.warnings),
        Err(e) => error_response(&e),
    }
}

pub fn not_found_text() -> Response {
    let mut resp = (StatusCode::NOT_FOUND, "404 page not found\n").into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}
