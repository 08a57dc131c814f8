-- mail: one row per agent mail message (the agent mail format), from the frontmatter of every
-- file under .mail/: mailbox, folder (unread | read | archive), file, and the fields from,
-- to, type, timestamp, needs_response, priority, tags, in_reply_to, thread_id, expires,
-- read_at.
-- Depends on: read_yaml_auto (the first document of each file is its frontmatter).
CREATE OR REPLACE VIEW mail AS
WITH template AS (
    SELECT NULL::VARCHAR AS "from", NULL::VARCHAR AS "to", NULL::VARCHAR AS "type",
           NULL::TIMESTAMPTZ AS "timestamp", NULL::BOOLEAN AS needs_response,
           NULL::VARCHAR AS priority, NULL::VARCHAR[] AS tags, NULL::VARCHAR AS in_reply_to,
           NULL::VARCHAR AS thread_id, NULL::TIMESTAMPTZ AS expires, NULL::TIMESTAMPTZ AS read_at,
           NULL::VARCHAR AS filename
    WHERE false
),
files AS (
    SELECT * FROM template
    UNION ALL BY NAME
    SELECT * FROM read_yaml_auto(['{{home}}/.mail/*/*.md', '{{home}}/.mail/*/read/*.md', '{{home}}/.mail/*/archive/*.md'],
                                 multi_document := 'first', hive_partitioning := false, filename := true,
                                 allow_empty := true, ignore_errors := true)
)
SELECT regexp_extract(filename, '\.mail/([^/]+)/', 1) AS mailbox,
       CASE WHEN regexp_matches(filename, '\.mail/[^/]+/read/') THEN 'read'
            WHEN regexp_matches(filename, '\.mail/[^/]+/archive/') THEN 'archive'
            ELSE 'unread' END AS folder,
       regexp_extract(filename, '([^/]+)$', 1) AS file,
       "from", "to", "type", "timestamp", needs_response, priority, tags, in_reply_to, thread_id,
       expires, read_at
FROM files;
