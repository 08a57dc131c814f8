-- distance_km(a, b): the great-circle distance in km between the centres of areas `a` and `b`
-- ({lat, lng, ...} in degrees), by the haversine formula on a sphere of the Earth's mean
-- radius (6371.0088 km).
CREATE OR REPLACE MACRO distance_km(a, b) AS
    2 * 6371.0088 * asin(least(1.0, sqrt(
        pow(sin(radians(b.lat - a.lat) / 2), 2)
        + cos(radians(a.lat)) * cos(radians(b.lat)) * pow(sin(radians(b.lng - a.lng) / 2), 2))));
