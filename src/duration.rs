//! Durations as the operator reads them, in an AssetScan (`rescanInterval`)
//! and in the configuration file: whole numbers with units, one after the
//! other (`6h`, `1h30m`, `500ms`). One grammar and one parser; each place
//! says which units it accepts.

use assetscan_domain::text::truncate_chars;
use schemars::{Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer};
use std::time::Duration;

/// A unit of the grammar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Days,
    Hours,
    Minutes,
    Seconds,
    Millis,
}

impl Unit {
    fn symbol(self) -> &'static str {
        match self {
            Unit::Days => "d",
            Unit::Hours => "h",
            Unit::Minutes => "m",
            Unit::Seconds => "s",
            Unit::Millis => "ms",
        }
    }

    fn millis(self) -> u64 {
        match self {
            Unit::Days => 86_400_000,
            Unit::Hours => 3_600_000,
            Unit::Minutes => 60_000,
            Unit::Seconds => 1_000,
            Unit::Millis => 1,
        }
    }
}

/// An AssetScan's units: what the CRD's pattern and CEL's `duration()`
/// both accept, so the API server can also enforce a minimum.
pub const SPEC_UNITS: &[Unit] = &[Unit::Hours, Unit::Minutes, Unit::Seconds];

/// The configuration file's units.
pub const CONFIG_UNITS: &[Unit] = &[
    Unit::Days,
    Unit::Hours,
    Unit::Minutes,
    Unit::Seconds,
    Unit::Millis,
];

/// What [`parse`] accepts with [`CONFIG_UNITS`], as a JSON Schema pattern:
/// the chart's schema refuses at `helm install` a duration the operator
/// would refuse at start. (`ms` before `m`; a unit needs its number, so `5ms`
/// cannot be read as `5m` then `s`.)
pub const CONFIG_PATTERN: &str = "^([0-9]+(ms|s|m|h|d))+$";

/// Longest piece of input quoted in an error.
const QUOTED_CHARS: usize = 64;

/// Not a duration of the grammar with the given units.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {text:?}: expected whole numbers with units {units}, like 6h or 1h30m")]
pub struct DurationError {
    text: String,
    units: String,
}

/// Parses `<number><unit>`, repeated (`1h30m`), with `units` only. The sum
/// must fit in `u64` milliseconds.
pub fn parse(text: &str, units: &[Unit]) -> Result<Duration, DurationError> {
    let invalid = || DurationError {
        text: truncate_chars(text, QUOTED_CHARS),
        units: units
            .iter()
            .map(|u| u.symbol())
            .collect::<Vec<_>>()
            .join(", "),
    };
    if text.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (number, tail) = rest.split_at(digits);
        // The longest symbol that fits, so `ms` is not read as `m` then `s`.
        let unit = units
            .iter()
            .copied()
            .filter(|u| tail.starts_with(u.symbol()))
            .max_by_key(|u| u.symbol().len())
            .ok_or_else(invalid)?;
        total = number
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(unit.millis()))
            .and_then(|ms| total.checked_add(ms))
            .ok_or_else(invalid)?;
        rest = &tail[unit.symbol().len()..];
    }
    Ok(Duration::from_millis(total))
}

/// A configuration file's duration (`#[serde(deserialize_with = ...)]`).
pub fn config<'de, D: Deserializer<'de>>(de: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(de)?;
    parse(&text, CONFIG_UNITS).map_err(serde::de::Error::custom)
}

/// An optional configuration file duration: absent or `null` is `None`.
pub fn config_optional<'de, D: Deserializer<'de>>(de: D) -> Result<Option<Duration>, D::Error> {
    Option::<String>::deserialize(de)?
        .map(|text| parse(&text, CONFIG_UNITS).map_err(serde::de::Error::custom))
        .transpose()
}

/// The schema of a configuration file's duration
/// (`#[schemars(schema_with = ...)]` beside [`config`]): a string of the
/// grammar, not the `{secs, nanos}` object `Duration` would otherwise be.
pub fn config_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "pattern": CONFIG_PATTERN })
}

/// The schema beside [`config_optional`]: a duration, or `null`.
pub fn config_optional_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": ["string", "null"], "pattern": CONFIG_PATTERN })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_add_up() {
        let ms = Duration::from_millis;
        assert_eq!(parse("500ms", CONFIG_UNITS), Ok(ms(500)));
        assert_eq!(parse("10s", CONFIG_UNITS), Ok(ms(10_000)));
        assert_eq!(parse("1m", CONFIG_UNITS), Ok(ms(60_000)));
        assert_eq!(parse("6h", CONFIG_UNITS), Ok(ms(6 * 3_600_000)));
        assert_eq!(parse("7d", CONFIG_UNITS), Ok(ms(7 * 86_400_000)));
        assert_eq!(parse("1h30m", SPEC_UNITS), Ok(ms(5_400_000)));
        assert_eq!(parse("1m1ms", CONFIG_UNITS), Ok(ms(60_001)));
        assert_eq!(parse("0s", SPEC_UNITS), Ok(Duration::ZERO));
    }

    #[test]
    fn garbage_and_foreign_units_are_refused() {
        for bad in [
            "", "10", "s", "1.5s", "10y", "-1s", " 6h", "6h ", "6H", "1m s",
        ] {
            assert!(parse(bad, CONFIG_UNITS).is_err(), "{bad:?}");
        }
        for foreign in ["500ms", "1d"] {
            assert!(parse(foreign, SPEC_UNITS).is_err(), "{foreign:?}");
        }
        assert!(
            parse("99999999999999999999h", SPEC_UNITS).is_err(),
            "overflow"
        );
        assert!(parse(&format!("{}d", u64::MAX / 1000), CONFIG_UNITS).is_err());
        let long = parse(&"1".repeat(10_000), CONFIG_UNITS).unwrap_err();
        assert!(long.to_string().len() < 200, "{long}");
    }

    /// The schema's pattern and the parser agree on what a configuration
    /// duration is.
    #[test]
    fn the_config_pattern_accepts_what_the_parser_does() {
        let pattern = regex::Regex::new(CONFIG_PATTERN).unwrap();
        for text in [
            "500ms", "10s", "1m", "6h", "7d", "1h30m", "1m1ms", "0s", "", "10", "s", "ms", "1.5s",
            "10y", "-1s", " 6h", "6h ", "6H", "1m s", "5msm", "1dd", "01s",
        ] {
            assert_eq!(
                pattern.is_match(text),
                parse(text, CONFIG_UNITS).is_ok(),
                "{text:?}"
            );
        }
    }
}
