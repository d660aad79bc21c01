//! The chart's values schema (charts/assetscan-operator/values.schema.json),
//! generated from types: the operator's configuration file from the same
//! sections the operator reads ([`crate::cli::config::Config`]), the
//! chart's own values from [`values::ChartValues`]. Helm checks every
//! install and upgrade against it, so a typo or a value the operator would
//! refuse fails `helm install` instead of the pods' start; and since it is
//! generated, a new key of the configuration reaches the chart's schema
//! without a second copy to keep in step. `assetscan-operator
//! values-schema` prints it (`make chart-schema` writes it); a test fails
//! when the committed file differs.

mod alerts;
mod kinds;
mod metrics;
mod network;
pub mod values;

use schemars::generate::SchemaSettings;
use schemars::transform::RecursiveTransform;
use schemars::{Schema, SchemaGenerator};
use serde_json::Value;

/// Where the chart keeps the schema, from the repository's root.
pub const VALUES_SCHEMA_PATH: &str = "charts/assetscan-operator/values.schema.json";

/// The values schema as the chart holds it: JSON Schema draft-07 (what
/// every Helm release reads), every type written out in place, and only
/// what checks or explains a value (the Rust types' integer formats and
/// defaults say nothing to Helm, and values.yaml holds the defaults).
pub fn values_schema() -> Result<String, serde_json::Error> {
    let generator = SchemaGenerator::new(SchemaSettings::draft07().with(|settings| {
        settings.inline_subschemas = true;
        settings
            .transforms
            .push(Box::new(RecursiveTransform(for_helm)));
    }));
    let schema = generator.into_root_schema_for::<values::ChartValues>();
    let mut text = serde_json::to_string_pretty(&schema)?;
    text.push('\n');
    Ok(text)
}

/// One schema object as the chart's file holds it: without `format` and
/// `default`, with each description's paragraphs on one line each (doc
/// comments wrap at 80 columns; an editor showing the description wraps
/// it itself).
fn for_helm(schema: &mut Schema) {
    schema.remove("format");
    schema.remove("default");
    if let Some(Value::String(text)) = schema.get_mut("description") {
        *text = unwrap_lines(text);
    }
    if schema.get("description").and_then(Value::as_str) == Some("") {
        schema.remove("description");
    }
}

/// `text` with the line breaks inside each paragraph made spaces; an
/// example (a fenced block) keeps its lines.
fn unwrap_lines(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| {
            if paragraph.starts_with("```") {
                paragraph.to_owned()
            } else {
                paragraph
                    .split('\n')
                    .map(str::trim)
                    .collect::<Vec<_>>()
                    .join(" ")
            }
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// The committed schema is the generated one: a key added to a type
    /// (or a value of the chart) without `make chart-schema` fails here.
    #[test]
    fn the_chart_values_schema_is_generated_from_the_types() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(VALUES_SCHEMA_PATH);
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == values_schema().unwrap(),
            "{} differs from what the types generate; regenerate it with `make chart-schema`",
            path.display()
        );
    }

    /// Every duration of the configuration reads as the operator's grammar:
    /// a `Duration` field without `#[schemars(schema_with =
    /// "crate::duration::config_schema")]` would be `{secs, nanos}` here.
    #[test]
    fn durations_are_strings_of_the_grammar() {
        let schema = values_schema().unwrap();
        assert!(
            !schema.contains("\"nanos\""),
            "a Duration field without its schema"
        );
        assert!(schema.contains(crate::duration::CONFIG_PATTERN));
    }

    #[test]
    fn paragraphs_keep_their_breaks_and_lose_their_wrapping() {
        assert_eq!(
            unwrap_lines("a\nb\n\nc\n d\n\n```yaml\nk: v\n```"),
            "a b\n\nc d\n\n```yaml\nk: v\n```"
        );
    }
}
