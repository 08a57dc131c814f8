//! The SQL assets (`macros/` then `sql/`), embedded in the binary in their load order, with the
//! exchange home filled in. The embedded connection and `mess sql init` use the same text.

/// Every asset file in load order: by the number in the file name, macros before views at the
/// same number. DuckDB binds a macro's body when the macro is created, so scalar macros come
/// first (010-099, with the constant table `time_zones` among them), then the views
/// (100-199), then the table macros that read views (200-299), then the views that call those
/// (300-).
pub const ASSETS: &[(&str, &str)] = &[
    (
        "macros/010_capability_id.sql",
        include_str!("../../macros/010_capability_id.sql"),
    ),
    (
        "macros/015_text_list.sql",
        include_str!("../../macros/015_text_list.sql"),
    ),
    (
        "macros/016_json_texts.sql",
        include_str!("../../macros/016_json_texts.sql"),
    ),
    (
        "macros/017_yaml_extract.sql",
        include_str!("../../macros/017_yaml_extract.sql"),
    ),
    (
        "macros/020_match_capabilities.sql",
        include_str!("../../macros/020_match_capabilities.sql"),
    ),
    (
        "macros/023_clock_seconds.sql",
        include_str!("../../macros/023_clock_seconds.sql"),
    ),
    (
        "macros/024_tz_parse.sql",
        include_str!("../../macros/024_tz_parse.sql"),
    ),
    (
        "sql/025_time_zones.sql",
        include_str!("../../sql/025_time_zones.sql"),
    ),
    (
        "macros/026_tz_transition.sql",
        include_str!("../../macros/026_tz_transition.sql"),
    ),
    (
        "macros/027_utc_offset.sql",
        include_str!("../../macros/027_utc_offset.sql"),
    ),
    (
        "macros/028_local_time.sql",
        include_str!("../../macros/028_local_time.sql"),
    ),
    (
        "macros/029_cron_parse.sql",
        include_str!("../../macros/029_cron_parse.sql"),
    ),
    (
        "macros/031_cron_ranges_match.sql",
        include_str!("../../macros/031_cron_ranges_match.sql"),
    ),
    (
        "macros/032_cron_field_matches.sql",
        include_str!("../../macros/032_cron_field_matches.sql"),
    ),
    (
        "macros/035_cron_names.sql",
        include_str!("../../macros/035_cron_names.sql"),
    ),
    (
        "macros/040_schedule_allows.sql",
        include_str!("../../macros/040_schedule_allows.sql"),
    ),
    (
        "macros/045_available_at.sql",
        include_str!("../../macros/045_available_at.sql"),
    ),
    (
        "macros/048_metadata_facts.sql",
        include_str!("../../macros/048_metadata_facts.sql"),
    ),
    (
        "macros/050_capability_needs.sql",
        include_str!("../../macros/050_capability_needs.sql"),
    ),
    (
        "macros/051_capability_facts.sql",
        include_str!("../../macros/051_capability_facts.sql"),
    ),
    (
        "macros/052_meta_satisfies.sql",
        include_str!("../../macros/052_meta_satisfies.sql"),
    ),
    (
        "macros/054_place_path.sql",
        include_str!("../../macros/054_place_path.sql"),
    ),
    (
        "macros/055_area_of.sql",
        include_str!("../../macros/055_area_of.sql"),
    ),
    (
        "macros/056_distance_km.sql",
        include_str!("../../macros/056_distance_km.sql"),
    ),
    (
        "macros/057_executor_places.sql",
        include_str!("../../macros/057_executor_places.sql"),
    ),
    (
        "macros/058_location_covered.sql",
        include_str!("../../macros/058_location_covered.sql"),
    ),
    (
        "macros/060_iso_seconds.sql",
        include_str!("../../macros/060_iso_seconds.sql"),
    ),
    (
        "sql/110_threads.sql",
        include_str!("../../sql/110_threads.sql"),
    ),
    (
        "sql/120_messages.sql",
        include_str!("../../sql/120_messages.sql"),
    ),
    (
        "sql/121_statuses.sql",
        include_str!("../../sql/121_statuses.sql"),
    ),
    (
        "sql/122_requests.sql",
        include_str!("../../sql/122_requests.sql"),
    ),
    (
        "sql/123_claims.sql",
        include_str!("../../sql/123_claims.sql"),
    ),
    (
        "sql/124_responses.sql",
        include_str!("../../sql/124_responses.sql"),
    ),
    (
        "sql/125_reviews.sql",
        include_str!("../../sql/125_reviews.sql"),
    ),
    (
        "sql/130_thread_history.sql",
        include_str!("../../sql/130_thread_history.sql"),
    ),
    (
        "sql/131_assignments.sql",
        include_str!("../../sql/131_assignments.sql"),
    ),
    (
        "sql/132_decisions.sql",
        include_str!("../../sql/132_decisions.sql"),
    ),
    (
        "sql/140_executors.sql",
        include_str!("../../sql/140_executors.sql"),
    ),
    (
        "sql/150_routing_rules.sql",
        include_str!("../../sql/150_routing_rules.sql"),
    ),
    (
        "sql/160_capabilities.sql",
        include_str!("../../sql/160_capabilities.sql"),
    ),
    (
        "sql/170_pending_by_capability.sql",
        include_str!("../../sql/170_pending_by_capability.sql"),
    ),
    (
        "sql/180_executor_stats.sql",
        include_str!("../../sql/180_executor_stats.sql"),
    ),
    (
        "sql/185_executor_reputation.sql",
        include_str!("../../sql/185_executor_reputation.sql"),
    ),
    ("sql/190_mail.sql", include_str!("../../sql/190_mail.sql")),
    (
        "sql/195_ledger.sql",
        include_str!("../../sql/195_ledger.sql"),
    ),
    (
        "sql/196_balances.sql",
        include_str!("../../sql/196_balances.sql"),
    ),
    (
        "macros/205_active_claims.sql",
        include_str!("../../macros/205_active_claims.sql"),
    ),
    (
        "macros/210_executor_availability_at.sql",
        include_str!("../../macros/210_executor_availability_at.sql"),
    ),
    (
        "macros/215_route_batch.sql",
        include_str!("../../macros/215_route_batch.sql"),
    ),
    (
        "macros/220_route_for.sql",
        include_str!("../../macros/220_route_for.sql"),
    ),
    (
        "macros/230_route_request.sql",
        include_str!("../../macros/230_route_request.sql"),
    ),
    (
        "sql/310_executor_availability.sql",
        include_str!("../../sql/310_executor_availability.sql"),
    ),
];

