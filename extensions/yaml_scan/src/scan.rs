//! A `read_yaml_auto` scan independent of DuckDB: options, file expansion, parsing through
//! the cache, the union schema, and Arrow batches for any slice of rows and columns.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
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
use crate::packed::Packed;
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

    /// Whether filling the column needs the file's documents of the bind (`messages` reads
    /// the whole file on its own).
    fn reads_documents(&self) -> bool {
        self.is_data() || matches!(self, Source::Documents)
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
    /// The path read, for reading it again (the rest of a thread file when its messages are
    /// asked for, or a parse the scan did not hold).
    path: Arc<Path>,
    /// Its `key=value` folders, shared by the files of one folder.
    hive: Arc<[(String, String)]>,
    /// Its parse, packed, unless the scan reads it again when it emits its rows.
    packed: Option<Arc<Packed>>,
}

/// The parses of the files a batch of rows comes from, unpacked for the batch.
struct Opened {
    /// The file index of `files[0]`.
    first: u32,
    files: Vec<Option<ParsedFile>>,
}

impl Opened {
    fn get(&self, file: u32) -> Option<&ParsedFile> {
        self.files
            .get(file.checked_sub(self.first)? as usize)?
            .as_ref()
    }
}

/// The rows of a scan: one per file (`thread`, `list`), counted rather than listed, or listed.
#[derive(Debug)]
enum Rows {
    PerFile(usize),
    Listed(Vec<Row>),
}

impl Rows {
    fn len(&self) -> usize {
        match self {
            Rows::PerFile(n) => *n,
            Rows::Listed(rows) => rows.len(),
        }
    }

    fn slice(&self, start: usize, end: usize) -> std::borrow::Cow<'_, [Row]> {
        match self {
            Rows::PerFile(_) => (start..end)
                .map(|i| Row {
                    file: i as u32,
                    doc: 0,
                    elem: u32::MAX,
                })
                .collect(),
            Rows::Listed(rows) => std::borrow::Cow::Borrowed(&rows[start..end]),
        }
    }
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
    rows: Rows,
    /// The confinement root, stripped from the paths a scan shows.
    root: Option<PathBuf>,
    /// Whether a file read again while scanning needs every document (else the first).
    need_all: bool,
    /// The cache's budget when the scan was bound (parse workers and DuckDB's threads use
    /// the binding thread's).
    budget: usize,
}

/// Files bound at a time: their parses not kept by the cache are dropped once their types
/// and rows are known, so binding a home larger than the cache's budget holds this many at
/// most.
const BIND_CHUNK: usize = 4096;

