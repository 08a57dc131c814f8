-- place_covered(places, wanted_place): whether an executor reaching `places`
-- (executor_places) covers a request's place path `wanted_place` (place_path): one of its
-- places is that path or above it (`home` covers `home/kitchen`). Covered when there is no
-- path to compare or the executor names no place.
CREATE OR REPLACE MACRO place_covered(places, wanted_place) AS
    wanted_place IS NULL OR len(coalesce(places, [])) = 0
    OR list_bool_or(list_transform(places, lambda place: wanted_place = place OR starts_with(wanted_place, place || '/')));

-- area_covered(area, wanted_area): whether an executor working in `area` (area_of) covers a
-- request's target area `wanted_area`: they overlap (centres at most the two radii apart).
-- Covered when either is missing.
-- Depends on: distance_km.
CREATE OR REPLACE MACRO area_covered(area, wanted_area) AS
    area IS NULL OR wanted_area IS NULL
    OR distance_km(area, wanted_area) <= area.radius_km + wanted_area.radius_km;

-- location_covered(access, exec_location, wanted): whether an executor with place paths
-- `access` (VARCHAR[]) and `location` `exec_location` (JSON) covers a request's
-- `constraints.location` `wanted` (JSON): a place path by place_covered, an area by
-- area_covered; whatever cannot be compared (free text, an executor that declares no place or
-- no area, no location) is covered. route_batch applies the same two tests to columns it
-- reads once.
-- Depends on: executor_places, place_path, area_of.
CREATE OR REPLACE MACRO location_covered(access, exec_location, wanted) AS
    place_covered(executor_places(access, exec_location), place_path(wanted))
    AND area_covered(area_of(exec_location), area_of(wanted));
