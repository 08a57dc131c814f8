-- match_capabilities(required, offered): true when every capability id in `required` is in
-- `offered` (both VARCHAR[]; entries may carry metadata as JSON text, which is tolerated and
-- ignored). An empty or NULL `required` matches every executor.
-- Depends on: capability_id.
CREATE OR REPLACE MACRO match_capabilities(required, offered) AS
    coalesce(
        list_bool_and(
            list_transform(
                coalesce(required, []::VARCHAR[]),
                lambda needed_cap: list_contains(list_transform(coalesce(offered, []::VARCHAR[]), lambda offered_cap: capability_id(offered_cap)), capability_id(needed_cap))
            )
        ),
        true
    );
