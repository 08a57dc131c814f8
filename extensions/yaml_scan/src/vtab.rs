//! The DuckDB table function `read_yaml_auto`: argument and option parsing in bind, projection
//! in init, and batches of at most 2048 rows in func.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use duckdb::core::{DataChunkHandle, LogicalTypeHandle, LogicalTypeId};
use duckdb::vtab::{
    BindInfo, InitInfo, TableFunctionInfo, VTab, record_batch_to_duckdb_data_chunk,
    to_duckdb_logical_type,
};

use crate::scan::{Mode, Options, Plan};

/// Rows per output chunk (DuckDB's vector size).
const CHUNK: usize = 2048;

/// The `read_yaml_auto` table function.
pub struct ReadYaml;

/// Where a locked-down instance lets `read_yaml_auto` read; registered as extra info. Clones
/// share the narrowing, so the registering code can narrow it after setting up.
#[derive(Debug, Clone)]
pub struct Confinement {
    /// Only files under this folder may be read.
    pub root: PathBuf,
    /// When set, only these files (relative to the root) exist for the function: others a
    /// pattern matches are skipped as if absent, so their names do not leak either.
    only: Arc<Mutex<Option<Arc<HashSet<PathBuf>>>>>,
    /// Hidden top-level folders of the root that may be read all the same.
    open: Vec<String>,
}

impl Confinement {
    /// Reading anything under `root`.
    pub fn new(root: PathBuf) -> Confinement {
        Confinement {
            root,
            only: Arc::default(),
            open: Vec::new(),
        }
    }

    /// The same, also reading the hidden top-level folder `name` (`.mail`, say).
    pub fn opening(mut self, name: &str) -> Confinement {
        self.open.push(name.to_owned());
        self
    }

