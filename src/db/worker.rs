//! Query workers: the wire between the exchange and a `mess query-worker` process, and the
//! worker's side of it. A worker reads one request at a time from its input, runs it with
//! [`query::run`] or [`query::run_arrow`], and answers on its output; it knows nothing of
//! keys, limits or pools (the exchange owns those) and never writes a file.
//!
//! Frames are a kind byte, a little-endian `u32` length and that many bytes. The exchange
//! sends a request frame (JSON); the worker answers with a started frame once the statement is
//! checked and about to run (its timeout starts then), data frames (an Arrow IPC stream, in
//! pieces, for Arrow requests), and exactly one reply frame (JSON) at the end.

use std::io::{self, Read, Write};
use std::path::PathBuf;

use crate::db::error::DbError;
use crate::db::query::{self, ArrowDone, QueryLimits, QueryResult, Scope};

/// A request frame (exchange to worker).
pub const REQUEST: u8 = b'Q';
/// The statement starts running (worker to exchange; empty).
pub const STARTED: u8 = b'S';
/// A piece of an Arrow IPC stream (worker to exchange).
pub const DATA: u8 = b'D';
/// The reply that ends an answer (worker to exchange).
pub const REPLY: u8 = b'R';

/// Largest request a worker reads: the SQL and the thread files in scope.
pub const MAX_REQUEST_BYTES: usize = 64 * 1024 * 1024;
/// Largest reply frame the exchange reads: rows are bounded by their character cap, and the
/// JSON of a reply stays well under this.
pub const MAX_REPLY_BYTES: usize = 16 * 1024 * 1024;
/// Bytes of Arrow data per data frame.
const DATA_CHUNK: usize = 1024 * 1024;

/// One query for a worker.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Request {
    /// The exchange home the query reads.
    pub home: PathBuf,
    /// The statement, as the caller sent it.
    pub sql: String,
    /// Its bounds.
    pub limits: QueryLimits,
    /// What it may see.
    pub scope: Scope,
    /// Arrow IPC (data frames) instead of rows.
    pub arrow: bool,
}

/// How a request ended.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Reply {
    /// The rows of a row request.
    Rows(QueryResult),
    /// The end of an Arrow request; its data frames came before.
    Arrow(ArrowDone),
    /// The query failed.
    Failed(Failure),
}

/// A failed query, as it crosses the wire.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Failure {
    /// Refused by the read-only rules ([`DbError::Refused`]).
    Refused(String),
    /// DuckDB could not run it ([`DbError::Failed`]).
    Failed(String),
    /// Interrupted at its time limit, in seconds.
    Timeout(u64),
    /// Stopped at the worker's memory ceiling (DuckDB ran out of memory).
    OutOfMemory,
    /// Anything else: the server's problem, logged by the exchange.
    Internal(String),
}

impl From<DbError> for Failure {
    fn from(e: DbError) -> Failure {
        let text = e.to_string();
        // DuckDB reports every failed allocation as an out-of-memory error, whether its buffer
        // manager or the worker's ceiling (malloc failing) stopped it.
        if text.contains("Out of Memory") || text.contains("bad_alloc") {
            return Failure::OutOfMemory;
        }
        match e {
            DbError::Refused { message } => Failure::Refused(message),
            DbError::Failed { message } => Failure::Failed(message),
            DbError::Timeout { seconds } => Failure::Timeout(seconds),
            other => Failure::Internal(other.to_string()),
        }
    }
}

impl Failure {
    /// The error this failure stands for, under a worker ceiling of `ceiling_mib`.
    pub fn into_error(self, ceiling_mib: u64) -> DbError {
        match self {
            Failure::Refused(message) => DbError::Refused { message },
            Failure::Failed(message) => DbError::Failed { message },
            Failure::Timeout(seconds) => DbError::Timeout { seconds },
            Failure::OutOfMemory => DbError::OutOfMemory { ceiling_mib },
            Failure::Internal(message) => DbError::Worker { message },
        }
    }
}

