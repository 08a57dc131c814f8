//! Tidy checks of the code map: the module dependency graph ARCHITECTURE.md states (its
//! "may use" table is the rule, parsed here, so the page and the code cannot drift apart), no
//! import cycle between the files of one module, and only known entries at the repository's top.

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

/// The code of a file without comments and without its trailing `#[cfg(test)]` module.
fn production_code(text: &str) -> String {
    let code: Vec<&str> = text
        .lines()
        .map(|l| match l.find("//") {
            Some(i) if !l[..i].contains('"') => &l[..i],
            _ => l,
        })
        .collect();
    let code = code.join("\n");
    match code.find("#[cfg(test)]") {
        Some(i) => code[..i].to_owned(),
        None => code,
    }
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
        if boundary(before) && after.is_some_and(char::is_whitespace) {
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
    for module in graph.keys() {
        assert!(
            root().join("src").join(module).is_dir()
                || root().join("src").join(format!("{module}.rs")).is_file(),
            "ARCHITECTURE.md's table names {module}, which is not a module of src/"
        );
    }
    problems.sort();
    problems.dedup();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn no_two_files_of_a_module_import_each_other() {
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for file in rust_files(&root().join("src")) {
        if is_test_file(&file) || file.file_name().is_some_and(|n| n == "mod.rs") {
            continue;
        }
        let here = module_path(&file);
        if here.len() < 2 {
            continue;
        }
        let parent = &here[..here.len() - 1];
        let code = production_code(&std::fs::read_to_string(&file).unwrap());
        for path in named_paths(&file, &code) {
            if path.len() > parent.len() && path.starts_with(parent) {
                let sibling = path[..=parent.len()].to_vec();
                if sibling != here {
                    edges.entry(here.clone()).or_default().insert(sibling);
                }
            }
        }
    }
    let mut cycles = Vec::new();
    for (a, targets) in &edges {
        for b in targets {
            if a < b && edges.get(b).is_some_and(|t| t.contains(a)) {
                cycles.push(format!("{} <-> {}", a.join("::"), b.join("::")));
            }
        }
    }
    assert!(
        cycles.is_empty(),
        "files that import each other (move what both need into one of them or a third):\n{}",
        cycles.join("\n")
    );
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
    "docs",
    "extensions",
    "macros",
    "notebooks",
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