/// The placeholder for the exchange home in asset files.
const HOME: &str = "{{home}}";

/// The placeholder for the rows of the `time_zones` table, a JSON list inside a SQL string:
/// `[{"zone": ..., "rule": ...}, ...]`.
const TIME_ZONES: &str = "{{time_zones}}";

/// The time zones of `protocol::tz` as the JSON text of a SQL string (names and rules hold no
/// quote; doubled anyway, so that the text can never end the string).
fn time_zone_rows() -> String {
    let rows: Vec<serde_json::Value> = crate::protocol::tz::ZONES
        .iter()
        .map(|(zone, rule)| serde_json::json!({"zone": zone, "rule": rule}))
        .collect();
    serde_json::Value::Array(rows)
        .to_string()
        .replace('\'', "''")
}

/// The assets with `home` filled in (as a SQL string body: single quotes doubled).
pub fn render(home: &str) -> Vec<(&'static str, String)> {
    // The home only ever appears inside `read_yaml_auto` patterns: its wildcard characters
    // are escaped so that a folder named `a[1]` is read as itself.
    let home = yaml_scan::escape_glob(home.trim_end_matches('/')).replace('\'', "''");
    let zones = time_zone_rows();
    ASSETS
        .iter()
        .map(|(name, sql)| (*name, sql.replace(HOME, &home).replace(TIME_ZONES, &zones)))
        .collect()
}

/// The assets with every pattern relative to the home (`{{home}}/x` becomes `x`), for the
/// confined query instance, whose `read_yaml_auto` reads relative patterns from the home: the
/// SQL of its views and macros then names no server path.
pub fn render_relative() -> Vec<(&'static str, String)> {
    let prefix = format!("{HOME}/");
    let zones = time_zone_rows();
    ASSETS
        .iter()
        .map(|(name, sql)| (*name, sql.replace(&prefix, "").replace(TIME_ZONES, &zones)))
        .collect()
}
