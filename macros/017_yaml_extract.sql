-- yaml_extract(value, path): the part of a YAML text (or of a value read from YAML) that a JSON
-- path names, as JSON: the reference design's `yaml_extract(messages, '$[*].from')` and
-- `'$[-1].MESS'`. Text is read as YAML (JSON text is YAML too; several documents read as a
-- list of them) with yaml_to_json; typed values (structs, lists) through their JSON form. Text
-- that is not YAML gives NULL.
-- Depends on: yaml_to_json, the json extension.
CREATE OR REPLACE MACRO yaml_extract(value, path) AS json_extract(
    CASE WHEN typeof(value) <> 'VARCHAR' THEN to_json(value)::VARCHAR
         WHEN json_valid(value::VARCHAR) THEN value::VARCHAR
         ELSE yaml_to_json(value::VARCHAR) END,
    path
);
