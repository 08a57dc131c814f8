//! `mess doctor`: what this machine gives the exchange. The disk probe first (how fast the
//! home's disk makes a small write durable, with one writer and many, and the ceiling that puts
//! on acknowledged messages), then the home, its configuration, the listen address and the
//! database, each on one line that names a problem and its fix.

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::time::Duration;

use crate::cli::{CliError, Context, output};
use crate::store::disk_probe::{self, DiskProbe};

/// Arguments of `mess doctor`.
#[derive(Debug, clap::Args)]
pub(crate) struct DoctorArgs {
    /// How long the disk probe runs, in seconds
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=600))]
    seconds: u64,
    /// Writers at once in the probe's second half (a busy server's concurrent requests)
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=256))]
    writers: u64,
}

pub(crate) fn run(cx: &Context, args: DoctorArgs) -> Result<(), CliError> {
    let home = &cx.config.home;
    let mut problems = 0;
    if home.join("config.yaml").is_file() || home.join("state=received").is_dir() {
        output::line(&format!("home      {}", home.display()));
    } else {
        problems += 1;
        output::line(&format!(
            "home      {}: no exchange here yet (`mess init` makes one)",
            home.display()
        ));
    }
    output::line(&format!("config    {}", config_line(home)));
    let addr = SocketAddr::from(([127, 0, 0, 1], cx.config.http_port.unwrap_or(8420)));
    output::line(&format!("address   {}", address_line(addr)));
    output::line(&format!(
        "database  {}",
        match &cx.database {
            Some(_) => "reachable, schema current (the database is the system of record)",
            None => "none: the home's files are the system of record (tier 0)",
        }
    ));

    // The probe works where the threads are written, or as near as exists.
    let probe_dir = home
        .ancestors()
        .find(|d| d.is_dir())
        .unwrap_or(Path::new("."));
    match disk_probe::probe(
        probe_dir,
        args.writers as usize,
        Duration::from_secs(args.seconds),
    ) {
        Ok(p) => disk_lines(&p),
        Err(e) => {
            problems += 1;
            output::line(&format!(
                "disk      cannot write durably in {}: {e}",
                probe_dir.display()
            ));
        }
    }
    if problems > 0 {
        return Err(CliError::new(format!(
            "{problems} problem(s) above need attention"
        )));
    }
    Ok(())
}

fn config_line(home: &Path) -> String {
    let path = home.join("config.yaml");
    if path.is_file() {
        // The command got here, so the file was read and its values accepted.
        format!("{}: read", path.display())
    } else {
        format!("{}: absent, defaults apply", path.display())
    }
}

fn address_line(addr: SocketAddr) -> String {
    match TcpListener::bind(addr) {
        Ok(_) => format!("{addr}: free for `mess serve`"),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => format!(
            "{addr}: in use (a `mess serve` already running? `--addr` or http.port picks another)"
        ),
        Err(e) => format!("{addr}: cannot listen: {e}"),
    }
}

fn disk_lines(p: &DiskProbe) {
    output::line(&format!(
        "disk      flush of a 2 KiB write: p50 {:.2} ms, p99 {:.2} ms",
        p.flush_p50.as_secs_f64() * 1e3,
        p.flush_p99.as_secs_f64() * 1e3
    ));
    output::line(&format!(
        "disk      durable atomic replaces: {:.0}/s with 1 writer, {:.0}/s with {}",
        p.replaces_one, p.replaces_many, p.writers
    ));
    output::line(&format!(
        "disk      ceiling: about {:.0} acknowledged messages/s on one node (one durable replace each; mess acknowledges nothing before it is on disk)",
        p.ack_ceiling()
    ));
}
