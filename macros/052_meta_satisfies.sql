-- meta_satisfies(offered_meta, needs): whether an executor's capability metadata
-- (`executors.capability_meta`: id -> JSON) satisfies a request's capability_needs: for every
-- need, the executor's metadata for that capability holds the key, and its value (a list, or
-- one value) contains every value needed (`areas: [kitchen]` is satisfied by
-- `areas: [kitchen, living-room]`, `camera: rear` by `camera: rear` or `camera: [rear, front]`;
-- a mapping value must be equal). No needs: true. Keys are read as map entries, never pasted
-- into a JSON path.
-- Depends on: json_texts, the json extension.
CREATE OR REPLACE MACRO meta_satisfies(offered_meta, needs) AS
    coalesce(list_bool_and(list_transform(coalesce(needs, []), lambda need_item:
        coalesce(
            CASE WHEN json_type(offered_meta[need_item.cap]) = 'OBJECT'
                 THEN map_contains(from_json(offered_meta[need_item.cap], '"MAP(VARCHAR, JSON)"'), need_item.key)
                      AND list_has_all(json_texts(from_json(offered_meta[need_item.cap], '"MAP(VARCHAR, JSON)"')[need_item.key]),
                                       need_item.need)
                 ELSE false END,
            false))),
        true);
