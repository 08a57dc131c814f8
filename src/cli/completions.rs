//! `mess completions SHELL` and `mess man`: shell completions (clap_complete) and manual pages
//! (clap_mangen), generated from the command definitions themselves, so they always list the
//! commands and flags this binary has. Neither reads a home or a config.

use std::path::PathBuf;

use clap::CommandFactory;

use crate::cli::{Args, CliError, output};

/// Arguments of `mess completions`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  mess completions bash > ~/.local/share/bash-completion/completions/mess
  mess completions zsh > ~/.zfunc/_mess     # with fpath+=(~/.zfunc) before compinit
  mess completions fish > ~/.config/fish/completions/mess.fish")]
pub(crate) struct CompletionsArgs {
    /// The shell to complete in
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// Arguments of `mess man`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  mess man | man -l -
  mess man --out /usr/local/share/man/man1 && mandb")]
pub(crate) struct ManArgs {
    /// Write mess.1 and one page per command (mess-request.1, ...) into this folder instead of
    /// printing mess.1
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// The commands as people type them: `mess` without its hidden subcommands (the query worker
/// the exchange starts itself), which the generators would otherwise offer.
fn visible() -> clap::Command {
    let full = Args::command();
    // clap cannot remove a subcommand: the command is built again from the visible ones.
    let mut command = clap::Command::new("mess").version(crate::BUILD);
    if let Some(about) = full.get_about() {
        command = command.about(about.clone());
    }
    if let Some(after) = full.get_after_help() {
        command = command.after_help(after.clone());
    }
    for arg in full.get_arguments() {
        command = command.arg(arg.clone());
    }
    for sub in full.get_subcommands().filter(|s| !s.is_hide_set()) {
        command = command.subcommand(sub.clone());
    }
    command
}

/// Prints the completion script for `shell`.
pub(crate) fn completions(args: CompletionsArgs) -> Result<(), CliError> {
    let mut command = visible();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "mess", &mut script);
    output::out(&String::from_utf8_lossy(&script));
    Ok(())
}

/// Prints mess(1), or writes every page into `--out`.
pub(crate) fn man(args: ManArgs) -> Result<(), CliError> {
    let command = visible();
    let Some(dir) = args.out else {
        output::out(&String::from_utf8_lossy(&page(&command)?));
        return Ok(());
    };
    std::fs::create_dir_all(&dir)
        .map_err(|e| CliError::new(format!("cannot create {}: {e}", dir.display())))?;
    let mut written = 0;
    let mut pages = vec![(String::from("mess"), command.clone())];
    for sub in command.get_subcommands() {
        // A command's page is `mess-request(1)`, its synopsis as typed (`mess request ...`).
        let name = format!("mess-{}", sub.get_name());
        let typed = format!("mess {}", sub.get_name());
        pages.push((name.clone(), sub.clone().display_name(name).bin_name(typed)));
    }
    for (name, cmd) in pages {
        let path = dir.join(format!("{name}.1"));
        std::fs::write(&path, page(&cmd)?)
            .map_err(|e| CliError::new(format!("cannot write {}: {e}", path.display())))?;
        written += 1;
    }
    output::line(&format!("wrote {written} pages to {}", dir.display()));
    Ok(())
}

/// One manual page in roff.
fn page(command: &clap::Command) -> Result<Vec<u8>, CliError> {
    let mut roff = Vec::new();
    clap_mangen::Man::new(command.clone())
        .render(&mut roff)
        .map_err(|e| CliError::new(format!("cannot render the manual page: {e}")))?;
    Ok(roff)
}
