//! A `read_yaml_auto` scan independent of DuckDB: options, file expansion, parsing through
//! the cache, the union schema, and Arrow batches for any slice of rows and columns.

use std::cell::Cell;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use duckdb::arrow::array::{ArrayRef, Int64Builder, ListArray, StringBuilder};
use duckdb::arrow::buffer::{NullBuffer, OffsetBuffer};
use duckdb::arrow::datatypes::{DataType, Field, Schema};
use duckdb::arrow::record_batch::{RecordBatch, RecordBatchOptions};

use crate::build::build;
use crate::cache::{self, Stamp};
use crate::glob;
use crate::node::{Key, Node};
use crate::parse::{self, Doc, ParsedFile};
use crate::types::{self, FileTypes, Ty, Union};

/// File name endings of MESSE-AF thread files: the format allows both.
pub const THREAD_SUFFIXES: [&str; 2] = [".messe-af.yaml", ".messe-af"];

/// Whether a file name (or a pattern's last part) names MESSE-AF thread files.
pub fn is_thread_name(name: &str) -> bool {
    THREAD_SUFFIXES.iter().any(|s| name.ends_with(s))
}

/// How documents become rows (`multi_document`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// One row per mapping document (the default for files other than thread files).
    Rows,
    /// Document 1 of each file only.
    First,
    /// One row per file; column `documents` lists every document.
    List,
    /// Document 1's keys as columns on a row for each of documents 2...
    Frontmatter,
    /// One row per file: document 1's keys as columns (every MESSE-AF envelope field among
    /// them, NULL where a file lacks it) and `messages`, the list of documents 2... The
    /// default when every file (or, with no files, every pattern) names MESSE-AF thread files.
    Thread,
}

impl Mode {
    /// Parses the option's value.
    pub fn parse(s: &str) -> Result<Mode, String> {
        match s {
            "rows" => Ok(Mode::Rows),
            "first" => Ok(Mode::First),
            "list" => Ok(Mode::List),
            "frontmatter" => Ok(Mode::Frontmatter),
            "thread" => Ok(Mode::Thread),
            other => Err(format!(
                "Invalid value \"{other}\" for multi_document (expected 'rows', 'first', 'list', 'frontmatter' or 'thread')"
            )),
        }
    }
}

/// The options of one scan.
#[derive(Debug, Clone)]
pub struct Options {
    /// `hive_partitioning`: `None` detects `key=value` folders.
    pub hive: Option<bool>,
    /// Add a `filename` column.
    pub filename: bool,
    /// Add a `document_index` column (0 = the first document of a file).
    pub document_index: bool,
    /// How documents become rows; `None` chooses by the file names: `thread` for MESSE-AF
    /// thread files, `rows` for anything else (and whenever `document_index` is asked for).
    pub mode: Option<Mode>,
    /// Skip files and documents that do not parse instead of failing.
    pub ignore_errors: bool,
    /// A top-level sequence gives one row per element (default) rather than one row.
    pub expand_root_sequence: bool,
    /// A pattern without wildcards that names no file gives no rows instead of an error (a
    /// glob that matches nothing always does). With no file at all the scan has the hive
    /// columns its patterns name and, in `thread` mode, the envelope columns and `messages`;
    /// otherwise only `filename` (views add their columns by name).
    pub allow_empty: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            hive: None,
            filename: false,
            document_index: false,
            mode: None,
            ignore_errors: false,
            expand_root_sequence: true,
            allow_empty: false,
        }
    }
}

/// What fills a column.
#[derive(Debug, Clone)]
enum Source {
    /// A top-level key of the row's document.
    Data(Key),
    /// A key of the file's first document (`frontmatter`).
    Front(Key),
    /// A key of the row's document where it has it, else of the file's first (`frontmatter`).
    Both(Key),
    /// A `key=value` folder of the path.
    Hive(String),
    Filename,
    DocumentIndex,
    /// Every document of the file (`list`).
    Documents,
    /// Documents 2.. of the file (`thread`).
    Messages,
}

