//! YAML as the operator reads and writes it: the configuration file, the
//! CRDs it prints, a `scan --from` package list. One set of reading rules
//! for all of them, those of YAML 1.2's core schema (as serde_yaml 0.9, the
//! crate used before serde-saphyr, read them):
//!
//! - `true` and `false` are booleans; `yes`, `no`, `on`, `off` are strings
//!   (a `bool` field refuses them);
//! - a number spelled with leading zeros (`0755`) or underscores (`1_000`)
//!   is a string unless its field is a number;
//! - `key: ~`, `key: null` and `key:` give `None` to an `Option`, and their
//!   text (`"~"`, `"null"`, `""`) to a `String`;
//! - a repeated key goes to the type: a struct refuses the repeated field, a
//!   map keeps the last value;
//! - `.nan` and `.inf` in an untyped value reach it as floats (JSON's
//!   `Value` makes them `null`).
//!
//! An error names its line and column and says what was wrong; it never
//! quotes the document's lines, which may hold a credential (a Redis URL
//! with its password).

use serde::Serialize;
use serde::de::{Deserialize, DeserializeOwned};
use serde_saphyr::{DuplicateKeyPolicy, MessageFormatter, NonFiniteFloatPolicy};
use std::fmt;

/// The reading rules above, as serde-saphyr's options.
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

/// Reads one YAML document (a stream of several is an error).
pub fn from_str<'de, T: Deserialize<'de>>(text: &'de str) -> Result<T, YamlError> {
    serde_saphyr::from_str_with_options(text, options()).map_err(YamlError::from)
}

/// Reads one YAML document from UTF-8 bytes.
pub fn from_slice<'de, T: Deserialize<'de>>(bytes: &'de [u8]) -> Result<T, YamlError> {
    serde_saphyr::from_slice_with_options(bytes, options()).map_err(YamlError::from)
}

/// Reads a stream of documents separated by `---` (as `kubectl` and
/// `helm template` print them); empty and `null` documents are left out.
pub fn from_multiple<T: DeserializeOwned>(text: &str) -> Result<Vec<T>, YamlError> {
    serde_saphyr::from_multiple_with_options(text, options()).map_err(YamlError::from)
}

/// Writes `value` as one YAML document. Strings another reader could take
/// for something else (`"yes"`, `"0755"`, `"null"`) are quoted.
pub fn to_string<T: Serialize>(value: &T) -> Result<String, serde_saphyr::SerializeError> {
    serde_saphyr::to_string(value)
}

/// Why a YAML document could not be read, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct YamlError {
    /// Line and column (from 1), when the parser knows them.
    position: Option<(u64, u64)>,
    message: String,
}

impl YamlError {
    /// Line and column (from 1) of the fault, when known.
    pub fn position(&self) -> Option<(u64, u64)> {
        self.position
    }

    /// What was wrong, without the position.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for YamlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.position {
            Some((line, column)) => write!(f, "line {line} column {column}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for YamlError {}

impl From<serde_saphyr::Error> for YamlError {
    fn from(err: serde_saphyr::Error) -> YamlError {
        let err = err.without_snippet();
        let position = err
            .location()
            .filter(|l| l.line() > 0)
            .map(|l| (l.line(), l.column()));
        // The formatter's text is not yet cleaned of control characters
        // (a quoted value may hold a newline): one line, always.
        let message = serde_saphyr::DefaultMessageFormatter
            .format_message(err)
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        YamlError { position, message }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::{Value, json};
    use std::collections::BTreeMap;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Section {
        on: Option<bool>,
        name: Option<String>,
        count: Option<u32>,
    }

    #[test]
    fn scalars_read_as_yaml_1_2() {
        let v: Value =
            from_str("a: yes\nb: 0755\nc: 1_000\nd: ~\ne: 0x1F\nf: .nan\ng: 'on'\n").unwrap();
        assert_eq!(
            v,
            json!({"a": "yes", "b": "0755", "c": "1_000", "d": null, "e": 31, "f": null, "g": "on"})
        );
        assert!(from_str::<Section>("on: yes").is_err());
        assert_eq!(from_str::<Section>("on: True").unwrap().on, Some(true));
        let s: Section = from_str("name: 0755\ncount: 12").unwrap();
        assert_eq!((s.name.as_deref(), s.count), (Some("0755"), Some(12)));
    }

    #[test]
    fn nulls_and_repeated_keys_as_before() {
        let m: BTreeMap<String, String> = from_str("a: ~\nb:\nc: null").unwrap();
        assert_eq!((&*m["a"], &*m["b"], &*m["c"]), ("~", "", "null"));
        assert_eq!(from_str::<Section>("name: ~").unwrap().name, None);
        let m: BTreeMap<String, u32> = from_str("a: 1\na: 2").unwrap();
        assert_eq!(m["a"], 2);
        assert!(from_str::<Section>("count: 1\ncount: 2").is_err());
    }

    #[test]
    fn streams_skip_empty_documents() {
        let text = "---\n# Source: a.yaml\nkind: A\n---\n# only a comment\n---\nkind: B\n";
        let docs: Vec<Value> = from_multiple(text).unwrap();
        assert_eq!(docs, vec![json!({"kind": "A"}), json!({"kind": "B"})]);
        assert!(from_str::<Value>(text).is_err(), "one document only");
    }

    #[test]
    fn errors_name_the_position_and_never_quote_the_text() {
        let text = "url: redis://:hunter2@redis:6379\ncount: -1\n";
        let err = from_str::<BTreeMap<String, Value>>("a: [1\n").unwrap_err();
        assert_eq!(err.position(), Some((1, 4)), "{err}");
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct WithUrl {
            url: String,
            count: u32,
        }
        let err = from_str::<WithUrl>(text).unwrap_err();
        assert_eq!(err.position(), Some((2, 8)), "{err}");
        assert!(err.to_string().starts_with("line 2 column 8: "), "{err}");
        assert!(!err.to_string().contains("hunter2"), "{err}");
        assert!(!err.message().contains('\n'), "{err}");
    }

    #[test]
    fn written_yaml_reads_back() {
        let v = json!({"s": "yes", "t": "0755", "n": null, "m": "a\nb\n", "k": "a: b", "l": "x ".repeat(60)});
        let text = to_string(&v).unwrap();
        assert!(text.contains("s: \"yes\""), "{text}");
        assert_eq!(from_str::<Value>(&text).unwrap(), v);
    }
}
