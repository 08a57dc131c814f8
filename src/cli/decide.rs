//! `mess approve` and `mess deny`: an approver decides on a request that asks for approval,
//! with a response whose content is the protocol's confirmation entry.

use crate::cli::{CliError, Context, message_of, output};

/// Arguments of `mess approve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ApproveArgs {
    /// The request's ref
    re: String,
    /// Why (recorded with the decision)
    #[arg(long)]
    reason: Option<String>,
}

/// Arguments of `mess deny`.
#[derive(Debug, clap::Args)]
pub(crate) struct DenyArgs {
    /// The request's ref
    re: String,
    /// Why (recorded with the decision; required, so the requestor learns what to change)
    #[arg(long)]
    reason: String,
}

pub(crate) fn approve(cx: &Context, args: ApproveArgs) -> Result<(), CliError> {
    decide(cx, &args.re, true, args.reason)
}

pub(crate) fn deny(cx: &Context, args: DenyArgs) -> Result<(), CliError> {
    if args.reason.trim().is_empty() {
        return Err(CliError::usage(
            "--reason: say why you deny it",
            "see `mess deny --help`",
        ));
    }
    decide(cx, &args.re, false, Some(args.reason))
}

fn decide(cx: &Context, re: &str, approve: bool, reason: Option<String>) -> Result<(), CliError> {
    let answer = cx.submit(message_of(
        if approve { "approve" } else { "deny" },
        "response",
        crate::exchange::hands::decision_body(re, approve, reason),
    )?)?;
    output::answer_lines(&answer);
    Ok(())
}

/// Arguments of `mess approval`.
#[derive(Debug, clap::Args)]
pub(crate) struct ApprovalArgs {
    /// The request's ref
    re: String,
    /// The action's intent (must be the approved request's)
    #[arg(long)]
    intent: Option<String>,
    /// The action's parameters, as JSON or YAML (their digest must be the approved one)
    #[arg(long, value_name = "JSON")]
    parameters: Option<String>,
    /// What the action spends or counts (at most the approved amount)
    #[arg(long)]
    amount: Option<f64>,
    /// Use the approval once for this action when it covers it (as its requestor)
    #[arg(long = "use")]
    use_it: bool,
}

pub(crate) fn approval(cx: &Context, args: ApprovalArgs) -> Result<(), CliError> {
    let parameters = match &args.parameters {
        None => None,
        Some(text) => Some(
            crate::protocol::yaml::parse_document(text, &crate::protocol::yaml::Limits::DEFAULT)
                .map_err(|e| {
                    CliError::usage(
                        format!("--parameters: {e}"),
                        "write JSON, e.g. '{\"invoice\": 42}'",
                    )
                })?,
        ),
    };
    let action = crate::exchange::hands::Action {
        intent: args.intent,
        parameters,
        amount: args.amount,
    };
    let who = cx.sender()?.id;
    let view = cx
        .exchange
        .approvals()
        .check(&args.re, &who, &action, args.use_it)?;
    let value = view.to_value();
    output::yaml(&value);
    if view.covers == Some(false) {
        return Err(CliError::new(format!(
            "{} does not cover this action: {}",
            view.thread,
            view.why.unwrap_or_default()
        )));
    }
    Ok(())
}
