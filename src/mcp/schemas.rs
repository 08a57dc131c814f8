//! Output schemas of the MCP tools: the shape of each tool's structured content, so clients
//! can check and use it without parsing the YAML text. Plain objects with optional properties
//! only (no `anyOf` or `$ref`), which every client's validator handles.

use std::sync::Arc;

use rmcp::model::JsonObject;
use serde_json::{Value, json};

fn object(schema: Value) -> Arc<JsonObject> {
    match schema {
        Value::Object(m) => Arc::new(m),
        _ => Arc::new(JsonObject::new()),
    }
}

/// The exchange's answer to a message: a MESS message (an ack with refs, statuses, replies).
pub(crate) fn message() -> Arc<JsonObject> {
    object(json!({
        "type": "object",
        "description": "The exchange's answer, a MESS message: `ack` (with `ref`, or `requests` for several), or the statuses and responses a query asked for.",
        "properties": {
            "MESS": {"type": "array", "items": {"type": "object"}}
        },
        "required": ["MESS"]
    }))
}

/// The answer to a new request: the exchange's ack, and after a wait (`wait_s`) the thread's
/// status view as `mess_status` gives it.
pub(crate) fn request() -> Arc<JsonObject> {
    let mut schema = (*status()).clone();
    schema.remove("description");
    object(json!({
        "type": "object",
        "description": "The exchange's ack (`MESS: [ack: {ref}]`). After a wait: `thread`, the request's status view (status, questions, the response once completed), `waited_s`, and `timed_out` (true when it is still open: continue with mess_wait).",
        "properties": {
            "MESS": {"type": "array", "items": {"type": "object"}},
            "thread": schema,
            "waited_s": {"type": "integer"},
            "timed_out": {"type": "boolean"}
        },
        "required": ["MESS"]
    }))
}

fn thread_summary() -> Value {
    json!({
        "type": "object",
        "properties": {
            "ref": {"type": "string"},
            "client_id": {"type": "string"},
            "status": {"type": "string"},
            "intent": {"type": "string"},
            "executor": {"type": "string"},
            "requestor": {"type": "string"},
            "updated": {"type": "string"},
            "queue_position": {"type": "integer"},
            "held_until": {"type": "string", "description": "held for its not_before until then"}
        },
        "required": ["ref", "status", "intent", "requestor", "updated"]
    })
}

/// One thread's status for its requestor, or (without `re`) the open threads.
pub(crate) fn status() -> Arc<JsonObject> {
    object(json!({
        "type": "object",
        "description": "With re: the thread's envelope fields, `state`, the latest status details under the status name (questions under needs_input, action and consequences under needs_confirmation), and when finished `response` (the executor's content) and `notes`; while pending, `queue_position`, or `held_until` and `waiting_because` while it waits for its not_before; `refs`, the threads its `ref:` entries name that you may see. Without re: `threads`, your open requests (with other exchanges configured, theirs too, each marked with `exchange`; `unreachable` names those that did not answer).",
        "properties": {
            "ref": {"type": "string"},
            "status": {"type": "string"},
            "state": {"type": "string"},
            "intent": {"type": "string"},
            "requestor": {"type": "string"},
            "executor": {"type": "string"},
            "created": {"type": "string"},
            "updated": {"type": "string"},
            "response": {"type": "array"},
            "notes": {"type": "string"},
            "unmet_hints": {"type": "array", "items": {"type": "string"}},
            "messages": {"type": "integer"},
            "queue_position": {"type": "integer", "description": "while pending: 1 is the next request an executor is offered"},
            "held_until": {"type": "string", "description": "while pending and held for its not_before: nobody is offered it before this instant"},
            "waiting_because": {"type": "string"},
            "refs": {"type": "object", "description": "each `ref:` entry of the thread, as written, to the summary of the thread it names (left out when you may not see it)"},
            "threads": {"type": "array", "items": thread_summary()},
            "unreachable": {"type": "array", "items": {"type": "object"}}
        }
    }))
}

/// The capability catalog with the executors holding each capability.
pub(crate) fn capabilities() -> Arc<JsonObject> {
    object(json!({
        "type": "object",
        "properties": {
            "capabilities": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "description": {"type": "string"},
                        "tags": {"type": "array", "items": {"type": "string"}},
                        "executors": {"type": "array"}
                    },
                    "required": ["id"]
                }
            }
        },
        "required": ["capabilities"]
    }))
}

/// A query's rows.
pub(crate) fn query() -> Arc<JsonObject> {
    object(json!({
        "type": "object",
        "properties": {
            "columns": {"type": "array", "items": {"type": "string"}},
            "rows": {"type": "array", "items": {"type": "object"}},
            "row_count": {"type": "integer"},
            "truncated": {"type": "boolean"},
            "warning": {"type": "string"}
        },
        "required": ["columns", "rows", "row_count", "truncated"]
    }))
}

/// What a wait saw.
pub(crate) fn wait() -> Arc<JsonObject> {
    object(json!({
        "type": "object",
        "properties": {
            "updated": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "ref": {"type": "string"},
                        "status": {"type": "string"},
                        "updated": {"type": "string"},
                        "exchange": {"type": "string"}
                    },
                    "required": ["ref", "status", "updated"]
                }
            },
            "waited_s": {"type": "integer"},
            "timed_out": {"type": "boolean"},
            "unreachable": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "exchange": {"type": "string"},
                        "error": {"type": "string"}
                    }
                }
            }
        },
        "required": ["updated", "waited_s", "timed_out"]
    }))
}

fn mail_fields() -> Value {
    json!({
        "file": {"type": "string"},
        "mailbox": {"type": "string"},
        "folder": {"type": "string"},
        "from": {"type": "string"},
        "to": {"type": "string"},
        "type": {"type": "string"},
        "timestamp": {"type": "string"},
        "priority": {"type": "string"},
        "needs_response": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "thread_id": {"type": "string"},
        "in_reply_to": {"type": "string"},
        "expires": {"type": "string"},
        "read_at": {"type": "string"},
        "body": {"type": "string"}
    })
}

/// Where a sent message landed.
pub(crate) fn mail_sent() -> Arc<JsonObject> {
    object(json!({
        "type": "object",
        "properties": {"mailbox": {"type": "string"}, "file": {"type": "string"}},
        "required": ["mailbox", "file"]
    }))
}

/// A mailbox's messages.
pub(crate) fn mail_list() -> Arc<JsonObject> {
    object(json!({
        "type": "object",
        "properties": {
            "messages": {"type": "array", "items": {"type": "object", "properties": mail_fields(), "required": ["file", "from", "type"]}},
            "unreadable": {"type": "array", "items": {"type": "string"}}
        },
        "required": ["messages"]
    }))
}

/// One message.
pub(crate) fn mail_message() -> Arc<JsonObject> {
    object(json!({
        "type": "object",
        "properties": mail_fields(),
        "required": ["file", "mailbox", "folder", "from", "type"]
    }))
}
