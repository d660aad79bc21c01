//! The operator's configuration file (YAML): Redis, the lock, step timeouts
//! and retries, providers and notification channels.

/// Durations in the config are strings like `500ms`, `10s`, `5m`, `6h`.
pub mod duration {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    /// Parses `<number><unit>` with unit `ms`, `s`, `m`, `h` or `d`.
    pub fn parse(text: &str) -> Result<Duration, String> {
        let text = text.trim();
        let split = text
            .find(|c: char| !c.is_ascii_digit())
            .ok_or_else(|| format!("duration {text:?} has no unit (ms, s, m, h, d)"))?;
        let (number, unit) = text.split_at(split);
        let n: u64 = number
            .parse()
            .map_err(|_| format!("duration {text:?} does not start with a whole number"))?;
        let ms = match unit {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return Err(format!("duration {text:?} has unknown unit {unit:?}")),
        };
        n.checked_mul(ms)
            .map(Duration::from_millis)
            .ok_or_else(|| format!("duration {text:?} is too large"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(de: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(de)?;
        parse(&text).map_err(serde::de::Error::custom)
    }

    pub fn serialize<S: Serializer>(d: &Duration, ser: S) -> Result<S::Ok, S::Error> {
        ser.serialize_str(&format!("{}ms", d.as_millis()))
    }

    #[cfg(test)]
    mod tests {
        use super::parse;
        use std::time::Duration;

        #[test]
        fn parses_units_and_rejects_garbage() {
            assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
            assert_eq!(parse("10s"), Ok(Duration::from_secs(10)));
            assert_eq!(parse("6h"), Ok(Duration::from_secs(6 * 3600)));
            for bad in ["", "10", "s", "1.5s", "10y", "-1s"] {
                assert!(parse(bad).is_err(), "{bad:?}");
            }
        }
    }
}
