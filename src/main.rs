//! `assetscan-operator`: see `assetscan-operator --help`.

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    assetscan_operator::cli::main().await
}
