//! `mess mail`: agent mail (send, list, read, mark read, archive, prune) in the home's `.mail/`
//! mailboxes, acting as --as / MESS_AGENT_ID / agent_id.

use std::io::Read;

use crate::cli::{CliError, Context, one_of, output, when};
use crate::mail::{ARCHIVE_KEEP_DAYS, Folder, Found, Letter, TYPES};
use crate::protocol::time;

/// Arguments of `mess mail`.
#[derive(Debug, clap::Args)]
pub(crate) struct MailArgs {
    #[command(subcommand)]
    command: MailCommand,
}

#[derive(Debug, clap::Subcommand)]
enum MailCommand {
    /// Write a message into a mailbox (a session name, a tag, or __broadcast)
    Send {
        /// The recipient mailbox
        #[arg(long)]
        to: String,
        /// The message type: status, alert, task, question, response, report, handoff,
        /// announcement, or another lower-case word
        #[arg(long = "type", default_value = "status")]
        kind: String,
        /// The Markdown body (read from stdin when absent)
        #[arg(long)]
        body: Option<String>,
        /// How urgent it is
        #[arg(long, default_value = "normal", value_parser = one_of(["urgent", "normal", "low"]))]
        priority: String,
        /// Tags, comma-separated
        #[arg(long, value_delimiter = ',')]
        tags: Vec<String>,
        /// The sender expects a reply
        #[arg(long)]
        needs_response: bool,
        /// The file name of the message this answers
        #[arg(long)]
        in_reply_to: Option<String>,
        /// Groups messages into a conversation
        #[arg(long)]
        thread: Option<String>,
        /// When it may be deleted: a time (RFC 3339, `friday 18:00`) or a duration from now
        /// (7d, 2h, PT30M)
        #[arg(long)]
        expires: Option<String>,
    },
    /// List the messages of a mailbox (yours by default), oldest first
    List {
        /// The mailbox (default: your own)
        mailbox: Option<String>,
        /// Which folder to list
        #[arg(long, default_value = "unread", value_parser = one_of(Folder::ALL.iter().map(|f| f.as_str())))]
        folder: String,
    },
    /// Print one message
    Read {
        /// Its file name
        file: String,
        /// The mailbox (default: your own)
        #[arg(long)]
        mailbox: Option<String>,
    },
    /// Claim an unread message: move it to read/ (of several readers exactly one succeeds)
    MarkRead {
        /// Its file name
        file: String,
        /// The mailbox (default: your own)
        #[arg(long)]
        mailbox: Option<String>,
    },
    /// Move a message to archive/
    Archive {
        /// Its file name
        file: String,
        /// The mailbox (default: your own)
        #[arg(long)]
        mailbox: Option<String>,
    },
    /// Delete expired messages and archive older than 90 days, in every mailbox
    Prune,
}

fn show(found: &Found) {
    let l = &found.letter;
    output::line(&format!(
        "file      {}/{} ({})",
        found.mailbox,
        found.file,
        found.folder.as_str()
    ));
    output::line(&format!("from      {}", l.from));
    output::line(&format!("to        {}", l.to));
    output::line(&format!("type      {}", l.kind));
    output::line(&format!(
        "timestamp {}",
        time::format_timestamp(&l.timestamp)
    ));
    output::line(&format!("priority  {}", l.priority));
    if !l.tags.is_empty() {
        output::line(&format!("tags      {}", l.tags.join(", ")));
    }
    if let Some(t) = &l.expires {
        output::line(&format!("expires   {}", time::format_timestamp(t)));
    }
    if let Some(t) = &l.read_at {
        output::line(&format!("read_at   {}", time::format_timestamp(t)));
    }
    output::line("");
    output::line(&l.body);
}

pub(crate) fn run(cx: &Context, args: MailArgs) -> Result<(), CliError> {
    let mail = cx.exchange.mail();
    let mine = |mailbox: Option<String>| -> Result<String, CliError> {
        match mailbox {
            Some(m) => Ok(m),
            None => cx.identity(),
        }
    };
    // Who reads, for the mailbox every session reads on its own account; the operator may
    // look at any mailbox without being anyone.
    let reader = cx.identity().ok();
    let now = cx.exchange.now();
    match args.command {
        MailCommand::Send {
            to,
            kind,
            body,
            priority,
            tags,
            needs_response,
            in_reply_to,
            thread,
            expires,
        } => {
            let body = match body {
                Some(b) => b,
                None => {
                    let mut text = String::new();
                    std::io::stdin().read_to_string(&mut text).map_err(|e| {
                        CliError::new(format!("cannot read the body from stdin: {e}"))
                    })?;
                    text
                }
            };
            if let Err(e) = crate::mail::check_type(&kind) {
                return Err(CliError::usage(
                    format!("--{e}"),
                    format!("the format's types are {}", TYPES.join(", ")),
                ));
            }
            // Phrases (`friday 18:00`) are read here; the mail module takes what MCP also
            // sends: RFC 3339 or a duration.
            let expires = expires
                .map(|e| {
                    when::duration_or_time_text("--expires", &e, now.with_timezone(&chrono::Utc))
                })
                .transpose()?;
            let expires = crate::mail::parse_expires(expires.as_deref().unwrap_or(""), now)
                .map_err(crate::exchange::error::Error::from)?;
            let letter = Letter {
                from: cx.identity()?,
                to,
                kind,
                timestamp: cx.exchange.now(),
                needs_response,
                priority,
                tags,
                in_reply_to,
                thread_id: thread,
                expires,
                read_at: None,
                body,
            };
            let file = mail
                .send(&letter)
                .map_err(crate::exchange::error::Error::from)?;
            output::line(&format!("{}/{file}", letter.to));
        }
        MailCommand::List { mailbox, folder } => {
            let mailbox = mine(mailbox)?;
            let folder = Folder::parse(&folder).map_err(crate::exchange::error::Error::from)?;
            let (found, problems) = mail
                .list(&mailbox, folder, reader.as_deref(), now)
                .map_err(crate::exchange::error::Error::from)?;
            for p in problems {
                output::warn(&p);
            }
            for f in found {
                output::line(&format!(
                    "{}  {:<8} {:<9} {:<7} {}",
                    f.file,
                    f.letter.kind,
                    f.letter.from,
                    f.letter.priority,
                    f.letter
                        .body
                        .lines()
                        .find(|l| !l.trim().is_empty())
                        .unwrap_or("")
                ));
            }
        }
        MailCommand::Read { file, mailbox } => {
            let found = mail
                .read(&mine(mailbox)?, &file, reader.as_deref(), now)
                .map_err(crate::exchange::error::Error::from)?;
            show(&found);
        }
        MailCommand::MarkRead { file, mailbox } => {
            let mailbox = mine(mailbox)?;
            let found = mail
                .mark_read(&mailbox, &file, &cx.identity()?, now)
                .map_err(crate::exchange::error::Error::from)?;
            output::line(&format!("{mailbox}/{}/{file}", found.folder.as_str()));
        }
        MailCommand::Archive { file, mailbox } => {
            let mailbox = mine(mailbox)?;
            mail.archive(&mailbox, &file)
                .map_err(crate::exchange::error::Error::from)?;
            output::line(&format!("{mailbox}/archive/{file}"));
        }
        MailCommand::Prune => {
            let pruned = cx.exchange.upkeep().prune_mail()?;
            output::line(&format!(
                "deleted {pruned} expired or archived messages (archive is kept {ARCHIVE_KEEP_DAYS} days)"
            ));
        }
    }
    Ok(())
}
