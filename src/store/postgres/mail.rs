//! Agent mail in the database (tier 1), as rows the `mail` module reads and writes: a message
//! is its file's name and exact text with the few facts pruning needs; claiming moves a row out
//! of `unread` with an update that only one transaction can make.

use crate::store::error::StoreError;
use crate::store::postgres::{Pg, Run as _, sorted};

/// One stored message, or one reader's record of a `__broadcast` message (`reader` set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MailRow {
    /// The mailbox.
    pub mailbox: String,
    /// The file name.
    pub file: String,
    /// `unread`, `read` or `archive` (a reader's record is `read`).
    pub folder: String,
    /// Who read it, for a record of reading `__broadcast`.
    pub reader: Option<String>,
    /// The sender (counted by the per-sender limit).
    pub sender: String,
    /// The file's text.
    pub doc: String,
    /// The letter's timestamp, in seconds since 1970.
    pub written: i64,
    /// When it may be deleted, in seconds since 1970.
    pub expires: Option<i64>,
}

/// What is live at `$now` (`$keep`: archive written before it is stale).
const LIVE: &str =
    "(expires IS NULL OR expires > $now) AND (folder <> 'archive' OR written > $keep)";

fn live(sql: &str, first: usize) -> String {
    sql.replace(
        "$LIVE",
        &LIVE
            .replace("$now", &format!("${first}"))
            .replace("$keep", &format!("${}", first + 1)),
    )
}

impl Pg {
    /// Stores a message or a reader's record unless one of that name is there; whether it was.
    pub fn mail_put(&self, row: &MailRow) -> Result<bool, StoreError> {
        let mut conn = self.conn()?;
        let n = match &row.reader {
            None => conn.execute(
                "INSERT INTO mess_mail (mailbox, file, folder, sender, doc, written, expires) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
                &[
                    &row.mailbox,
                    &row.file,
                    &row.folder,
                    &row.sender,
                    &row.doc,
                    &row.written,
                    &row.expires,
                ],
            ),
            Some(reader) => conn.execute(
                "INSERT INTO mess_mail_reads (mailbox, file, reader, doc, written, expires) \
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
                &[
                    &row.mailbox,
                    &row.file,
                    reader,
                    &row.doc,
                    &row.written,
                    &row.expires,
                ],
            ),
        }
        .map_err(sorted)?;
        Ok(n == 1)
    }

    /// How many unread messages from `sender` wait in `mailbox`.
    pub fn mail_unread_from(&self, mailbox: &str, sender: &str) -> Result<i64, StoreError> {
        let mut conn = self.conn()?;
        Ok(conn
            .query_one(
                "SELECT count(*) FROM mess_mail \
                 WHERE mailbox = $1 AND sender = $2 AND folder = 'unread'",
                &[&mailbox, &sender],
            )
            .map_err(sorted)?
            .get(0))
    }

