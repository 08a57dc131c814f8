-- capability_id(entry): the id of one capability entry as the views carry it: a plain id
-- ('take-photo'), or JSON text of `{id: metadata}` ('{"vacuum-floor":{"areas":["kitchen"]}}').
-- Depends on: the json extension.
CREATE OR REPLACE MACRO capability_id(entry) AS
    CASE WHEN starts_with(trim(entry), '{') THEN json_keys(entry::JSON)[1] ELSE entry END;
