//! `make generate` (`cargo run -p assetscan-generate`) rewrites every
//! region behind its source; `--check` only names them and fails, as
//! `make test` does (the crate's tests).

use assetscan_generate::{behind, root};
use std::process::ExitCode;

fn main() -> ExitCode {
    let check = std::env::args().skip(1).any(|a| a == "--check");
    let root = root();
    let behind = match behind(&root) {
        Ok(behind) => behind,
        Err(e) => {
            eprintln!("generate: {e}");
            return ExitCode::FAILURE;
        }
    };
    for (file, generated) in &behind {
        if check {
            println!("generate: {} is behind its source", file.display());
        } else if let Err(e) = std::fs::write(root.join(file), generated) {
            eprintln!("generate: {}: {e}", file.display());
            return ExitCode::FAILURE;
        } else {
            println!("generate: {} rewritten", file.display());
        }
    }
    if check && !behind.is_empty() {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
