//! The kubeconfig that points `kubectl`, the operator and kube-rs'
//! `Config::infer` at an emulator. Plain HTTP, no credentials: the emulator
//! does not authenticate (see "Not emulated").

use std::path::Path;

use super::error::EmulatorError;

/// Name used for the cluster, user and context entries.
pub const CONTEXT: &str = "kube-emulator";

/// Renders a kubeconfig for `server_url` with `namespace` as the context default.
pub fn render(server_url: &str, namespace: &str) -> String {
    let doc = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": {"server": server_url}}],
        "users": [{"name": CONTEXT, "user": {}}],
        "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": CONTEXT, "namespace": namespace}}],
        "current-context": CONTEXT,
        "preferences": {},
    });
    // Serializing a json! literal to YAML cannot fail.
    serde_saphyr::to_string(&doc).unwrap_or_default()
}

/// Writes the kubeconfig file (creating parent directories).
pub fn write(path: &Path, server_url: &str, namespace: &str) -> Result<(), EmulatorError> {
    let io = |source| EmulatorError::Io {
        path: path.display().to_string(),
        source,
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    std::fs::write(path, render(server_url, namespace)).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_rs_reads_it() {
        let yaml = render("http://127.0.0.1:1234", "default");
        let kc: kube::config::Kubeconfig = crate::yaml::from_str(&yaml).expect("valid kubeconfig");
        assert_eq!(kc.current_context.as_deref(), Some(CONTEXT));
        assert_eq!(
            kc.clusters[0]
                .cluster
                .as_ref()
                .and_then(|c| c.server.as_deref()),
            Some("http://127.0.0.1:1234")
        );
    }
}
