//! Robots that speak MCP: an executor entry with `mcp: {url, api_key?, tool?}` (an MCP server
//! over streamable HTTP) or `mcp: {command: [program, args...], tool?}` (one over stdio) gets the
//! requests routed to it as a tool call (`execute_task` unless `tool` says otherwise) with the
//! intent, the ref, the context and a presigned link. The exchange is the MCP client: once the
//! robot answers the handshake it claims the thread for the executor, calls the tool, and turns
//! the result into the thread's status and response (a robot that answers with an MCP task is
//! followed with `tasks/get` until the task is over). What the robot asks on the way (an
//! elicitation, or `input_required`) is put to the requestor and answered back by
//! `robot_input`. A robot that cannot be reached is retried like any channel, and the thread
//! stays open for escalation meanwhile.

use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, GetTaskParams, TaskPayload,
    UpdateTaskParams,
};

use crate::exchange::directory::Origin;
use crate::exchange::outcome::Outcome;
use crate::exchange::robot_input::{CHANNEL, Relay, as_robot};
use crate::exchange::{Error, Exchange};
use crate::links::Action;
use crate::notify::{NotifyError, Sent};
use crate::protocol::ids::ThreadRef;
use crate::protocol::status::Status;
use crate::protocol::value::{Map, Value};
use crate::store::outbox::Delivery;

/// The tool called when the entry names none.
const DEFAULT_TOOL: &str = "execute_task";

/// How long the robot may take to answer the handshake.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long one tool call may take: the robot does the work inside it.
const CALL_TIMEOUT: Duration = Duration::from_secs(600);

/// How a robot is reached.
#[derive(Debug, Clone)]
enum Reach {
    Http { url: String, key: Option<String> },
    Stdio { program: String, args: Vec<String> },
}

/// An MCP robot an executor entry names.
#[derive(Debug, Clone)]
struct Robot {
    reach: Reach,
    tool: String,
}

/// The robot of an executor entry's `mcp:`.
fn robot_of(executor: &str, entry: &Value, expand: fn(&str) -> String) -> Result<Robot, String> {
    let map = entry.as_map().ok_or_else(|| {
        format!(
            "executor {executor}: mcp must be a mapping {{url, api_key, tool}} or {{command, tool}}"
        )
    })?;
    let text = |k: &str| map.get(k).and_then(Value::scalar_text).map(|s| expand(&s));
    let tool = text("tool").unwrap_or_else(|| DEFAULT_TOOL.to_owned());
    if let Some(url) = text("url") {
        let parsed = reqwest::Url::parse(url.trim())
            .map_err(|e| format!("executor {executor}: mcp.url {url:?}: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(format!(
                "executor {executor}: mcp.url must be http or https"
            ));
        }
        let key = text("api_key").filter(|k| !k.trim().is_empty());
        return Ok(Robot {
            reach: Reach::Http { url, key },
            tool,
        });
    }
    let command: Vec<String> = match map.get("command") {
        Some(Value::Seq(items)) => items.iter().filter_map(Value::scalar_text).collect(),
        Some(v) => v
            .scalar_text()
            .map(|s| s.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default(),
        None => Vec::new(),
    };
    let Some((program, args)) = command.split_first() else {
        return Err(format!("executor {executor}: mcp needs url or command"));
    };
    Ok(Robot {
        reach: Reach::Stdio {
            program: program.clone(),
            args: args.to_vec(),
        },
        tool,
    })
}

/// Checks an `mcp:` entry of a registration: only the operator may name a robot (a command
/// runs on this machine, a URL is reached from it).
pub(crate) fn check_entry(
    executor: &str,
    entry: &Value,
    by_key: bool,
    expand: fn(&str) -> String,
) -> Result<(), String> {
    if by_key {
        return Err(
            "an MCP robot is set in config.yaml or by the operator, not with a key".to_owned(),
        );
    }
    robot_of(executor, entry, expand).map(|_| ())
}

/// The robot executor `id` stands for, when its entry has `mcp:` and the operator made it.
fn robot(ex: &Exchange, id: &str) -> Option<Result<Robot, String>> {
    let directory = ex.directory();
    let entry = directory.executor(id)?.extra.get("mcp")?.clone();
    if !matches!(
        directory.origin(id),
        Some(Origin::ConfigFile | Origin::Registration { by_key: false, .. })
    ) {
        return Some(Err(format!(
            "executor {id}: an MCP robot is set in config.yaml or by the operator, not with a key"
        )));
    }
    Some(robot_of(id, &entry, ex.settings().dispatch.expand))
}

