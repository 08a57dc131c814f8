//! Tidy checks of the house style, run as ordinary tests: module docs, layer boundaries,
//! banned calls, registered test files and the DuckDB pin.

use std::path::{Path, PathBuf};

pub(crate) fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub(crate) fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out.sort();
    out
}

fn rel(p: &Path) -> String {
    p.strip_prefix(root())
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

#[test]
fn every_source_file_starts_with_a_module_doc() {
    for dir in ["src", "crates", "tests", "benches", "extensions", "edge"] {
        for f in rust_files(&root().join(dir)) {
            if rel(&f).contains("/target/") {
                continue;
            }
            let text = std::fs::read_to_string(&f).unwrap();
            assert!(
                text.starts_with("//!"),
                "{} must start with a //! line",
                rel(&f)
            );
        }
    }
}

/// The protocol crate's source, which must not come to nothing: a moved folder would
/// otherwise leave the purity checks with nothing to check.
fn protocol_files() -> Vec<PathBuf> {
    let files: Vec<PathBuf> = rust_files(&root().join("crates/protocol/src"))
        .into_iter()
        .filter(|f| !f.to_string_lossy().ends_with("tests.rs"))
        .collect();
    assert!(files.len() > 10, "crates/protocol/src has no protocol");
    files
}

#[test]
fn protocol_stays_pure() {
    let allowed = [
        "std::",
        // Address types only (`IpAddr`): sockets are `std::net`, banned below.
        "core::net::",
        "serde",
        "chrono",
        "thiserror",
        "crate::",
        "super::",
        "self::",
    ];
    for f in protocol_files() {
        let text = code_only(&std::fs::read_to_string(&f).unwrap());
        // Module-level imports only; `use Enum::*` inside a function is not a dependency.
        for line in text.lines() {
            let Some(path) = line.strip_prefix("use ") else {
                continue;
            };
            let ok = allowed.iter().any(|a| path.starts_with(a))
                || (path.starts_with("serde_yaml") && f.ends_with("src/yaml.rs"));
            assert!(ok, "{}: protocol may not use {path}", rel(&f));
        }
        for banned in [
            "std::fs",
            "std::net",
            "std::process",
            "tokio",
            "duckdb",
            "axum",
            "rmcp",
            "reqwest",
            "jsonwebtoken",
            "Utc::now",
        ] {
            assert!(
                !text.contains(banned),
                "{}: protocol must not touch {banned}",
                rel(&f)
            );
        }
    }
}

/// The packages `roots` pull in, transitively, by Cargo.lock. The lock records each package's
/// dependencies for every target and every feature the workspace turns on, so this is more
/// than one build takes, never less.
fn locked_dependencies(roots: &[&str]) -> std::collections::BTreeSet<String> {
    let lock = std::fs::read_to_string(root().join("Cargo.lock")).unwrap();
    let mut deps: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for block in lock.split("[[package]]").skip(1) {
        let name = block
            .lines()
            .find_map(|l| l.strip_prefix("name = "))
            .unwrap_or_default()
            .trim_matches('"')
            .to_owned();
        let list = block
            .split_once("dependencies = [")
            .map(|(_, rest)| rest.split(']').next().unwrap_or_default())
            .unwrap_or_default();
        // Entries are "name" or "name version" when two versions are locked.
        let names: Vec<String> = list
            .split(',')
            .filter_map(|d| d.trim().trim_matches('"').split(' ').next())
            .filter(|d| !d.is_empty())
            .map(str::to_owned)
            .collect();
        deps.entry(name).or_default().extend(names);
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut todo: Vec<String> = roots.iter().map(|r| (*r).to_owned()).collect();
    for r in roots {
        assert!(deps.contains_key(*r), "{r} is not in Cargo.lock");
        seen.insert((*r).to_owned());
    }
    while let Some(p) = todo.pop() {
        for d in deps.get(&p).into_iter().flatten() {
            if seen.insert(d.clone()) {
                todo.push(d.clone());
            }
        }
    }
    seen
}

#[test]
fn the_protocol_crate_depends_on_no_runtime_database_file_or_network_crate() {
    // Its direct dependencies, as its manifest names them: a new one is a decision, made here.
    let manifest = std::fs::read_to_string(root().join("crates/protocol/Cargo.toml")).unwrap();
    let section = toml_section(&manifest, "[dependencies]");
    let direct: Vec<&str> = section
        .lines()
        .filter_map(|l| l.split('=').next())
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('['))
        .collect();
    // serde_json reads bodies sent as JSON strictly (`read::json_message`).
    assert_eq!(
        direct,
        ["chrono", "serde", "serde_json", "serde_yaml", "thiserror"]
    );
    // And what they pull in (its dev-dependencies are the tests' own): nothing that brings an
    // async runtime, a database, sockets or files of its own, so the crate builds for any target.
    let all = locked_dependencies(&direct);
    for banned in [
        "tokio",
        "mio",
        "socket2",
        "duckdb",
        "libduckdb-sys",
        "postgres",
        "hyper",
        "reqwest",
        "rustix",
        "notify",
        "tempfile",
        "mess",
    ] {
        assert!(
            !all.contains(banned),
            "mess-protocol pulls in {banned}: {all:?}"
        );
    }
}

#[test]
fn banned_calls_stay_in_their_one_place() {
    let rules: [(&str, &[&str]); 4] = [
        // The protocol crate's src/yaml.rs is the other (see `protocol_stays_pure`).
        ("serde_yaml", &[]),
        // The unit tests' choice of backend is read where the test stores are made.
        ("std::env", &["src/cli/", "src/store/testing.rs"]),
        ("Utc::now", &["src/exchange/clock.rs"]),
        (concat!("process::", "exit"), &[]),
    ];
    for f in rust_files(&root().join("src")) {
        let name = rel(&f);
        let text = code_only(&std::fs::read_to_string(&f).unwrap());
        for (needle, homes) in &rules {
            if text.contains(needle) {
                assert!(
                    homes.iter().any(|h| name.starts_with(h)),
                    "{name} uses {needle}, which belongs in {homes:?}"
                );
            }
        }
    }
    // `#[ignore]` has one use: a test that drives a program outside Rust (Chromium, jupyter, the
    // duckdb CLI, Python, node), which a plain `cargo test` cannot assume; `.ci/test` installs
    // them and runs these with `--include-ignored`, where they fail when the program is missing.
    let ignore = concat!("#[", "ignore");
    let external = concat!("#[", "ignore = \"drives ");
    let should_panic = concat!("#[", "should_panic");
    for dir in ["src", "crates", "tests", "benches", "extensions", "edge"] {
        for f in rust_files(&root().join(dir)) {
            let text = std::fs::read_to_string(&f).unwrap();
            for line in code_only(&text).lines().filter(|l| l.contains(ignore)) {
                assert!(
                    line.trim_start().starts_with(external) && line.contains(".ci/test runs it"),
                    "{}: only tests that drive an outside program may be ignored, as \
                     {external}<program>; .ci/test runs it\"] ({line})",
                    rel(&f)
                );
            }
            assert!(
                !text.contains(should_panic),
                "{}: no should_panic tests",
                rel(&f)
            );
        }
    }
}

/// Who may see and do what is decided in `exchange::access` (and the exchange's use cases),
/// never in an adapter: the HTTP, MCP and CLI code may ask, not compare principals with a
/// thread's parties, read roles, check a link's actions or know the shared mailbox.
#[test]
fn adapters_do_not_decide_access() {
    let decisions = [
        ".requestor ==",
        "== e.requestor",
        "executor.as_deref() == Some(",
        "role.is_some()",
        "role.is_none()",
        "role.map(",
        "Role::Agent =>",
        "Role::Executor =>",
        "Action::Read",
        ".allows(",
        "BROADCAST",
        "access::may_see(",
        "may_address(",
        "link_reads(",
    ];
    let adapters = ["src/http/", "src/mcp/", "src/cli/"];
    for f in rust_files(&root().join("src")) {
        let name = rel(&f);
        if !adapters.iter().any(|a| name.starts_with(a)) {
            continue;
        }
        let text = code_only(&std::fs::read_to_string(&f).unwrap());
        for needle in decisions {
            assert!(
                !text.contains(needle),
                "{name} decides access itself ({needle}); ask exchange::access instead"
            );
        }
    }
}

/// The text without comment lines, so prose may name what code may not use.
fn code_only(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn every_integration_test_file_is_registered() {
    let main = std::fs::read_to_string(root().join("tests/it/main.rs")).unwrap();
    for f in rust_files(&root().join("tests/it")) {
        let name = rel(&f);
        if name == "tests/it/main.rs" || name.starts_with("tests/it/support/") {
            continue;
        }
        let module = f.file_stem().unwrap().to_string_lossy();
        assert!(
            main.contains(&format!("mod {module};")),
            "{name} is not declared in tests/it/main.rs"
        );
    }
}

#[test]
fn duckdb_is_pinned_exactly_and_alike_in_every_manifest() {
    let mut manifests = vec![root().join("Cargo.toml")];
    for entry in std::fs::read_dir(root().join("extensions"))
        .unwrap()
        .flatten()
    {
        let m = entry.path().join("Cargo.toml");
        if m.exists() {
            manifests.push(m);
        }
    }
    let mut versions = Vec::new();
    for m in &manifests {
        let text = std::fs::read_to_string(m).unwrap();
        for line in text.lines().filter(|l| l.starts_with("duckdb ")) {
            assert!(
                line.contains("default-features = false"),
                "{}: {line}",
                rel(m)
            );
            let version = line
                .split("version = \"")
                .nth(1)
                .and_then(|v| v.split('"').next())
                .unwrap_or("");
            assert!(
                version.starts_with('='),
                "{}: pin duckdb with = ({line})",
                rel(m)
            );
            versions.push(version.to_owned());
        }
    }
    assert!(manifests.len() >= 2 && !versions.is_empty());
    assert!(
        versions.iter().all(|v| v == &versions[0]),
        "duckdb pins differ: {versions:?}"
    );
}

/// A manifest's lines from `header` up to the next table that is not one of its sub-tables.
fn toml_section(text: &str, header: &str) -> String {
    let mut out = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with('[') {
            inside = line.starts_with(header);
        }
        if inside && !line.trim().is_empty() && !line.starts_with('#') {
            out.push(line);
        }
    }
    out.join("\n")
}

#[test]
fn every_crate_shares_the_workspace_lints() {
    let root_manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let lints = toml_section(&root_manifest, "[workspace.lints");
    assert!(
        lints.contains("unsafe_code"),
        "no [workspace.lints] in Cargo.toml"
    );
    for m in [
        "Cargo.toml",
        "crates/protocol/Cargo.toml",
        "extensions/yaml_scan/Cargo.toml",
        "extensions/mess_yaml/Cargo.toml",
        "edge/core/Cargo.toml",
    ] {
        let text = std::fs::read_to_string(root().join(m)).unwrap();
        assert!(
            text.contains("[lints]\nworkspace = true"),
            "{m} does not use the workspace lints"
        );
    }
    // The extension (bundled and loadable DuckDB never meet) and the edge's WebAssembly crate
    // (another compiler and target) are workspaces of their own, so they repeat the tables;
    // they must stay equal.
    for m in ["extensions/mess_yaml/Cargo.toml", "edge/core/Cargo.toml"] {
        let text = std::fs::read_to_string(root().join(m)).unwrap();
        assert_eq!(
            toml_section(&text, "[workspace.lints"),
            lints,
            "{m}'s [workspace.lints] differ from Cargo.toml's"
        );
    }
}

#[test]
fn the_bundled_duckdb_has_one_feature_set() {
    // A test build that unified other features than the run command's would compile DuckDB's
    // C++ a second time.
    let features = |m: &str| -> Vec<String> {
        let text = std::fs::read_to_string(root().join(m)).unwrap();
        text.lines()
            .filter(|l| l.starts_with("duckdb ") && l.contains("\"bundled\""))
            .map(|l| l.split("features = ").nth(1).unwrap_or("").to_owned())
            .collect()
    };
    let main = features("Cargo.toml");
    let scan = features("extensions/yaml_scan/Cargo.toml");
    assert_eq!(main.len(), 1, "Cargo.toml: one bundled duckdb line");
    assert_eq!(
        scan, main,
        "yaml_scan's bundled duckdb (dev) must list Cargo.toml's features"
    );
}

#[test]
fn every_sql_asset_is_registered_in_load_order() {
    let registry = std::fs::read_to_string(root().join("src/db/assets.rs")).unwrap();
    // Entries read `("macros/010_x.sql", include_str!("../../macros/010_x.sql"))`; the first
    // string of each is its name.
    let listed: Vec<String> = registry
        .split("include_str!")
        .filter_map(|chunk| chunk.rsplit('(').next())
        .filter_map(|tail| {
            tail.trim()
                .strip_prefix('"')
                .and_then(|r| r.split('"').next())
        })
        .filter(|name| name.ends_with(".sql"))
        .map(str::to_owned)
        .collect();
    let mut on_disk = Vec::new();
    for dir in ["macros", "sql"] {
        for entry in std::fs::read_dir(root().join(dir)).unwrap().flatten() {
            on_disk.push(format!("{dir}/{}", entry.file_name().to_string_lossy()));
        }
    }
    on_disk.sort();
    let mut sorted_listed = listed.clone();
    sorted_listed.sort();
    assert_eq!(
        sorted_listed, on_disk,
        "src/db/assets.rs must list every file of macros/ and sql/"
    );
    let number = |p: &str| {
        p.split('/')
            .nth(1)
            .and_then(|n| n.get(..3))
            .and_then(|n| n.parse::<u32>().ok())
            .unwrap()
    };
    for pair in listed.windows(2) {
        assert!(
            number(&pair[0]) <= number(&pair[1]),
            "load order: {} before {}",
            pair[0],
            pair[1]
        );
    }
    for f in &on_disk {
        let text = std::fs::read_to_string(root().join(f)).unwrap();
        assert!(text.starts_with("-- "), "{f} must start with a -- header");
    }
}

#[test]
fn every_pointer_of_architecture_md_s_index_is_valid() {
    // "Where it lives": each row names a file and, for Rust, an item defined (or called) there.
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let index = &text[text
        .find("## Where it lives")
        .expect("ARCHITECTURE.md has a `## Where it lives` index")..];
    let mut rows = 0;
    let mut broken = Vec::new();
    for line in index
        .lines()
        .skip_while(|l| !l.starts_with("| behaviour |"))
        .skip(2)
    {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().trim_matches('`'))
            .collect();
        let [behaviour, file, item] = cells[..] else {
            broken.push(format!("not three cells: {line}"));
            continue;
        };
        rows += 1;
        let Ok(source) = std::fs::read_to_string(root().join(file)) else {
            broken.push(format!("{behaviour}: {file} does not exist"));
            continue;
        };
        if !item.is_empty()
            && !source.contains(&format!("fn {item}"))
            && !source.contains(&format!("{item}("))
        {
            broken.push(format!("{behaviour}: {file} has no {item}"));
        }
    }
    assert!(
        rows >= 40,
        "the index names {rows} behaviours; it keeps at least 40"
    );
    assert!(broken.is_empty(), "{}", broken.join("\n"));
    let words = text.split_whitespace().count();
    assert!(
        words < 2_500,
        "ARCHITECTURE.md has {words} words (the map stays short)"
    );
}
