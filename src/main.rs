//! `assetscan-operator`: see `assetscan-operator --help`.

use std::process::ExitCode;

/// jemalloc instead of the C library's allocator: a replica holds its
/// shard's AssetScans as many small allocations (strings of a few bytes
/// each), which jemalloc's size classes pack without a per-allocation
/// header; `make scale` measures the peak RSS per replica it gives.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> ExitCode {
    assetscan_operator::cli::main().await
}
