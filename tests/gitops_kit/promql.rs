//! The metric names and labels the operator exports, read from its own
//! registry, and a checker for the PromQL queries that use them.

use super::{read, root};
use assetscan_operator::telemetry::{ChannelLabels, Metrics, ScanLabels, ShardLabels, StepLabels};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

/// Labels Prometheus adds to every scraped series (ServiceMonitor targets).
pub const TARGET_LABELS: [&str; 7] = [
    "namespace",
    "pod",
    "job",
    "instance",
    "service",
    "container",
    "endpoint",
];

pub struct Exported {
    /// Series names, from the registry's `# TYPE` lines.
    names: BTreeSet<String>,
    /// Label names per series name, from its samples.
    labels: BTreeMap<String, BTreeSet<String>>,
    /// The operator's source, where label values are string literals.
    source: String,
}

pub fn exported() -> &'static Exported {
    static EXPORTED: OnceLock<Exported> = OnceLock::new();
    EXPORTED.get_or_init(|| {
        let m = Metrics::new();
        // One child in each labelled family, so its labels show in samples.
        m.reconciled("x");
        m.failed("x");
        let step = StepLabels { step: "x".into() };
        m.step_duration.get_or_create(&step).observe(0.1);
        m.step_errors.get_or_create(&step).inc();
        m.notifications_sent
            .get_or_create(&ChannelLabels {
                channel: "x".into(),
            })
            .inc();
        let channel = ChannelLabels {
            channel: "x".into(),
        };
        let promise = &m.promise;
        promise
            .detection_to_notification
            .get_or_create(&channel)
            .observe(0.1);
        promise.reconcile_duration.observe(0.1);
        let shard = ShardLabels { shard: "0".into() };
        let status = &promise.status;
        let scan = ScanLabels {
            shard: "0".into(),
            phase: "x".into(),
            verdict: "x".into(),
        };
        status.scans.get_or_create(&scan).set(1);
        status
            .unnotified_high_risk_age
            .get_or_create(&shard)
            .set(1.0);
        status.overdue_age.get_or_create(&shard).set(1.0);
        status.shards.get_or_create(&shard).set(1);
        let text = m.encode();
        let mut names = BTreeSet::new();
        let mut labels: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                let series: Vec<String> = match kind {
                    "counter" => vec![format!("{}_total", name.trim_end_matches("_total"))],
                    "gauge" => vec![name.to_owned()],
                    "histogram" => ["_bucket", "_sum", "_count"]
                        .iter()
                        .map(|s| format!("{name}{s}"))
                        .collect(),
                    other => panic!("metric type {other} of {name}: teach this test its series"),
                };
                names.extend(series);
            } else if !line.starts_with('#') && !line.is_empty() {
                let name_end = line.find(['{', ' ']).unwrap();
                let entry = labels.entry(line[..name_end].to_owned()).or_default();
                if let Some(set) = line[name_end..]
                    .strip_prefix('{')
                    .and_then(|s| s.split_once('}'))
                {
                    for pair in set.0.split(',') {
                        entry.insert(pair.split_once('=').unwrap().0.to_owned());
                    }
                }
            }
        }
        let mut source = String::new();
        let mut dirs = vec![root().join("src")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    source.push_str(&read(&path));
                }
            }
        }
        Exported {
            names,
            labels,
            source,
        }
    })
}

/// `name{label op "value", ...}` in a query.
#[derive(Debug)]
pub struct Selector {
    metric: String,
    matchers: Vec<(String, String, String)>,
}

#[derive(Debug, Default)]
pub struct Query {
    selectors: Vec<Selector>,
    /// Labels in `by (...)`, `without (...)`, `on (...)`, `ignoring (...)`,
    /// `group_left/right (...)` and `label_values(..., label)`.
    grouping: Vec<String>,
}

/// Labels that follow these words in parentheses.
const GROUPING: [&str; 6] = [
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];
/// Words that name no metric.
const KEYWORDS: [&str; 5] = ["and", "or", "unless", "bool", "offset"];
/// Aggregations, which may put `by (...)` before their parenthesis.
const AGGREGATIONS: [&str; 12] = [
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
];

