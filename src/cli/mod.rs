//! The `mess` command line: clap arguments, one file per subcommand, and the single place where
//! errors become one-line messages and exit codes (0 success, 1 operational error, 2 usage).

mod archive;
mod cancel;
mod claim;
mod complete;
mod completions;
mod config;
mod config_check;
mod dashboard;
mod db;
mod decide;
mod demo;
mod doctor;
mod export;
mod fsck;
mod import;
mod init;
mod link;
mod mail;
mod mcp;
mod output;
mod query;
mod query_worker;
mod reply;
mod request;
mod review;
mod send;
mod serve;
mod shells;
mod show;
mod sql;
mod status;
mod token;
mod update;
mod webhook_secret;
mod when;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{CommandFactory, Parser, Subcommand};

use crate::cli::config::{Config, ConfigError, McpFile};
use crate::exchange::clock::SystemClock;
use crate::exchange::error::{Error, ErrorKind};
use crate::exchange::{Exchange, Sender};
use crate::protocol::message::Message;
use crate::store::Store;

/// The heading global flags are listed under in every command's help, apart from its own.
const GLOBAL: &str = "Global options";

/// mess: a MESS exchange for physical-world tasks
#[derive(Debug, Parser)]
#[command(
    name = "mess",
    version = crate::BUILD,
    about,
    propagate_version = true,
    after_help = "Examples:
  mess init && mess serve              start an exchange in ~/.mess on 127.0.0.1:8420
  mess request \"check the fridge\" --requires take-photo --as alice
  mess status                          the open threads
  mess completions bash                shell completions (also zsh, fish, powershell)"
)]
pub struct Args {
    /// Exchange home folder (default ~/.mess)
    #[arg(
        long,
        global = true,
        env = "MESS_HOME",
        value_name = "DIR",
        help_heading = GLOBAL
    )]
    home: Option<PathBuf>,

    /// Act as this agent or executor (default: MESS_AGENT_ID, else agent_id in config.yaml)
    #[arg(
        long = "as",
        global = true,
        env = "MESS_AGENT_ID",
        value_name = "ID",
        help_heading = GLOBAL
    )]
    as_id: Option<String>,

    /// PostgreSQL database of a multi-node exchange (postgres://USER@HOST:PORT/DB); --home is
    /// then this node's read-only mirror of the thread files
    #[arg(
        long,
        global = true,
        env = "MESS_DATABASE_URL",
        value_name = "URL",
        hide_env_values = true,
        help_heading = GLOBAL
    )]
    database: Option<String>,

    /// Act on another exchange: a name from `exchanges:` in config.yaml, or the URL of a `mess
    /// serve` (its API key from MESS_API_KEY); the key decides who acts
    #[arg(long, global = true, value_name = "NAME|URL", help_heading = GLOBAL)]
    exchange: Option<String>,

    /// How long-running commands (serve, mcp) write their log on stderr: text or json; levels
    /// come from MESS_LOG, else RUST_LOG (`info`, `mess=debug,warn`)
    #[arg(
        long,
        global = true,
        env = "MESS_LOG_FORMAT",
        value_enum,
        default_value_t,
        value_name = "FORMAT",
        help_heading = GLOBAL
    )]
    log_format: output::LogFormat,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant, reason = "parsed once per process")]
