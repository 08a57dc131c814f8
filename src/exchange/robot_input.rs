//! What an MCP robot asks in the middle of its work, relayed to the requestor: an elicitation
//! (`elicitation/create` during the tool call, the `input_required` of a tool result, or of an
//! MCP task) becomes the thread's `needs_input` with the robot's questions, or its
//! `needs_confirmation` when it asks only yes or no; the requestor's reply goes back to the
//! robot as the elicitation's result, and the thread is `in_progress` again. The exchange is
//! the robot's MCP client here ([`Relay`] is its handler); it does not decide anything the
//! protocol's own `needs_input` flow does not.

use std::collections::BTreeMap;

use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    Implementation, InputRequest, InputRequests, InputResponses,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleClient};

use crate::exchange::{Error, Exchange, Sender};
use crate::protocol::ids::ThreadRef;
use crate::protocol::message::{Message, Payload};
use crate::protocol::value::{Map, Value};

/// The delivery channel of an MCP robot.
pub(crate) const CHANNEL: &str = "mcp";

/// Most questions one elicitation may put (properties of its schema).
const MOST_QUESTIONS: usize = 20;

/// How often a thread waiting for the requestor's answer is read again when no change is heard
/// (a reply written by another process this one does not watch).
const LOOK_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The exchange as the MCP client of one robot's session for one thread: what the robot asks
/// is put to the thread's requestor, and its answer given back.
#[derive(Clone)]
pub(crate) struct Relay {
    pub(crate) ex: Exchange,
    pub(crate) thread: ThreadRef,
    pub(crate) executor: String,
    /// Beyond this, a question nobody answered is given up (the robot hears `cancel`).
    pub(crate) until: tokio::time::Instant,
}

/// What the exchange tells robots about itself: tasks welcome, and it relays questions.
pub(crate) fn client_config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::builder()
            .enable_tasks()
            .enable_elicitation()
            .build(),
        Implementation::new("mess", env!("CARGO_PKG_VERSION")),
    )
}

impl rmcp::ClientHandler for Relay {
    fn get_info(&self) -> ClientConfig {
        client_config()
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        tokio::select! {
            answered = self.ask(&request) => Ok(answered),
            // The robot withdrew the question (it cancelled the request).
            () = context.ct.cancelled() => Ok(ElicitResult::new(ElicitationAction::Cancel)),
        }
    }
}

/// The requestor's answer to a question, as found in the thread.
enum Answer {
    /// `answers` of a reply.
    Given(Map),
    /// `confirm` of a reply.
    Confirmed(bool),
    /// The thread ended (cancelled, expired) before anyone answered.
    Ended,
}

impl Relay {
    /// Answers the input requests of a tool result or a task that says `input_required`: each
    /// elicitation is put to the requestor in turn; `answered` keeps the keys answered before
    /// (a task's requests stay listed until it moves on). Other kinds of request (sampling,
    /// roots) are the robot's host's business, not a marketplace's: refused.
    pub(crate) async fn answer_all(
        &self,
        requests: &InputRequests,
        answered: &mut std::collections::HashSet<String>,
    ) -> Result<InputResponses, String> {
        let mut out = InputResponses::new();
        for (key, request) in requests {
            if answered.contains(key) {
                continue;
            }
            let InputRequest::Elicitation(elicit) = request else {
                return Err(
                    "the robot asked for sampling or roots, which mess does not relay".to_owned(),
                );
            };
            let result = self.ask(&elicit.params).await;
            let value = serde_json::to_value(&result).map_err(|e| e.to_string())?;
            out.insert(key.clone(), value);
            answered.insert(key.clone());
        }
        Ok(out)
    }

