-- json_texts(value): the values a JSON value stands for, as JSON texts: the elements of a list,
-- the value itself otherwise, none for JSON null or NULL. Two values compare equal when their
-- texts do (DuckDB writes JSON minified).
-- Depends on: the json extension.
CREATE OR REPLACE MACRO json_texts(value) AS
    CASE coalesce(json_type(value), 'NULL')
        WHEN 'NULL' THEN []::VARCHAR[]
        WHEN 'ARRAY' THEN list_transform(from_json(value, '["JSON"]'), lambda json_item: json(json_item)::VARCHAR)
        ELSE [json(value)::VARCHAR]
    END;
