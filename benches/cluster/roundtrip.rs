//! G5, files stay the format: a demo home (threads in every state, some archived) goes into a
//! fresh database with `mess import`, a new node builds its mirror from the database, and
//! `mess export` writes the database back out; both must equal the home byte for byte.

use std::time::{Duration, Instant};

use crate::Outcome;
use crate::nodes::{Cluster, mess, serve, thread_files, wait_until};

/// Runs G5 with a demo home of `threads` threads.
pub(crate) fn run(threads: usize, config: &str) -> Outcome {
    let source = tempfile::TempDir::new().unwrap();
    std::fs::write(source.path().join("config.yaml"), config).unwrap();
    mess(
        source.path(),
        None,
        &[
            "demo",
            "seed",
            "--threads",
            &threads.to_string(),
            "--days",
            "60",
        ],
    );
    mess(source.path(), None, &["archive", "--older-than", "20d"]);
    let before = thread_files(source.path());

    let cluster = Cluster::new(1, config);
    let t = Instant::now();
    cluster.mess(0, &["import", &source.path().to_string_lossy()]);
    let imported = t.elapsed();

    let mirror = cluster.home(0);
    let t = Instant::now();
    let node = serve(&mirror, Some(&cluster.url()));
    let mirrored = wait_until(Duration::from_secs(300), || {
        thread_files(&mirror).len() >= before.len()
    });
    let mirror_time = t.elapsed();
    drop(node);
    let in_mirror = thread_files(&mirror);

    let out = tempfile::TempDir::new().unwrap();
    let exported_home = out.path().join("home");
    let t = Instant::now();
    cluster.mess(0, &["export", &exported_home.to_string_lossy()]);
    let exported = t.elapsed();
    let in_export = thread_files(&exported_home);

    let archived = before.keys().filter(|k| k.starts_with("archive/")).count();
    let mirror_same = mirrored && in_mirror == before;
    let export_same = in_export == before;
    Outcome {
        ok: mirror_same && export_same,
        lines: vec![
            format!(
                "G5 files stay the format: a demo home of {} threads ({archived} archived) -> mess import {:.1} s ({:.0} threads/s) -> a new node's mirror {:.1} s -> mess export {:.1} s",
                before.len(),
                imported.as_secs_f64(),
                before.len() as f64 / imported.as_secs_f64(),
                mirror_time.as_secs_f64(),
                exported.as_secs_f64()
            ),
            format!(
                "   mirror byte-identical to the home: {mirror_same}; export byte-identical to the home: {export_same}"
            ),
        ],
    }
}
