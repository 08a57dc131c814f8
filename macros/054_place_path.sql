-- place_path(location): a location (JSON) as a place path, lower case ('home/kitchen'), when
-- it is one: text of names joined by '/' (letters, digits, '_', '.', ':', '-'); NULL for free
-- text ('grocery store near home'), an area, or nothing. Only place paths are compared with
-- executors' `access`.
-- Depends on: the json extension.
CREATE OR REPLACE MACRO place_path(location) AS
    CASE WHEN json_type(location) = 'VARCHAR'
              AND regexp_full_match(lower(trim(location ->> '$')), '[a-z0-9_.:-]+(/[a-z0-9_.:-]+)*')
         THEN lower(trim(location ->> '$')) END;