/// Bytes of packed parses a scan holds beyond what the cache keeps.
const SCAN_HOLDS: usize = 8 * 1024 * 1024;

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
        let mut paths: Vec<Arc<Path>> = Vec::new();
        let mut seen: HashSet<Arc<Path>> = HashSet::new();
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
                let p: Arc<Path> = Arc::from(p);
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
        let budget = cache::budget();
        let mut shaper = Shaper::new(mode, opts);
        let mut files = Vec::with_capacity(paths.len());
        let mut folders: HashMap<&Path, Arc<[(String, String)]>> = HashMap::new();
        let mut held = 0usize;
        for chunk in paths.chunks(BIND_CHUNK) {
            for (path, loaded) in load(chunk, need_all, opts.ignore_errors, budget)? {
                let packed = loaded.packed;
                if !opts.ignore_errors
                    && let Some((i, why)) = broken(&packed, need_all)
                {
                    return Err(format!("{}: document {}: {why}", path.display(), i + 1));
                }
                let folder = path.parent().unwrap_or(Path::new(""));
                let hive = folders
                    .entry(folder)
                    .or_insert_with(|| hive_parts(path).into())
                    .clone();
                if shaper.needs_documents() {
                    shaper.absorb(files.len() as u32, &packed.types, &packed.unpack());
                } else {
                    shaper.absorb(files.len() as u32, &packed.types, &ParsedFile::default());
                }
                // A parse the cache did not keep because the file was written moments ago
                // stays with the scan while the scan's own share allows, so a busy home's
                // newest files are not parsed twice; other files the cache did not keep (its
                // budget spent) are read again when the scan emits their rows.
                let keep = loaded.kept || (loaded.fresh && held + packed.footprint() <= SCAN_HOLDS);
                if !loaded.kept && keep {
                    held += packed.footprint();
                }
                files.push(File {
                    packed: keep.then_some(packed),
                    path: path.clone(),
                    hive,
                });
            }
        }
        drop(folders);
        let dirs: HashSet<&Path> = paths.iter().filter_map(|p| p.parent()).collect();
        cache::prune(&dirs, &seen);
        drop(dirs);
        drop(seen);

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
        let hive_sources: Vec<&[(String, String)]> = if files.is_empty() {
            pattern_hive.iter().map(Vec::as_slice).collect()
        } else {
            let mut distinct: Vec<&[(String, String)]> = Vec::new();
            for f in &files {
                if !distinct.iter().any(|h| std::ptr::eq(*h, &*f.hive)) {
                    distinct.push(&f.hive);
                }
            }
            distinct
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
        let (mut columns, rows) = shaper.finish(opts, &hive_keys)?;
        if columns.is_empty() && rows.len() == 0 && (files.is_empty() || opts.allow_empty) {
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
            root,
            need_all,
            budget,
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
        self.rows.len() == 0
    }

    /// The rows `start..end` of the columns `projection` (indexes into [`Plan::schema`]).
    /// Rows of a file the scan did not hold and that vanished since the bind (moved by a
    /// concurrent write) are left out when a column from the documents is asked for.
    pub fn batch(
        &self,
        start: usize,
        end: usize,
        projection: &[usize],
    ) -> Result<RecordBatch, String> {
        let listed = self.rows.slice(start, end);
        let mut rows = &listed[..];
        let reads_documents = projection
            .iter()
            .any(|&c| self.columns[c].source.reads_documents());
        let opened = self.open(if reads_documents { rows } else { &[] });
        let kept: Vec<Row>;
        if reads_documents && rows.iter().any(|r| opened.get(r.file).is_none()) {
            kept = rows
                .iter()
                .filter(|r| opened.get(r.file).is_some())
                .copied()
                .collect();
            rows = &kept;
        }
        let mut fields = Vec::with_capacity(projection.len());
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(projection.len());
        for &c in projection {
            let col = &self.columns[c];
            fields.push(Field::new(&col.name, col.arrow.clone(), true));
            arrays.push(self.column(col, rows, &opened));
        }
        let options = RecordBatchOptions::new().with_row_count(Some(rows.len()));
        RecordBatch::try_new_with_options(Arc::new(Schema::new(fields)), arrays, &options)
            .map_err(|e| e.to_string())
    }

    /// Unpacks (or reads again) the files `rows` come from; rows are in file order.
    fn open(&self, rows: &[Row]) -> Opened {
        let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
            return Opened {
                first: 0,
                files: Vec::new(),
            };
        };
        let files = (first.file..=last.file)
            .map(|i| {
                let file = &self.files[i as usize];
                match &file.packed {
                    Some(packed) => Some(packed.unpack()),
                    None => reread(&file.path, self.need_all, self.budget),
                }
            })
            .collect();
        Opened {
            first: first.file,
            files,
        }
    }

    fn node<'a>(&self, opened: &'a Opened, row: &Row) -> Option<&'a Node> {
        let doc = match opened.get(row.file)?.docs.get(row.doc as usize)? {
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
    fn front<'a>(&self, opened: &'a Opened, row: &Row, key: &str) -> Option<&'a Node> {
        match opened.get(row.file)?.docs.first() {
            Some(Doc::Value(n)) => n.get(key),
            _ => None,
        }
    }

    /// The path as the scan shows it: relative to the root of a confined scan.
    fn shown(&self, file: &File) -> String {
        match &self.root {
            Some(root) => file.path.strip_prefix(root).unwrap_or(&file.path),
            None => &file.path,
        }
        .to_string_lossy()
        .into_owned()
    }

    fn column(&self, col: &Column, rows: &[Row], opened: &Opened) -> ArrayRef {
        match &col.source {
            Source::Data(key) => {
                let values: Vec<Option<&Node>> = rows
                    .iter()
                    .map(|r| {
                        self.node(opened, r).and_then(|n| match n {
                            // An unexpanded top-level sequence is its own `json` column.
                            Node::List(_) if &**key == "json" => Some(n),
                            _ => n.get(key),
                        })
                    })
                    .collect();
                build(&col.ty, &values)
            }
            Source::Front(key) => {
                let values: Vec<Option<&Node>> =
                    rows.iter().map(|r| self.front(opened, r, key)).collect();
                build(&col.ty, &values)
            }
            Source::Both(key) => {
                let values: Vec<Option<&Node>> = rows
                    .iter()
                    .map(|r| {
                        self.node(opened, r)
                            .and_then(|n| n.get(key))
                            .or_else(|| self.front(opened, r, key))
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
                    b.append_value(self.shown(&self.files[r.file as usize]));
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
                    let file = &self.files[r.file as usize];
                    let opened_file = opened.get(r.file);
                    let whole;
                    let parsed = match opened_file.filter(|p| p.complete) {
                        Some(p) => Some(p),
                        None => {
                            whole = full_parse(file, self.budget);
                            whole.as_ref()
                        }
                    };
                    match parsed {
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
                    for d in opened.get(r.file).map_or(&[][..], |p| &p.docs[..]) {
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
fn confine(paths: &[Arc<Path>], root: &Path, open: &[String]) -> Result<(), String> {
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

/// A file's parse, packed, and whether the cache kept it.
struct Loaded {
    packed: Arc<Packed>,
    kept: bool,
    /// Not kept because the file changed moments ago (see `cache::SETTLE`).
    fresh: bool,
}

/// A file's position in its chunk and its parse.
/// `Ok(None)`: the file vanished after the glob listed it (moved by a concurrent write).
type Attempt = (usize, Result<Option<Loaded>, String>);

/// Parses every file (through the cache), in parallel for the ones not cached.
fn load(
    paths: &[Arc<Path>],
    need_all: bool,
    ignore_errors: bool,
    budget: usize,
) -> Result<Vec<(&Arc<Path>, Loaded)>, String> {
    let mut slots: Vec<Option<Loaded>> = Vec::with_capacity(paths.len());
    let mut misses = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        let hit = Stamp::of(p)
            .and_then(|s| cache::get(p, s, need_all))
            .map(|packed| Loaded {
                packed,
                kept: true,
                fresh: false,
            });
        if hit.is_none() {
            misses.push(i);
        }
        slots.push(hit);
    }
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(misses.len().max(1));
    let chunk = misses.len().div_ceil(workers).max(1);
    let results: Vec<Vec<Attempt>> = std::thread::scope(|s| {
        let handles: Vec<_> = misses
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .map(|&i| (i, parse_guarded(&paths[i], need_all, budget)))
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
        .filter_map(|(p, f)| f.map(|f| (p, f)))
        .collect())
}

/// [`read_and_parse`], with a panic in the parser turned into that file's error: an
/// unexpected input must fail its query (or be skipped by `ignore_errors`), never silently
/// drop the files parsed beside it.
fn parse_guarded(
    path: &Arc<Path>,
    need_all: bool,
    budget: usize,
) -> Result<Option<Loaded>, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        read_and_parse(path, need_all, budget)
    }))
    .unwrap_or_else(|_| {
        Err(format!(
            "{}: the YAML parser failed on this file",
            path.display()
        ))
    })
}

fn read_and_parse(
    path: &Arc<Path>,
    need_all: bool,
    budget: usize,
) -> Result<Option<Loaded>, String> {
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
    let packed = Arc::new(Packed::pack(&parse::parse_file(&text, !need_all)));
    let kept = cache::put(path, stamp, packed.clone(), budget);
    Ok(Some(Loaded {
        packed,
        kept,
        fresh: !kept && !stamp.settled(),
    }))
}

/// The file's documents read again while scanning (its parse was not kept at bind: the
/// cache's budget was spent); `None` when it vanished or no longer parses.
fn reread(path: &Arc<Path>, need_all: bool, budget: usize) -> Option<ParsedFile> {
    if let Some(hit) = Stamp::of(path).and_then(|s| cache::get(path, s, need_all)) {
        return Some(hit.unpack());
    }
    parse_guarded(path, need_all, budget)
        .ok()
        .flatten()
        .map(|l| l.packed.unpack())
}

/// Every document of `file`: its packed parse when complete, else the cache's or a new one.
fn full_parse(file: &File, budget: usize) -> Option<ParsedFile> {
    if let Some(packed) = file.packed.as_ref().filter(|p| p.complete) {
        return Some(packed.unpack());
    }
    reread(&file.path, true, budget)
}

/// The first document that does not parse and the reason, when it counts (`need_all`, or it
/// is the first document).
fn broken(packed: &Packed, need_all: bool) -> Option<(usize, String)> {
    packed
        .broken
        .as_ref()
        .filter(|(i, _)| need_all || *i == 0)
        .map(|(i, why)| (*i as usize, why.to_string()))
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

pub(crate) fn file_types(file: &ParsedFile) -> &FileTypes {
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
fn default_mode(patterns: &[String], paths: &[Arc<Path>]) -> Mode {
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

/// The rows of a scan and the union of its files' types, gathered file by file.
struct Shaper {
    mode: Mode,
    expand: bool,
    /// Rows of unexpanded documents (`rows`, `first` without `expand_root_sequence`).
    ty: Ty,
    /// Shared file types (`rows`, `first`, `list`).
    shared: Union,
    /// Document 1's types (`frontmatter`, `thread`).
    front: Union,
    /// Documents 2..'s types (`frontmatter`).
    rest: Union,
    rows: Vec<Row>,
    /// Files absorbed (`thread`, `list`: a row each).
    files: usize,
}

impl Shaper {
    fn new(mode: Mode, opts: &Options) -> Shaper {
        Shaper {
            mode,
            expand: opts.expand_root_sequence,
            ty: Ty::Null,
            shared: Union::default(),
            front: Union::default(),
            rest: Union::default(),
            rows: Vec::new(),
            files: 0,
        }
    }

    /// Whether [`Shaper::absorb`] needs the file's documents (else its types are enough).
    fn needs_documents(&self) -> bool {
        matches!(self.mode, Mode::Rows | Mode::First | Mode::Frontmatter)
    }

    /// Adds the rows of file `fi`.
    fn absorb(&mut self, fi: u32, types: &FileTypes, parsed: &ParsedFile) {
        match self.mode {
            Mode::Rows | Mode::First => {
                let docs = if self.mode == Mode::First {
                    &parsed.docs[..parsed.docs.len().min(1)]
                } else {
                    &parsed.docs[..]
                };
                if self.expand {
                    self.shared.absorb(if self.mode == Mode::First {
                        &types.first
                    } else {
                        &types.all
                    });
                }
                for (di, doc) in docs.iter().enumerate() {
                    for (ei, node) in rows_of(doc, self.expand) {
                        if !self.expand {
                            self.ty.absorb(&row_type(node));
                        }
                        self.rows.push(Row {
                            file: fi,
                            doc: di as u32,
                            elem: ei,
                        });
                    }
                }
            }
            Mode::Frontmatter => {
                self.front.absorb(&types.first);
                self.rest.absorb(&types.rest);
                for (di, doc) in parsed.docs.iter().enumerate().skip(1) {
                    for (ei, _) in rows_of(doc, self.expand) {
                        self.rows.push(Row {
                            file: fi,
                            doc: di as u32,
                            elem: ei,
                        });
                    }
                }
            }
            Mode::Thread | Mode::List => {
                if self.mode == Mode::Thread {
                    self.front.absorb(&types.first);
                } else {
                    self.shared.absorb(&types.all);
                }
                self.files = fi as usize + 1;
            }
        }
    }

    /// The columns and rows of the scan.
    fn finish(self, opts: &Options, hive_keys: &[String]) -> Result<(Vec<Column>, Rows), String> {
        let mut columns = Vec::new();
        let rows = match self.mode {
            Mode::Thread | Mode::List => Rows::PerFile(self.files),
            _ => {
                let mut rows = self.rows;
                rows.shrink_to_fit();
                Rows::Listed(rows)
            }
        };
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
        match self.mode {
            Mode::Rows | Mode::First => {
                let mut ty = self.ty;
                ty.absorb(&self.shared.finish());
                data_columns(&ty, Source::Data, &mut columns)?;
            }
            Mode::Frontmatter => {
                let mut doc_cols = Vec::new();
                data_columns(&self.rest.finish(), Source::Data, &mut doc_cols)?;
                data_columns(&self.front.finish(), Source::Front, &mut columns)?;
                // A key in both places takes, row by row, the document's value where the
                // document has the key and the front matter's elsewhere.
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
                let mut envelope = match self.front.finish() {
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
                let ty = self.shared.finish();
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
        if opts.document_index && !matches!(self.mode, Mode::List | Mode::Thread) {
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
}

/// With `expand_root_sequence := false`, a top-level sequence is one row whose only column is
/// the sequence itself, named `json` as DuckDB's JSON reader does for unnamed values.
fn row_type(node: &Node) -> Ty {
    match node {
        Node::List(_) => Ty::Struct(vec![(Key::from("json"), Ty::of(node))]),
        other => Ty::of(other),
    }
}
