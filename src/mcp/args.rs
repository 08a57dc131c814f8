//! The arguments of the MCP tools. Their doc comments are the schema descriptions the model
//! reads, so they say what each field means, its default and its limits. Optional text fields
//! default to empty rather than being nullable, which every client can express.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Deserialize;

/// `mess`: a raw MESS message.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct MessArgs {
    /// A complete MESS message in YAML, e.g. "MESS:\n  - request:\n      intent: water the plants".
    /// Use it for what the other tools cannot say: several requests at once, dependencies,
    /// attachments, replies to suggestions.
    pub message: String,
    /// The exchange to act on: a name from `exchanges:` in config.yaml (local or remote).
    /// Empty or "primary": this exchange.
    #[serde(default)]
    pub exchange: String,
}

/// `mess_observe`: ask someone to look at something.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ObserveArgs {
    /// What to find out, in plain language ("what's in the fridge?").
    pub intent: String,
    /// Extra context lines (where, what to look for).
    #[serde(default)]
    pub context: Vec<String>,
    /// The form of answer wanted: text, image, structured, confirmation, ... (empty: any).
    #[serde(default)]
    pub response_hint: Vec<String>,
    /// Latest useful time (RFC 3339, e.g. 2026-11-26T18:00:00Z); after it the request expires.
    /// Empty: no deadline.
    #[serde(default)]
    pub needed_by: String,
    /// background, normal (default), elevated or urgent.
    #[serde(default)]
    pub priority: String,
    /// Seconds to wait for the answer (default 50, at most 120), with progress notifications
    /// meanwhile: the call returns as soon as the request completes, fails or needs you. 0:
    /// return the ref at once. Above 50 only for clients that keep a call open on progress.
    #[serde(default = "default_observe_wait")]
    pub wait_s: u32,
    /// The exchange to act on: a name from `exchanges:` in config.yaml (local or remote).
    /// Empty or "primary": this exchange.
    #[serde(default)]
    pub exchange: String,
    /// A URL that hears of every change of the request: a signed POST of the thread (only
    /// where the exchange's dispatch.webhook.allow permits).
    #[serde(default)]
    pub callback: String,
    /// How many people should look, each answering on their own (1-50; 0 or 1: one).
    #[serde(default)]
    pub assignments: u32,
    /// With assignments: done early when `need` answers give one value of the structured
    /// answer's `field`, e.g. {"field": "open", "need": 2}.
    #[serde(default)]
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    pub agree: Option<serde_json::Map<String, serde_json::Value>>,
}

fn default_observe_wait() -> u32 {
    crate::mcp::wait::MOST_WAIT_S
}

/// `mess_do`: ask someone or something to act.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct DoArgs {
    /// What must be done, in plain language ("vacuum the kitchen").
    pub intent: String,
    /// Extra context lines (where, how, constraints).
    #[serde(default)]
    pub context: Vec<String>,
    /// Capability ids an executor must hold (e.g. vacuum-floor); `mess_capabilities` lists them.
    #[serde(default)]
    pub requires: Vec<String>,
    /// True: the executor must ask for confirmation before acting (answer with `mess_reply`).
    #[serde(default)]
    pub confirm_before: bool,
    /// Latest useful time (RFC 3339); after it the request expires. Empty: no deadline.
    #[serde(default)]
    pub needed_by: String,
    /// background, normal (default), elevated or urgent.
    #[serde(default)]
    pub priority: String,
    /// Seconds to wait for the request to complete, fail or need you (needs_input,
    /// needs_confirmation), with progress notifications meanwhile; at most 120. 0 (default):
    /// return the ref at once.
    #[serde(default)]
    pub wait_s: u32,
    /// The exchange to act on: a name from `exchanges:` in config.yaml (local or remote).
    /// Empty or "primary": this exchange.
    #[serde(default)]
    pub exchange: String,
    /// A URL that hears of every change of the request: a signed POST of the thread (only
    /// where the exchange's dispatch.webhook.allow permits).
    #[serde(default)]
    pub callback: String,
    /// Several answers, approvals and escalation ladders.
    #[serde(flatten)]
    pub many: ManyArgs,
}

