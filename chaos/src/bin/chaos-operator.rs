//! The operator's own command line (`assetscan_operator::cli`), built in
//! this package with the fault drills compiled in. A package's tests and
//! tools can only name its own binaries, so this is how the chaos run gets
//! a fresh operator binary with `FAILPOINTS` support from cargo, whatever
//! else was built before.

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    assetscan_operator::cli::main().await
}
