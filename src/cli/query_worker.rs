//! `mess query-worker` (hidden): the process the exchange runs user SQL in. It caps its own
//! memory before anything else, then answers requests on stdin/stdout until stdin closes
//! (`db::worker` has the wire). People never run it; the exchange starts and stops it.

use std::io::{BufWriter, Write};

use nix::sys::resource::{Resource, setrlimit};

use crate::cli::CliError;

/// Arguments of `mess query-worker`.
#[derive(Debug, clap::Args)]
pub(crate) struct QueryWorkerArgs {
    /// Memory ceiling of this process, in bytes (its data segment and private mappings)
    #[arg(long, value_name = "BYTES")]
    memory: u64,
}

/// How far a query worker lowers its scheduling priority (0 normal, 19 lowest).
const QUERY_NICENESS: i32 = 10;

pub(crate) fn run(args: QueryWorkerArgs) -> Result<(), CliError> {
    // RLIMIT_DATA covers the heap and every private writable mapping, so an allocation past
    // the ceiling fails (DuckDB reports it as out of memory; Rust aborts the process) instead
    // of growing into the server's memory. Hard and soft alike: a query cannot raise it.
    setrlimit(Resource::RLIMIT_DATA, args.memory, args.memory)
        .map_err(|e| CliError::new(format!("cannot set the query worker's memory ceiling: {e}")))?;
    // The parse cache keeps what it can of the home between queries within a quarter of the
    // ceiling and reads the rest again for each query, so a query over every thread of a
    // home of any size fits (measured: about 600 bytes a thread envelope, so the 64 MiB of a
    // 256 MiB ceiling keep 100,000 threads warm; DuckDB's own share is half the ceiling).
    yaml_scan::set_cache_budget(usize::try_from(args.memory / 4).unwrap_or(usize::MAX));
    // User SQL is the least urgent work on the machine: a worker running a heavy query
    // yields the CPU to the exchange's messages and routing (measured: `cargo bench --bench
    // hostile`). A worker that cannot lower its priority still runs.
    let _ = rustix::process::nice(QUERY_NICENESS);
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    let mut output = BufWriter::with_capacity(64 * 1024, stdout.lock());
    crate::db::worker::serve(&mut stdin.lock(), &mut output)
        .and_then(|()| output.flush())
        .map_err(|e| CliError::new(format!("query worker: {e}")))
}
