//! Store benchmark: on a home with 100,000 threads, the cost of a durable append and a durable
//! state change as a ratio to a bare write+fsync+rename+dir-fsync of the same size (measured in
//! the same run), status lookup by ref, ref allocation as the home grows, and peak memory.
//!
//! Run with `cargo bench --bench store` (`-- --threads N` for another home size).

#![allow(clippy::unwrap_used, clippy::print_stdout)]

use std::fs::{self, File};
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{NaiveDate, TimeDelta};
use mess::exchange::clock::SystemClock;
use mess::exchange::{Exchange, Sender, Settings};
use mess::protocol::emit;
use mess::protocol::envelope::{EXCHANGE, Envelope, MessageDoc};
use mess::protocol::ids::ThreadRef;
use mess::protocol::message::{Ack, Message, Payload};
use mess::protocol::status::{State, Status};
use mess::protocol::time;
use mess::protocol::value::Map;
use mess::store::Store;
use mess::store::layout::Location;

const SAMPLES: usize = 200;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let threads: usize = args
        .iter()
        .position(|a| a == "--threads")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000);
    let dir = tempfile::TempDir::new().unwrap();
    let home = dir.path();
    fs::write(
        home.join("config.yaml"),
        "executors:\n  robot:\n    capabilities: [work]\n",
    )
    .unwrap();
    let store = Store::open(home);
    store.init().unwrap();

    println!("mess store benchmark: {threads} threads, {SAMPLES} samples per operation, medians");
    let t = Instant::now();
    let pending = populate(&store, threads);
    println!(
        "populated {threads} thread files in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    let ex = Exchange::new(store.clone(), Settings::defaults(), Arc::new(SystemClock));
    let agent = Sender::new("agent", "bench");
    let robot = Sender::new("robot", "bench");

    // (a) durable state change: claim moves a pending thread from state=received/ to
    // state=executing/ (write, rename, unlink, two folder syncs).
    let mut claim = Vec::new();
    let mut claim_base = Vec::new();
    for r in pending.iter().take(SAMPLES) {
        let msg = format!("MESS:\n  - status:\n      re: {r}\n      code: claimed\n");
        let d = timed(|| {
            ex.intake().submit_text(&msg, &robot).unwrap();
        });
        claim.push(d);
        claim_base.push(baseline(&store, State::Executing, r));
    }

    // (a) durable append: a progress update on a claimed thread (a new message document, no
    // folder move).
    let target = &pending[0];
    let mut append = Vec::new();
    let mut append_base = Vec::new();
    for i in 0..SAMPLES {
        let msg = format!(
            "MESS:\n  - status:\n      re: {target}\n      code: in_progress\n      progress_pct: {}\n",
            i % 100
        );
        append.push(timed(|| {
            ex.intake().submit_text(&msg, &robot).unwrap();
        }));
        append_base.push(baseline(&store, State::Executing, target));
    }

    // (b) status lookup by ref: the envelope alone, and the full exchange read path.
    let refs: Vec<ThreadRef> = (0..SAMPLES)
        .map(|i| nth_ref(i * (threads / SAMPLES).max(1)))
        .collect();
    let lookup: Vec<Duration> = refs
        .iter()
        .map(|r| timed(|| drop(store.envelope(r).unwrap())))
        .collect();
    let read: Vec<Duration> = refs
        .iter()
        .map(|r| timed(|| drop(ex.thread(r.as_str(), "agent").unwrap())))
        .collect();

    // (c) ref allocation: steady state, the first allocation of a new day, and the very first
    // allocation in a home written by other tools (no counters yet, so the folders are listed
    // once), on this home.
    let day = NaiveDate::from_ymd_opt(2030, 1, 1).unwrap();
    let first_ever = timed(|| drop(store.allocate_refs(day, 1).unwrap()));
    let next_day = day.succ_opt().unwrap();
    let first_of_day = timed(|| drop(store.allocate_refs(next_day, 1).unwrap()));
    let alloc: Vec<Duration> = (0..SAMPLES)
        .map(|_| timed(|| drop(store.allocate_refs(day, 1).unwrap())))
        .collect();
    let create: Vec<Duration> = (0..SAMPLES / 4)
        .map(|i| {
            let msg =
                format!("MESS:\n  - request:\n      intent: bench {i}\n      requires: [work]\n");
            timed(|| drop(ex.intake().submit_text(&msg, &agent).unwrap()))
        })
        .collect();
    let small = small_home_allocation();

    let (c, cb) = (median(&claim), median(&claim_base));
    let (a, ab) = (median(&append), median(&append_base));
    println!();
    println!(
        "{:<52} {:>10} {:>10} {:>7}",
        "operation", "median", "baseline", "ratio"
    );
    println!(
        "{:<52} {:>10} {:>10} {:>6.2}x",
        "durable append (progress update, same folder)",
        us(a),
        us(ab),
        ratio(a, ab)
    );
    println!(
        "{:<52} {:>10} {:>10} {:>6.2}x",
        "durable state change (claim, moves the file)",
        us(c),
        us(cb),
        ratio(c, cb)
    );
    println!(
        "{:<52} {:>10}",
        "status lookup by ref (envelope only)",
        us(median(&lookup))
    );
    println!(
        "{:<52} {:>10}",
        "status read by ref (exchange: expiry check + parse)",
        us(median(&read))
    );
    println!(
        "{:<52} {:>10}",
        format!("ref allocation, steady state ({threads} threads)"),
        us(median(&alloc))
    );
    println!(
        "{:<52} {:>10}",
        format!("ref allocation, steady state ({} threads)", small.0),
        us(small.1)
    );
    println!(
        "{:<52} {:>10}",
        format!("ref allocation, first of a new day ({threads} threads)"),
        us(first_of_day)
    );
    println!(
        "{:<52} {:>10}",
        format!("ref allocation, first ever (lists {threads} files)"),
        us(first_ever)
    );
    println!(
        "{:<52} {:>10}",
        "create request (ref, index, file, dispatch)",
        us(median(&create))
    );
    println!(
        "{:<52} {:>9} MiB",
        "peak memory (VmHWM)",
        peak_memory_kib() / 1024
    );
    println!();
    println!(
        "baseline: write the same number of bytes to a temp file in the same folder, fsync, rename, fsync the folder"
    );
}