enum Command {
    /// Create the home layout and an example config.yaml
    Init(init::InitArgs),
    /// Run the exchange server (HTTP API) until Ctrl-C
    Serve(serve::ServeArgs),
    /// Serve MCP over stdio for an agent host (acts as --as / MESS_AGENT_ID / agent_id)
    Mcp(mcp::McpArgs),
    /// Submit a raw MESS message (YAML) from a file or stdin and print the exchange's answer
    Send(send::SendArgs),
    /// Submit a request
    Request(request::RequestArgs),
    /// Show one thread's state, or the open threads
    Status(status::StatusArgs),
    /// Print a whole thread file
    Show(show::ShowArgs),
    /// Claim a pending request as an executor
    Claim(claim::ClaimArgs),
    /// Report a status on a claimed request
    Update(update::UpdateArgs),
    /// Complete a claimed request with a response
    Complete(complete::CompleteArgs),
    /// Answer questions or a confirmation request as the requestor
    Reply(reply::ReplyArgs),
    /// Review finished work as its requestor: a rating, feedback, or a redo
    Review(review::ReviewArgs),
    /// Approve a request that asks for your approval
    Approve(decide::ApproveArgs),
    /// Deny a request that asks for your approval, with a reason
    Deny(decide::DenyArgs),
    /// What an approval covers, and whether it covers an action (`--use` uses it once)
    Approval(decide::ApprovalArgs),
    /// Grant shells and show balances (the operator's)
    Shells(shells::ShellsArgs),
    /// Cancel a request as its requestor
    Cancel(cancel::CancelArgs),
    /// Move old finished and canceled threads to archive/YYYY-MM/
    Archive(archive::ArchiveArgs),
    /// Check every thread file; with --repair, fix what interrupted writes left behind
    Fsck(fsck::FsckArgs),
    /// Run one read-only SQL statement over the exchange's views
    Query(query::QueryArgs),
    /// Set up the duckdb CLI or Python duckdb over this home
    Sql(sql::SqlArgs),
    /// Synthetic data for trying things out
    Demo(demo::DemoArgs),
    /// The schema of the database named by --database: init, migrate, status
    Db(db::DbArgs),
    /// Copy a home's threads, keys, registrations and ledger into the database named by --database
    Import(import::ImportArgs),
    /// Write the database named by --database out as a home (threads, keys, registrations, ledger)
    Export(export::ExportArgs),
    /// Make an API key for an agent or an executor (printed once, stored hashed)
    Token(token::TokenArgs),
    /// Print a presigned link to the human client for one executor on one thread
    Link(link::LinkArgs),
    /// Print a login link to the operator dashboard (10 minutes, one use); --open opens it
    Dashboard(dashboard::DashboardArgs),
    /// Check config.yaml and the registry files (exit 1 on unknown keys or unusable values)
    Config(config_check::ConfigArgs),
    /// Agent mail: send, list, read, mark read and archive messages in .mail/ mailboxes
    Mail(mail::MailArgs),
    /// Print the key that signs webhooks when dispatch.webhook.secret is unset (generated into
    /// .mess/ on first use), for receivers to check the x-mess-signature header with
    WebhookSecret(webhook_secret::WebhookSecretArgs),
    /// Check what this machine gives the exchange: disk flush speed and durable-write rate
    /// (the ceiling on acknowledged messages), home, config, listen address, database
    Doctor(doctor::DoctorArgs),
    /// Print a shell completion script (bash, zsh, fish, powershell)
    Completions(completions::CompletionsArgs),
    /// Print the manual page, or write one per command with --out
    Man(completions::ManArgs),
    /// Run user SQL for an exchange over stdin/stdout (started by the exchange itself)
    #[command(hide = true)]
    QueryWorker(query_worker::QueryWorkerArgs),
}

/// What a subcommand needs: the resolved settings, the exchange, and who is acting.
struct Context {
    config: Config,
    exchange: Exchange,
    as_id: Option<String>,
    /// The agent host's MCP file, read for `mess mcp` only.
    mcp_file: Option<McpFile>,
    /// The remote exchange `--exchange` names, when it names one: commands then act there.
    remote: Option<RemoteCx>,
    /// The database `--database` names, for the commands that work on one (`mess db`,
    /// `export`, `import`); the exchange keeps its own handle.
    database: Option<crate::store::postgres::Pg>,
}

/// A remote exchange and the runtime its calls run on (commands are synchronous).
struct RemoteCx {
    remote: crate::remote::Remote,
    runtime: tokio::runtime::Runtime,
}

impl RemoteCx {
    fn run<T>(
        &self,
        call: impl std::future::Future<Output = Result<T, crate::remote::RemoteError>>,
    ) -> Result<T, CliError> {
        self.runtime
            .block_on(call)
            .map_err(|e| CliError::new(e.to_string()))
    }
}

impl Context {
    /// The acting principal, or an error saying how to name one.
    fn identity(&self) -> Result<String, CliError> {
        self.as_id
            .clone()
            .or_else(|| self.config.agent_id.clone())
            .filter(|s| !s.trim().is_empty())
            .ok_or_else(|| {
                CliError::usage(
                    "no identity to act as",
                    "pass --as ID, set MESS_AGENT_ID, or set agent_id in config.yaml",
                )
            })
    }

