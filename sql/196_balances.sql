-- balances: every account's shells from the ledger: account, credited (shells in), debited
-- (shells out), balance (credited - debited), movements. `operator`'s balance is minus all that
-- was granted, so the balances sum to zero; an `escrow:REF` account holds a request's
-- compensation until it is released or refunded.
-- Depends on: ledger.
CREATE OR REPLACE VIEW balances AS
WITH sides AS (
    SELECT "to" AS account, shells AS credited, 0::BIGINT AS debited FROM ledger
    UNION ALL
    SELECT "from" AS account, 0::BIGINT AS credited, shells AS debited FROM ledger
)
SELECT account,
       sum(credited)::BIGINT AS credited,
       sum(debited)::BIGINT AS debited,
       (sum(credited) - sum(debited))::BIGINT AS balance,
       count(*) AS movements
FROM sides
GROUP BY account
ORDER BY account;