    /// Puts `request` to the thread's requestor and waits for the answer (or the thread's end,
    /// or [`Relay::until`]); then the thread is `in_progress` again and the answer is the
    /// elicitation's result.
    pub(crate) async fn ask(&self, request: &ElicitRequestParams) -> ElicitResult {
        let (status, fields) = question_of(request);
        let (ex, thread, executor) = (self.ex.clone(), self.thread.clone(), self.executor.clone());
        let code = status.get("code").and_then(Value::scalar_text);
        let asked = tokio::task::spawn_blocking(move || -> Result<usize, String> {
            let before = ex
                .store()
                .read(&thread)
                .and_then(|f| f.messages().map(|m| m.len()))
                .map_err(|e| e.to_string())?;
            as_robot(&ex, &thread, &executor, vec![("status", status)])
                .map_err(|e| ex.public_message(&e))?;
            Ok(before)
        })
        .await;
        let before = match asked {
            Ok(Ok(n)) => n,
            Ok(Err(why)) => {
                tracing::warn!(thread = %self.thread, "the robot's question could not be put: {why}");
                return ElicitResult::new(ElicitationAction::Cancel);
            }
            Err(_) => return ElicitResult::new(ElicitationAction::Cancel),
        };
        let answer = self.wait_for_answer(before).await;
        let result = match answer {
            Some(Answer::Given(answers)) => ElicitResult::new(ElicitationAction::Accept)
                .with_content(typed_answers(&answers, &fields)),
            Some(Answer::Confirmed(true)) => {
                let mut content = serde_json::Map::new();
                if let Some((name, _)) = fields.first() {
                    content.insert(name.clone(), serde_json::Value::Bool(true));
                }
                ElicitResult::new(ElicitationAction::Accept)
                    .with_content(serde_json::Value::Object(content))
            }
            Some(Answer::Confirmed(false)) => ElicitResult::new(ElicitationAction::Decline),
            Some(Answer::Ended) | None => ElicitResult::new(ElicitationAction::Cancel),
        };
        if result.action == ElicitationAction::Accept {
            // The answer is with the robot: its work goes on.
            let (ex, thread, executor) =
                (self.ex.clone(), self.thread.clone(), self.executor.clone());
            let mut going = Map::new();
            going.insert("code", Value::str("in_progress"));
            going.insert(
                "message",
                Value::str(match code.as_deref() {
                    Some("needs_confirmation") => "confirmed; the robot goes on",
                    _ => "answered; the robot goes on",
                }),
            );
            let _ = tokio::task::spawn_blocking(move || {
                as_robot(&ex, &thread, &executor, vec![("status", going)])
            })
            .await;
        }
        result
    }

    /// Waits until the requestor replies to the question asked after message `before`, the
    /// thread ends, or time is up (`None`).
    async fn wait_for_answer(&self, before: usize) -> Option<Answer> {
        let mut changes = self.ex.changes().subscribe();
        loop {
            let (ex, thread) = (self.ex.clone(), self.thread.clone());
            let found = tokio::task::spawn_blocking(move || answer_after(&ex, &thread, before))
                .await
                .ok()
                .flatten();
            if found.is_some() {
                return found;
            }
            let next = (tokio::time::Instant::now() + LOOK_EVERY).min(self.until);
            if tokio::time::Instant::now() >= self.until {
                return None;
            }
            tokio::select! {
                () = tokio::time::sleep_until(next) => {}
                change = changes.recv() => {
                    if let Err(tokio::sync::broadcast::error::RecvError::Closed) = change {
                        tokio::time::sleep_until(next).await;
                    }
                }
            }
        }
    }
}

/// The requestor's reply to the question asked after message `before` of `thread`, if any.
fn answer_after(ex: &Exchange, thread: &ThreadRef, before: usize) -> Option<Answer> {
    let file = ex.store().read(thread).ok()?;
    if file.envelope.status.is_terminal() {
        return Some(Answer::Ended);
    }
    let messages = file.messages().ok()?;
    let requestor = &file.envelope.requestor;
    messages
        .iter()
        .skip(before)
        .filter(|d| &d.from == requestor)
        .flat_map(|d| d.message.payloads.iter())
        .find_map(|p| match p {
            Payload::Reply(r) => match (&r.answers, r.confirm) {
                (_, Some(yes)) => Some(Answer::Confirmed(yes)),
                (Some(answers), None) if !answers.is_empty() => {
                    Some(Answer::Given(answers.clone()))
                }
                _ => None,
            },
            _ => None,
        })
}