    fn sender(&self) -> Result<Sender, CliError> {
        Ok(Sender::new(self.identity()?, "cli"))
    }

    /// Submits one message as the acting principal (on a remote exchange, as its key's).
    fn submit(&self, message: Message) -> Result<Message, CliError> {
        if let Some(r) = &self.remote {
            return r.run(r.remote.submit(&message));
        }
        let answer = self.exchange.intake().submit(message, &self.sender()?)?;
        self.warn_stalled();
        Ok(answer)
    }

    /// The thread `re` names, as the acting principal may read it.
    fn thread(&self, re: &str) -> Result<crate::store::thread::ThreadFile, CliError> {
        if let Some(r) = &self.remote {
            return r.run(r.remote.thread(re));
        }
        let who = self.identity().unwrap_or_default();
        Ok(self.exchange.thread(re, &who)?)
    }

    /// Says so when notices wait with no process to send them (a one-shot command queues
    /// them; a long-lived `mess serve` or `mess mcp` sends them).
    fn warn_stalled(&self) {
        if let Some(note) = self.exchange.outbox().notices_stalled() {
            output::warn(&note);
        }
    }
}

/// An error on its way to the terminal.
#[derive(Debug)]
pub struct CliError {
    message: String,
    hint: Option<String>,
    code: u8,
}

impl CliError {
    fn new(message: impl Into<String>) -> CliError {
        CliError {
            message: message.into(),
            hint: None,
            code: 1,
        }
    }

    /// A problem with what was typed (exit code 2), with a hint on how to type it.
    fn usage(message: impl Into<String>, hint: impl Into<String>) -> CliError {
        CliError {
            message: message.into(),
            hint: Some(hint.into()),
            code: 2,
        }
    }

    /// An operational failure (exit code 1) with a hint on what to do next.
    fn with_hint(message: impl Into<String>, hint: impl Into<String>) -> CliError {
        CliError {
            message: message.into(),
            hint: Some(hint.into()),
            code: 1,
        }
    }
}

impl From<Error> for CliError {
    fn from(e: Error) -> CliError {
        let hint = match e.kind() {
            ErrorKind::NotFound => {
                Some("`mess status --all` lists threads; refs look like 2026-01-31-001")
            }
            ErrorKind::Internal => Some("`mess fsck` checks the exchange's files"),
            _ => None,
        };
        CliError {
            message: e.to_string(),
            hint: hint.map(str::to_owned),
            code: 1,
        }
    }
}

impl From<ConfigError> for CliError {
    fn from(e: ConfigError) -> CliError {
        CliError::new(e.to_string())
    }
}

impl From<crate::store::error::StoreError> for CliError {
    fn from(e: crate::store::error::StoreError) -> CliError {
        CliError::from(Error::from(e))
    }
}

impl From<crate::mail::MailError> for CliError {
    fn from(e: crate::mail::MailError) -> CliError {
        CliError::from(Error::from(e))
    }
}

/// Parses the command line, runs the command, and maps the outcome to an exit code.
pub fn run() -> ExitCode {
    // Outbound HTTPS (notification channels) uses rustls with the ring provider; installing it
    // twice is harmless, so this ignores an earlier install.
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Bare `mess` shows what it can do, as `mess --help` does.
    if std::env::args_os().len() == 1 {
        let _ = Args::command().print_help();
        return ExitCode::SUCCESS;
    }
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) if e.use_stderr() => {
            report(&usage_error(&e));
            return ExitCode::from(2);
        }
        Err(e) => {
            // --help and --version print to stdout and succeed.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
    };
    output::set_log_format(args.log_format);
    match run_command(args) {
        // A reader that stopped early (`mess status | head`) got what it wanted.
        _ if output::stdout_closed() => ExitCode::SUCCESS,
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            report(&e);
            ExitCode::from(e.code)
        }
    }
}

/// Finishes what writers that died (a crash, a kill) left half-done in the home, the first
/// thing a long-running process (`mess serve`, `mess mcp`) does, so `mess fsck` is clean after
/// a restart; says on stderr what it repaired.
fn heal_interrupted_writes(cx: &Context) {
    match cx.exchange.upkeep().heal_interrupted_writes() {
        Ok(repaired) if repaired.is_empty() => {}
        Ok(repaired) => output::warn(&format!(
            "repaired {} leftover(s) of writes interrupted before this start ({})",
            repaired.len(),
            repaired[0].problem
        )),
        Err(e) => output::warn(&format!("cannot heal interrupted writes: {e}")),
    }
}

