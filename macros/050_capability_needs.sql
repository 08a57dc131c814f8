-- capability_needs(requires): what the metadata of a request's required capabilities asks
-- for, one struct per metadata key: {cap, key, need (json_texts of the value)}. Entries of
-- `requires` (VARCHAR[]) are plain ids, or JSON text of `{id: metadata}`; only metadata that
-- is a mapping asks for anything (other metadata is informational). See meta_satisfies.
-- Depends on: capability_id, json_texts, the json extension.
CREATE OR REPLACE MACRO capability_needs(requires) AS
    flatten(list_transform(
        list_filter(coalesce(requires, []::VARCHAR[]), lambda need_entry:
            CASE WHEN starts_with(trim(need_entry), '{') AND json_valid(need_entry)
                 THEN json_type(need_entry::JSON) = 'OBJECT' ELSE false END),
        lambda need_entry: list_transform(
            CASE WHEN json_type(from_json(need_entry::JSON, '"MAP(VARCHAR, JSON)"')[capability_id(need_entry)]) = 'OBJECT'
                 THEN map_entries(from_json(from_json(need_entry::JSON, '"MAP(VARCHAR, JSON)"')[capability_id(need_entry)],
                                            '"MAP(VARCHAR, JSON)"'))
                 ELSE []::STRUCT("key" VARCHAR, "value" JSON)[] END,
            lambda need_kv: {'cap': capability_id(need_entry), 'key': need_kv.key, 'need': json_texts(need_kv.value)})));
