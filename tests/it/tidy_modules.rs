//! Tidy checks of the code map: the module dependency graph ARCHITECTURE.md states (its
//! "may use" table is the rule, parsed here, so the page and the code cannot drift apart), no
//! import cycle between the parts of one module (through submodules too), and only known
//! entries at the repository's top. Test-only items are left out wherever they stand.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::tidy::{root, rust_files};

/// The module path of a source file under `src/` (`src/exchange/plan.rs` is
/// `["exchange", "plan"]`, `src/exchange/mod.rs` is `["exchange"]`).
fn module_path(file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root().join("src")).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" && stem != "main" {
        parts.push(stem.to_owned());
    }
    parts
}

/// Test code may reach anywhere (it builds homes and drives the whole exchange).
fn is_test_file(file: &Path) -> bool {
    let name = file.file_stem().unwrap().to_string_lossy();
    name == "tests"
        || name.ends_with("_tests")
        || file.components().any(|c| c.as_os_str() == "tests")
}

/// The code of a file without comments and without its test-only items: every item after a
/// `#[cfg(test)]` (a `mod tests;` declaration, or an item with a body, skipped to its matching
/// brace), wherever it stands, so imports below a test module are still checked.
fn production_code(text: &str) -> String {
    let code: Vec<&str> = text
        .lines()
        .map(|l| match l.find("//") {
            Some(i) if !l[..i].contains('"') => &l[..i],
            _ => l,
        })
        .collect();
    let code = code.join("\n");
    let mut out = String::with_capacity(code.len());
    let mut rest = code.as_str();
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = &rest[at + "#[cfg(test)]".len()..];
        let (semi, brace) = (item.find(';'), item.find('{'));
        let end = match (semi, brace) {
            // `mod tests;`, `use ...;`: up to the semicolon.
            (Some(s), Some(b)) if s < b => s + 1,
            (Some(s), None) => s + 1,
            (_, Some(b)) => {
                let mut depth = 0usize;
                let mut close = item.len();
                for (i, c) in item[b..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                close = b + i + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                close
            }
            (None, None) => item.len(),
        };
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// Every module path a file names: `use` trees expanded (`use crate::{a, b::{c, d}}`) and
/// inline paths (`crate::store::Error`, `super::plan::x`), resolved against the file's module.
fn named_paths(file: &Path, code: &str) -> Vec<Vec<String>> {
    let here = module_path(file);
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = find_word(rest, "use") {
        let after = &rest[i + 3..];
        let Some(end) = after.find(';') else { break };
        let tree: String = after[..end].split_whitespace().collect();
        for path in expand(&tree) {
            out.push(path);
        }
        rest = &after[end..];
    }
    for start in ["crate::", "super::"] {
        let mut rest = code;
        while let Some(i) = rest.find(start) {
            let before = rest[..i].chars().last();
            let tail = &rest[i..];
            rest = &rest[i + start.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let path: String = tail
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            out.push(path.split("::").map(str::to_owned).collect());
        }
    }
    out.into_iter().filter_map(|p| resolve(&here, p)).collect()
}

fn find_word(text: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = text[from..].find(word) {
        let at = from + i;
        let before = text[..at].chars().last();
        let after = text[at + word.len()..].chars().next();
        let boundary = |c: Option<char>| !c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        // A `use` item starts its line (after `pub` or `pub(…)`): the word inside a string
        // ("unset it to use the home's secret") is not one.
        let line = text[..at].rsplit('\n').next().unwrap_or("").trim();
        let starts_item =
            line.is_empty() || line == "pub" || line.starts_with("pub(") && line.ends_with(')');
        if boundary(before) && starts_item && after.is_some_and(char::is_whitespace) {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// `crate::{a, b::{c, d}}` into `[crate, a]`, `[crate, b, c]`, `[crate, b, d]`.
fn expand(tree: &str) -> Vec<Vec<String>> {
    let tree = tree
        .trim_start_matches("pub(crate)")
        .trim_start_matches("pub");
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or(tree);
        return vec![path.split("::").map(str::to_owned).collect()];
    };
    let prefix: Vec<String> = tree[..open]
        .trim_end_matches("::")
        .split("::")
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    let mut out = Vec::new();
    for part in parts.into_iter().filter(|p| !p.is_empty()) {
        for tail in expand(part) {
            let mut path = prefix.clone();
            path.extend(tail.into_iter().filter(|s| s != "self"));
            out.push(path);
        }
    }
    out
}

/// An absolute module path for `crate::` and `super::` paths; `None` for anything else.
fn resolve(here: &[String], path: Vec<String>) -> Option<Vec<String>> {
    let first = path.first()?;
    if first == "crate" {
        return Some(path[1..].to_vec());
    }
    if first != "super" {
        return None;
    }
    // `here` is the module the file declares (`x/mod.rs` and `x.rs` both are `x`), so each
    // `super` is one step up from it.
    let mut base = here.to_vec();
    let mut rest = path.as_slice();
    while rest.first().is_some_and(|s| s == "super") {
        base.pop()?;
        rest = &rest[1..];
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The "may use" table of ARCHITECTURE.md: module to the top-level modules its code may name.
fn stated_graph() -> BTreeMap<String, BTreeSet<String>> {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let mut graph = BTreeMap::new();
    let mut in_table = false;
    for line in text.lines() {
        if line.starts_with("| module | may use |") {
            in_table = true;
            continue;
        }
        if in_table {
            if !line.starts_with('|') {
                break;
            }
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            if cells[0].starts_with("---") {
                continue;
            }
            let names = |cell: &str| -> BTreeSet<String> {
                cell.split(',')
                    .map(|s| s.trim().trim_matches('`').to_owned())
                    .filter(|s| !s.is_empty() && s != "nothing")
                    .collect()
            };
            graph.insert(cells[0].trim_matches('`').to_owned(), names(cells[1]));
        }
    }
    assert!(
        !graph.is_empty(),
        "ARCHITECTURE.md has no `| module | may use |` table"
    );
    graph
}

#[test]
fn modules_use_only_what_architecture_md_allows() {
    let graph = stated_graph();
    let files = rust_files(&root().join("src"));
    let tops: BTreeSet<String> = files
        .iter()
        .filter_map(|f| module_path(f).first().cloned())
        .collect();
    let mut problems = Vec::new();
    for file in files {
        let here = module_path(&file);
        let Some(top) = here.first() else { continue };
        if is_test_file(&file) {
            continue;
        }
        let Some(allowed) = graph.get(top) else {
            problems.push(format!(
                "src/{top} is not in ARCHITECTURE.md's may-use table"
            ));
            continue;
        };
        let code = production_code(&std::fs::read_to_string(&file).unwrap());
        for path in named_paths(&file, &code) {
            let Some(target) = path.first() else { continue };
            if target == top || !tops.contains(target) {
                continue;
            }
            if !allowed.contains(target) {
                problems.push(format!(
                    "{} uses {} ({}), which ARCHITECTURE.md does not allow {top}",
                    file.strip_prefix(root()).unwrap().display(),
                    target,
                    path.join("::")
                ));
            }
        }
    }
    // `protocol` is a crate of its own (crates/protocol, re-exported by src/lib.rs): the
    // compiler keeps it from naming anything of `mess`, and every module may use it.
    for module in graph.keys() {
        assert!(
            root().join("src").join(module).is_dir()
                || root().join("src").join(format!("{module}.rs")).is_file()
                || root().join("crates").join(module).is_dir(),
            "ARCHITECTURE.md's table names {module}, which is not a module of src/ or a crate of crates/"
        );
    }
    problems.sort();
    problems.dedup();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn no_two_parts_of_a_module_import_each_other() {
    // Within each module, an edge from one of its parts to another: a part is a child module
    // with everything below it (`store::postgres` with `store::postgres::mirror`), so a cycle through
    // submodules is seen at the level where it closes.
    let mut edges: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for file in rust_files(&root().join("src")) {
        if is_test_file(&file) {
            continue;
        }
        let here = module_path(&file);
        let code = production_code(&std::fs::read_to_string(&file).unwrap());
        let named = named_paths(&file, &code);
        // The file belongs to a part of every module above it.
        for depth in 0..here.len() {
            let parent = &here[..depth];
            let part = &here[depth];
            for path in &named {
                if path.len() > depth && path.starts_with(parent) && &path[depth] != part {
                    edges
                        .entry(parent.to_vec())
                        .or_default()
                        .entry(part.clone())
                        .or_default()
                        .insert(path[depth].clone());
                }
            }
        }
    }
    let mut cycles = Vec::new();
    for (parent, graph) in &edges {
        for start in graph.keys() {
            if let Some(cycle) = cycle_from(graph, start) {
                let mut named: Vec<String> = cycle
                    .iter()
                    .map(|p| {
                        let mut full = parent.clone();
                        full.push(p.clone());
                        full.join("::")
                    })
                    .collect();
                // One report per cycle, whichever part it was found from.
                let least = named
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, n)| *n)
                    .map_or(0, |(i, _)| i);
                named.rotate_left(least);
                cycles.push(named.join(" -> "));
            }
        }
    }
    cycles.sort();
    cycles.dedup();
    assert!(
        cycles.is_empty(),
        "parts of a module that import each other, directly or through others (move what they share \
         into one of them or a third):\n{}",
        cycles.join("\n")
    );
}

/// A cycle of `graph` through `start` (the parts in order, `start` first), if any.
fn cycle_from(graph: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    let mut stack: Vec<(String, Vec<String>)> = vec![(start.to_owned(), vec![start.to_owned()])];
    let mut seen = BTreeSet::new();
    while let Some((node, path)) = stack.pop() {
        for next in graph.get(&node).into_iter().flatten() {
            if next == start {
                return Some(path);
            }
            if seen.insert(next.clone()) {
                let mut longer = path.clone();
                longer.push(next.clone());
                stack.push((next.clone(), longer));
            }
        }
    }
    None
}

/// What may sit at the top of the repository; a stray home folder or scratch file fails here.
const TOP_LEVEL: &[&str] = &[
    ".ci",
    ".gitignore",
    "ARCHITECTURE.md",
    "Cargo.lock",
    "Cargo.toml",
    "README.md",
    "SKILL.md",
    "benches",
    "build.rs",
    "crates",
    "docs",
    "edge",
    "extensions",
    "macros",
    "notebooks",
    "packaging",
    "proptest-regressions",
    "sql",
    "src",
    "tests",
];

#[test]
fn only_known_entries_sit_at_the_top_of_the_repository() {
    let out = std::process::Command::new("git")
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .current_dir(root())
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git ls-files failed");
    let mut unknown = BTreeSet::new();
    for path in out.stdout.split(|b| *b == 0).filter(|p| !p.is_empty()) {
        let path = String::from_utf8_lossy(path);
        let top = path.split('/').next().unwrap_or_default().to_owned();
        if !TOP_LEVEL.contains(&top.as_str()) {
            unknown.insert(top);
        }
    }
    assert!(
        unknown.is_empty(),
        "unknown entries at the top of the repository (remove them, or add them to TOP_LEVEL \
         and say in ARCHITECTURE.md what they are for): {unknown:?}"
    );
}