    /// The live messages of `mailbox` in `folder` at `now` (`keep`: the oldest archive kept),
    /// by name; `unread_for` leaves out those that reader has a record of.
    pub fn mail_list(
        &self,
        mailbox: &str,
        folder: &str,
        unread_for: Option<&str>,
        now: i64,
        keep: i64,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let mut conn = self.conn()?;
        let rows = conn
            .query(
                &live(
                    "SELECT file, doc FROM mess_mail m WHERE mailbox = $1 AND folder = $2 \
                     AND ($3::text IS NULL OR NOT EXISTS (SELECT 1 FROM mess_mail_reads r \
                       WHERE r.mailbox = m.mailbox AND r.file = m.file AND r.reader = $3)) \
                     AND $LIVE ORDER BY file",
                    4,
                ),
                &[&mailbox, &folder, &unread_for, &now, &keep],
            )
            .map_err(sorted)?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// `reader`'s live records of `mailbox`, by name.
    pub fn mail_records(
        &self,
        mailbox: &str,
        reader: &str,
        now: i64,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let mut conn = self.conn()?;
        let rows = conn
            .query(
                "SELECT file, doc FROM mess_mail_reads WHERE mailbox = $1 AND reader = $2 \
                 AND (expires IS NULL OR expires > $3) ORDER BY file",
                &[&mailbox, &reader, &now],
            )
            .map_err(sorted)?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    /// The live message `file` of `mailbox`, with its folder; or `reader`'s record of it.
    pub fn mail_get(
        &self,
        mailbox: &str,
        file: &str,
        reader: Option<&str>,
        now: i64,
        keep: i64,
    ) -> Result<Option<(String, String)>, StoreError> {
        let mut conn = self.conn()?;
        let row = match reader {
            Some(reader) => conn.query_opt(
                "SELECT 'read', doc FROM mess_mail_reads WHERE mailbox = $1 AND file = $2 \
                 AND reader = $3 AND (expires IS NULL OR expires > $4)",
                &[&mailbox, &file, &reader, &now],
            ),
            None => conn.query_opt(
                &live(
                    "SELECT folder, doc FROM mess_mail WHERE mailbox = $1 AND file = $2 AND $LIVE",
                    3,
                ),
                &[&mailbox, &file, &now, &keep],
            ),
        }
        .map_err(sorted)?;
        Ok(row.map(|r| (r.get(0), r.get(1))))
    }

    /// Moves the unread message `file` to `read` with the text `doc`; false when it is not
    /// unread (any more): of concurrent claims exactly one gets true.
    pub fn mail_claim(&self, mailbox: &str, file: &str, doc: &str) -> Result<bool, StoreError> {
        let mut conn = self.conn()?;
        let n = conn
            .execute(
                "UPDATE mess_mail SET folder = 'read', doc = $3, version = nextval('mess_mail_version') \
                 WHERE mailbox = $1 AND file = $2 AND folder = 'unread'",
                &[&mailbox, &file, &doc],
            )
            .map_err(sorted)?;
        Ok(n == 1)
    }

    /// Moves `file` to `archive`; `None` when there is no such message, else whether it was
    /// archived already.
    pub fn mail_archive(&self, mailbox: &str, file: &str) -> Result<Option<bool>, StoreError> {
        let mut conn = self.conn()?;
        let row = conn
            .query_opt(
                "UPDATE mess_mail m SET folder = 'archive', version = nextval('mess_mail_version') \
                 FROM mess_mail old \
                 WHERE m.mailbox = $1 AND m.file = $2 \
                   AND old.mailbox = m.mailbox AND old.file = m.file \
                 RETURNING old.folder = 'archive'",
                &[&mailbox, &file],
            )
            .map_err(sorted)?;
        Ok(row.map(|r| r.get(0)))
    }

    /// Deletes the messages and records stale at `now` (`keep`: archive written before it
    /// goes); returns how many.
    pub fn mail_prune(&self, now: i64, keep: i64) -> Result<u64, StoreError> {
        let mut conn = self.conn()?;
        let messages = conn
            .execute(
                "DELETE FROM mess_mail WHERE (expires IS NOT NULL AND expires <= $1) \
                 OR (folder = 'archive' AND written <= $2)",
                &[&now, &keep],
            )
            .map_err(sorted)?;
        let records = conn
            .execute(
                "DELETE FROM mess_mail_reads WHERE expires IS NOT NULL AND expires <= $1",
                &[&now],
            )
            .map_err(sorted)?;
        Ok(messages + records)
    }

    /// What identifies the stored mail as it is now (every write changes it): the number of
    /// messages and records and the newest write.
    pub fn mail_version(&self) -> Result<(i64, i64), StoreError> {
        let mut conn = self.conn()?;
        let row = conn
            .query_one(
                "SELECT (SELECT count(*) FROM mess_mail) + (SELECT count(*) FROM mess_mail_reads), \
                 greatest((SELECT max(version) FROM mess_mail), \
                          (SELECT max(version) FROM mess_mail_reads), 0)",
                &[],
            )
            .map_err(sorted)?;
        Ok((row.get(0), row.get(1)))
    }

    /// Every stored message and record, by mailbox and name (for `mess export`).
    pub fn mail_rows(&self) -> Result<Vec<MailRow>, StoreError> {
        let mut conn = self.conn()?;
        let rows = conn
            .query(
                "SELECT mailbox, file, folder, NULL::text, sender, doc, written, expires \
                 FROM mess_mail \
                 UNION ALL SELECT mailbox, file, 'read', reader, '', doc, written, expires \
                 FROM mess_mail_reads ORDER BY 1, 4 NULLS FIRST, 2",
                &[],
            )
            .map_err(sorted)?;
        Ok(rows
            .iter()
            .map(|r| MailRow {
                mailbox: r.get(0),
                file: r.get(1),
                folder: r.get(2),
                reader: r.get(3),
                sender: r.get(4),
                doc: r.get(5),
                written: r.get(6),
                expires: r.get(7),
            })
            .collect())
    }
}