/// The status that puts `request` to the requestor, and the fields asked (name and JSON type,
/// in the schema's order): `needs_confirmation` when it asks one yes or no (or to open a URL),
/// else `needs_input` with a question per field.
fn question_of(request: &ElicitRequestParams) -> (Map, Vec<(String, String)>) {
    let (message, schema) = match request {
        ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } => (
            message.clone(),
            serde_json::to_value(requested_schema).unwrap_or_default(),
        ),
        ElicitRequestParams::UrlElicitationParams { message, url, .. } => {
            let mut status = Map::new();
            status.insert("code", Value::str("needs_confirmation"));
            status.insert("action", Value::str(format!("{message} (at {url})")));
            return (status, Vec::new());
        }
        // A mode of a later MCP version: asked as a yes or no with what can be shown of it.
        other => {
            let said = serde_json::to_value(other)
                .ok()
                .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_owned))
                .unwrap_or_else(|| "the robot asks to go on".to_owned());
            let mut status = Map::new();
            status.insert("code", Value::str("needs_confirmation"));
            status.insert("action", Value::str(said));
            return (status, Vec::new());
        }
    };
    let properties: Vec<(String, serde_json::Value)> = schema
        .get("properties")
        .and_then(serde_json::Value::as_object)
        .map(|p| {
            p.iter()
                .take(MOST_QUESTIONS)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default();
    let kind_of = |p: &serde_json::Value| {
        p.get("type")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("string")
            .to_owned()
    };
    let fields: Vec<(String, String)> = properties
        .iter()
        .map(|(name, p)| (name.clone(), kind_of(p)))
        .collect();
    let mut status = Map::new();
    if let [(_, only)] = properties.as_slice()
        && kind_of(only) == "boolean"
    {
        status.insert("code", Value::str("needs_confirmation"));
        status.insert("action", Value::str(message.trim()));
        return (status, fields);
    }
    let mut questions = Vec::new();
    for (name, p) in &properties {
        let text = |k: &str| p.get(k).and_then(serde_json::Value::as_str);
        let asked = match (text("title"), text("description")) {
            (_, Some(d)) if properties.len() > 1 => d.to_owned(),
            (Some(t), _) if properties.len() > 1 => t.to_owned(),
            (_, Some(d)) => format!("{} ({d})", message.trim()),
            _ => message.trim().to_owned(),
        };
        let mut q = Map::new();
        q.insert("field", Value::str(name));
        q.insert("question", Value::str(asked));
        let options: Vec<Value> = match p.get("enum").and_then(serde_json::Value::as_array) {
            Some(values) => values
                .iter()
                .filter_map(|v| v.as_str().map(Value::str))
                .collect(),
            None if kind_of(p) == "boolean" => vec![Value::Bool(true), Value::Bool(false)],
            None => p
                .get("oneOf")
                .and_then(serde_json::Value::as_array)
                .map(|alts| {
                    alts.iter()
                        .filter_map(|a| a.get("const").and_then(|c| c.as_str()).map(Value::str))
                        .collect()
                })
                .unwrap_or_default(),
        };
        if !options.is_empty() {
            q.insert("options", Value::Seq(options));
        }
        questions.push(Value::Map(q));
    }
    if questions.is_empty() {
        // A question with nothing to fill in: yes, go on, or no.
        status.insert("code", Value::str("needs_confirmation"));
        status.insert("action", Value::str(message.trim()));
        return (status, fields);
    }
    status.insert("code", Value::str("needs_input"));
    status.insert("message", Value::str(message.trim()));
    status.insert("questions", Value::Seq(questions));
    (status, fields)
}

/// The requestor's answers as the robot's schema types them (a number asked for goes back as
/// a number); an answer that does not read as its type goes back as the text it is.
fn typed_answers(answers: &Map, fields: &[(String, String)]) -> serde_json::Value {
    let kinds: BTreeMap<&str, &str> = fields
        .iter()
        .map(|(n, k)| (n.as_str(), k.as_str()))
        .collect();
    let mut out = serde_json::Map::new();
    for (name, value) in answers.iter() {
        let text = value.scalar_text().unwrap_or_default();
        let typed = match (kinds.get(name.as_str()).copied(), value) {
            (_, Value::Bool(b)) => serde_json::Value::Bool(*b),
            (Some("boolean"), _) => match text.trim().to_ascii_lowercase().as_str() {
                "true" | "yes" | "y" | "1" => serde_json::Value::Bool(true),
                "false" | "no" | "n" | "0" => serde_json::Value::Bool(false),
                _ => serde_json::Value::String(text),
            },
            (Some("integer"), _) => text
                .trim()
                .parse::<i64>()
                .map_or(serde_json::Value::String(text.clone()), Into::into),
            (Some("number"), _) => text
                .trim()
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map_or(
                    serde_json::Value::String(text.clone()),
                    serde_json::Value::Number,
                ),
            _ => serde_json::Value::String(text),
        };
        out.insert(name.clone(), typed);
    }
    serde_json::Value::Object(out)
}

/// Sends `payloads` (YAML list items) into `thread` as the robot executor.
pub(crate) fn as_robot(
    ex: &Exchange,
    thread: &ThreadRef,
    executor: &str,
    payloads: Vec<(&str, Map)>,
) -> Result<(), Error> {
    let mut items = Vec::new();
    for (kind, mut body) in payloads {
        body.insert("re", Value::str(thread.as_str()));
        let mut item = Map::new();
        item.insert(kind, Value::Map(body));
        items.push(Value::Map(item));
    }
    let mut top = Map::new();
    top.insert("MESS", Value::Seq(items));
    let message = Message::from_value(Value::Map(top))?;
    let sender = Sender {
        id: executor.to_owned(),
        channel: CHANNEL.to_owned(),
        role: Some(crate::exchange::auth::Role::Executor),
        callback: None,
    };
    ex.intake().submit(message, &sender)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(message: &str, schema: serde_json::Value) -> ElicitRequestParams {
        serde_json::from_value(serde_json::json!({
            "mode": "form",
            "message": message,
            "requestedSchema": schema,
        }))
        .unwrap()
    }

    #[test]
    fn a_form_with_fields_asks_questions_and_one_yes_or_no_asks_to_confirm() {
        let (status, fields) = question_of(&form(
            "Which room, and how many passes?",
            serde_json::json!({"type": "object", "properties": {
                "room": {"type": "string", "enum": ["kitchen", "hall"], "description": "the room"},
                "passes": {"type": "integer", "description": "how many passes"}
            }}),
        ));
        let text = crate::protocol::emit::to_yaml(&Value::Map(status));
        assert!(text.contains("code: needs_input"), "{text}");
        assert!(
            text.contains("field: room") && text.contains("- kitchen"),
            "{text}"
        );
        assert!(text.contains("question: how many passes"), "{text}");
        let mut answers = Map::new();
        answers.insert("room", Value::str("hall"));
        answers.insert("passes", Value::str("3"));
        assert_eq!(
            typed_answers(&answers, &fields),
            serde_json::json!({"room": "hall", "passes": 3})
        );
        let (status, _) = question_of(&form(
            "Empty the bin into the recycling?",
            serde_json::json!({"type": "object", "properties": {"ok": {"type": "boolean"}}}),
        ));
        let text = crate::protocol::emit::to_yaml(&Value::Map(status));
        assert!(
            text.contains("code: needs_confirmation")
                && text.contains("action: Empty the bin into the recycling?"),
            "{text}"
        );
    }
}
