-- text_list(value): a JSON list of scalars as VARCHAR[] (a single scalar as a one-element
-- list; anything else, or NULL, as the empty list), each element as its text.
-- Depends on: the json extension.
CREATE OR REPLACE MACRO text_list(value) AS
    CASE coalesce(json_type(value), 'NULL')
        WHEN 'ARRAY' THEN list_filter(list_transform(from_json(value, '["JSON"]'), lambda text_item: text_item ->> '$'),
                                      lambda text_item: text_item IS NOT NULL)
        WHEN 'OBJECT' THEN []::VARCHAR[]
        WHEN 'NULL' THEN []::VARCHAR[]
        ELSE [value ->> '$']
    END;