/// A small PromQL scanner: enough to find every metric name, matcher and
/// grouping label of the queries this repository ships. Hand-written: the
/// Rust PromQL parser (`promql-parser`) brings `bincode`, which RustSec
/// lists as unmaintained, and `cargo deny` would refuse it.
pub fn scan_query(expr: &str) -> Result<Query, String> {
    let mut scanner = Scanner {
        expr,
        chars: expr.chars().collect(),
        at: 0,
        depth: 0,
        query: Query::default(),
    };
    while scanner.at < scanner.chars.len() {
        scanner.token()?;
    }
    if scanner.depth != 0 {
        return Err(format!("unbalanced ( in {expr}"));
    }
    Ok(scanner.query)
}

/// Where the scan is in a query, and what it found so far.
struct Scanner<'a> {
    expr: &'a str,
    chars: Vec<char>,
    at: usize,
    depth: i32,
    query: Query,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn fail(&self, what: &str) -> String {
        format!("{what} in {}", self.expr)
    }

    /// One token, and what it says of the query.
    fn token(&mut self) -> Result<(), String> {
        let c = self.chars[self.at];
        match c {
            c if c.is_whitespace() => self.at += 1,
            '(' => {
                self.depth += 1;
                self.at += 1;
            }
            ')' => {
                self.depth -= 1;
                if self.depth < 0 {
                    return Err(self.fail("unbalanced )"));
                }
                self.at += 1;
            }
            '[' => {
                let close = (self.chars[self.at..].iter())
                    .position(|&c| c == ']')
                    .ok_or_else(|| self.fail("unclosed ["))?;
                self.at += close + 1;
            }
            '"' | '\'' => {
                self.string()?;
            }
            c if c.is_ascii_digit() || c == '.' => {
                while (self.peek()).is_some_and(|c| c.is_ascii_alphanumeric() || c == '.') {
                    self.at += 1;
                }
            }
            c if c.is_ascii_alphabetic() || c == '_' || c == ':' => self.word()?,
            c if "+-*/%^=!<>,".contains(c) => self.at += 1,
            c => return Err(self.fail(&format!("unexpected {c:?}"))),
        }
        Ok(())
    }

    /// A name: a grouping, `label_values(...)`, a function, a keyword, or a
    /// metric with its matchers.
    fn word(&mut self) -> Result<(), String> {
        let name = self.ident();
        let mut next = self.at;
        while (self.chars.get(next)).is_some_and(|c| c.is_whitespace()) {
            next += 1;
        }
        let call = self.chars.get(next) == Some(&'(');
        if GROUPING.contains(&name.as_str()) {
            let labels = self.label_list()?;
            self.query.grouping.extend(labels);
        } else if call && name == "label_values" {
            self.label_values(next)?;
        } else if !(call
            || KEYWORDS.contains(&name.as_str())
            || AGGREGATIONS.contains(&name.as_str()))
        {
            let matchers = match self.chars.get(next) == Some(&'{') {
                true => {
                    self.at = next + 1;
                    self.matchers()?
                }
                false => Vec::new(),
            };
            let metric = name;
            self.query.selectors.push(Selector { metric, matchers });
        }
        Ok(())
    }

    fn ident(&mut self) -> String {
        let start = self.at;
        while (self.peek()).is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            self.at += 1;
        }
        self.chars[start..self.at].iter().collect()
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.at += 1;
        }
    }

    /// A quoted string, its escapes taken.
    fn string(&mut self) -> Result<String, String> {
        let quote = self.chars[self.at];
        let mut out = String::new();
        self.at += 1;
        while self.peek().is_some_and(|c| c != quote) {
            if self.peek() == Some('\\') {
                self.at += 1;
            }
            out.extend(self.peek());
            self.at += 1;
        }
        if self.at >= self.chars.len() {
            return Err(self.fail("unterminated string"));
        }
        self.at += 1;
        Ok(out)
    }

    /// A parenthesised list of label names.
    fn label_list(&mut self) -> Result<Vec<String>, String> {
        self.skip_ws();
        if self.peek() != Some('(') {
            return Err(self.fail(&format!("expected a label list at {}", self.at)));
        }
        self.at += 1;
        self.items(')', "unclosed label list", |scanner| {
            match scanner.ident() {
                name if name.is_empty() => Err(scanner.fail("bad label list")),
                name => Ok(name),
            }
        })
    }

    /// Items separated by commas, up to `close`: each read by `item`.
    fn items<T>(
        &mut self,
        close: char,
        unclosed: &str,
        mut item: impl FnMut(&mut Self) -> Result<T, String>,
    ) -> Result<Vec<T>, String> {
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            match self.peek() {
                Some(c) if c == close => {
                    self.at += 1;
                    return Ok(items);
                }
                Some(',') => self.at += 1,
                Some(_) => items.push(item(self)?),
                None => return Err(self.fail(unclosed)),
            }
        }
    }

    /// `label_values(selector, label)`: Grafana's, not PromQL's; its
    /// parenthesis opens at `open`.
    fn label_values(&mut self, open: usize) -> Result<(), String> {
        let close = (self.chars[open..].iter())
            .position(|&c| c == ')')
            .ok_or_else(|| self.fail("unclosed label_values"))?;
        let inner: String = self.chars[open + 1..open + close].iter().collect();
        let (selector, label) =
            (inner.rsplit_once(',')).ok_or_else(|| self.fail("label_values without a label"))?;
        let inner = scan_query(selector)?;
        self.query.selectors.extend(inner.selectors);
        self.query.grouping.push(label.trim().to_owned());
        self.at = open + close + 1;
        Ok(())
    }

    /// The matchers after a metric's `{`, up to its `}`.
    fn matchers(&mut self) -> Result<Vec<(String, String, String)>, String> {
        self.items('}', "unclosed {", Self::matcher)
    }

    /// `label op "value"`.
    fn matcher(&mut self) -> Result<(String, String, String), String> {
        let label = self.ident();
        self.skip_ws();
        let op: String = (self.chars[self.at..].iter())
            .take_while(|c| matches!(c, '=' | '!' | '~'))
            .collect();
        if label.is_empty() || !["=", "!=", "=~", "!~"].contains(&op.as_str()) {
            return Err(self.fail(&format!("bad matcher at {}", self.at)));
        }
        self.at += op.len();
        self.skip_ws();
        if !matches!(self.peek(), Some('"') | Some('\'')) {
            return Err(self.fail("matcher value not quoted"));
        }
        let value = self.string()?;
        Ok((label, op, value))
    }
}

