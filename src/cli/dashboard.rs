//! `mess dashboard`: prints a login link to the operator dashboard that `mess serve` shows at
//! `/` (10 minutes, one use; it sets a 12-hour session cookie), and with `--open` opens it in
//! the browser. Whoever can run this holds the home, which is what makes them the operator.

use crate::cli::{CliError, Context, output};

/// Arguments of `mess dashboard`.
#[derive(Debug, clap::Args)]
pub(crate) struct DashboardArgs {
    /// Open the link in the default browser too
    #[arg(long)]
    open: bool,
    /// The server's address as the browser reaches it (default: MESS_PUBLIC_URL, which wins
    /// over dispatch.public_url, else where `mess serve` listens)
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
}

pub(crate) fn run(cx: &Context, args: DashboardArgs) -> Result<(), CliError> {
    if cx.remote.is_some() {
        return Err(CliError::usage(
            "mess dashboard signs in to this home's server, not to another exchange",
            "run it on the machine that holds the exchange's home",
        ));
    }
    let token = cx.exchange.auth().mint_dashboard_login("operator")?;
    let base = args
        .base_url
        .as_deref()
        .unwrap_or(&cx.config.exchange.dispatch.public_url)
        .trim_end_matches('/');
    let url = format!("{base}/dashboard/login?token={token}");
    output::line(&url);
    output::err("the link works once, for 10 minutes; the session it opens lasts 12 hours\n");
    if args.open {
        open_in_browser(&url);
    }
    Ok(())
}

/// Hands `url` to the desktop's opener; where there is none, the printed link still works.
fn open_in_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let started = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Err(e) = started {
        output::warn(&format!(
            "cannot open a browser ({opener}: {e}); open the link above"
        ));
    }
}
