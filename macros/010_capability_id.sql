-- capability_id(entry): the id of one capability entry as the views carry it: a plain id
-- ('take-photo'), or JSON text of `{id: metadata}` ('{"vacuum-floor":{"areas":["kitchen"]}}').
-- In a list of such entries with different ids, read_yaml_auto gives every element the union
-- of the keys, the others null ('{"vacuum-floor":null,"take-photo":{"camera":"rear"}}'), so
-- the id is the first key with a value (the first key when all are null).
-- Depends on: the json extension.
CREATE OR REPLACE MACRO capability_id(entry) AS
    CASE WHEN starts_with(trim(entry), '{') THEN coalesce(
        list_filter(json_keys(entry::JSON),
                    lambda cap_key: json_type(entry::JSON, '$."' || cap_key || '"') <> 'NULL')[1],
        json_keys(entry::JSON)[1])
    ELSE entry END;
