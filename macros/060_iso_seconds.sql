-- iso_seconds(d): the seconds of an ISO 8601 duration as MESS writes estimates (`PT45M`,
-- `P1DT2H`, `PT1H30M`, `P2W`); NULL for anything else (months and years have no fixed length).
CREATE OR REPLACE MACRO iso_seconds(d) AS (
    CASE WHEN regexp_full_match(upper(trim(d)), 'P(\d+W)?(\d+D)?(T(\d+H)?(\d+M)?(\d+(\.\d+)?S)?)?')
              AND upper(trim(d)) NOT IN ('P', 'PT')
              AND NOT ends_with(upper(trim(d)), 'T')
         THEN coalesce(TRY_CAST(regexp_extract(upper(d), '(\d+)W', 1) AS DOUBLE), 0) * 604800
            + coalesce(TRY_CAST(regexp_extract(upper(d), '(\d+)D', 1) AS DOUBLE), 0) * 86400
            + coalesce(TRY_CAST(regexp_extract(upper(d), 'T.*?(\d+)H', 1) AS DOUBLE), 0) * 3600
            + coalesce(TRY_CAST(regexp_extract(upper(d), 'T.*?(\d+)M', 1) AS DOUBLE), 0) * 60
            + coalesce(TRY_CAST(regexp_extract(upper(d), 'T.*?(\d+(\.\d+)?)S', 1) AS DOUBLE), 0)
    END
);
