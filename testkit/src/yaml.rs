//! YAML as the test kit reads it (manifests, `kubectl` and `helm` output,
//! request bodies): with the operator's rules (its `src/yaml.rs`, which
//! explains them): YAML 1.2's core schema, a repeated key left to the type,
//! `~` into a `String` as its text, errors on one line without the
//! document's text.

use serde::de::DeserializeOwned;
use serde_saphyr::{DuplicateKeyPolicy, NonFiniteFloatPolicy};

/// The reading rules, as serde-saphyr's options.
pub fn options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        strict_booleans: true,
        leading_zero_numbers_as_strings: true,
        underscored_numbers_as_strings: true,
        null_as_string: true,
        duplicate_keys: DuplicateKeyPolicy::PassThrough,
        non_finite_float_policy: NonFiniteFloatPolicy::PassThrough,
        with_snippet: false,
    }
}

/// Reads one YAML document.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, serde_saphyr::Error> {
    serde_saphyr::from_str_with_options(text, options())
}

/// Reads one YAML document from UTF-8 bytes.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, serde_saphyr::Error> {
    serde_saphyr::from_slice_with_options(bytes, options())
}

/// Reads a stream of documents separated by `---`; empty and `null`
/// documents are left out.
pub fn from_multiple<T: DeserializeOwned>(text: &str) -> Result<Vec<T>, serde_saphyr::Error> {
    serde_saphyr::from_multiple_with_options(text, options())
}
