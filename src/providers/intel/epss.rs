//! Exploit prediction scores from FIRST's EPSS API
//! (<https://api.first.org/epss>): `GET <base>/epss?cve=A,B,…` answers
//! `{"status":"OK", …, "data":[{"cve","epss","percentile","date"}]}` with the
//! numbers as strings (`"0.972240000"`). CVEs EPSS does not know are simply
//! absent from `data`.
//!
//! FIRST documents at most 2000 characters for `cve` and pages answers at
//! 100 rows by default, so CVEs go out in batches that respect both.

use crate::providers::cve::is_cve_id;
use crate::providers::error::{ProviderConfigError, check_at_least};
use crate::providers::http::{
    HttpClient, HttpError, HttpProfile, HttpSettings, Reply, join_path, parse_http_url,
};
use reqwest::Url;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;
use std::time::Duration;

const PROVIDER: &str = "epss";

const PROFILE: HttpProfile = HttpProfile::api(PROVIDER, Duration::from_secs(10), 1024 * 1024);

/// `threatIntel.epss` in the config. Every key is optional.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct EpssConfig {
    /// Set to false to skip EPSS. Default true.
    pub enabled: bool,
    /// Default `https://api.first.org/data/v1`; requests go to `<baseUrl>/epss`.
    pub base_url: String,
    /// `timeout` per HTTP call (default `10s`), `maxBodyBytes` (default
    /// 1 MiB), `bearerTokenFrom`.
    #[serde(flatten)]
    pub http: HttpSettings,
    /// Length limit of the `cve` parameter (comma-separated). Default 2000.
    pub max_cve_param_chars: usize,
    /// CVEs per request; keep it at most the API's page size. Default 100.
    pub max_cves_per_request: usize,
}

impl Default for EpssConfig {
    fn default() -> EpssConfig {
        EpssConfig {
            enabled: true,
            base_url: "https://api.first.org/data/v1".to_owned(),
            http: HttpSettings::default(),
            max_cve_param_chars: 2000,
            max_cves_per_request: 100,
        }
    }
}

/// One CVE's EPSS row.
#[derive(Clone, Debug, PartialEq)]
pub struct EpssScore {
    /// Probability of exploitation in the next 30 days, 0..1.
    pub epss: f64,
    /// Rank among all scored CVEs, 0..1.
    pub percentile: f64,
    /// The model's score date, `YYYY-MM-DD`.
    pub date: String,
}

#[derive(Debug)]
pub struct EpssClient {
    http: HttpClient,
    url: Url,
    max_param_chars: usize,
    max_per_request: usize,
}

#[derive(Deserialize)]
struct Response {
    data: Vec<Row>,
    #[serde(default)]
    total: Option<u64>,
}

#[derive(Deserialize)]
struct Row {
    cve: String,
    #[serde(deserialize_with = "number_or_string")]
    epss: f64,
    #[serde(deserialize_with = "number_or_string")]
    percentile: f64,
    #[serde(default)]
    date: String,
}

impl EpssClient {
    pub fn new(config: &EpssConfig) -> Result<EpssClient, ProviderConfigError> {
        // The longest CVE id seen so far has 19 characters.
        let max_param_chars =
            check_at_least(PROVIDER, "maxCveParamChars", config.max_cve_param_chars, 20)?;
        let max_per_request = check_at_least(
            PROVIDER,
            "maxCvesPerRequest",
            config.max_cves_per_request,
            1,
        )?;
        let base = parse_http_url(PROVIDER, "baseUrl", &config.base_url)?;
        Ok(EpssClient {
            http: HttpClient::new(&PROFILE, &config.http)?,
            url: join_path(&base, &["epss"]),
            max_param_chars,
            max_per_request,
        })
    }

    /// Scores for the given CVEs (strings that are not CVE ids are skipped).
    pub async fn scores(&self, cves: &[String]) -> Result<BTreeMap<String, EpssScore>, HttpError> {
        let mut scores = BTreeMap::new();
        let wanted: Vec<&str> = cves
            .iter()
            .map(String::as_str)
            .filter(|c| is_cve_id(c))
            .collect();
        for param in batches(&wanted, self.max_param_chars, self.max_per_request) {
            let mut url = self.url.clone();
            url.query_pairs_mut().append_pair("cve", &param);
            let reply = self.http.send(self.http.get(url)).await?.success()?;
            let response: Response = reply.json()?;
            if response
                .total
                .is_some_and(|t| t > response.data.len() as u64)
            {
                tracing::warn!(
                    total = response.total,
                    rows = response.data.len(),
                    "EPSS answer was paged; rows missing"
                );
            }
            for row in response.data {
                check_range(&reply, &row)?;
                let score = EpssScore {
                    epss: row.epss,
                    percentile: row.percentile,
                    date: row.date,
                };
                scores.insert(row.cve, score);
            }
        }
        Ok(scores)
    }
}

fn check_range(reply: &Reply, row: &Row) -> Result<(), HttpError> {
    let unit = 0.0..=1.0;
    if unit.contains(&row.epss) && unit.contains(&row.percentile) {
        Ok(())
    } else {
        Err(reply.malformed(
            "an EPSS score outside 0..1",
            format!("{}: epss/percentile outside 0..1", row.cve),
        ))
    }
}

/// Comma-joined `cve` values, each at most `max_chars` long and holding at
/// most `max_count` ids.
fn batches(cves: &[&str], max_chars: usize, max_count: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut count = 0;
    for cve in cves {
        let needed = if current.is_empty() {
            cve.len()
        } else {
            cve.len() + 1
        };
        if count > 0 && (current.len() + needed > max_chars || count == max_count) {
            out.push(std::mem::take(&mut current));
            count = 0;
        }
        if !current.is_empty() {
            current.push(',');
        }
        current.push_str(cve);
        count += 1;
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// EPSS sends numbers as strings; accept real numbers too.
fn number_or_string<'de, D: Deserializer<'de>>(deserializer: D) -> Result<f64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Number(f64),
        Text(String),
    }
    match Raw::deserialize(deserializer)? {
        Raw::Number(n) => Ok(n),
        Raw::Text(s) => s.trim().parse().map_err(serde::de::Error::custom),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_respect_length_and_count() {
        let cves: Vec<String> = (0..500).map(|i| format!("CVE-2024-{:05}", i)).collect();
        let refs: Vec<&str> = cves.iter().map(String::as_str).collect();
        let out = batches(&refs, 2000, 1000);
        assert!(out.iter().all(|b| b.len() <= 2000));
        assert_eq!(out.iter().map(|b| b.split(',').count()).sum::<usize>(), 500);
        assert_eq!(out.len(), 4); // 14 chars + comma: 133 per batch
        let by_count = batches(&refs, 2000, 100);
        assert_eq!(by_count.len(), 5);
        assert!(batches(&[], 2000, 100).is_empty());
    }

    #[test]
    fn numbers_as_strings() {
        let row: Row = serde_json::from_str(
            r#"{"cve":"CVE-1","epss":"0.972240000","percentile":1,"date":"d"}"#,
        )
        .unwrap();
        assert_eq!((row.epss, row.percentile), (0.97224, 1.0));
        assert!(
            serde_json::from_str::<Row>(r#"{"cve":"CVE-1","epss":"high","percentile":"1"}"#)
                .is_err()
        );
    }
}
