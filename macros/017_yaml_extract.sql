-- yaml_extract(value, path): the part of a value read from YAML that a JSON path names, as JSON
-- (the implementation plan's `yaml_extract(messages, '$[*].from')` and `'$[-1].MESS'`). The
-- scanner gives YAML as typed DuckDB values, so this is json_extract over their JSON form.
-- Depends on: the json extension.
CREATE OR REPLACE MACRO yaml_extract(value, path) AS json_extract(to_json(value), path);