/// The tool call's arguments for `thread`, or why there is nothing to do.
fn robot_arguments(
    ex: &Exchange,
    thread: &ThreadRef,
    executor: &str,
) -> Result<Result<serde_json::Map<String, serde_json::Value>, String>, Error> {
    let file = ex.store().read(thread)?;
    let env = &file.envelope;
    if env.status != Status::Pending {
        return Ok(Err(format!("the thread is {}", env.status)));
    }
    let context = file
        .messages()?
        .iter()
        .flat_map(|m| m.message.payloads.iter())
        .find_map(|p| match p {
            crate::protocol::message::Payload::Request(r) => Some(
                r.context
                    .iter()
                    .map(|c| serde_json::to_value(c.to_value()).unwrap_or_default())
                    .collect::<Vec<_>>(),
            ),
            _ => None,
        })
        .unwrap_or_default();
    let d = &ex.settings().dispatch;
    let link = ex
        .auth()
        .mint_link_via(
            thread,
            executor,
            &Action::ALL,
            d.link_ttl_seconds,
            Some(CHANNEL),
        )
        .ok()
        .map(|token| crate::protocol::link::page_url(&d.public_url, thread.as_str(), &token));
    let mut args = serde_json::Map::new();
    args.insert("intent".into(), env.intent.clone().into());
    args.insert("ref".into(), thread.as_str().into());
    args.insert("context".into(), context.into());
    args.insert("requires".into(), env.requires.clone().into());
    if let Some(link) = link {
        args.insert("link".into(), link.into());
    }
    Ok(Ok(args))
}

/// One attempt to hand the thread of delivery `d` to its MCP robot.
pub(crate) async fn call(ex: &Exchange, d: &Delivery) -> Outcome {
    let robot = match robot(ex, &d.executor) {
        Some(Ok(r)) => r,
        Some(Err(e)) => return Outcome::undelivered(NotifyError::Fail { message: e }),
        None => return Outcome::moot(format!("{} is not an MCP robot", d.executor)),
    };
    let Ok(thread) = ThreadRef::parse(&d.thread) else {
        return Outcome::moot("not a thread".to_owned());
    };
    let (worker, r, executor) = (ex.clone(), thread.clone(), d.executor.clone());
    let args =
        match tokio::task::spawn_blocking(move || robot_arguments(&worker, &r, &executor)).await {
            Ok(Ok(Ok(a))) => a,
            Ok(Ok(Err(moot))) => return Outcome::moot(moot),
            Ok(Err(e)) => {
                return Outcome::undelivered(NotifyError::Retry {
                    message: ex.scrub_home(&e.to_string()),
                });
            }
            Err(e) => {
                return Outcome::undelivered(NotifyError::Retry {
                    message: e.to_string(),
                });
            }
        };
    // The session's client relays what the robot asks to the requestor (`robot_input`).
    let relay = Relay {
        ex: ex.clone(),
        thread: thread.clone(),
        executor: d.executor.clone(),
        until: tokio::time::Instant::now() + CALL_TIMEOUT,
    };
    let client = match tokio::time::timeout(CONNECT_TIMEOUT, connect(&robot, relay.clone())).await {
        Ok(Ok(c)) => c,
        Ok(Err(why)) => return Outcome::undelivered(NotifyError::Retry { message: why }),
        Err(_) => {
            return Outcome::undelivered(NotifyError::Retry {
                message: "mcp: the robot did not answer the handshake in time".to_owned(),
            });
        }
    };
    // Reached: the call is the executor's claim.
    let claim = {
        let (worker, r, executor) = (ex.clone(), thread.clone(), d.executor.clone());
        tokio::task::spawn_blocking(move || {
            let mut body = Map::new();
            body.insert("code", Value::str("claimed"));
            as_robot(&worker, &r, &executor, vec![("status", body)])
        })
        .await
    };
    match claim {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            let _ = client.cancel().await;
            return Outcome::moot(format!("not claimed: {}", ex.public_message(&e)));
        }
        Err(e) => {
            return Outcome::undelivered(NotifyError::Retry {
                message: e.to_string(),
            });
        }
    }
    let called =
        tokio::time::timeout(CALL_TIMEOUT, run_tool(&client, &relay, &robot.tool, args)).await;
    let _ = client.cancel().await;
    let payloads = match called {
        Ok(Ok(result)) => answer_of(&result),
        Ok(Err(why)) => failed(&format!("the robot's {} call failed: {why}", robot.tool)),
        Err(_) => failed(&format!(
            "the robot's {} call took longer than {} s",
            robot.tool,
            CALL_TIMEOUT.as_secs()
        )),
    };
    let (worker, r, executor) = (ex.clone(), thread.clone(), d.executor.clone());
    let recorded = tokio::task::spawn_blocking(move || {
        as_robot(&worker, &r, &executor, payloads).or_else(|e| {
            // After the requestor refused a confirmation only `cancelled` (or `held`) may
            // follow: the robot's end is recorded so, whatever its tool said.
            let (env, _) = worker.store().envelope(&r)?;
            if env.confirmation != Some(crate::protocol::envelope::ConfirmState::Rejected) {
                return Err(e);
            }
            let mut body = Map::new();
            body.insert("code", Value::str("cancelled"));
            body.insert("reason", Value::str("the requestor did not confirm"));
            as_robot(&worker, &r, &executor, vec![("status", body)])
        })
    })
    .await;
    match recorded {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::warn!(thread = %thread, error = %e, "the robot's answer could not be recorded");
        }
        Err(e) => {
            tracing::warn!(thread = %thread, error = %e, "recording the robot's answer failed")
        }
    }
    Outcome::of_sending(Ok(Sent::default()))
}

