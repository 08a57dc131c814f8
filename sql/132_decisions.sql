-- decisions: one row per decision on a request that asks for approval (`approval:`), from the
-- thread's envelope: who decided, how, when, through which channel and why. Columns: ref, seq
-- (1 for the first decision), "by", decision (approved or denied), "at", channel, reason, need
-- (approvals needed), deny_vetoes, thread_status (completed means approved), state, archived.
-- Depends on: threads.
CREATE OR REPLACE VIEW decisions AS
SELECT t.ref,
       d.seq,
       d.entry."by" AS "by",
       d.entry.decision AS decision,
       d.entry."at" AS "at",
       d.entry.channel AS channel,
       d.entry.reason AS reason,
       t.approval.need AS need,
       coalesce(t.approval.deny_vetoes, false) AS deny_vetoes,
       t.status AS thread_status,
       t.state,
       t.archived
FROM threads t,
     LATERAL (SELECT unnest(t.decisions) AS entry, generate_subscripts(t.decisions, 1) AS seq) d;
