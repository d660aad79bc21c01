//! The command line of the suites that run on the emulator or a cluster
//! (e2e, conformance): `--kubeconfig PATH` (empty: the caller had none to
//! give), `--no-garbage-collector`, `--record PATH` (conformance: where the
//! cluster's answers are written), `--list`, and names to filter by;
//! libtest's own flags (`--test-threads=2`, ...) are accepted and ignored,
//! since `cargo test` passes them to every test binary.

pub struct Args {
    /// `--kubeconfig` given (empty when the caller had none to give).
    pub kubeconfig: Option<String>,
    pub garbage_collector: bool,
    /// `--record PATH`: the conformance suite writes the cluster's answers there.
    pub record: Option<String>,
    pub filters: Vec<String>,
    pub list: bool,
}

impl Args {
    pub fn parse() -> Args {
        let mut args = Args {
            kubeconfig: None,
            garbage_collector: true,
            record: None,
            filters: Vec::new(),
            list: false,
        };
        let mut given = std::env::args().skip(1);
        while let Some(arg) = given.next() {
            match arg.as_str() {
                "--kubeconfig" => args.kubeconfig = Some(given.next().unwrap_or_default()),
                "--no-garbage-collector" => args.garbage_collector = false,
                "--record" => args.record = Some(given.next().unwrap_or_default()),
                "--list" => args.list = true,
                // libtest's options that take a value, as a separate word.
                "--test-threads" | "--skip" | "--format" | "--color" | "-Z" => {
                    given.next();
                }
                flag if flag.starts_with('-') => {
                    if let Some(path) = flag.strip_prefix("--kubeconfig=") {
                        args.kubeconfig = Some(path.to_owned());
                    } else if let Some(path) = flag.strip_prefix("--record=") {
                        args.record = Some(path.to_owned());
                    }
                }
                filter => args.filters.push(filter.to_owned()),
            }
        }
        args
    }

    /// Whether `name` passes the filters.
    pub fn selects(&self, name: &str) -> bool {
        self.filters.is_empty() || self.filters.iter().any(|f| name.contains(f.as_str()))
    }

    /// With `--list`, prints `names` as libtest lists tests and answers
    /// true: the run is over.
    pub fn listed<'a>(&self, names: impl Iterator<Item = &'a str>) -> bool {
        if self.list {
            names.for_each(|name| println!("{name}: test"));
        }
        self.list
    }
}

/// The runtime a suite runs on: two worker threads, as `make test` runs
/// each test binary.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a Tokio runtime")
}
