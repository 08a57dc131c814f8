-- location_covered(access, exec_location, wanted): whether an executor with place paths
-- `access` (VARCHAR[]) and `location` `exec_location` (JSON) covers a request's
-- `constraints.location` `wanted` (JSON). A place path (place_path) is covered by an
-- executor's path equal to it or above it (`home` covers `home/kitchen`; its `access` and a
-- text `location` count); an area (area_of) by an executor's area that overlaps it (centres
-- at most the two radii apart). Whatever cannot be compared (free text, an executor that
-- declares no place or no area, no location) is covered.
-- Depends on: place_path, area_of, distance_km.
CREATE OR REPLACE MACRO location_covered(access, exec_location, wanted) AS
    CASE
        WHEN place_path(wanted) IS NOT NULL THEN
            coalesce(list_bool_or(list_transform(
                list_concat(coalesce(access, []::VARCHAR[]),
                            CASE WHEN json_type(exec_location) = 'VARCHAR' THEN [exec_location ->> '$'] ELSE []::VARCHAR[] END),
                lambda place: place_path(wanted) = rtrim(lower(trim(place)), '/')
                              OR starts_with(place_path(wanted), rtrim(lower(trim(place)), '/') || '/'))),
                     true)
        WHEN area_of(wanted) IS NOT NULL AND area_of(exec_location) IS NOT NULL THEN
            distance_km(area_of(wanted), area_of(exec_location)) <= area_of(wanted).radius_km + area_of(exec_location).radius_km
        ELSE true
    END;
