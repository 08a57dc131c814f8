//! `mess webhook-secret`: prints the key that signs webhooks when `dispatch.webhook.secret` is
//! unset (generated into `.mess/webhook-secret` on first use), for the receivers to check
//! signatures with.

use crate::cli::{CliError, Context, output};

/// Arguments of `mess webhook-secret`.
#[derive(Debug, clap::Args)]
pub(crate) struct WebhookSecretArgs {}

pub(crate) fn run(cx: &Context, _args: WebhookSecretArgs) -> Result<(), CliError> {
    match cx.exchange.outbox().generated_webhook_secret()? {
        Some(key) => {
            output::line(&key);
            Ok(())
        }
        // The configured key is the operator's to hand out; it is not echoed here.
        None => Err(CliError::with_hint(
            "webhooks are signed with dispatch.webhook.secret from config.yaml, not a generated key",
            "give receivers that key, or remove it from config.yaml to sign with the generated one",
        )),
    }
}
