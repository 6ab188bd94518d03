//! psql, for the kill tests' setup and checks on PostgreSQL: drop a test's schema, count and
//! terminate its connections.

use anyhow::{ensure, Context, Result};
use std::process::Command;

/// Runs one statement with psql on `url`; returns what it printed (unaligned, tuples only).
pub fn psql(url: &str, sql: &str) -> Result<String> {
    let out = Command::new("psql")
        .env("PGOPTIONS", "-c client_min_messages=warning")
        .args([url, "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .output()
        .context("running psql")?;
    ensure!(
        out.status.success(),
        "psql `{sql}`: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?)
}

/// Drops a test's schema and everything in it.
pub fn drop_schema(url: &str, schema: &str) -> Result<()> {
    psql(url, &format!("DROP SCHEMA IF EXISTS {schema} CASCADE")).map(drop)
}
