//! Schema inference: the union type of values seen in a column, across every row of every file
//! (no sampling), and its Arrow form.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use duckdb::arrow::datatypes::{DataType, Field, Fields, TimeUnit};

use crate::node::{Key, Node};

/// Mappings with more distinct keys than this (in one document, or unioned over all) become
/// JSON text: a STRUCT that wide is no use in SQL, and merging wider ones costs the square of
/// their width.
pub(crate) const MAX_STRUCT_FIELDS: usize = 1000;

/// The inferred type of a column or nested field.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Ty {
    /// Only nulls seen so far.
    Null,
    Bool,
    Int,
    Float,
    Text,
    Date,
    TimestampTz,
    Timestamp,
    /// Values that fit no common type, kept as text (JSON for collections).
    Json,
    /// `{}` seen and nothing else: DuckDB has no empty STRUCT, so alone it becomes JSON text.
    EmptyMap,
    List(Box<Ty>),
    Struct(Vec<(Key, Ty)>),
}

impl Ty {
    /// The type of one value.
    pub(crate) fn of(node: &Node) -> Ty {
        match node {
            Node::Null => Ty::Null,
            Node::Bool(_) => Ty::Bool,
            Node::Int(_) => Ty::Int,
            Node::Float(_) => Ty::Float,
            Node::Str(_) => Ty::Text,
            Node::Date(_) => Ty::Date,
            Node::TimestampTz(_) => Ty::TimestampTz,
            Node::Timestamp(_) => Ty::Timestamp,
            Node::List(items) => {
                let mut elem = Ty::Null;
                for item in items.iter() {
                    elem.absorb(&Ty::of(item));
                }
                Ty::List(Box::new(elem))
            }
            Node::Map(entries) if entries.is_empty() => Ty::EmptyMap,
            Node::Map(entries) if entries.len() > MAX_STRUCT_FIELDS => Ty::Json,
            Node::Map(entries) => Ty::Struct(
                entries
                    .iter()
                    .map(|(k, v)| (k.clone(), Ty::of(v)))
                    .collect(),
            ),
        }
    }

    /// Widens `self` to hold values of `other` too.
    pub(crate) fn absorb(&mut self, other: &Ty) {
        if self == other {
            return;
        }
        let merged = match (&mut *self, other) {
            (_, Ty::Null) => return,
            (Ty::Null, o) => o.clone(),
            (Ty::Json, _) | (_, Ty::Json) => Ty::Json,
            (Ty::Int, Ty::Float) | (Ty::Float, Ty::Int) => Ty::Float,
            (Ty::EmptyMap, Ty::Struct(f)) => Ty::Struct(f.clone()),
            (Ty::Struct(_), Ty::EmptyMap) => return,
            (Ty::Struct(fields), Ty::Struct(others)) => {
                for (k, t) in others {
                    match fields.iter_mut().find(|(fk, _)| fk == k) {
                        Some((_, ft)) => ft.absorb(t),
                        None => fields.push((k.clone(), t.clone())),
                    }
                }
                if fields.len() <= MAX_STRUCT_FIELDS {
                    return;
                }
                Ty::Json
            }
            (Ty::List(a), Ty::List(b)) => {
                a.absorb(b);
                return;
            }
            // Collections mixed with anything else, and scalars of different kinds.
            (Ty::List(_) | Ty::Struct(_) | Ty::EmptyMap, _)
            | (_, Ty::List(_) | Ty::Struct(_) | Ty::EmptyMap) => Ty::Json,
            _ => Ty::Text,
        };
        *self = merged;
    }

    /// The Arrow type of a column of this type.
    pub(crate) fn arrow(&self) -> DataType {
        match self {
            Ty::Null | Ty::Text | Ty::Json | Ty::EmptyMap => DataType::Utf8,
            Ty::Bool => DataType::Boolean,
            Ty::Int => DataType::Int64,
            Ty::Float => DataType::Float64,
            Ty::Date => DataType::Date32,
            Ty::TimestampTz => {
                DataType::Timestamp(TimeUnit::Microsecond, Some(Arc::from("+00:00")))
            }
            Ty::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, None),
            Ty::List(elem) => DataType::List(Arc::new(Field::new("l", elem.arrow(), true))),
            Ty::Struct(fields) => DataType::Struct(
                fields
                    .iter()
                    .zip(unique_names(fields.iter().map(|(k, _)| &**k)))
                    .map(|((_, t), name)| Field::new(name, t.arrow(), true))
                    .collect::<Fields>(),
            ),
        }
    }
}

/// Names for keys that DuckDB tells apart only by case (`ID` and `id` are one name to it):
/// the first keeps its name, later ones get `_1`, `_2`, ... appended.
pub(crate) fn unique_names<'a>(keys: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut taken = HashSet::new();
    keys.map(|k| unique_name(k, &mut taken)).collect()
}

/// `name`, or `name_N` with the smallest N not yet in `taken` (compared ignoring ASCII case);
/// the result is added to `taken`.
pub(crate) fn unique_name(name: &str, taken: &mut HashSet<String>) -> String {
    if taken.insert(name.to_ascii_lowercase()) {
        return name.to_owned();
    }
    (1..)
        .map(|n| format!("{name}_{n}"))
        .find(|candidate| taken.insert(candidate.to_ascii_lowercase()))
        .unwrap_or_default()
}

/// The union row types of one file, for the document modes. Files of the same shape share
/// one copy of each type (see [`intern`]).
#[derive(Debug, Clone)]
pub(crate) struct FileTypes {
    /// Every row of every document (`rows`, `list`).
    pub(crate) all: Arc<Ty>,
    /// Rows of document 1 (`first`, and the front matter of `frontmatter`).
    pub(crate) first: Arc<Ty>,
    /// Rows of documents 2.. (`frontmatter`).
    pub(crate) rest: Arc<Ty>,
}

/// Above this many distinct types the interner starts over (types already handed out stay
/// valid; only the sharing of new ones restarts).
const MAX_INTERNED: usize = 100_000;

/// The shared copy of `ty`. Thread files of one exchange come in few shapes, so sharing their
/// types keeps a cache of 100,000 files from holding 100,000 copies of the same type tree, and
/// lets a scan absorb each distinct shape once.
pub(crate) fn intern(ty: Ty) -> Arc<Ty> {
    static INTERNED: OnceLock<Mutex<HashSet<Arc<Ty>>>> = OnceLock::new();
    let mut set = match INTERNED.get_or_init(Default::default).lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    };
    if let Some(shared) = set.get(&ty) {
        return shared.clone();
    }
    if set.len() >= MAX_INTERNED {
        set.clear();
    }
    let shared = Arc::new(ty);
    set.insert(shared.clone());
    shared
}

/// The union of many types, absorbing each shared (interned) type once however many files
/// have it.
#[derive(Default)]
pub(crate) struct Union {
    ty: Option<Ty>,
    /// The types absorbed, held so that an address seen stays theirs while the union lives.
    seen: HashMap<*const Ty, Arc<Ty>>,
}

impl Union {
    /// Widens the union to hold `ty`.
    pub(crate) fn absorb(&mut self, ty: &Arc<Ty>) {
        if let std::collections::hash_map::Entry::Vacant(slot) = self.seen.entry(Arc::as_ptr(ty)) {
            slot.insert(ty.clone());
            self.ty.get_or_insert(Ty::Null).absorb(ty);
        }
    }

    /// The union type (`Null` when nothing was absorbed).
    pub(crate) fn finish(self) -> Ty {
        self.ty.unwrap_or(Ty::Null)
    }
}
