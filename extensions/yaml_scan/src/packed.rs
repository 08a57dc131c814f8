//! The compact form the cache keeps a parsed file in: its documents as one byte string
//! (a tag per value, lengths and integers as varints, timestamps as microseconds), with the
//! file's row types beside it. A parsed envelope as a tree of nodes takes about 1.5 KB in
//! 30 allocations; packed it takes about 450 bytes in one, so the cache of a 100,000-thread
//! home fits in a query worker's memory. Unpacking is a walk over the bytes, many times
//! faster than parsing the YAML again.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use crate::node::{self, Key, Node};
use crate::parse::{Doc, ParsedFile};
use crate::types::FileTypes;

/// A parsed file, packed.
#[derive(Debug)]
pub(crate) struct Packed {
    bytes: Box<[u8]>,
    /// False when only the first document was parsed.
    pub(crate) complete: bool,
    /// The row types of the file's documents.
    pub(crate) types: FileTypes,
    /// The first document that does not parse, and why.
    pub(crate) broken: Option<(u32, Box<str>)>,
}

/// What an entry costs beyond its bytes (the allocation, the cache's key and slot), counted
/// against the cache's budget.
const ENTRY_OVERHEAD: usize = 256;

const DOC_EMPTY: u8 = 0;
const DOC_BROKEN: u8 = 1;
const DOC_VALUE: u8 = 2;

const NULL: u8 = 0;
const FALSE: u8 = 1;
const TRUE: u8 = 2;
const INT: u8 = 3;
const FLOAT: u8 = 4;
const STR: u8 = 5;
const DATE: u8 = 6;
const TIMESTAMP_TZ: u8 = 7;
const TIMESTAMP: u8 = 8;
const LIST: u8 = 9;
const MAP: u8 = 10;

impl Packed {
    /// Packs `file` (its types computed now, once).
    pub(crate) fn pack(file: &ParsedFile) -> Packed {
        let mut out = Vec::with_capacity(256);
        put_len(&mut out, file.docs.len());
        for doc in &file.docs {
            match doc {
                Doc::Empty => out.push(DOC_EMPTY),
                Doc::Broken(why) => {
                    out.push(DOC_BROKEN);
                    put_str(&mut out, why);
                }
                Doc::Value(n) => {
                    out.push(DOC_VALUE);
                    put_node(&mut out, n);
                }
            }
        }
        Packed {
            bytes: out.into_boxed_slice(),
            complete: file.complete,
            types: crate::scan::file_types(file).clone(),
            broken: file.docs.iter().enumerate().find_map(|(i, d)| match d {
                Doc::Broken(why) => Some((i as u32, why.as_str().into())),
                _ => None,
            }),
        }
    }

    /// The documents again.
    pub(crate) fn unpack(&self) -> ParsedFile {
        let table = key_table();
        let mut r = Reader {
            bytes: &self.bytes,
            at: 0,
            keys: &table.keys,
        };
        let docs = r.docs().unwrap_or_default();
        let file = ParsedFile {
            docs,
            complete: self.complete,
            types: std::sync::OnceLock::new(),
        };
        let _ = file.types.set(self.types.clone());
        file
    }

    /// Bytes this entry holds, for the cache's budget.
    pub(crate) fn footprint(&self) -> usize {
        self.bytes.len() + ENTRY_OVERHEAD
    }
}