impl Source {
    /// Whether the column comes from the documents (rather than the path or the scan).
    fn is_data(&self) -> bool {
        matches!(self, Source::Data(_) | Source::Front(_) | Source::Both(_))
    }
}

#[derive(Debug, Clone)]
struct Column {
    name: String,
    ty: Ty,
    source: Source,
    arrow: DataType,
}

#[derive(Debug)]
struct File {
    /// The path read, for parsing the rest of a thread file when its messages are asked for.
    path: PathBuf,
    shown: String,
    hive: Vec<(String, String)>,
    parsed: Arc<ParsedFile>,
}

#[derive(Debug, Clone, Copy)]
struct Row {
    file: u32,
    doc: u32,
    /// Element of a top-level sequence, or `u32::MAX` for the whole document.
    elem: u32,
}

thread_local! {
    static DEFINING: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` (creating views and macros) with `read_yaml_auto` binding as if no file matched.
/// DuckDB binds a view's query when the view is created and again at every query; without
/// this, creating the views over a home of 100,000 threads would parse all of them once just
/// to learn a schema that the first query infers again. Views must therefore bind over an empty
/// home, which they do anyway (their typed templates give every column they use).
pub fn defining<T>(f: impl FnOnce() -> T) -> T {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            DEFINING.with(|d| d.set(self.0));
        }
    }
    let _reset = Reset(DEFINING.with(|d| d.replace(true)));
    f()
}

/// A bound scan: its columns and rows, ready to be emitted in batches.
#[derive(Debug)]
pub struct Plan {
    columns: Vec<Column>,
    files: Vec<File>,
    rows: Vec<Row>,
}

impl Plan {
    /// Expands `patterns`, parses (or reuses) every file and infers the schema. With `root`
    /// (the locked-down query instance), relative patterns are taken from the root, and a
    /// pattern that reaches outside it or into its hidden folders is refused before any folder
    /// is listed; with `only` as well, files outside that set (relative to the root) are
    /// skipped as if absent.
    pub fn bind(
        patterns: &[String],
        opts: &Options,
        root: Option<&Path>,
        only: Option<&HashSet<PathBuf>>,
        open: &[String],
    ) -> Result<Plan, String> {
        let planned = Plan::bind_paths(patterns, opts, root, only, open);
        match root.and_then(|r| r.canonicalize().ok()) {
            // Errors of a confined scan name files relative to the root, as its rows do.
            Some(root) => planned.map_err(|e| e.replace(&format!("{}/", root.display()), "")),
            None => planned,
        }
    }

    fn bind_paths(
        patterns: &[String],
        opts: &Options,
        root: Option<&Path>,
        only: Option<&HashSet<PathBuf>>,
        open: &[String],
    ) -> Result<Plan, String> {
        let mut paths: Vec<PathBuf> = Vec::new();
        let mut seen = HashSet::new();
        let defining = DEFINING.with(Cell::get);
        let root = match root {
            Some(r) => Some(
                r.canonicalize()
                    .map_err(|e| format!("{}: {e}", r.display()))?,
            ),
            None => None,
        };
        for pattern in patterns.iter().filter(|_| !defining) {
            let pattern = match &root {
                Some(root) => confine_pattern(pattern, root, open)?,
                None => pattern.clone(),
            };
            let mut matched = glob::expand(&pattern);
            if let (Some(root), Some(only)) = (&root, only) {
                matched.retain(|p| {
                    p.canonicalize()
                        .ok()
                        .and_then(|real| real.strip_prefix(root).ok().map(Path::to_path_buf))
                        .is_some_and(|rel| only.contains(&rel))
                });
            }
            // A glob over an empty folder is an empty answer (a new home has no canceled
            // threads yet); a path without wildcards names one file, and a missing one is
            // most likely a typo.
            if matched.is_empty() && !opts.allow_empty && !glob::has_wildcard(&pattern) {
                return Err(format!(
                    "No files found that match the pattern \"{pattern}\""
                ));
            }
            for p in matched {
                if seen.insert(p.clone()) {
                    paths.push(p);
                }
            }
        }
        if let Some(root) = &root {
            confine(&paths, root, open)?;
        }
        // Asking for `document_index` asks for documents.
        let mode = match opts.mode {
            Some(m) => m,
            None if opts.document_index => Mode::Rows,
            None => default_mode(patterns, &paths),
        };
        // A thread row's `messages` are JSON read when the column is scanned, so binding a
        // thread scan parses only envelopes, and a query that never reads `messages` (a count,
        // a status listing) never parses the rest of a file.
        let need_all = !matches!(mode, Mode::First | Mode::Thread);
        let parsed = load(&paths, need_all, opts.ignore_errors)?;
        let dirs: HashSet<&Path> = paths.iter().filter_map(|p| p.parent()).collect();
        cache::prune(&dirs, &seen);

        let mut files = Vec::with_capacity(parsed.len());
        for (path, parsed) in parsed {
            if !opts.ignore_errors
                && let Some((i, why)) = parsed.docs.iter().enumerate().find_map(|(i, d)| match d {
                    Doc::Broken(why) if need_all || i == 0 => Some((i, why)),
                    _ => None,
                })
            {
                return Err(format!("{}: document {}: {why}", path.display(), i + 1));
            }
            // A confined scan names files relative to its root: the root is the server's
            // business, and the relative path is what the caller can use.
            let shown = match &root {
                Some(root) => path.strip_prefix(root).unwrap_or(&path).to_string_lossy(),
                None => path.to_string_lossy(),
            };
            files.push(File {
                path: path.clone(),
                shown: shown.into_owned(),
                hive: hive_parts(&path),
                parsed,
            });
        }
        // With no file, the `key=value` folders the patterns name give the hive columns, so
        // `WHERE state = 'canceled'` over an empty folder binds and answers nothing.
        let pattern_hive: Vec<Vec<(String, String)>> = if files.is_empty() {
            patterns
                .iter()
                .map(|p| hive_parts(Path::new(&glob::expand_home(p))))
                .collect()
        } else {
            Vec::new()
        };
        let hive_sources: Vec<&Vec<(String, String)>> = if files.is_empty() {
            pattern_hive.iter().collect()
        } else {
            files.iter().map(|f| &f.hive).collect()
        };
        let hive_on = opts
            .hive
            .unwrap_or_else(|| hive_sources.iter().any(|h| !h.is_empty()));
        let mut hive_keys: Vec<String> = Vec::new();
        if hive_on {
            for h in &hive_sources {
                for (k, _) in h.iter() {
                    if !hive_keys.contains(k) {
                        hive_keys.push(k.clone());
                    }
                }
            }
        }
        let (mut columns, rows) = shape(&files, opts, mode, &hive_keys)?;
        if columns.is_empty() && rows.is_empty() && (files.is_empty() || opts.allow_empty) {
            columns.push(Column {
                name: "filename".to_owned(),
                ty: Ty::Text,
                arrow: DataType::Utf8,
                source: Source::Filename,
            });
        }
        if columns.is_empty() {
            return Err(
                "read_yaml_auto found no mapping documents, so there are no columns".to_owned(),
            );
        }
        Ok(Plan {
            columns,
            files,
            rows,
        })
    }

    /// Column names and Arrow types, in order.
    pub fn schema(&self) -> Vec<(String, DataType)> {
        self.columns
            .iter()
            .map(|c| (c.name.clone(), c.arrow.clone()))
            .collect()
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True when the scan has no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The rows `start..end` of the columns `projection` (indexes into [`Plan::schema`]).
    pub fn batch(
        &self,
        start: usize,
        end: usize,
        projection: &[usize],
    ) -> Result<RecordBatch, String> {
        let rows = &self.rows[start..end];
        let mut fields = Vec::with_capacity(projection.len());
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(projection.len());
        for &c in projection {
            let col = &self.columns[c];
            fields.push(Field::new(&col.name, col.arrow.clone(), true));
            arrays.push(self.column(col, rows));
        }
        let options = RecordBatchOptions::new().with_row_count(Some(rows.len()));
        RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), arrays, &options)
            .map_err(|e| e.to_string())
    }

    fn node(&self, row: &Row) -> Option<&Node> {
        let doc = match self.files[row.file as usize]
            .parsed
            .docs
            .get(row.doc as usize)?
        {
            Doc::Value(n) => n,
            _ => return None,
        };
        match (doc, row.elem) {
            (n, u32::MAX) => Some(n),
            (Node::List(items), i) => items.get(i as usize),
            _ => None,
        }
    }

    /// The value of `key` in the first document of the row's file.
    fn front(&self, row: &Row, key: &str) -> Option<&Node> {
        match self.files[row.file as usize].parsed.docs.first() {
            Some(Doc::Value(n)) => n.get(key),
            _ => None,
        }
    }

    fn column(&self, col: &Column, rows: &[Row]) -> ArrayRef {
        match &col.source {
            Source::Data(key) => {
                let values: Vec<Option<&Node>> = rows
                    .iter()
                    .map(|r| {
                        self.node(r).and_then(|n| match n {
                            // An unexpanded top-level sequence is its own `json` column.
                            Node::List(_) if &**key == "json" => Some(n),
                            _ => n.get(key),
                        })
                    })
                    .collect();
                build(&col.ty, &values)
            }
            Source::Front(key) => {
                let values: Vec<Option<&Node>> = rows.iter().map(|r| self.front(r, key)).collect();
                build(&col.ty, &values)
            }
            Source::Both(key) => {
                let values: Vec<Option<&Node>> = rows
                    .iter()
                    .map(|r| {
                        self.node(r)
                            .and_then(|n| n.get(key))
                            .or_else(|| self.front(r, key))
                    })
                    .collect();
                build(&col.ty, &values)
            }
            Source::Hive(key) => {
                let mut b = StringBuilder::with_capacity(rows.len(), rows.len() * 8);
                for r in rows {
                    let f = &self.files[r.file as usize];
                    match f.hive.iter().find(|(k, _)| k == key) {
                        Some((_, v)) => b.append_value(v),
                        None => b.append_null(),
                    }
                }
                Arc::new(b.finish())
            }
            Source::Filename => {
                let mut b = StringBuilder::with_capacity(rows.len(), rows.len() * 48);
                for r in rows {
                    b.append_value(&self.files[r.file as usize].shown);
                }
                Arc::new(b.finish())
            }
            Source::DocumentIndex => {
                let mut b = Int64Builder::with_capacity(rows.len());
                for r in rows {
                    b.append_value(i64::from(r.doc));
                }
                Arc::new(b.finish())
            }
            Source::Messages => {
                // Documents 2.. of each thread file as one JSON array, parsed now (the scan's
                // bind read only the envelopes); a file that cannot be read gives null.
                let mut b = StringBuilder::with_capacity(rows.len(), rows.len() * 256);
                for r in rows {
                    match full_parse(&self.files[r.file as usize]) {
                        Some(parsed) => {
                            let docs: Vec<Node> = parsed
                                .docs
                                .iter()
                                .skip(1)
                                .filter_map(|d| match d {
                                    Doc::Value(n @ Node::Map(_)) => Some(n.clone()),
                                    _ => None,
                                })
                                .collect();
                            b.append_value(Node::List(docs.into_boxed_slice()).to_text());
                        }
                        None => b.append_null(),
                    }
                }
                Arc::new(b.finish())
            }
            Source::Documents => {
                let Ty::List(elem) = &col.ty else {
                    return build(&col.ty, &vec![None; rows.len()]);
                };
                let mut offsets = vec![0i32];
                let mut children: Vec<Option<&Node>> = Vec::new();
                for r in rows {
                    for d in self.files[r.file as usize].parsed.docs.iter() {
                        if let Doc::Value(n @ Node::Map(_)) = d {
                            children.push(Some(n));
                        }
                    }
                    offsets.push(children.len() as i32);
                }
                let child = build(elem, &children);
                Arc::new(ListArray::new(
                    Arc::new(Field::new("l", elem.arrow(), true)),
                    OffsetBuffer::new(offsets.into()),
                    child,
                    Some(NullBuffer::from(vec![true; rows.len()])),
                ))
            }
        }
    }
}

/// Whether `rel` (relative to the root) passes through a hidden folder, other than a top-level
/// one the confinement opens (`open`).
fn hidden(rel: &Path, open: &[String]) -> bool {
    rel.components().enumerate().any(|(i, c)| {
        let name = c.as_os_str().to_string_lossy();
        name.starts_with('.') && !(i == 0 && open.iter().any(|o| *o == name))
    })
}

/// The pattern a confined scan walks: from the root when relative, refused when it could leave
/// the root (`..`, a start outside it) or names a hidden folder of it (`.mess/` holds locks and
/// indexes, `.mail/` the mail spool: neither is exchange data).
fn confine_pattern(pattern: &str, root: &Path, open: &[String]) -> Result<String, String> {
    let expanded = glob::expand_home(pattern);
    let absolute = if expanded.starts_with('/') {
        expanded
    } else {
        format!("{}/{expanded}", glob::escape(&root.to_string_lossy()))
    };
    let refuse = |why: &str| {
        Err(format!(
            "read_yaml_auto may only read the exchange's files here; \"{pattern}\" {why}"
        ))
    };
    if absolute.split('/').any(|part| part == "..") {
        return refuse("uses `..`");
    }
    let prefix = glob::literal_prefix(&absolute);
    // The start of the walk, as the file system resolves it (links included).
    let start = prefix.canonicalize().unwrap_or(prefix);
    let Ok(within) = start.strip_prefix(root) else {
        return refuse("is outside the exchange home");
    };
    if hidden(within, open) {
        return refuse("reads a hidden folder of the exchange home");
    }
    Ok(absolute)
}

/// Checks every matched file against the root after links are resolved, without naming files
/// outside it (the error must not become a way to list other folders).
fn confine(paths: &[PathBuf], root: &Path, open: &[String]) -> Result<(), String> {
    for p in paths {
        let real = p
            .canonicalize()
            .map_err(|_| "read_yaml_auto cannot resolve a matched file".to_owned())?;
        let Ok(rel) = real.strip_prefix(root) else {
            return Err(
                "read_yaml_auto may only read the exchange's files here; the pattern matches files outside the exchange home"
                    .to_owned(),
            );
        };
        if hidden(rel, open) {
            return Err(
                "read_yaml_auto may only read the exchange's files here; the pattern matches files in a hidden folder of the exchange home"
                    .to_owned(),
            );
        }
    }
    Ok(())
}

/// A file's position in the scan and its parse.
/// `Ok(None)`: the file vanished after the glob listed it (moved by a concurrent write).
type Loaded = (usize, Result<Option<Arc<ParsedFile>>, String>);

/// Parses every file (through the cache), in parallel for the ones not cached.
fn load(
    paths: &[PathBuf],
    need_all: bool,
    ignore_errors: bool,
) -> Result<Vec<(PathBuf, Arc<ParsedFile>)>, String> {
    let mut slots: Vec<Option<Arc<ParsedFile>>> = Vec::with_capacity(paths.len());
    let mut misses = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        let hit = Stamp::of(p).and_then(|s| cache::get(p, s, need_all));
        if hit.is_none() {
            misses.push(i);
        }
        slots.push(hit);
    }
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(misses.len().max(1));
    let chunk = misses.len().div_ceil(workers).max(1);
    let results: Vec<Vec<Loaded>> = std::thread::scope(|s| {
        let handles: Vec<_> = misses
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .map(|&i| (i, parse_guarded(&paths[i], need_all)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| "read_yaml_auto: a parse worker stopped unexpectedly".to_owned())
            })
            .collect::<Result<Vec<_>, String>>()
    })?;
    for (i, result) in results.into_iter().flatten() {
        match result {
            Ok(file) => slots[i] = file,
            Err(e) if ignore_errors => {
                let _ = e;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(paths
        .iter()
        .zip(slots)
        .filter_map(|(p, f)| f.map(|f| (p.clone(), f)))
        .collect())
}

/// [`read_and_parse`], with a panic in the parser turned into that file's error: an
/// unexpected input must fail its query (or be skipped by `ignore_errors`), never silently
/// drop the files parsed beside it.
fn parse_guarded(path: &Path, need_all: bool) -> Result<Option<Arc<ParsedFile>>, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        read_and_parse(path, need_all)
    }))
    .unwrap_or_else(|_| {
        Err(format!(
            "{}: the YAML parser failed on this file",
            path.display()
        ))
    })
}

fn read_and_parse(path: &Path, need_all: bool) -> Result<Option<Arc<ParsedFile>>, String> {
    // The stamp is taken before reading: a write that lands in between changes the stamp the
    // next query sees, so a stale parse is never served twice.
    let stamp = match Stamp::read(path) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let text =
        String::from_utf8(bytes).map_err(|_| format!("{}: not UTF-8 text", path.display()))?;
    let parsed = Arc::new(parse::parse_file(&text, !need_all));
    cache::put(path.to_owned(), stamp, parsed.clone());
    Ok(Some(parsed))
}

/// Every document of `file`: its bind-time parse when complete, else the cache's or a new one.
fn full_parse(file: &File) -> Option<Arc<ParsedFile>> {
    if file.parsed.complete {
        return Some(file.parsed.clone());
    }
    if let Some(hit) = Stamp::of(&file.path).and_then(|s| cache::get(&file.path, s, true)) {
        return Some(hit);
    }
    parse_guarded(&file.path, true).ok().flatten()
}

/// The `key=value` folders of a path, outermost first.
fn hive_parts(path: &Path) -> Vec<(String, String)> {
    let Some(parent) = path.parent() else {
        return Vec::new();
    };
    parent
        .components()
        .filter_map(|c| {
            let s = c.as_os_str().to_str()?;
            let (k, v) = s.split_once('=')?;
            (!k.is_empty()).then(|| (k.to_owned(), v.to_owned()))
        })
        .collect()
}

/// Rows of a document: the mapping itself, or the mapping elements of a top-level sequence.
fn rows_of(doc: &Doc, expand: bool) -> Vec<(u32, &Node)> {
    match doc {
        Doc::Value(n @ Node::Map(_)) => vec![(u32::MAX, n)],
        Doc::Value(Node::List(items)) if expand => items
            .iter()
            .enumerate()
            .filter(|(_, n)| matches!(n, Node::Map(_)))
            .map(|(i, n)| (i as u32, n))
            .collect(),
        Doc::Value(n @ Node::List(_)) => {
            // Without expansion, the sequence is one row with a single column named after it.
            vec![(u32::MAX, n)]
        }
        _ => Vec::new(),
    }
}

fn file_types(file: &ParsedFile) -> &FileTypes {
    file.types.get_or_init(|| {
        let (mut all, mut first, mut rest) = (Ty::Null, Ty::Null, Ty::Null);
        for (i, doc) in file.docs.iter().enumerate() {
            for (_, node) in rows_of(doc, true) {
                let t = Ty::of(node);
                all.absorb(&t);
                if i == 0 {
                    first.absorb(&t);
                } else {
                    rest.absorb(&t);
                }
            }
        }
        FileTypes {
            all: types::intern(all),
            first: types::intern(first),
            rest: types::intern(rest),
        }
    })
}

/// The mode a scan without `multi_document` uses: `thread` when it reads MESSE-AF thread
/// files only (judged by the files' names, or by the patterns' when nothing matched), where a
/// row per document would count every thread once per message; `rows` otherwise.
fn default_mode(patterns: &[String], paths: &[PathBuf]) -> Mode {
    let threads = if paths.is_empty() {
        !patterns.is_empty() && patterns.iter().all(|p| is_thread_name(p))
    } else {
        paths.iter().all(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(is_thread_name)
        })
    };
    if threads { Mode::Thread } else { Mode::Rows }
}

/// The MESSE-AF v1 envelope fields, typed as the format's examples write them: a `thread`
/// scan has each as a column even when no file has it (an unclaimed thread has no
/// `executor`), so the format's queries bind on any home.
fn envelope_template() -> Vec<(Key, Ty)> {
    let text = |k: &str| (Key::from(k), Ty::Text);
    let time = |k: &str| (Key::from(k), Ty::TimestampTz);
    vec![
        text("ref"),
        text("client_id"),
        text("requestor"),
        text("executor"),
        text("status"),
        time("created"),
        time("updated"),
        time("expires"),
        text("intent"),
        text("priority"),
        (
            Key::from("history"),
            Ty::List(Box::new(Ty::Struct(vec![
                text("action"),
                time("at"),
                text("by"),
            ]))),
        ),
    ]
}

/// The columns and rows of a scan.
fn shape(
    files: &[File],
    opts: &Options,
    mode: Mode,
    hive_keys: &[String],
) -> Result<(Vec<Column>, Vec<Row>), String> {
    let mut columns = Vec::new();
    let mut rows = Vec::new();
    let data_columns = |ty: &Ty, source: fn(Key) -> Source, columns: &mut Vec<Column>| {
        if matches!(ty, Ty::Json) {
            // Rows are mappings, so their type is JSON only when they are too wide.
            return Err(format!(
                "read_yaml_auto: the documents have more than {} distinct top-level keys; a table that wide is refused",
                types::MAX_STRUCT_FIELDS
            ));
        }
        if let Ty::Struct(fields) = ty {
            for (k, t) in fields {
                if hive_keys.iter().any(|h| h.eq_ignore_ascii_case(k))
                    || columns.iter().any(|c: &Column| c.name == **k)
                {
                    continue;
                }
                columns.push(Column {
                    name: k.to_string(),
                    ty: t.clone(),
                    arrow: t.arrow(),
                    source: source(k.clone()),
                });
            }
        }
        Ok(())
    };
    match mode {
        Mode::Rows | Mode::First => {
            let mut ty = Ty::Null;
            let mut shared = Union::default();
            for (fi, f) in files.iter().enumerate() {
                let docs = if mode == Mode::First {
                    &f.parsed.docs[..f.parsed.docs.len().min(1)]
                } else {
                    &f.parsed.docs[..]
                };
                if opts.expand_root_sequence {
                    let t = file_types(&f.parsed);
                    shared.absorb(if mode == Mode::First {
                        &t.first
                    } else {
                        &t.all
                    });
                }
                for (di, doc) in docs.iter().enumerate() {
                    for (ei, node) in rows_of(doc, opts.expand_root_sequence) {
                        if !opts.expand_root_sequence {
                            ty.absorb(&row_type(node));
                        }
                        rows.push(Row {
                            file: fi as u32,
                            doc: di as u32,
                            elem: ei,
                        });
                    }
                }
            }
            ty.absorb(&shared.finish());
            data_columns(&ty, Source::Data, &mut columns)?;
        }
        Mode::Frontmatter => {
            let (mut front, mut rest) = (Union::default(), Union::default());
            for (fi, f) in files.iter().enumerate() {
                let t = file_types(&f.parsed);
                front.absorb(&t.first);
                rest.absorb(&t.rest);
                for (di, doc) in f.parsed.docs.iter().enumerate().skip(1) {
                    for (ei, _) in rows_of(doc, opts.expand_root_sequence) {
                        rows.push(Row {
                            file: fi as u32,
                            doc: di as u32,
                            elem: ei,
                        });
                    }
                }
            }
            let mut doc_cols = Vec::new();
            data_columns(&rest.finish(), Source::Data, &mut doc_cols)?;
            data_columns(&front.finish(), Source::Front, &mut columns)?;
            // A key in both places takes, row by row, the document's value where the document
            // has the key and the front matter's elsewhere.
            for col in &mut columns {
                if let (Some(at), Source::Front(key)) = (
                    doc_cols.iter().position(|d| d.name == col.name),
                    &col.source,
                ) {
                    let own = doc_cols.remove(at);
                    col.ty.absorb(&own.ty);
                    col.arrow = col.ty.arrow();
                    col.source = Source::Both(key.clone());
                }
            }
            columns.extend(doc_cols);
        }
        Mode::Thread => {
            let mut front = Union::default();
            for (fi, f) in files.iter().enumerate() {
                let t = file_types(&f.parsed);
                front.absorb(&t.first);
                rows.push(Row {
                    file: fi as u32,
                    doc: 0,
                    elem: u32::MAX,
                });
            }
            let mut envelope = match front.finish() {
                Ty::Struct(fields) => fields,
                Ty::Json => {
                    return data_columns(&Ty::Json, Source::Data, &mut columns)
                        .map(|_| (columns, rows));
                }
                _ => Vec::new(),
            };
            for (k, t) in envelope_template() {
                if !envelope
                    .iter()
                    .any(|(have, _)| have.eq_ignore_ascii_case(&k))
                {
                    envelope.push((k, t));
                }
            }
            data_columns(&Ty::Struct(envelope), Source::Data, &mut columns)?;
            columns.push(Column {
                name: "messages".to_owned(),
                arrow: Ty::Json.arrow(),
                ty: Ty::Json,
                source: Source::Messages,
            });
        }
        Mode::List => {
            let mut shared = Union::default();
            for (fi, f) in files.iter().enumerate() {
                shared.absorb(&file_types(&f.parsed).all);
                rows.push(Row {
                    file: fi as u32,
                    doc: 0,
                    elem: u32::MAX,
                });
            }
            let ty = shared.finish();
            let list = Ty::List(Box::new(if matches!(ty, Ty::Null) { Ty::Json } else { ty }));
            columns.push(Column {
                name: "documents".to_owned(),
                arrow: list.arrow(),
                ty: list,
                source: Source::Documents,
            });
        }
    }
    for key in hive_keys {
        columns.push(Column {
            name: key.clone(),
            ty: Ty::Text,
            arrow: DataType::Utf8,
            source: Source::Hive(key.clone()),
        });
    }
    if opts.filename {
        columns.push(Column {
            name: "filename".to_owned(),
            ty: Ty::Text,
            arrow: DataType::Utf8,
            source: Source::Filename,
        });
    }
    if opts.document_index && !matches!(mode, Mode::List | Mode::Thread) {
        columns.push(Column {
            name: "document_index".to_owned(),
            ty: Ty::Int,
            arrow: DataType::Int64,
            source: Source::DocumentIndex,
        });
    }
    // DuckDB compares column names ignoring case: a data column whose name an added column
    // (filename, document_index) or an earlier data column takes is renamed with `_1`, ...
    let mut taken: HashSet<String> = columns
        .iter()
        .filter(|c| !c.source.is_data())
        .map(|c| c.name.to_ascii_lowercase())
        .collect();
    for col in columns.iter_mut().filter(|c| c.source.is_data()) {
        col.name = types::unique_name(&col.name, &mut taken);
    }
    Ok((columns, rows))
}

/// With `expand_root_sequence := false`, a top-level sequence is one row whose only column is
/// the sequence itself, named `json` as DuckDB's JSON reader does for unnamed values.
fn row_type(node: &Node) -> Ty {
    match node {
        Node::List(_) => Ty::Struct(vec![(Key::from("json"), Ty::of(node))]),
        other => Ty::of(other),
    }
}
