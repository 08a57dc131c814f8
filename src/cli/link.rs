//! `mess link`: prints a presigned link to the human client for one executor on one thread.

use crate::cli::{CliError, Context, output, when};
use crate::links::Action;

/// Arguments of `mess link`.
#[derive(Debug, clap::Args)]
pub(crate) struct LinkArgs {
    /// The thread (a ref, a client id of the acting principal, or `last`)
    re: String,
    /// The executor the link acts as
    #[arg(long, value_name = "ID")]
    executor: String,
    /// How long the link works: a duration (24h, 30m, 7d, P1D) or the time it ends (`friday 18:00`)
    #[arg(long, default_value = "24h", value_name = "DURATION")]
    ttl: String,
    /// What the link allows, comma-separated (default: all of read, claim, update, respond, decline)
    #[arg(long, value_delimiter = ',', value_name = "ACTIONS")]
    actions: Vec<String>,
    /// The exchange's address as the executor's browser reaches it [default: MESS_PUBLIC_URL,
    /// else dispatch.public_url of config.yaml, else where this home's mess serve listens, else
    /// http.port on 127.0.0.1, as the links in notifications use]
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
}

pub(crate) fn run(cx: &Context, args: LinkArgs) -> Result<(), CliError> {
    let ttl = when::span(
        "--ttl",
        &args.ttl,
        cx.exchange.now().with_timezone(&chrono::Utc),
        when::Toward::Future,
    )?;
    let actions = args
        .actions
        .iter()
        .map(|a| {
            Action::parse(a.trim()).ok_or_else(|| {
                CliError::usage(
                    format!("--actions: unknown action {a:?}"),
                    "actions are read, claim, update, respond, decline",
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let sender = cx.identity().unwrap_or_else(|_| args.executor.clone());
    let thread = cx.exchange.resolve(&args.re, &sender)?;
    cx.exchange
        .access()
        .check_link_holder(&thread, &args.executor)?;
    let token = cx.exchange.auth().mint_link(
        &thread,
        &args.executor,
        &actions,
        ttl.length.num_seconds(),
    )?;
    // The human client's page; the same token works on /thread/{ref}?token= for programs.
    let base = args
        .base_url
        .as_deref()
        .unwrap_or(&cx.config.exchange.dispatch.public_url);
    output::line(&crate::protocol::link::page_url(
        base,
        thread.as_str(),
        &token,
    ));
    Ok(())
}
