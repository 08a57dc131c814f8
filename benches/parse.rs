//! Parsing-memory benchmark: how much memory reading one message costs, as a multiple of its
//! size, for the shapes that cost most per byte (dense flow and block sequences, small
//! mappings, expanded aliases) and for ordinary ones (a data URI, prose), in YAML and JSON, at
//! the size limit of the value budget and beyond it (refused before the parser runs). Each
//! shape is parsed in a fresh process of this benchmark, which reports its peak memory
//! (VmHWM) above what it held with the text already loaded: the baseline is the same process
//! just before parsing.
//!
//! Run with `cargo bench --bench parse` (`-- --mib 8` for the size of the largest shapes).

#![allow(clippy::unwrap_used, clippy::print_stdout)]

use std::process::Command;

use mess::protocol::message::Message;
use mess::protocol::yaml::{self, Limits};

fn peak_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The value budget of a YAML message of `len` bytes, and of a JSON one.
fn budget(len: usize, json: bool) -> usize {
    let per = if json {
        yaml::JSON_BYTES_PER_NODE
    } else {
        yaml::YAML_BYTES_PER_NODE
    };
    yaml::MESSAGE_BASE_NODES + len / per
}

/// `n` items of `make(i, width)` under a request, with the width grown until the text is
/// about `bytes` long and the item count shrunk until it fits the value budget: the densest
/// text of this shape that is still read.
fn at_limit(bytes: usize, json: bool, item: impl Fn(usize, usize) -> String) -> String {
    let wrap = |items: Vec<String>| {
        if json {
            format!(
                "{{\"MESS\":[{{\"request\":{{\"intent\":\"x\",\"data\":[{}]}}}}]}}",
                items.join(",")
            )
        } else {
            format!(
                "MESS:\n  - request:\n      intent: x\n      data:\n{}",
                items.concat()
            )
        }
    };
    let one = item(0, 1).len().max(1);
    let mut n = budget(bytes, json);
    loop {
        let width = (bytes / n.max(1)).saturating_sub(one).max(1);
        let text = wrap((0..n).map(|i| item(i, width)).collect());
        let fits = if json {
            // JSON is counted while it is read: each item is one value here.
            n + 16 <= budget(text.len(), true)
        } else {
            yaml::estimate_events(&text) <= budget(text.len(), false)
        };
        if fits || n < 16 {
            return text;
        }
        n = n * 19 / 20;
    }
}

/// The text of `shape` at about `bytes` bytes.
fn text(shape: &str, bytes: usize) -> String {
    let digits = |i: usize, width: usize| format!("{i:0width$}");
    match shape {
        "yaml-flow-at-limit" => {
            at_limit(bytes, false, |i, w| {
                if i == 0 {
                    format!("        - [{}", digits(i, w))
                } else {
                    format!(",{}", digits(i, w))
                }
            })
            .replacen("data:\n        - [", "data: [", 1)
                + "]\n"
        }
        "yaml-block-at-limit" => {
            at_limit(bytes, false, |i, w| format!("        - {}\n", digits(i, w)))
        }
        "yaml-maps-at-limit" => at_limit(bytes, false, |i, w| {
            format!("        - {{k: {i}, v: {}}}\n", "v".repeat(w))
        }),
        "yaml-aliases-at-limit" => {
            // Each level repeats the one before: about 14,700 values once expanded, just
            // inside the budget of a small message.
            let mut s = String::from(
                "MESS:\n  - request:\n      intent: x\n      a0: &a0 [1, 2, 3, 4, 5, 6, 7, 8]\n",
            );
            for i in 1..4 {
                let prev = format!("*a{}", i - 1);
                s.push_str(&format!(
                    "      a{i}: &a{i} [{}]\n",
                    vec![prev; 8].join(", ")
                ));
            }
            s.push_str("      b: [*a3, *a3]\n");
            s
        }
        "yaml-alias-bomb" => {
            let mut s = String::from(
                "MESS:\n  - request:\n      intent: x\n      a0: &a0 [1, 2, 3, 4, 5, 6, 7, 8]\n",
            );
            for i in 1..12 {
                let prev = format!("*a{}", i - 1);
                s.push_str(&format!(
                    "      a{i}: &a{i} [{}]\n",
                    vec![prev; 8].join(", ")
                ));
            }
            s
        }
        "yaml-flow-refused" => format!(
            "MESS:\n  - request:\n      intent: x\n      data: [{}]\n",
            vec!["1"; bytes / 2].join(",")
        ),
        "yaml-data-uri" => format!(
            "MESS:\n  - request:\n      intent: look at this\n      context:\n        - file: data:application/octet-stream;base64,{}\n",
            "QUJD".repeat(bytes / 4)
        ),
        "yaml-prose" => {
            let line = "The quick brown fox jumps over the lazy dog, again and again.\n";
            let mut s = String::from(
                "MESS:\n  - request:\n      intent: read this\n      context:\n        - |\n",
            );
            while s.len() < bytes {
                s.push_str("          ");
                s.push_str(line);
            }
            s
        }
        "json-array-at-limit" => at_limit(bytes, true, |_, w| "7".repeat(w)),
        other => panic!("unknown shape {other}"),
    }
}

