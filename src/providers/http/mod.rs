//! The HTTP plumbing every provider shares: one settings type and one
//! constructor ([`HttpClient::new`]), one capped body reader, one
//! classifier from failures to [`HttpError`], and one rule for what of a URL
//! may be shown.

mod client;
mod error;
mod guard;
mod settings;
mod url;

pub use client::install_crypto_provider;
pub(crate) use client::{HttpClient, Reply};
pub use error::HttpError;
pub(crate) use error::is_retryable_status;
pub use guard::{EgressGuard, GuardError};
pub(crate) use settings::HttpProfile;
pub use settings::HttpSettings;
pub(crate) use url::{SecretUrl, join_path, parse_http_url};
