-- capability_id(entry): the id of one capability entry as the views carry it: a plain id
-- ('take-photo'), or JSON text of `{id: metadata}` ('{"vacuum-floor":{"areas":["kitchen"]}}').
-- In a list of such entries with different ids, read_yaml_auto gives every element the union
-- of the keys, the others null ('{"vacuum-floor":null,"take-photo":{"camera":"rear"}}'), so
-- the id is the first key with a value (the first key when all are null). Text that only looks
-- like JSON ('{x') is an id as written; keys are read as map entries, never pasted into a JSON
-- path, so no id can change what is read.
-- Depends on: the json extension.
CREATE OR REPLACE MACRO capability_id(entry) AS
    CASE WHEN starts_with(trim(entry), '{') AND json_valid(entry) AND json_type(entry::JSON) = 'OBJECT'
    THEN coalesce(
        list_filter(map_entries(from_json(entry::JSON, '"MAP(VARCHAR, JSON)"')),
                    lambda cap_kv: cap_kv.value IS NOT NULL AND json_type(cap_kv.value) <> 'NULL')[1].key,
        json_keys(entry::JSON)[1])
    ELSE entry END;
