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

/// A small PromQL scanner: enough to find every metric name, matcher and
/// grouping label of the queries this repository ships.
pub fn scan_query(expr: &str) -> Result<Query, String> {
    const GROUPING: [&str; 6] = [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ];
    const KEYWORDS: [&str; 5] = ["and", "or", "unless", "bool", "offset"];
    // Aggregations may put `by (...)` before their parenthesis.
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
    let chars: Vec<char> = expr.chars().collect();
    let mut query = Query::default();
    let mut i = 0;
    let mut depth = 0i32;
    let ident = |i: &mut usize| -> String {
        let start = *i;
        while *i < chars.len()
            && (chars[*i].is_ascii_alphanumeric() || chars[*i] == '_' || chars[*i] == ':')
        {
            *i += 1;
        }
        chars[start..*i].iter().collect()
    };
    let skip_ws = |i: &mut usize| {
        while *i < chars.len() && chars[*i].is_whitespace() {
            *i += 1;
        }
    };
    let string = |i: &mut usize| -> Result<String, String> {
        let quote = chars[*i];
        let mut out = String::new();
        *i += 1;
        while *i < chars.len() && chars[*i] != quote {
            if chars[*i] == '\\' {
                *i += 1;
            }
            out.push(chars[*i]);
            *i += 1;
        }
        if *i == chars.len() {
            return Err(format!("unterminated string in {expr}"));
        }
        *i += 1;
        Ok(out)
    };
    // A parenthesised list of label names.
    let label_list = |i: &mut usize, out: &mut Vec<String>| -> Result<(), String> {
        skip_ws(i);
        if chars.get(*i) != Some(&'(') {
            return Err(format!("expected a label list at {} in {expr}", *i));
        }
        *i += 1;
        loop {
            skip_ws(i);
            match chars.get(*i) {
                Some(')') => {
                    *i += 1;
                    return Ok(());
                }
                Some(',') => *i += 1,
                Some(_) => {
                    let name = ident(i);
                    if name.is_empty() {
                        return Err(format!("bad label list in {expr}"));
                    }
                    out.push(name);
                }
                None => return Err(format!("unclosed label list in {expr}")),
            }
        }
    };
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '(' {
            depth += 1;
            i += 1;
        } else if c == ')' {
            depth -= 1;
            if depth < 0 {
                return Err(format!("unbalanced ) in {expr}"));
            }
            i += 1;
        } else if c == '[' {
            let close = chars[i..]
                .iter()
                .position(|&c| c == ']')
                .ok_or_else(|| format!("unclosed [ in {expr}"))?;
            i += close + 1;
        } else if c == '"' || c == '\'' {
            string(&mut i)?;
        } else if c.is_ascii_digit() || c == '.' {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let name = ident(&mut i);
            let mut j = i;
            skip_ws(&mut j);
            let call = chars.get(j) == Some(&'(');
            if GROUPING.contains(&name.as_str()) {
                label_list(&mut i, &mut query.grouping)?;
            } else if call && name == "label_values" {
                // label_values(selector, label): Grafana's, not PromQL's.
                let close = chars[j..]
                    .iter()
                    .position(|&c| c == ')')
                    .ok_or_else(|| format!("unclosed label_values in {expr}"))?;
                let inner: String = chars[j + 1..j + close].iter().collect();
                let (selector, label) = inner
                    .rsplit_once(',')
                    .ok_or_else(|| format!("label_values without a label in {expr}"))?;
                let inner_query = scan_query(selector)?;
                query.selectors.extend(inner_query.selectors);
                query.grouping.push(label.trim().to_owned());
                i = j + close + 1;
            } else if call
                || KEYWORDS.contains(&name.as_str())
                || AGGREGATIONS.contains(&name.as_str())
            {
                // A function, an aggregation or an operator: no metric.
            } else {
                let mut selector = Selector {
                    metric: name,
                    matchers: Vec::new(),
                };
                if chars.get(j) == Some(&'{') {
                    i = j + 1;
                    loop {
                        skip_ws(&mut i);
                        match chars.get(i) {
                            Some('}') => {
                                i += 1;
                                break;
                            }
                            Some(',') => i += 1,
                            Some(_) => {
                                let label = ident(&mut i);
                                skip_ws(&mut i);
                                let op: String = chars[i..]
                                    .iter()
                                    .take_while(|c| matches!(c, '=' | '!' | '~'))
                                    .collect();
                                if label.is_empty()
                                    || !["=", "!=", "=~", "!~"].contains(&op.as_str())
                                {
                                    return Err(format!("bad matcher at {i} in {expr}"));
                                }
                                i += op.len();
                                skip_ws(&mut i);
                                if !matches!(chars.get(i), Some('"') | Some('\'')) {
                                    return Err(format!("matcher value not quoted in {expr}"));
                                }
                                let value = string(&mut i)?;
                                selector.matchers.push((label, op, value));
                            }
                            None => return Err(format!("unclosed {{ in {expr}")),
                        }
                    }
                }
                query.selectors.push(selector);
            }
        } else if "+-*/%^=!<>,".contains(c) {
            i += 1;
        } else {
            return Err(format!("unexpected {c:?} in {expr}"));
        }
    }
    if depth != 0 {
        return Err(format!("unbalanced ( in {expr}"));
    }
    Ok(query)
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
