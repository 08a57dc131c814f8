-- capability_needs(requires): what the metadata of a request's required capabilities asks
-- for, as metadata_facts: every key of a mapping must be there, with every value asked for
-- (`areas: [kitchen]` asks for the key `areas` holding `kitchen`). Entries of `requires`
-- (VARCHAR[]) are plain ids, or JSON text of `{id: metadata}`; metadata that is not a
-- mapping is informational and asks for nothing. An executor satisfies the needs when its
-- capability_facts hold them all (meta_satisfies).
-- Depends on: capability_id, metadata_facts, the json extension.
CREATE OR REPLACE MACRO capability_needs(requires) AS
    flatten(list_transform(
        list_filter(coalesce(requires, []::VARCHAR[]), lambda need_entry:
            CASE WHEN starts_with(trim(need_entry), '{') AND json_valid(need_entry)
                 THEN json_type(need_entry::JSON) = 'OBJECT' ELSE false END),
        lambda need_entry: list_transform(
            [{'cap': capability_id(need_entry), 'entry': from_json(need_entry::JSON, '"MAP(VARCHAR, JSON)"')}],
            lambda need_cap: metadata_facts(need_cap.cap, need_cap.entry[need_cap.cap]))[1]));