/// `mess_request`: the fields of `mess_observe` and `mess_do` together.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct RequestArgs {
    /// What is needed, in plain language.
    pub intent: String,
    /// Extra context lines.
    #[serde(default)]
    pub context: Vec<String>,
    /// Capability ids an executor must hold.
    #[serde(default)]
    pub requires: Vec<String>,
    /// The form of answer wanted (empty: any).
    #[serde(default)]
    pub response_hint: Vec<String>,
    /// True: the executor must ask for confirmation before acting.
    #[serde(default)]
    pub confirm_before: bool,
    /// Latest useful time (RFC 3339). Empty: no deadline.
    #[serde(default)]
    pub needed_by: String,
    /// background, normal (default), elevated or urgent.
    #[serde(default)]
    pub priority: String,
    /// The exchange to act on: a name from `exchanges:` in config.yaml (local or remote).
    /// Empty or "primary": this exchange.
    #[serde(default)]
    pub exchange: String,
    /// A URL that hears of every change of the request: a signed POST of the thread (only
    /// where the exchange's dispatch.webhook.allow permits).
    #[serde(default)]
    pub callback: String,
    /// Several answers, approvals and escalation ladders.
    #[serde(flatten)]
    pub many: ManyArgs,
}

/// A thread reference: `re`, or its alias `ref`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct StatusArgs {
    /// The request: its ref (2026-11-26-001), your client id, or "last". Empty: all your open
    /// requests. "all": every request of yours, finished ones too.
    #[serde(default)]
    pub re: String,
    /// Same as `re`.
    #[serde(default, rename = "ref")]
    pub r#ref: String,
    /// The exchange to act on: a name from `exchanges:` in config.yaml (local or remote).
    /// Empty or "primary": this exchange.
    #[serde(default)]
    pub exchange: String,
}

/// `mess_reply`: answer an executor's questions or confirmation request.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ReplyArgs {
    /// The request: ref, client id or "last" (or use `ref`).
    #[serde(default)]
    pub re: String,
    /// Same as `re`.
    #[serde(default, rename = "ref")]
    pub r#ref: String,
    /// Answers to `needs_input` questions, by question id (e.g. {"location": "both"}).
    #[serde(default)]
    pub answers: serde_json::Map<String, serde_json::Value>,
    /// The answer to `needs_confirmation`: true to go ahead, false to refuse (absent: not a
    /// confirmation). The words "yes" and "no" are read the same way.
    #[serde(default)]
    pub confirm: YesNo,
    /// Accept a suggestion: true or false (absent: not about a suggestion); "yes" and "no" too.
    #[serde(default)]
    pub accept: YesNo,
    /// Why, in a few words (optional).
    #[serde(default)]
    pub reason: String,
    /// The exchange to act on: a name from `exchanges:` in config.yaml (local or remote).
    /// Empty or "primary": this exchange.
    #[serde(default)]
    pub exchange: String,
}

/// `mess_answer`: answer one question (older clients).
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct AnswerArgs {
    /// The request: ref, client id or "last".
    #[serde(rename = "ref")]
    pub r#ref: String,
    /// The answer text; with a single open question it answers that one.
    pub answer: String,
    /// The exchange to act on: a name from `exchanges:` in config.yaml (local or remote).
    /// Empty or "primary": this exchange.
    #[serde(default)]
    pub exchange: String,
}

/// A protocol boolean (`confirm: true`) as a tool argument: JSON true or false, or, as older
/// clients send it, the words yes, no, true, false (empty: absent). Kept as sent, so a value
/// that is neither becomes a tool error naming the field rather than a refused call.
#[derive(Debug, Default, Deserialize)]
#[serde(transparent)]
pub(crate) struct YesNo(pub serde_json::Value);

impl JsonSchema for YesNo {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "YesNo".into()
    }

    fn json_schema(_generator: &mut SchemaGenerator) -> Schema {
        // Declared as the protocol's boolean: a schema of either type is one many clients
        // cannot express, and the words are only for clients written before.
        json_schema!({"type": "boolean"})
    }
}