    /// From now on, only `files` (paths relative to the root) are readable.
    pub fn narrow(&self, files: HashSet<PathBuf>) {
        *self.lock() = Some(Arc::new(files));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Arc<HashSet<PathBuf>>>> {
        match self.only.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn only(&self) -> Option<Arc<HashSet<PathBuf>>> {
        self.lock().clone()
    }
}

/// The bound scan.
pub struct Bound {
    plan: Plan,
}

/// Progress of one execution.
pub struct Progress {
    next: Mutex<usize>,
    projection: Vec<usize>,
}

fn paths_of(bind: &BindInfo) -> Result<Vec<String>, String> {
    let arg = bind.get_parameter(0);
    if arg.is_null() {
        return Err("read_yaml_auto needs a path, a glob or a list of them, not NULL".to_owned());
    }
    if let Some(items) = arg.to_list() {
        let paths: Vec<String> = items
            .iter()
            .filter(|v| !v.is_null())
            .map(ToString::to_string)
            .collect();
        if paths.is_empty() {
            return Err("read_yaml_auto needs at least one path in the list".to_owned());
        }
        return Ok(paths);
    }
    match arg.logical_type_id() {
        LogicalTypeId::Varchar => Ok(vec![arg.to_string()]),
        other => Err(format!(
            "read_yaml_auto expects a path (VARCHAR) or a list of paths, not {other:?}"
        )),
    }
}

fn options_of(bind: &BindInfo) -> Result<Options, String> {
    let flag = |name: &str| {
        bind.get_named_parameter(name)
            .filter(|v| !v.is_null())
            .map(|v| v.to_bool())
    };
    let mut opts = Options {
        hive: flag("hive_partitioning"),
        filename: flag("filename").unwrap_or(false),
        document_index: flag("document_index").unwrap_or(false),
        ignore_errors: flag("ignore_errors").unwrap_or(false),
        expand_root_sequence: flag("expand_root_sequence").unwrap_or(true),
        allow_empty: flag("allow_empty").unwrap_or(false),
        ..Options::default()
    };
    if let Some(m) = bind
        .get_named_parameter("multi_document")
        .filter(|v| !v.is_null())
    {
        opts.mode = Some(Mode::parse(&m.to_string())?);
    }
    Ok(opts)
}

impl ReadYaml {
    fn bind_with(
        bind: &BindInfo,
        confinement: Option<&Confinement>,
    ) -> Result<Bound, Box<dyn std::error::Error>> {
        let paths = paths_of(bind)?;
        let opts = options_of(bind)?;
        let only = confinement.and_then(Confinement::only);
        let plan = Plan::bind(
            &paths,
            &opts,
            confinement.map(|c| c.root.as_path()),
            only.as_deref(),
            confinement.map_or(&[], |c| c.open.as_slice()),
        )?;
        for (name, ty) in plan.schema() {
            bind.add_result_column(&name, to_duckdb_logical_type(&ty)?);
        }
        bind.set_cardinality(plan.len() as u64, true);
        Ok(Bound { plan })
    }
}

impl VTab for ReadYaml {
    type BindData = Bound;
    type InitData = Progress;

    fn bind(bind: &BindInfo) -> Result<Self::BindData, Box<dyn std::error::Error>> {
        let extra = bind.get_extra_info::<Confinement>();
        // SAFETY: extra info is only ever registered as a `Confinement` (see
        // `register_confined`); a null pointer means none was registered.
        #[allow(unsafe_code)]
        let confinement = unsafe { extra.as_ref() };
        Self::bind_with(bind, confinement)
    }

    fn init(init: &InitInfo) -> Result<Self::InitData, Box<dyn std::error::Error>> {
        let bound = init.get_bind_data::<Bound>();
        // SAFETY: DuckDB hands back the bind data this function's bind stored, which lives
        // until the query ends.
        #[allow(unsafe_code)]
        let columns = unsafe { bound.as_ref() }.map_or(0, |b| b.plan.schema().len());
        // Indexes past the last column stand for row ids (as in `count(*)`); they carry no data.
        let projection = init
            .get_column_indices()
            .into_iter()
            .map(|i| i as usize)
            .filter(|i| *i < columns)
            .collect();
        Ok(Progress {
            next: Mutex::new(0),
            projection,
        })
    }

    fn func(
        func: &TableFunctionInfo<Self>,
        output: &mut DataChunkHandle,
    ) -> Result<(), Box<dyn std::error::Error>> {
        let bound = func.get_bind_data();
        let progress = func.get_init_data();
        let (start, end) = {
            let mut next = progress
                .next
                .lock()
                .map_err(|_| "read_yaml_auto: poisoned progress lock")?;
            let start = *next;
            let end = (start + CHUNK).min(bound.plan.len());
            *next = end;
            (start, end)
        };
        if start >= end {
            output.set_len(0);
            return Ok(());
        }
        if progress.projection.is_empty() {
            output.set_len(end - start);
            return Ok(());
        }
        let batch = bound.plan.batch(start, end, &progress.projection)?;
        record_batch_to_duckdb_data_chunk(&batch, output)?;
        Ok(())
    }

    fn supports_pushdown() -> bool {
        true
    }

    fn parameters() -> Option<Vec<LogicalTypeHandle>> {
        Some(vec![LogicalTypeHandle::from(LogicalTypeId::Any)])
    }

    fn named_parameters() -> Option<Vec<(String, LogicalTypeHandle)>> {
        let boolean = || LogicalTypeHandle::from(LogicalTypeId::Boolean);
        Some(vec![
            ("hive_partitioning".to_owned(), boolean()),
            ("filename".to_owned(), boolean()),
            ("document_index".to_owned(), boolean()),
            (
                "multi_document".to_owned(),
                LogicalTypeHandle::from(LogicalTypeId::Varchar),
            ),
            ("ignore_errors".to_owned(), boolean()),
            ("expand_root_sequence".to_owned(), boolean()),
            ("allow_empty".to_owned(), boolean()),
        ])
    }
}

/// Registers `read_yaml_auto` on a connection.
pub fn register(con: &duckdb::Connection) -> duckdb::Result<()> {
    con.register_table_function::<ReadYaml>("read_yaml_auto")
}

/// Registers `read_yaml_auto` so that it reads only under `root` (for untrusted queries:
/// DuckDB's own file-access settings do not cover this function).
pub fn register_confined(con: &duckdb::Connection, root: PathBuf) -> duckdb::Result<()> {
    register_within(con, &Confinement::new(root))
}

/// Registers `read_yaml_auto` within `confinement`, which the caller may narrow later.
pub fn register_within(con: &duckdb::Connection, confinement: &Confinement) -> duckdb::Result<()> {
    con.register_table_function_with_extra_info::<ReadYaml, Confinement>(
        "read_yaml_auto",
        confinement,
    )
}
