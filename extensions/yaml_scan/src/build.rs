//! Turning parsed values into Arrow arrays of an inferred type. Values that do not fit the
//! type exactly are converted the way the type's inference allows (integers into floats,
//! anything into text), so no row is dropped for its shape.

use std::sync::Arc;

use duckdb::arrow::array::{
    ArrayRef, BooleanBuilder, Date32Builder, Float64Builder, Int64Builder, ListArray,
    StringBuilder, StructArray, TimestampMicrosecondBuilder,
};
use duckdb::arrow::buffer::{NullBuffer, OffsetBuffer};
use duckdb::arrow::datatypes::{Field, Fields};

use crate::node::Node;
use crate::types::{Ty, unique_names};

/// The value, unless it is absent or null.
fn present<'a>(v: &Option<&'a Node>) -> Option<&'a Node> {
    v.filter(|n| !matches!(n, Node::Null))
}

/// Builds one array of type `ty` from `values` (`None` and `Node::Null` are nulls).
pub(crate) fn build(ty: &Ty, values: &[Option<&Node>]) -> ArrayRef {
    match ty {
        Ty::Bool => {
            let mut b = BooleanBuilder::with_capacity(values.len());
            for v in values {
                b.append_option(match present(v) {
                    Some(Node::Bool(x)) => Some(*x),
                    _ => None,
                });
            }
            Arc::new(b.finish())
        }
        Ty::Int => {
            let mut b = Int64Builder::with_capacity(values.len());
            for v in values {
                b.append_option(match present(v) {
                    Some(Node::Int(x)) => Some(*x),
                    _ => None,
                });
            }
            Arc::new(b.finish())
        }
        Ty::Float => {
            let mut b = Float64Builder::with_capacity(values.len());
            for v in values {
                b.append_option(match present(v) {
                    Some(Node::Int(x)) => Some(*x as f64),
                    Some(Node::Float(x)) => Some(*x),
                    _ => None,
                });
            }
            Arc::new(b.finish())
        }
        Ty::Date => {
            let mut b = Date32Builder::with_capacity(values.len());
            for v in values {
                b.append_option(match present(v) {
                    Some(Node::Date(x)) => Some(*x),
                    _ => None,
                });
            }
            Arc::new(b.finish())
        }
        Ty::TimestampTz | Ty::Timestamp => {
            let mut b = TimestampMicrosecondBuilder::with_capacity(values.len());
            for v in values {
                b.append_option(match present(v) {
                    Some(Node::TimestampTz(x) | Node::Timestamp(x)) => Some(*x),
                    _ => None,
                });
            }
            let array = b.finish();
            match ty {
                Ty::TimestampTz => Arc::new(array.with_timezone("+00:00")),
                _ => Arc::new(array),
            }
        }
        Ty::Null | Ty::Text | Ty::Json | Ty::EmptyMap => {
            let mut b = StringBuilder::with_capacity(values.len(), values.len() * 16);
            for v in values {
                match present(v) {
                    Some(Node::Str(s)) => b.append_value(s),
                    Some(node) => b.append_value(node.to_text()),
                    None => b.append_null(),
                }
            }
            Arc::new(b.finish())
        }
        Ty::List(elem) => {
            let mut offsets = Vec::with_capacity(values.len() + 1);
            offsets.push(0i32);
            let mut children: Vec<Option<&Node>> = Vec::new();
            let mut valid = Vec::with_capacity(values.len());
            for v in values {
                match present(v) {
                    Some(Node::List(items)) => {
                        children.extend(items.iter().map(Some));
                        valid.push(true);
                    }
                    // A scalar where a list is expected cannot occur: inference would have
                    // widened the type to JSON text.
                    _ => valid.push(false),
                }
                offsets.push(children.len() as i32);
            }
            let child = build(elem, &children);
            let field = Arc::new(Field::new("l", elem.arrow(), true));
            Arc::new(ListArray::new(
                field,
                OffsetBuffer::new(offsets.into()),
                child,
                Some(NullBuffer::from(valid)),
            ))
        }
        Ty::Struct(fields) => {
            let valid: Vec<bool> = values
                .iter()
                .map(|v| matches!(present(v), Some(Node::Map(_))))
                .collect();
            let children: Vec<ArrayRef> = fields
                .iter()
                .map(|(k, t)| {
                    let child: Vec<Option<&Node>> = values
                        .iter()
                        .map(|v| present(v).and_then(|n| n.get(k)))
                        .collect();
                    build(t, &child)
                })
                .collect();
            let arrow_fields: Fields = fields
                .iter()
                .zip(unique_names(fields.iter().map(|(k, _)| &**k)))
                .map(|((_, t), name)| Field::new(name, t.arrow(), true))
                .collect();
            Arc::new(StructArray::new(
                arrow_fields,
                children,
                Some(NullBuffer::from(valid)),
            ))
        }
    }
}