/// Folds clap's multi-line report into one line, with clap's `Usage:` line and where to read
/// more as the hint.
fn usage_error(e: &clap::Error) -> CliError {
    let rendered = e.render().to_string();
    let text: Vec<&str> = rendered
        .lines()
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let message = text.join(" ");
    let message = message
        .strip_prefix("error: ")
        .unwrap_or(&message)
        .to_owned();
    let usage = rendered
        .lines()
        .find_map(|l| l.strip_prefix("Usage: "))
        .map(str::trim);
    let hint = match usage {
        // `mess request [OPTIONS] <INTENT>`: its help is `mess request --help`.
        Some(usage) => {
            let command: Vec<&str> = usage
                .split_whitespace()
                .take_while(|w| !w.starts_with(['[', '<', '-']))
                .collect();
            format!(
                "usage: {usage}; `{} --help` lists its flags",
                command.join(" ")
            )
        }
        None => "`mess --help` lists the commands; `mess COMMAND --help` their flags".to_owned(),
    };
    CliError::usage(message, hint)
}

fn report(e: &CliError) {
    let mut text = format!("error: {}\n", e.message);
    if let Some(h) = &e.hint {
        text.push_str(&format!("hint: {h}\n"));
    }
    output::err(&text);
}

fn run_command(args: Args) -> Result<(), CliError> {
    // A query worker reads no configuration and no home of its own: requests name the home.
    // Nor do completions and manual pages: they come from the command definitions.
    let command = match args.command {
        Command::QueryWorker(a) => return query_worker::run(a),
        Command::Completions(a) => return completions::completions(a),
        Command::Man(a) => return completions::man(a),
        other => other,
    };
    // An agent host's `mess mcp` reads the reference design's MCP file too (identity, home, settings).
    let mcp_file = match &command {
        Command::Mcp(_) => McpFile::find()?,
        _ => None,
    };
    let mut config = Config::resolve_with(args.home, mcp_file.as_ref())?;
    let remote = match &args.exchange {
        Some(name) => remote_of(name, &mut config, &command)?,
        None => None,
    };
    // Queries run in workers of this same program (`mess query-worker`).
    config.exchange.queries.worker = std::env::current_exe().ok();
    if let Some(after) = output::env_millis("MESS_NOTICE_OVERDUE_MS") {
        config.exchange.dispatch.overdue = after;
    }
    let database = match &args.database {
        Some(url) => Some(open_database(url, &command)?),
        None => None,
    };
    let store = match &database {
        Some(db) => Store::on_database(&config.home, db.clone()),
        None => Store::open(&config.home),
    };
    let exchange = Exchange::new(store, config.exchange.clone(), Arc::new(SystemClock));
    let cx = Context {
        config,
        exchange,
        as_id: args.as_id,
        mcp_file,
        remote,
        database,
    };
    // A long-running process does the home's internal work on its own worker; a one-shot
    // command finishes what it queued (and what an earlier one left) before it exits.
    // `mess doctor` leaves the home as it found it.
    let one_shot = cx.remote.is_none()
        && !matches!(
            command,
            Command::Serve(_) | Command::Mcp(_) | Command::Doctor(_)
        );
    let outcome = dispatch(&cx, command);
    if one_shot {
        match cx.exchange.outbox().finish_internal_work() {
            Ok(_) => {}
            Err(e) => output::warn(&format!(
                "cannot finish the exchange's queued work now (the next command tries again): {}",
                cx.exchange.public_message(&e)
            )),
        }
    }
    outcome
}

