//! Reading MESS messages from text as an exchange takes them: YAML (one message per document)
//! or, for a body sent as JSON, strict JSON. Parsing is bounded by the text's size
//! ([`Limits::message`], [`Limits::json_message`]); the caller checks the size itself first.

use crate::error::ProtocolError;
use crate::message::Message;
use crate::yaml::{self, Limits, YamlError};

/// The MESS messages of YAML text holding one or more (one per document; empty documents are
/// skipped).
pub fn messages(text: &str) -> Result<Vec<Message>, ProtocolError> {
    let docs: Vec<_> = yaml::parse_documents(text, &Limits::message(text.len()))?
        .into_iter()
        .filter(|d| !d.is_null())
        .collect();
    let several = docs.len() > 1;
    let messages = docs
        .into_iter()
        .enumerate()
        .map(|(i, d)| {
            Message::from_value(d).map_err(|e| match e {
                // With several documents, the path says which one.
                ProtocolError::Invalid { path, problem } if several => ProtocolError::Invalid {
                    path: format!("document {}: {path}", i + 1),
                    problem,
                },
                other => other,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if messages.is_empty() {
        return Err(ProtocolError::invalid("MESS", "the input holds no message"));
    }
    Ok(messages)
}

/// The one MESS message of YAML (or JSON) text, as the API takes one per request.
pub fn one_message(text: &str) -> Result<Message, ProtocolError> {
    let mut messages = messages(text)?;
    if messages.len() != 1 {
        return Err(ProtocolError::invalid(
            "body",
            format!(
                "send one MESS message per request (found {} documents)",
                messages.len()
            ),
        ));
    }
    Ok(messages.remove(0))
}

/// The MESS message of a JSON text (RFC 8259), as the API reads bodies sent as
/// `application/json`: strict JSON, not YAML, so every escape JSON allows (surrogate pairs
/// included) reads as JSON means it, and an error gives the line and column.
pub fn json_message(text: &str) -> Result<Message, ProtocolError> {
    let malformed = |e: serde_json::Error| {
        ProtocolError::from(YamlError {
            message: format!("invalid JSON: {e}"),
        })
    };
    let mut reader = serde_json::Deserializer::from_str(text);
    let value =
        yaml::value_from(&mut reader, &Limits::json_message(text.len())).map_err(malformed)?;
    reader.end().map_err(malformed)?;
    Message::from_value(value)
}
