//! Argo CD health scripts, run the way Argo CD runs them.

use super::{customizations, luas, yaml_file};
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Runs a health script the way Argo CD does: the object, with JSON nulls
/// removed (Argo CD's conversion has none), as the global `obj`; the
/// script's returned table is the verdict.
pub const HARNESS: &str = r#"
local cjson = require("cjson")
local function strip(t)
  for k, v in pairs(t) do
    if v == cjson.null then t[k] = nil elseif type(v) == "table" then strip(v) end
  end
end
obj = cjson.decode(io.read("*a"))
if type(obj) == "table" then strip(obj) end
local hs = dofile(os.getenv("HEALTH_SCRIPT"))
io.write(cjson.encode(hs))
"#;

#[derive(Debug, PartialEq, Eq)]
pub struct Health {
    pub status: String,
    pub message: String,
}

pub fn health(lua: &Path, script: &Path, obj: &Value) -> Health {
    let mut child = Command::new(lua)
        .args(["-e", HARNESS])
        .env("HEALTH_SCRIPT", script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", lua.display()));
    let input = serde_json::to_vec(obj).unwrap();
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{} {} failed on {obj}:\n{}",
        lua.display(),
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let verdict: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not a JSON table ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    let field = |name: &str| {
        verdict[name]
            .as_str()
            .unwrap_or_else(|| panic!("{} returned no {name}: {verdict}", script.display()))
            .to_owned()
    };
    let status = field("status");
    assert!(
        ["Healthy", "Progressing", "Degraded", "Suspended"].contains(&status.as_str()),
        "{status} is not an Argo CD health status"
    );
    Health {
        status,
        message: field("message"),
    }
}

pub fn asset_scan_script() -> PathBuf {
    customizations().join("AssetScan").join("health.lua")
}

/// Every case of `<kind>/health_test.yaml` (Argo CD's layout), under every
/// interpreter; returns the statuses seen.
pub fn check_health_tests(kind: &str) -> BTreeSet<String> {
    let dir = customizations().join(kind);
    let tests = yaml_file(&dir.join("health_test.yaml"));
    let cases = tests["tests"].as_array().expect("tests: [...]");
    let mut used = BTreeSet::new();
    let mut statuses = BTreeSet::new();
    for case in cases {
        let input = case["inputPath"].as_str().expect("inputPath");
        let expected = Health {
            status: case["healthStatus"]["status"].as_str().unwrap().to_owned(),
            message: case["healthStatus"]["message"].as_str().unwrap().to_owned(),
        };
        let obj = yaml_file(&dir.join(input));
        assert_eq!(obj["kind"], kind, "{input}");
        for lua in luas() {
            let actual = health(lua, &dir.join("health.lua"), &obj);
            assert_eq!(actual, expected, "{kind} {input} under {}", lua.display());
        }
        used.insert(input.to_owned());
        statuses.insert(expected.status);
    }
    let samples: BTreeSet<String> = std::fs::read_dir(dir.join("testdata"))
        .unwrap()
        .map(|e| format!("testdata/{}", e.unwrap().file_name().to_string_lossy()))
        .collect();
    assert_eq!(
        used, samples,
        "every sample in testdata/ has a test, and only those"
    );
    statuses
}
