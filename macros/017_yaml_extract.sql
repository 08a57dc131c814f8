-- yaml_extract(value, path): the part of a value read from YAML that a JSON path names, as JSON
-- (the implementation plan's `yaml_extract(messages, '$[*].from')` and `'$[-1].MESS'`). A thread
-- row's `messages` is JSON text, read as JSON; typed values (structs, lists) are read through
-- their JSON form.
-- Depends on: the json extension.
CREATE OR REPLACE MACRO yaml_extract(value, path) AS json_extract(
    CASE WHEN typeof(value) = 'VARCHAR' THEN value::VARCHAR ELSE to_json(value)::VARCHAR END,
    path
);