/// Runs one subcommand.
fn dispatch(cx: &Context, command: Command) -> Result<(), CliError> {
    match command {
        Command::Init(a) => init::run(cx, a),
        Command::Serve(a) => serve::run(cx, a),
        Command::Mcp(a) => mcp::run(cx, a),
        Command::Send(a) => send::run(cx, a),
        Command::Request(a) => request::run(cx, a),
        Command::Status(a) => status::run(cx, a),
        Command::Show(a) => show::run(cx, a),
        Command::Claim(a) => claim::run(cx, a),
        Command::Update(a) => update::run(cx, a),
        Command::Complete(a) => complete::run(cx, a),
        Command::Reply(a) => reply::run(cx, a),
        Command::Review(a) => review::run(cx, a),
        Command::Approve(a) => decide::approve(cx, a),
        Command::Deny(a) => decide::deny(cx, a),
        Command::Approval(a) => decide::approval(cx, a),
        Command::Shells(a) => shells::run(cx, a),
        Command::Cancel(a) => cancel::run(cx, a),
        Command::Archive(a) => archive::run(cx, a),
        Command::Fsck(a) => fsck::run(cx, a),
        Command::Query(a) => query::run(cx, a),
        Command::Sql(a) => sql::run(cx, a),
        Command::Demo(a) => demo::run(cx, a),
        Command::Db(a) => db::run(cx, a),
        Command::Import(a) => import::run(cx, a),
        Command::Export(a) => export::run(cx, a),
        Command::Token(a) => token::run(cx, a),
        Command::Link(a) => link::run(cx, a),
        Command::Dashboard(a) => dashboard::run(cx, a),
        Command::Config(a) => config_check::run(cx, a),
        Command::Mail(a) => mail::run(cx, a),
        Command::WebhookSecret(a) => webhook_secret::run(cx, a),
        Command::Doctor(a) => doctor::run(cx, a),
        Command::QueryWorker(a) => query_worker::run(a),
        Command::Completions(a) => completions::completions(a),
        Command::Man(a) => completions::man(a),
    }
}

/// The exchange `--exchange NAME|URL` names for `command`: a remote one (its client), or a
/// local home (then `config` is resolved again for it, and `None` comes back).
fn remote_of(
    name: &str,
    config: &mut Config,
    command: &Command,
) -> Result<Option<RemoteCx>, CliError> {
    use crate::cli::config::ExchangeEntry;
    let env_key = || {
        std::env::var("MESS_API_KEY")
            .ok()
            .filter(|k| !k.trim().is_empty())
    };
    let name = name.trim();
    let (url, key) = if name.starts_with("http://") || name.starts_with("https://") {
        (name.to_owned(), env_key())
    } else {
        match config
            .exchanges
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, e)| e.clone())
        {
            Some(ExchangeEntry::Remote { url, api_key }) => (url, api_key.or_else(env_key)),
            Some(ExchangeEntry::Local(path)) => {
                *config = Config::resolve_with(Some(path), None)?;
                return Ok(None);
            }
            None if name == "primary" => return Ok(None),
            None => {
                let known: Vec<&str> = config.exchanges.iter().map(|(n, _)| n.as_str()).collect();
                return Err(CliError::usage(
                    format!("--exchange {name:?}: no such exchange in config.yaml"),
                    if known.is_empty() {
                        "add an `exchanges:` section to config.yaml, or pass the URL of a `mess serve`".to_owned()
                    } else {
                        format!(
                            "known: {}; or pass the URL of a `mess serve`",
                            known.join(", ")
                        )
                    },
                ));
            }
        }
    };
    let remote_commands = [
        "send", "request", "status", "show", "claim", "update", "complete", "reply", "review",
        "cancel", "approve", "deny",
    ];
    let this = command_name(command);
    if !remote_commands.contains(&this) {
        return Err(CliError::usage(
            format!("`mess {this}` works on a local home, not through --exchange"),
            format!("with --exchange: {}", remote_commands.join(", ")),
        ));
    }
    let key = key.ok_or_else(|| {
        CliError::usage(
            format!(
                "no API key for the exchange at {}",
                crate::remote::redact_url(&url)
            ),
            "set MESS_API_KEY, or api_key in its `exchanges:` entry (e.g. api_key: ${MY_KEY})",
        )
    })?;
    let remote =
        crate::remote::Remote::new(&url, &key).map_err(|e| CliError::new(e.to_string()))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::new(format!("cannot start the HTTP client: {e}")))?;
    Ok(Some(RemoteCx { remote, runtime }))
}