/// `mess_cancel`: `re` is required, as in the reference design's schema (the server still
/// takes `ref` in its place).
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = re_required)]
pub(crate) struct CancelArgs {
    /// The request: ref, client id or "last".
    #[serde(default)]
    pub re: String,
    /// Same as `re`.
    #[serde(default, rename = "ref")]
    pub r#ref: String,
    /// Why it is no longer needed (optional).
    #[serde(default)]
    pub reason: String,
    /// The exchange to act on: a name from `exchanges:` in config.yaml (local or remote).
    /// Empty or "primary": this exchange.
    #[serde(default)]
    pub exchange: String,
}

/// `mess_review`: the requestor's review of finished work.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = re_required)]
pub(crate) struct ReviewArgs {
    /// The request: ref, client id or "last".
    #[serde(default)]
    pub re: String,
    /// Same as `re`.
    #[serde(default, rename = "ref")]
    pub r#ref: String,
    /// 1 to 5 (stars), "accept" or "reject".
    #[serde(default)]
    pub rating: Option<serde_json::Value>,
    /// What was wrong or right.
    #[serde(default)]
    pub feedback: String,
    /// Ask the same executor to do the work again (completed or partial work).
    #[serde(default)]
    pub request_redo: bool,
    /// The exchange to act on: a name from `exchanges:` in config.yaml (local or remote).
    /// Empty or "primary": this exchange.
    #[serde(default)]
    pub exchange: String,
}

/// `mess_query`: read-only SQL over the exchange.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct QueryArgs {
    /// One read-only SQL statement over the views threads, messages, thread_history,
    /// executors, capabilities, pending_by_capability, executor_availability, executor_stats.
    pub sql: String,
    /// Most rows to return (default 100, at most 1000); `truncated` says when there were more.
    #[serde(default = "default_limit")]
    pub limit: u32,
    /// markdown (default), json or csv: the form of the text result.
    #[serde(default = "default_format")]
    pub format: String,
}

/// Marks `re` required in a tool's input schema.
fn re_required(schema: &mut Schema) {
    schema.insert("required".to_owned(), serde_json::json!(["re"]));
}

fn default_limit() -> u32 {
    100
}

fn default_format() -> String {
    "markdown".to_owned()
}

/// `mess_capabilities`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct CapabilitiesArgs {
    /// Only capabilities with this tag (empty: all).
    #[serde(default)]
    pub tag: String,
}

/// `mess_fetch`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct FetchArgs {
    /// A resource: mess://pending, mess://history, mess://request/{ref}, mess://help, or
    /// thread://{ref}.
    pub uri: String,
}

/// `mess_wait`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct WaitArgs {
    /// The request to wait on: ref, client id or "last" (or use `ref`). Empty: any of yours.
    #[serde(default)]
    pub re: String,
    /// Same as `re`.
    #[serde(default, rename = "ref")]
    pub r#ref: String,
    /// Longest wait in seconds (default and most 50); call again to keep waiting.
    #[serde(default = "default_wait")]
    pub timeout_s: u32,
    /// The exchange to wait on: a name from `exchanges:`, or "primary" for this one. Empty
    /// and without `re`: every exchange (each change says which).
    #[serde(default)]
    pub exchange: String,
}

fn default_wait() -> u32 {
    crate::mcp::wait::MOST_WAIT_S
}

/// `re` or its alias `ref`, whichever was given.
pub(crate) fn either(re: &str, alias: &str) -> String {
    if re.trim().is_empty() {
        alias.trim().to_owned()
    } else {
        re.trim().to_owned()
    }
}

/// `mess_mail_send`: leave a message in an agent mailbox.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct MailSendArgs {
    /// The recipient mailbox: a session name, a tag shared by several agents, or __broadcast.
    pub to: String,
    /// The Markdown body.
    pub body: String,
    /// status (default), alert, task, question, response, report, handoff or announcement;
    /// another lower-case word (letters, digits, '-') is kept as it is.
    #[serde(default, rename = "type")]
    pub kind: String,
    /// urgent, normal (default) or low.
    #[serde(default)]
    pub priority: String,
    /// Tags for filtering (task ids, topics).
    #[serde(default)]
    pub tags: Vec<String>,
    /// Whether you expect a reply.
    #[serde(default)]
    pub needs_response: bool,
    /// The file name of the message this answers (empty: none).
    #[serde(default)]
    pub in_reply_to: String,
    /// A conversation id grouping related messages (empty: none).
    #[serde(default)]
    pub thread_id: String,
    /// When the message may be deleted: an RFC 3339 time or a duration from now (7d, 2h,
    /// PT30M). Nobody is served it afterwards. Empty: it stays until read and archived.
    #[serde(default)]
    pub expires: String,
}

