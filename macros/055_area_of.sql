-- area_of(location): a location (JSON) as an area {lat, lng, radius_km} (degrees, km; radius
-- 0 when missing), when it is a mapping with numeric lat and lng; NULL otherwise.
-- Depends on: the json extension.
CREATE OR REPLACE MACRO area_of(location) AS
    CASE WHEN json_type(location) = 'OBJECT'
              AND json_type(location, '$.lat') IN ('BIGINT', 'UBIGINT', 'DOUBLE')
              AND json_type(location, '$.lng') IN ('BIGINT', 'UBIGINT', 'DOUBLE')
         THEN {'lat': (location ->> '$.lat')::DOUBLE, 'lng': (location ->> '$.lng')::DOUBLE,
               'radius_km': greatest(coalesce(TRY_CAST(location ->> '$.radius_km' AS DOUBLE), 0), 0)} END;
