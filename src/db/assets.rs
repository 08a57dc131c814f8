//! The SQL assets (`macros/` then `sql/`), embedded in the binary in their load order, with the
//! exchange home filled in. The embedded connection and `mess sql init` use the same text.

/// Every asset file in load order: by the number in the file name, macros before views at the
/// same number. DuckDB binds a macro's body when the macro is created, so scalar macros come
/// first (010-099), then the views (100-199), then the table macros that read views (200-299),
/// then the views that call those (300-).
pub const ASSETS: &[(&str, &str)] = &[
    (
        "macros/010_capability_id.sql",
        include_str!("../../macros/010_capability_id.sql"),
    ),
    (
        "macros/020_match_capabilities.sql",
        include_str!("../../macros/020_match_capabilities.sql"),
    ),
    (
        "macros/030_cron_field_matches.sql",
        include_str!("../../macros/030_cron_field_matches.sql"),
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
        "sql/110_threads.sql",
        include_str!("../../sql/110_threads.sql"),
    ),
    (
        "sql/120_messages.sql",
        include_str!("../../sql/120_messages.sql"),
    ),
    (
        "sql/130_thread_history.sql",
        include_str!("../../sql/130_thread_history.sql"),
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
    ("sql/190_mail.sql", include_str!("../../sql/190_mail.sql")),
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

/// The assets with `home` filled in (as a SQL string body: single quotes doubled).
pub fn render(home: &str) -> Vec<(&'static str, String)> {
    // The home only ever appears inside `read_yaml_auto` patterns: its wildcard characters
    // are escaped so that a folder named `a[1]` is read as itself.
    let home = yaml_scan::escape_glob(home.trim_end_matches('/')).replace('\'', "''");
    ASSETS
        .iter()
        .map(|(name, sql)| (*name, sql.replace(HOME, &home)))
        .collect()
}

/// The assets with every pattern relative to the home (`{{home}}/x` becomes `x`), for the
/// confined query instance, whose `read_yaml_auto` reads relative patterns from the home: the
/// SQL of its views and macros then names no server path.
pub fn render_relative() -> Vec<(&'static str, String)> {
    let prefix = format!("{HOME}/");
    ASSETS
        .iter()
        .map(|(name, sql)| (*name, sql.replace(&prefix, "")))
        .collect()
}