/// Every metric of `expr` is exported; its matchers and grouping use labels
/// the metric has (or the scrape adds), and values the operator's source
/// writes.
pub fn check_query(expr: &str) -> Result<(), String> {
    let exported = exported();
    let query = scan_query(expr)?;
    if query.selectors.is_empty() {
        return Err(format!("no metric in {expr}"));
    }
    let mut labels: BTreeSet<String> = TARGET_LABELS.iter().map(|l| (*l).to_owned()).collect();
    for selector in &query.selectors {
        if !exported.names.contains(&selector.metric) {
            return Err(format!(
                "{} is not exported (the operator exports {:?}) in {expr}",
                selector.metric, exported.names
            ));
        }
        let own = exported
            .labels
            .get(&selector.metric)
            .cloned()
            .unwrap_or_default();
        for (label, op, value) in &selector.matchers {
            if TARGET_LABELS.contains(&label.as_str()) {
                continue;
            }
            if !own.contains(label) {
                return Err(format!(
                    "{} has no label {label} in {expr}",
                    selector.metric
                ));
            }
            if op == "=" || op == "=~" {
                for alternative in value.split('|') {
                    if !exported.source.contains(&format!("\"{alternative}\"")) {
                        return Err(format!(
                            "{label}={alternative:?} is never written by the operator in {expr}"
                        ));
                    }
                }
            }
        }
        labels.extend(own);
    }
    for label in &query.grouping {
        if !labels.contains(label) {
            return Err(format!("no metric of {expr} has the label {label}"));
        }
    }
    Ok(())
}

/// Every `expr` and variable query of a Grafana dashboard.
pub fn dashboard_queries(dashboard: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dashboard];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(map) => {
                if let Some(Value::String(expr)) = map.get("expr") {
                    out.push(expr.clone());
                }
                stack.extend(map.values());
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    for variable in dashboard["templating"]["list"].as_array().unwrap() {
        if variable["type"] == "query" {
            out.push(variable["query"]["query"].as_str().unwrap().to_owned());
        }
    }
    out
}
