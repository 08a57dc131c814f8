//! `mess mcp`: the MCP server over stdio for agent hosts (`command: mess, args: [mcp]`). Stdout
//! is the protocol channel, so logs go to stderr and nothing else is printed.

use std::sync::Arc;

use rmcp::ServiceExt;

use crate::cli::{CliError, Context, output};
use crate::exchange::Sender;
use crate::exchange::auth::{Principal, Role};
use crate::mcp::MessMcp;

/// Arguments of `mess mcp` (the identity comes from --as, MESS_AGENT_ID or agent_id).
#[derive(Debug, clap::Args)]
pub(crate) struct McpArgs {
    /// Act as the exchange's operator: change routing rules, register any executor and see
    /// the whole home through SQL (without it, the session is the agent it is started as)
    #[arg(long)]
    operator: bool,
}

pub(crate) fn run(cx: &Context, args: McpArgs) -> Result<(), CliError> {
    let who = cx.identity()?;
    output::start_logging("warn");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::new(format!("cannot start the MCP runtime: {e}")))?;
    // An agent host hands the session to a model: it acts as the agent it is started as,
    // within that role, unless the operator says otherwise on the command line.
    let sender = if args.operator {
        Sender::new(who, "mcp")
    } else {
        Sender::principal(
            &Principal {
                id: who,
                role: Role::Agent,
            },
            "mcp",
        )
    };
    let mut server = MessMcp::new(Arc::new(cx.exchange.clone()), sender);
    if let Some(every) = output::env_millis("MESS_MCP_HEARTBEAT_MS") {
        server = server.with_heartbeat(every);
    }
    // Executors answer through other processes; the file system tells this one.
    let _watch = match cx.exchange.watch_home() {
        Ok(w) => Some(w),
        Err(e) => {
            tracing::warn!(error = %e, "cannot watch the home; mess_wait sees only this session's changes");
            None
        }
    };
    runtime.block_on(async move {
        let running = server
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| CliError::new(format!("MCP session failed to start: {e}")))?;
        running
            .waiting()
            .await
            .map_err(|e| CliError::new(format!("MCP session ended with an error: {e}")))?;
        Ok(())
    })
}
