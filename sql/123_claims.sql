-- claims: one row per claim, the reference design's name (a `claimed` status in a thread;
-- a claim the exchange refused was never written). Columns: ref, seq, executor (the principal
-- who claimed: the message's sender as the exchange recorded it, never an `executor:` the
-- payload declares about itself), claimed_at,
-- estimate (v1.1's claim estimate, as written, e.g. PT45M), eta, message, released (true when a
-- later status ended the claim without a completion: declined, failed, cancelled or expired),
-- state, archived, filename.
-- Depends on: statuses.
CREATE OR REPLACE VIEW claims AS
SELECT c.ref,
       c.seq,
       c."from" AS executor,
       c.received AS claimed_at,
       c.status ->> '$.estimate' AS estimate,
       c.status ->> '$.eta' AS eta,
       c.message,
       EXISTS (SELECT 1 FROM statuses l
               WHERE l.ref = c.ref AND l.seq > c.seq
                 AND l.code IN ('declined', 'failed', 'cancelled', 'canceled', 'expired')) AS released,
       c.state,
       c.archived,
       c.filename
FROM statuses c
WHERE c.code = 'claimed';
