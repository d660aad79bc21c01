//! The shape every provider stub has: a [`StubServer`] on a few routes
//! whose handlers share one state with the test that drives them. Each stub
//! is a [`Stub`] of its own state (`pub type EpssStub = Stub<EpssState>`),
//! so starting one, reaching its state and its server (`url()`, `faults()`,
//! `calls(route)`) are written once, here, and not once per provider.

use super::server::{StubServer, lock};
use axum::Router;
use axum::routing::MethodRouter;
use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard};

/// The state a stub's handlers and its test share (axum's `State`).
pub(crate) type Shared<S> = Arc<Mutex<S>>;

/// A running provider stub: its server and the state of its provider.
/// Derefs to its [`StubServer`]; stops when dropped.
#[derive(Debug)]
pub struct Stub<S> {
    server: StubServer,
    state: Shared<S>,
}

impl<S: Send + 'static> Stub<S> {
    /// Serves `routes` (pattern, handler) on a free loopback port, their
    /// handlers sharing `state`, and counts the calls to each pattern.
    pub(crate) async fn serve(
        state: S,
        routes: &[(&'static str, MethodRouter<Shared<S>>)],
    ) -> std::io::Result<Stub<S>> {
        let state = Arc::new(Mutex::new(state));
        let router = routes
            .iter()
            .fold(Router::new(), |router, (pattern, handler)| {
                router.route(pattern, handler.clone())
            })
            .with_state(Arc::clone(&state));
        let patterns: Vec<&'static str> = routes.iter().map(|(pattern, _)| *pattern).collect();
        Ok(Stub {
            server: StubServer::start(router, &patterns).await?,
            state,
        })
    }
}

impl<S> Stub<S> {
    /// The provider's state, as its handlers see it.
    pub(crate) fn state(&self) -> MutexGuard<'_, S> {
        lock(&self.state)
    }

    /// The full URL of `path` on this stub.
    pub(crate) fn url_of(&self, path: &str) -> String {
        format!("{}{path}", self.server.url())
    }
}

impl<S> Deref for Stub<S> {
    type Target = StubServer;

    fn deref(&self) -> &StubServer {
        &self.server
    }
}
