//! The disk probe: what this disk allows a store that acknowledges only what is on disk. It
//! times the durable write every thread file goes through (`fsio::write_atomic`: a temp file
//! written and flushed, renamed over the target, the folder flushed) with one writer and with
//! many, and a bare flush of a small write. `mess doctor` prints it; the load benchmark divides
//! its throughput by it, so a figure says how close mess comes to the hardware it ran on.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::store::error::StoreError;
use crate::store::fsio;

/// The size of one probe write: about a thread file after a few messages.
const WRITE_BYTES: usize = 2048;

/// What the disk under one folder did.
#[derive(Debug, Clone)]
pub struct DiskProbe {
    /// Median time to flush a 2 KiB write (`fdatasync`).
    pub flush_p50: Duration,
    /// 99th percentile of the same.
    pub flush_p99: Duration,
    /// Durable atomic replaces per second with one writer.
    pub replaces_one: f64,
    /// Durable atomic replaces per second with [`DiskProbe::writers`] writers at once.
    pub replaces_many: f64,
    /// How many writers the second rate had.
    pub writers: usize,
}

impl DiskProbe {
    /// The most messages per second a store can acknowledge when each costs one durable
    /// replace: the many-writer rate. A status change that moves a file between folders costs
    /// a little more (the old name is removed and its folder flushed too).
    pub fn ack_ceiling(&self) -> f64 {
        self.replaces_many
    }
}

/// Probes the disk holding `dir` for about `duration` in all (a quarter each for flushes and
/// one writer, half for `writers` writers). Works in a fresh folder inside `dir`, removed after.
pub fn probe(dir: &Path, writers: usize, duration: Duration) -> Result<DiskProbe, StoreError> {
    let work = dir.join(format!(".disk-probe-{}", std::process::id()));
    fsio::ensure_dir(&work)?;
    let result = run(&work, writers.max(1), duration);
    let _ = std::fs::remove_dir_all(&work);
    result
}

fn run(work: &Path, writers: usize, duration: Duration) -> Result<DiskProbe, StoreError> {
    let (flush_p50, flush_p99) = flushes(&work.join("flush"), duration / 4)?;
    let replaces_one = replaces(work, 1, duration / 4)?;
    let replaces_many = replaces(work, writers, duration / 2)?;
    Ok(DiskProbe {
        flush_p50,
        flush_p99,
        replaces_one,
        replaces_many,
        writers,
    })
}

/// Rewrites one file in place and flushes it, timing each flush.
fn flushes(path: &Path, duration: Duration) -> Result<(Duration, Duration), StoreError> {
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(|e| StoreError::io(path, e))?;
    let block = [b'x'; WRITE_BYTES];
    let mut times = Vec::new();
    let until = Instant::now() + duration;
    while times.len() < 10 || Instant::now() < until {
        let started = Instant::now();
        std::io::Seek::rewind(&mut file)
            .and_then(|_| file.write_all(&block))
            .and_then(|()| file.sync_data())
            .map_err(|e| StoreError::io(path, e))?;
        times.push(started.elapsed());
    }
    times.sort();
    let at = |p: f64| times[((times.len() - 1) as f64 * p).round() as usize];
    Ok((at(0.5), at(0.99)))
}

/// `writers` threads each replacing its own file durably for `duration`; replaces per second.
fn replaces(work: &Path, writers: usize, duration: Duration) -> Result<f64, StoreError> {
    let block = vec![b'x'; WRITE_BYTES];
    let started = Instant::now();
    let until = started + duration;
    let counts: Vec<Result<u64, StoreError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..writers)
            .map(|i| {
                let (block, target) = (&block, work.join(format!("replace-{i}")));
                scope.spawn(move || replace_until(&target, block, until))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(Ok(0)))
            .collect()
    });
    let elapsed = started.elapsed().as_secs_f64().max(1e-9);
    let mut total = 0;
    for count in counts {
        total += count?;
    }
    Ok(total as f64 / elapsed)
}

fn replace_until(target: &Path, block: &[u8], until: Instant) -> Result<u64, StoreError> {
    let mut done = 0;
    while done == 0 || Instant::now() < until {
        fsio::write_atomic(target, block)?;
        done += 1;
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_writes_and_leaves_nothing_behind() {
        let dir = tempfile::TempDir::new().unwrap();
        let p = probe(dir.path(), 4, Duration::from_millis(200)).unwrap();
        assert!(p.replaces_one > 0.0 && p.replaces_many > 0.0, "{p:?}");
        assert!(p.flush_p50 <= p.flush_p99, "{p:?}");
        assert_eq!(p.writers, 4);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