/// Writes one frame.
pub fn write_frame(out: &mut dyn Write, kind: u8, payload: &[u8]) -> io::Result<()> {
    let len = u32::try_from(payload.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "frame over 4 GiB"))?;
    out.write_all(&[kind])?;
    out.write_all(&len.to_le_bytes())?;
    out.write_all(payload)
}

/// Reads one frame of at most `max` bytes; `None` at the end of the input.
pub fn read_frame(input: &mut dyn Read, max: usize) -> io::Result<Option<(u8, Vec<u8>)>> {
    let mut kind = [0u8; 1];
    if input.read(&mut kind)? == 0 {
        return Ok(None);
    }
    let mut len = [0u8; 4];
    input.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len) as usize;
    if len > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a frame of {len} bytes is over the limit of {max}"),
        ));
    }
    let mut payload = vec![0u8; len];
    input.read_exact(&mut payload)?;
    Ok(Some((kind[0], payload)))
}

/// A writer that sends what it is given as data frames of [`DATA_CHUNK`] bytes, so an Arrow
/// answer never sits whole in the worker's memory.
struct DataFrames<'a> {
    out: &'a mut dyn Write,
    pending: Vec<u8>,
    /// The output failed (the exchange went away): the worker stops.
    broken: Option<io::Error>,
}

impl DataFrames<'_> {
    fn send(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let sent = write_frame(self.out, DATA, &self.pending);
        self.pending.clear();
        sent.inspect_err(|e| self.broken = Some(io::Error::new(e.kind(), e.to_string())))
    }
}

impl Write for DataFrames<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // The IPC writer hands over a whole column buffer at once: it leaves in frames of at
        // most DATA_CHUNK bytes, never copied whole.
        let mut rest = buf;
        while !rest.is_empty() {
            let take = (DATA_CHUNK - self.pending.len()).min(rest.len());
            self.pending.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if self.pending.len() >= DATA_CHUNK {
                self.send()?;
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send()
    }
}

/// The worker's loop: answers requests from `input` on `output` until `input` ends. Returns
/// an error when either side of the wire breaks; a failed query is an answer, not an error.
pub fn serve(input: &mut dyn Read, output: &mut dyn Write) -> io::Result<()> {
    let invalid = |e: serde_json::Error| io::Error::new(io::ErrorKind::InvalidData, e);
    while let Some((kind, payload)) = read_frame(input, MAX_REQUEST_BYTES)? {
        if kind != REQUEST {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("expected a request frame, got kind {kind}"),
            ));
        }
        let request: Request = serde_json::from_slice(&payload).map_err(invalid)?;
        drop(payload);
        let reply =
            match query::prepare(&request.home, &request.sql, &request.limits, &request.scope) {
                Err(e) => Reply::Failed(e.into()),
                Ok(prepared) => {
                    write_frame(output, STARTED, &[])?;
                    output.flush()?;
                    run(prepared, &request, output)?
                }
            };
        write_frame(output, REPLY, &serde_json::to_vec(&reply).map_err(invalid)?)?;
        output.flush()?;
    }
    Ok(())
}

/// Runs a prepared statement as `request` asks: rows, or Arrow data frames on `output`.
fn run(prepared: query::Prepared, request: &Request, output: &mut dyn Write) -> io::Result<Reply> {
    if !request.arrow {
        return Ok(match prepared.rows(&request.limits) {
            Ok(rows) => Reply::Rows(rows),
            Err(e) => Reply::Failed(e.into()),
        });
    }
    let mut data = DataFrames {
        out: output,
        pending: Vec::with_capacity(DATA_CHUNK),
        broken: None,
    };
    let outcome = prepared.arrow(&request.limits, &mut data);
    data.flush()?;
    if let Some(e) = data.broken {
        return Err(e);
    }
    Ok(match outcome {
        Ok(done) => Reply::Arrow(done),
        Err(e) => Reply::Failed(e.into()),
    })
}
