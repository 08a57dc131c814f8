-- ledger: every movement of shells, as recorded in ledger/YYYY-MM.yaml (one document each).
-- Columns: id (what it is for: grant-..., escrow-REF, carry-FROM-TO, share-REF-N, settle-REF,
-- rest-REF), at, "from" (the account debited), "to" (the account credited), shells, kind (grant,
-- escrow, carry, share, release, refund), thread, note, filename. Accounts are principal ids,
-- `escrow:REF` and `operator` (where grants come from).
-- Depends on: read_yaml_auto, the json extension.
CREATE OR REPLACE VIEW ledger AS
WITH docs AS (
    SELECT to_json(r) AS j, r.filename AS filename
    FROM read_yaml_auto('{{home}}/ledger/*.yaml', allow_empty := true, filename := true) r
)
SELECT j ->> '$.id' AS id,
       (j ->> '$.at')::TIMESTAMPTZ AS "at",
       j ->> '$.from' AS "from",
       j ->> '$.to' AS "to",
       (j ->> '$.shells')::BIGINT AS shells,
       j ->> '$.kind' AS kind,
       j ->> '$.thread' AS thread,
       j ->> '$.note' AS note,
       filename
FROM docs
WHERE j ->> '$.id' IS NOT NULL AND TRY_CAST(j ->> '$.shells' AS BIGINT) > 0;