/// `mess_mail_list`: the messages of a mailbox.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct MailListArgs {
    /// The mailbox (empty: your own).
    #[serde(default)]
    pub mailbox: String,
    /// unread (default), read or archive.
    #[serde(default)]
    pub folder: String,
}

/// `mess_mail_read` and `mess_mail_archive`: one message.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct MailFileArgs {
    /// The message's file name, as mess_mail_list shows it.
    pub file: String,
    /// The mailbox (empty: your own).
    #[serde(default)]
    pub mailbox: String,
    /// mess_mail_read only: also mark it read (in your own or a tag mailbox that claims it:
    /// it moves to read/ and of several readers exactly one succeeds; in __broadcast it is read
    /// for you alone).
    #[serde(default)]
    pub mark_read: bool,
}

/// `mess_decide`: an approver's decision.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = re_required)]
pub(crate) struct DecideArgs {
    /// The request asking for your approval: its ref.
    #[serde(default)]
    pub re: String,
    /// Same as `re`.
    #[serde(default, rename = "ref")]
    pub r#ref: String,
    /// True to approve, false to deny.
    pub approve: bool,
    /// Why (recorded with the decision; say it when you deny).
    #[serde(default)]
    pub reason: String,
}

/// `mess_approved`: what an approval covers.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = re_required)]
pub(crate) struct ApprovedArgs {
    /// The approval request's ref.
    #[serde(default)]
    pub re: String,
    /// Same as `re`.
    #[serde(default, rename = "ref")]
    pub r#ref: String,
    /// The action's intent (must be the approved request's). Empty: not checked.
    #[serde(default)]
    pub intent: String,
    /// The action's parameters; their digest must equal the approved ones'.
    #[serde(default)]
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    pub parameters: Option<serde_json::Value>,
    /// What the action spends or counts; at most the approved amount.
    #[serde(default)]
    #[schemars(with = "f64")]
    pub amount: Option<f64>,
    /// True: use the approval once for this action when it covers it (its uses are counted).
    #[serde(default, rename = "use")]
    pub use_it: bool,
}

/// The request fields of many hands, shared by `mess_do` and `mess_request`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
pub(crate) struct ManyArgs {
    /// How many answers, each from a different executor (1-50; 0 or 1: one, the usual way).
    #[serde(default)]
    pub assignments: u32,
    /// With assignments: done early when `need` answers give one value of the structured
    /// answer's `field`, e.g. {"field": "open", "need": 2}.
    #[serde(default)]
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    pub agree: Option<serde_json::Map<String, serde_json::Value>>,
    /// Ask named people to approve instead of someone to act: {"from": [executor or
    /// capability ids], "need": M, "deny_vetoes": bool, "expires": "2h" or a time, "scope":
    /// {"parameters": {...}, "amount": N, "uses": N, "valid_for": "1h"}}. Check it later with
    /// mess_approved.
    #[serde(default)]
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    pub approval: Option<serde_json::Map<String, serde_json::Value>>,
    /// With confirm_before: who confirms the executor's step instead of you, {"from":
    /// [executor or capability ids], "need": M, "deny_vetoes": bool}; they decide with
    /// mess_decide.
    #[serde(default)]
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    pub confirm_by: Option<serde_json::Map<String, serde_json::Value>>,
    /// An escalation ladder: [{"after": "10m", "to": [ids or capabilities]}, ..., {"after":
    /// "2h"}] offers the work further up while nobody takes it; a last rung without `to`
    /// ends the request `expired`.
    #[serde(default)]
    pub escalate: Vec<serde_json::Map<String, serde_json::Value>>,
}