fn timed(f: impl FnOnce()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

fn median(v: &[Duration]) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    s[s.len() / 2]
}

fn us(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}

/// A bare durable replace of a file as large as the thread file now is, in the same folder.
fn baseline(store: &Store, state: State, r: &ThreadRef) -> Duration {
    let size = fs::metadata(store.layout().thread_path(&Location::State(state), r))
        .unwrap()
        .len() as usize;
    let dir = store.layout().state_dir(state);
    let bytes = vec![b'x'; size];
    let tmp = dir.join(".baseline.tmp");
    let dst = dir.join(".baseline");
    timed(|| {
        let mut f = File::create(&tmp).unwrap();
        f.write_all(&bytes).unwrap();
        f.sync_data().unwrap();
        fs::rename(&tmp, &dst).unwrap();
        File::open(&dir).unwrap().sync_all().unwrap();
    })
}

/// The ref of the i-th generated thread: 300 a day from 2025-01-01.
fn nth_ref(i: usize) -> ThreadRef {
    let day = NaiveDate::from_ymd_opt(2025, 1, 1).unwrap() + TimeDelta::days((i / 300) as i64);
    ThreadRef::from_serial(day, (i % 300 + 1) as u64)
}

/// Writes `n` realistic thread files (no fsync: this is setup, not the measured path), spread
/// over the four folders; returns the refs of the pending ones.
fn populate(store: &Store, n: usize) -> Vec<ThreadRef> {
    let mut pending = Vec::new();
    for i in 0..n {
        let r = nth_ref(i);
        let (date, _) = r.date_serial().unwrap();
        let at = time::utc(date.and_hms_opt(9, 0, 0).unwrap().and_utc());
        let msg = format!(
            "MESS:\n  - request:\n      intent: task number {i}\n      requires: [work]\n      context:\n        - generated by the store benchmark\n"
        );
        let request = Message::from_value(
            mess::protocol::yaml::parse_document(&msg, &mess::protocol::yaml::Limits::DEFAULT)
                .unwrap(),
        )
        .unwrap();
        let Payload::Request(req) = &request.payloads[0] else {
            unreachable!()
        };
        let doc = MessageDoc {
            from: "agent".into(),
            received: at,
            channel: Some("bench".into()),
            message: request.clone(),
            extra: Map::new(),
        };
        let mut env = Envelope::create(r.clone(), req, &doc, vec![]);
        let ack = MessageDoc {
            from: EXCHANGE.into(),
            received: at,
            channel: None,
            message: Message::new(vec![Payload::Ack(Ack {
                re: Some("last".into()),
                thread_ref: Some(r.to_string()),
                requests: vec![],
                received_at: None,
                queue_position: None,
                extra: Map::new(),
            })]),
            extra: Map::new(),
        };
        let mut docs = vec![env.to_value(), doc.to_value(), ack.to_value()];
        let state = match i % 10 {
            0 | 1 => State::Received,
            2 => State::Executing,
            9 => State::Canceled,
            _ => State::Finished,
        };
        if state != State::Received {
            env.status = match state {
                State::Executing => Status::InProgress,
                State::Finished => Status::Completed,
                _ => Status::Cancelled,
            };
            env.executor = Some("robot".into());
            env.record(env.status.as_str(), at, "robot", None);
            docs[0] = env.to_value();
        } else {
            pending.push(r.clone());
        }
        let path = store.layout().thread_path(&Location::State(state), &r);
        fs::write(path, emit::to_yaml_documents(&docs)).unwrap();
    }
    // Pending threads of old days would expire nothing (no needed_by); claim order is random
    // enough for the benchmark as generated.
    pending
}

/// Steady-state allocation on a home with 1,000 threads, for comparison.
fn small_home_allocation() -> (usize, Duration) {
    let dir = tempfile::TempDir::new().unwrap();
    let store = Store::open(dir.path());
    store.init().unwrap();
    populate(&store, 1000);
    let day = NaiveDate::from_ymd_opt(2030, 1, 1).unwrap();
    store.allocate_refs(day, 1).unwrap();
    let v: Vec<Duration> = (0..SAMPLES)
        .map(|_| timed(|| drop(store.allocate_refs(day, 1).unwrap())))
        .collect();
    (1000, median(&v))
}

fn peak_memory_kib() -> u64 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).map(|l| {
                l.split_whitespace()
                    .nth(1)
                    .unwrap_or("0")
                    .parse()
                    .unwrap_or(0)
            })
        })
        .unwrap_or(0)
}