fn put_len(out: &mut Vec<u8>, n: usize) {
    put_varint(out, n as u64);
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_signed(out: &mut Vec<u8>, v: i64) {
    put_varint(out, ((v << 1) ^ (v >> 63)) as u64);
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_len(out, s.len());
    out.extend_from_slice(s.as_bytes());
}

/// Mapping keys numbered process-wide, so a packed key is a byte or two: thread files repeat
/// the same few dozen keys. Numbers are never reused, so the table only grows, up to
/// [`MAX_KEYS`]; keys past it are packed as text.
#[derive(Default)]
struct KeyTable {
    numbers: HashMap<Key, u64>,
    keys: Vec<Key>,
}

const MAX_KEYS: usize = 16_384;

fn key_table() -> std::sync::MutexGuard<'static, KeyTable> {
    static TABLE: OnceLock<Mutex<KeyTable>> = OnceLock::new();
    match TABLE.get_or_init(Default::default).lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// Writes a key: its number plus one, or 0 and the text.
fn put_key(out: &mut Vec<u8>, table: &mut KeyTable, key: &Key) {
    let number = match table.numbers.get(key) {
        Some(n) => Some(*n),
        None if table.keys.len() < MAX_KEYS => {
            let n = table.keys.len() as u64;
            table.keys.push(key.clone());
            table.numbers.insert(key.clone(), n);
            Some(n)
        }
        None => None,
    };
    match number {
        Some(n) => put_varint(out, n + 1),
        None => {
            put_varint(out, 0);
            put_str(out, key);
        }
    }
}

fn put_node(out: &mut Vec<u8>, n: &Node) {
    let mut table = key_table();
    put_value(out, &mut table, n);
}

fn put_value(out: &mut Vec<u8>, table: &mut KeyTable, n: &Node) {
    match n {
        Node::Null => out.push(NULL),
        Node::Bool(false) => out.push(FALSE),
        Node::Bool(true) => out.push(TRUE),
        Node::Int(i) => {
            out.push(INT);
            put_signed(out, *i);
        }
        Node::Float(f) => {
            out.push(FLOAT);
            out.extend_from_slice(&f.to_le_bytes());
        }
        Node::Str(s) => {
            out.push(STR);
            put_str(out, s);
        }
        Node::Date(d) => {
            out.push(DATE);
            put_signed(out, i64::from(*d));
        }
        Node::TimestampTz(us) => {
            out.push(TIMESTAMP_TZ);
            put_signed(out, *us);
        }
        Node::Timestamp(us) => {
            out.push(TIMESTAMP);
            put_signed(out, *us);
        }
        Node::List(items) => {
            out.push(LIST);
            put_len(out, items.len());
            for item in items.iter() {
                put_value(out, table, item);
            }
        }
        Node::Map(entries) => {
            out.push(MAP);
            put_len(out, entries.len());
            for (k, v) in entries.iter() {
                put_key(out, table, k);
                put_value(out, table, v);
            }
        }
    }
}

/// Reads what [`Packed::pack`] wrote. Every read is checked, so a packing bug shows as a
/// missing document rather than a panic; the bytes never come from outside the process.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    keys: &'a [Key],
}

impl Reader<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Some(v);
            }
        }
        None
    }

    fn signed(&mut self) -> Option<i64> {
        let v = self.varint()?;
        Some(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    fn len(&mut self) -> Option<usize> {
        usize::try_from(self.varint()?).ok()
    }

    fn str(&mut self) -> Option<&str> {
        let n = self.len()?;
        let s = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        std::str::from_utf8(s).ok()
    }

    fn docs(&mut self) -> Option<Vec<Doc>> {
        let n = self.len()?;
        let mut docs = Vec::with_capacity(n.min(self.bytes.len()));
        for _ in 0..n {
            docs.push(match self.byte()? {
                DOC_EMPTY => Doc::Empty,
                DOC_BROKEN => Doc::Broken(self.str()?.to_owned()),
                DOC_VALUE => Doc::Value(self.node()?),
                _ => return None,
            });
        }
        Some(docs)
    }

    fn node(&mut self) -> Option<Node> {
        Some(match self.byte()? {
            NULL => Node::Null,
            FALSE => Node::Bool(false),
            TRUE => Node::Bool(true),
            INT => Node::Int(self.signed()?),
            FLOAT => {
                let raw = self.bytes.get(self.at..self.at + 8)?;
                self.at += 8;
                Node::Float(f64::from_le_bytes(raw.try_into().ok()?))
            }
            STR => Node::Str(self.str()?.into()),
            DATE => Node::Date(i32::try_from(self.signed()?).ok()?),
            TIMESTAMP_TZ => Node::TimestampTz(self.signed()?),
            TIMESTAMP => Node::Timestamp(self.signed()?),
            LIST => {
                let n = self.len()?;
                let mut items = Vec::with_capacity(n.min(self.bytes.len()));
                for _ in 0..n {
                    items.push(self.node()?);
                }
                Node::List(items.into_boxed_slice())
            }
            MAP => {
                let n = self.len()?;
                let mut entries = Vec::with_capacity(n.min(self.bytes.len()));
                for _ in 0..n {
                    let key = match self.varint()? {
                        0 => node::intern(self.str()?),
                        n => self.keys.get(usize::try_from(n - 1).ok()?)?.clone(),
                    };
                    entries.push((key, self.node()?));
                }
                Node::Map(entries.into_boxed_slice())
            }
            _ => return None,
        })
    }
}
