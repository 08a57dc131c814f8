-- metadata_facts(cap, meta): what capability `cap`'s metadata `meta` (JSON) states, as facts
-- routing compares by containment: for every key of a mapping, `cap␟"key"` (the key is
-- there) and `cap␟"key"␟value` for each value (json_texts: each element of a list, else the
-- value), ␟ being chr(31). Keys and values are JSON texts, whose quotes and escapes keep any
-- fact from reading as another. A key whose value is null states nothing: YAML files read
-- together share one shape, which gives each the others' keys as null. Metadata that is not a
-- mapping states nothing.
-- Depends on: json_texts, the json extension.
CREATE OR REPLACE MACRO metadata_facts(cap, meta) AS
    CASE WHEN json_type(meta) = 'OBJECT' THEN
        flatten(list_transform(list_filter(map_entries(from_json(meta, '"MAP(VARCHAR, JSON)"')),
                                           lambda meta_kv: coalesce(json_type(meta_kv.value), 'NULL') <> 'NULL'),
                               lambda meta_kv:
            list_concat([cap || chr(31) || to_json(meta_kv.key)::VARCHAR],
                        list_transform(json_texts(meta_kv.value), lambda meta_value:
                            cap || chr(31) || to_json(meta_kv.key)::VARCHAR || chr(31) || meta_value))))
    ELSE []::VARCHAR[] END;