/// Reads the message in `file` in this fresh process and prints `bytes peak_kib accepted`:
/// the peak above what the process held once the text was read.
fn one(file: &str, json: bool) {
    let text = std::fs::read_to_string(file).unwrap();
    let before = peak_kib();
    let accepted = if json {
        let mut reader = serde_json::Deserializer::from_str(&text);
        yaml::value_from(&mut reader, &Limits::json_message(text.len()))
            .ok()
            .map(|v| Message::from_value(v).is_ok())
            .is_some()
    } else {
        yaml::parse_documents(&text, &Limits::message(text.len()))
            .map(|docs| {
                docs.into_iter()
                    .filter(|d| !d.is_null())
                    .for_each(|d| drop(Message::from_value(d)));
            })
            .is_ok()
    };
    let after = peak_kib();
    println!(
        "{} {} {}",
        text.len(),
        after.saturating_sub(before),
        accepted
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--one") {
        one(&args[i + 1], args[i + 2] == "json");
        return;
    }
    let mib: usize = args
        .iter()
        .position(|a| a == "--mib")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(8);
    println!(
        "mess parse benchmark: peak memory of parsing one message, above the same process with the text loaded (2-core figures in the README)"
    );
    println!(
        "{:<22} {:>12} {:>12} {:>9}  outcome",
        "shape", "bytes", "peak", "multiple"
    );
    let me = std::env::current_exe().unwrap();
    let dir = tempfile::TempDir::new().unwrap();
    for shape in [
        "yaml-flow-at-limit",
        "yaml-block-at-limit",
        "yaml-maps-at-limit",
        "yaml-aliases-at-limit",
        "yaml-alias-bomb",
        "yaml-data-uri",
        "yaml-prose",
        "json-array-at-limit",
        "yaml-flow-refused",
    ] {
        let sizes: &[usize] = if shape.contains("alias") {
            &[0]
        } else {
            &[64 * 1024, mib * 1024 * 1024]
        };
        for &size in sizes {
            let file = dir.path().join("message");
            std::fs::write(&file, text(shape, size)).unwrap();
            let kind = if shape.starts_with("json") {
                "json"
            } else {
                "yaml"
            };
            let out = Command::new(&me)
                .args(["--one", file.to_str().unwrap(), kind])
                .output()
                .unwrap();
            let line = String::from_utf8_lossy(&out.stdout).into_owned();
            let mut parts = line.split_whitespace();
            let bytes: f64 = parts.next().and_then(|b| b.parse().ok()).unwrap_or(0.0);
            let kib: f64 = parts.next().and_then(|k| k.parse().ok()).unwrap_or(0.0);
            let accepted = parts.next() == Some("true");
            println!(
                "{:<22} {:>12} {:>9.1} MiB {:>8.1}x  {}",
                shape,
                bytes as u64,
                kib / 1024.0,
                kib * 1024.0 / bytes.max(1.0),
                if accepted { "read" } else { "refused" }
            );
        }
    }
}