/// The subcommand's name as typed.
fn command_name(command: &Command) -> &'static str {
    match command {
        Command::Init(_) => "init",
        Command::Serve(_) => "serve",
        Command::Mcp(_) => "mcp",
        Command::Send(_) => "send",
        Command::Request(_) => "request",
        Command::Status(_) => "status",
        Command::Show(_) => "show",
        Command::Claim(_) => "claim",
        Command::Update(_) => "update",
        Command::Complete(_) => "complete",
        Command::Reply(_) => "reply",
        Command::Review(_) => "review",
        Command::Approve(_) => "approve",
        Command::Deny(_) => "deny",
        Command::Approval(_) => "approval",
        Command::Shells(_) => "shells",
        Command::Cancel(_) => "cancel",
        Command::Archive(_) => "archive",
        Command::Fsck(_) => "fsck",
        Command::Query(_) => "query",
        Command::Sql(_) => "sql",
        Command::Demo(_) => "demo",
        Command::Db(_) => "db",
        Command::Import(_) => "import",
        Command::Export(_) => "export",
        Command::Token(_) => "token",
        Command::Link(_) => "link",
        Command::Dashboard(_) => "dashboard",
        Command::Config(_) => "config",
        Command::Mail(_) => "mail",
        Command::WebhookSecret(_) => "webhook-secret",
        Command::Doctor(_) => "doctor",
        Command::QueryWorker(_) => "query-worker",
        Command::Completions(_) => "completions",
        Command::Man(_) => "man",
    }
}

/// Opens the database of tier 1 for `command`: `mess serve` brings its schema up to date
/// (nodes starting together migrate once), `mess db` manages it, and every other command
/// runs only on the schema it was built for.
fn open_database(url: &str, command: &Command) -> Result<crate::store::postgres::Pg, CliError> {
    let db = crate::store::postgres::Pg::open(url)?;
    match command {
        Command::Db(_) => {}
        Command::Serve(_) => {
            db.migrate()?;
        }
        _ => db.check_schema()?,
    }
    Ok(db)
}

/// Builds a one-payload message `{MESS: [{kind: body}]}` from flags and validates it like any
/// input; a problem is a usage error that names the flag.
/// A flag's parser that takes exactly these words: a value outside them exits 2 with clap's
/// message listing them, before anything runs.
fn one_of(words: impl IntoIterator<Item = &'static str>) -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(words)
}

fn message_of(
    command: &str,
    kind: &str,
    body: crate::protocol::value::Map,
) -> Result<Message, CliError> {
    use crate::protocol::error::ProtocolError;
    Message::single(kind, body).map_err(|e| match e {
        ProtocolError::Invalid { path, problem } => CliError::usage(
            format!("{}: {problem}", flag_for(&path)),
            format!("see `mess {command} --help`"),
        ),
        other => CliError::from(Error::from(other)),
    })
}

/// The flag (or argument) behind a message field, for error messages.
fn flag_for(path: &str) -> String {
    // `MESS[0].status.progress_pct` -> `progress_pct`; nested paths keep their first field.
    let field = path.splitn(3, '.').nth(2).unwrap_or(path);
    let field = field.split(['.', '[']).next().unwrap_or(field);
    match field {
        "re" => "the RE argument".to_owned(),
        "intent" => "the INTENT argument".to_owned(),
        "code" => "--status".to_owned(),
        "progress_pct" => "--progress".to_owned(),
        "questions" => "--question".to_owned(),
        "answers" => "--answer".to_owned(),
        "content" => "--text/--file".to_owned(),
        "constraints" => "--depends-on".to_owned(),
        "request_redo" => "--redo".to_owned(),
        other => format!("--{}", other.replace('_', "-")),
    }
}

/// A progress bar for long work (seed, import, export, archive, fsck) on stderr, drawn by
/// indicatif only when stderr is a terminal: a pipe or a log file gets nothing.
struct Progress {
    label: &'static str,
    enabled: bool,
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    fn new(label: &'static str) -> Progress {
        Progress {
            label,
            enabled: std::io::stderr().is_terminal(),
            bar: None,
        }
    }

    fn update(&mut self, done: usize, total: usize) {
        if !self.enabled || total == 0 {
            return;
        }
        let label = self.label;
        let bar = self.bar.get_or_insert_with(|| {
            let bar = indicatif::ProgressBar::with_draw_target(
                Some(total as u64),
                indicatif::ProgressDrawTarget::stderr_with_hz(10),
            );
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "{msg} [{bar:30}] {pos}/{len} ({percent}%), {per_sec}, {eta} left",
            ) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_message(label);
            bar
        });
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        if done >= total {
            bar.finish();
        }
    }
}
