-- executor_places(access, location): the place paths an executor reaches, lower case without
-- a trailing '/': its `access` list, and its `location` when that is text (JSON). Compared
-- with a request's place path by place_covered.
-- Depends on: the json extension.
CREATE OR REPLACE MACRO executor_places(access, location) AS
    list_transform(
        list_concat(coalesce(access, []::VARCHAR[]),
                    CASE WHEN json_type(location) = 'VARCHAR' THEN [location ->> '$'] ELSE []::VARCHAR[] END),
        lambda place: rtrim(lower(trim(place)), '/'));
