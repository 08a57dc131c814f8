//! `yaml_to_json(text)`: YAML text as JSON text, the scalar beneath the `yaml_extract` macro
//! (embedded and in the `mess_yaml` extension). Several documents become a list of them, as a
//! thread file's messages are. A text that is not YAML, or passes the parser's size limits,
//! gives NULL: one bad row never fails a query.

use duckdb::core::{DataChunkHandle, Inserter, LogicalTypeId};
use duckdb::types::DuckString;
use duckdb::vscalar::{ScalarFunctionSignature, VScalar};
use duckdb::vtab::arrow::WritableVector;

use crate::parse::{Doc, parse_file};

/// The JSON form of the YAML `text`: its one document, or a list of its documents (empty ones
/// left out); `None` when a document does not parse or there is none.
pub fn yaml_to_json(text: &str) -> Option<String> {
    let parsed = parse_file(text, false);
    let mut values = Vec::with_capacity(parsed.docs.len());
    for doc in &parsed.docs {
        match doc {
            Doc::Value(node) => values.push(node),
            Doc::Empty => {}
            Doc::Broken(_) => return None,
        }
    }
    let mut out = String::with_capacity(text.len());
    match values.as_slice() {
        [] => return None,
        [one] => one.write_json(&mut out),
        many => {
            out.push('[');
            for (i, node) in many.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                node.write_json(&mut out);
            }
            out.push(']');
        }
    }
    Some(out)
}

/// The DuckDB scalar function `yaml_to_json(VARCHAR) -> VARCHAR`.
struct YamlToJson;

impl VScalar for YamlToJson {
    type State = ();

    fn invoke(
        _: &Self::State,
        input: &mut DataChunkHandle,
        output: &mut dyn WritableVector,
    ) -> Result<(), Box<dyn std::error::Error>> {
        let rows = input.len();
        let texts = input.flat_vector(0);
        // SAFETY: the one argument is a VARCHAR column of `rows` rows (the signature below).
        #[allow(unsafe_code)]
        let cells = unsafe { texts.as_slice_with_len::<duckdb::ffi::duckdb_string_t>(rows) };
        let mut out = output.flat_vector();
        for (row, cell) in cells.iter().enumerate() {
            if texts.row_is_null(row as u64) {
                out.set_null(row);
                continue;
            }
            let mut cell = *cell;
            match yaml_to_json(DuckString::new(&mut cell).as_str().as_ref()) {
                Some(json) => out.insert(row, json.as_str()),
                None => out.set_null(row),
            }
        }
        Ok(())
    }

    fn signatures() -> Vec<ScalarFunctionSignature> {
        vec![ScalarFunctionSignature::exact(
            vec![LogicalTypeId::Varchar.into()],
            LogicalTypeId::Varchar.into(),
        )]
    }
}

/// Registers `yaml_to_json` on `con`.
pub fn register_scalars(con: &duckdb::Connection) -> duckdb::Result<()> {
    con.register_scalar_function::<YamlToJson>("yaml_to_json")
}
