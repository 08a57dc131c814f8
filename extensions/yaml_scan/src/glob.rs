//! Expanding `read_yaml_auto` paths: `~`, `*`, `?`, `[...]` within a name, and `**` for any
//! number of folders. The C API offers no glob, so this is ours; matches come back sorted.

use std::path::{Path, PathBuf};

/// Expands `~` at the start of a path to `$HOME`.
pub(crate) fn expand_home(pattern: &str) -> String {
    match pattern.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => match std::env::var("HOME") {
            Ok(home) => format!("{home}{rest}"),
            Err(_) => pattern.to_owned(),
        },
        _ => pattern.to_owned(),
    }
}

/// The files matching `pattern` (after `~` expansion), sorted. A pattern without wildcards
/// matches itself when it is a file.
pub(crate) fn expand(pattern: &str) -> Vec<PathBuf> {
    let pattern = expand_home(pattern);
    if !has_wildcard(&pattern) {
        let p = PathBuf::from(&pattern);
        return if p.is_file() { vec![p] } else { Vec::new() };
    }
    let absolute = pattern.starts_with('/');
    let parts: Vec<&str> = pattern.split('/').filter(|p| !p.is_empty()).collect();
    let root = if absolute {
        PathBuf::from("/")
    } else {
        PathBuf::from(".")
    };
    let mut out = Vec::new();
    walk(&root, &parts, !absolute, &mut out);
    out.sort();
    out.dedup();
    out
}

/// Whether a pattern has wildcards (a path without them names one file).
pub(crate) fn has_wildcard(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

fn walk(dir: &Path, parts: &[&str], relative: bool, out: &mut Vec<PathBuf>) {
    let Some((first, rest)) = parts.split_first() else {
        return;
    };
    let join = |name: &str| {
        if relative && dir == Path::new(".") {
            PathBuf::from(name)
        } else {
            dir.join(name)
        }
    };
    if *first == "**" {
        // Zero folders, then every folder below but hidden ones (as `*` skips them). Links
        // to folders are not followed here: a link to an ancestor would make the walk endless.
        walk(dir, rest, relative, out);
        for sub in entries(dir)
            .into_iter()
            .filter(|e| e.is_dir && !e.is_link && !e.name.starts_with('.'))
        {
            walk(&join(&sub.name), parts, relative, out);
        }
        return;
    }
    if !has_wildcard(first) {
        let next = join(first);
        if rest.is_empty() {
            if next.is_file() {
                out.push(next);
            }
        } else if next.is_dir() {
            walk(&next, rest, relative, out);
        }
        return;
    }
    for entry in entries(dir) {
        if entry.name.starts_with('.') && !first.starts_with('.') {
            continue;
        }
        if !matches(first, &entry.name) {
            continue;
        }
        let next = join(&entry.name);
        if rest.is_empty() {
            if !entry.is_dir {
                out.push(next);
            }
        } else if entry.is_dir {
            walk(&next, rest, relative, out);
        }
    }
}

struct Entry {
    name: String,
    /// A folder, or a link to one.
    is_dir: bool,
    is_link: bool,
}

fn entries(dir: &Path) -> Vec<Entry> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    read.flatten()
        .map(|e| {
            let is_link = e.file_type().map(|t| t.is_symlink()).unwrap_or(false);
            let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false)
                || (is_link && e.path().is_dir());
            Entry {
                name: e.file_name().to_string_lossy().into_owned(),
                is_dir,
                is_link,
            }
        })
        .collect()
}

/// The folders of `pattern` before its first wildcard (the part a walk starts from).
pub(crate) fn literal_prefix(pattern: &str) -> PathBuf {
    let mut prefix = PathBuf::from(if pattern.starts_with('/') { "/" } else { "" });
    let parts: Vec<&str> = pattern.split('/').filter(|p| !p.is_empty()).collect();
    for (i, part) in parts.iter().enumerate() {
        match literal(part) {
            Some(name) if i + 1 < parts.len() => prefix.push(name),
            _ => break,
        }
    }
    prefix
}

/// The name a pattern component stands for when it has no wildcard other than escaped ones
/// (`[*]`, see [`escape`]).
fn literal(part: &str) -> Option<String> {
    let chars: Vec<char> = part.chars().collect();
    let mut name = String::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '[' if chars.get(i + 2) == Some(&']') && chars.get(i + 1) != Some(&'!') => {
                name.push(chars[i + 1]);
                i += 3;
            }
            '*' | '?' | '[' => return None,
            c => {
                name.push(c);
                i += 1;
            }
        }
    }
    Some(name)
}

/// `text` with the wildcard characters made literal (`[*]`), for embedding a folder name in a
/// pattern.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '*' | '?' | '[' => {
                out.push('[');
                out.push(c);
                out.push(']');
            }
            c => out.push(c),
        }
    }
    out
}

/// Matches one path component against a pattern with `*`, `?` and `[...]` (`[!...]` negates).
pub(crate) fn matches(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    match_from(&p, &n)
}

fn match_from(p: &[char], n: &[char]) -> bool {
    // Iterative matching with backtracking on the last `*`.
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() {
            match p[pi] {
                '*' => {
                    star = Some((pi, ni));
                    pi += 1;
                    continue;
                }
                '?' => {
                    pi += 1;
                    ni += 1;
                    continue;
                }
                '[' => {
                    if let Some((ok, len)) = class(&p[pi..], n[ni])
                        && ok
                    {
                        pi += len;
                        ni += 1;
                        continue;
                    }
                }
                c if c == n[ni] => {
                    pi += 1;
                    ni += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, sn)) => {
                pi = sp + 1;
                ni = sn + 1;
                star = Some((sp, sn + 1));
            }
            None => return false,
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// Matches `c` against the class starting at `p[0] == '['`; returns (matched, class length).
fn class(p: &[char], c: char) -> Option<(bool, usize)> {
    let mut i = 1;
    let negate = matches!(p.get(i), Some('!' | '^'));
    if negate {
        i += 1;
    }
    let mut matched = false;
    let start = i;
    while i < p.len() && (p[i] != ']' || i == start) {
        if i + 2 < p.len() && p[i + 1] == '-' && p[i + 2] != ']' {
            if p[i] <= c && c <= p[i + 2] {
                matched = true;
            }
            i += 3;
        } else {
            if p[i] == c {
                matched = true;
            }
            i += 1;
        }
    }
    if i >= p.len() {
        return None;
    }
    Some((matched != negate, i + 1))
}