/// A client session with a robot, whose questions the session's [`Relay`] puts to the
/// requestor.
type Session = rmcp::service::RunningService<rmcp::RoleClient, Relay>;

/// Calls `tool` with `args` and returns its result: at once, or, when the robot answers with an
/// MCP task, once the task is over (polled with `tasks/get`). When the robot needs input (a
/// tool result or a task `input_required`), `relay` puts its questions to the requestor and the
/// answers go back (the call again with `inputResponses`, or `tasks/update`).
async fn run_tool(
    client: &Session,
    relay: &Relay,
    tool: &str,
    args: serde_json::Map<String, serde_json::Value>,
) -> Result<CallToolResult, String> {
    let mut params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args);
    let mut answered = std::collections::HashSet::new();
    let task = loop {
        match client
            .call_tool_once(params.clone())
            .await
            .map_err(|e| e.to_string())?
        {
            CallToolResponse::Complete(result) => return Ok(result),
            CallToolResponse::Task(created) => break created.task,
            CallToolResponse::InputRequired(asked) => {
                let responses = relay
                    .answer_all(&asked.input_requests.unwrap_or_default(), &mut answered)
                    .await?;
                params = params.with_input_responses(responses);
                if let Some(state) = asked.request_state {
                    params = params.with_request_state(state);
                }
            }
            _ => return Err("the robot answered in a way mess does not know".to_owned()),
        }
    };
    let every = Duration::from_millis(task.poll_interval_ms.unwrap_or(1000).clamp(200, 10_000));
    loop {
        tokio::time::sleep(every).await;
        let got = client
            .get_task(GetTaskParams::new(task.task_id.clone()))
            .await
            .map_err(|e| e.to_string())?;
        match got.task.payload {
            TaskPayload::Completed { result } => {
                return serde_json::from_value(serde_json::Value::Object(result))
                    .map_err(|e| format!("its task's result: {e}"));
            }
            TaskPayload::Failed { error } => {
                return Err(error
                    .get("message")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("its task failed")
                    .to_owned());
            }
            TaskPayload::Cancelled => return Err("the robot cancelled its task".to_owned()),
            TaskPayload::InputRequired { input_requests } => {
                let responses = relay.answer_all(&input_requests, &mut answered).await?;
                if !responses.is_empty() {
                    client
                        .update_task(UpdateTaskParams::new(task.task_id.clone(), responses))
                        .await
                        .map_err(|e| e.to_string())?;
                }
            }
            _ => {}
        }
    }
}

/// An MCP client session with `robot`, its questions relayed by `relay`.
async fn connect(robot: &Robot, relay: Relay) -> Result<Session, String> {
    match &robot.reach {
        Reach::Http { url, key } => {
            let mut config =
                rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                    url.clone(),
                );
            if let Some(key) = key {
                config = config.auth_header(key.clone());
            }
            relay
                .serve(rmcp::transport::StreamableHttpClientTransport::from_config(
                    config,
                ))
                .await
                .map_err(|e| format!("mcp: the robot at {url} cannot be reached: {e}"))
        }
        Reach::Stdio { program, args } => {
            let mut cmd = tokio::process::Command::new(program);
            cmd.args(args);
            let transport = rmcp::transport::TokioChildProcess::new(cmd)
                .map_err(|e| format!("mcp: cannot start {program}: {e}"))?;
            relay
                .serve(transport)
                .await
                .map_err(|e| format!("mcp: {program} did not start an MCP session: {e}"))
        }
    }
}

/// The status and response a tool result makes: `completed` with its text and structured
/// content, or `failed` with its text when the tool says it failed.
fn answer_of(result: &CallToolResult) -> Vec<(&'static str, Map)> {
    let text: Vec<String> = result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect();
    if result.is_error == Some(true) {
        return failed(&if text.is_empty() {
            "the robot reported a failure".to_owned()
        } else {
            text.join("\n")
        });
    }
    let mut content: Vec<Value> = text.into_iter().map(Value::String).collect();
    if let Some(structured) = &result.structured_content {
        let limits = crate::protocol::yaml::Limits::json_message(1024 * 1024);
        if let Ok(v) = crate::protocol::yaml::value_from(structured.clone(), &limits) {
            let mut entry = Map::new();
            // The protocol's own entry for typed data (v1.0 §2.2), so every reader of
            // responses (views, the page, agents) finds it where the spec puts it.
            entry.insert("structured", v);
            content.push(Value::Map(entry));
        }
    }
    if content.is_empty() {
        content.push(Value::str("done"));
    }
    let mut status = Map::new();
    status.insert("code", Value::str("completed"));
    let mut response = Map::new();
    response.insert("content", Value::Seq(content));
    vec![("status", status), ("response", response)]
}

fn failed(reason: &str) -> Vec<(&'static str, Map)> {
    let mut status = Map::new();
    status.insert("code", Value::str("failed"));
    status.insert("reason", Value::str(reason));
    vec![("status", status)]
}
