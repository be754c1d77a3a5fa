//! jprof's tables, created on first use (docs/fleet.md explains each column and key, and how
//! to make them Distributed on a cluster). Only column types and engines ClickHouse 18.16
//! already had: no LowCardinality, DateTime64, codecs or TTL.

use super::client::Client;
use crate::error::Result;

/// Each distinct stack once, by the hash of its frames (root first, as parallel arrays).
/// Pushes insert the stacks they use; a stack inserted twice is merged away in the background,
/// and readers take `any()` per hash meanwhile.
const STACKS: &str = "CREATE TABLE IF NOT EXISTS {db}.stacks (
    stack_hash UInt64,
    names Array(String),
    kinds Array(UInt8),
    modules Array(String),
    files Array(String),
    lines Array(UInt32),
    tiers Array(String),
    tier_classes Array(UInt8)
) ENGINE = ReplacingMergeTree ORDER BY stack_hash";

/// One row per sample. `batch` names the push's insert the row came in by the position of its
/// first sample in the push (each insert is within one day, so it lands as one part, whole or
/// not at all); a retried push sends only the samples no batch there covers.
const SAMPLES: &str = "CREATE TABLE IF NOT EXISTS {db}.samples (
    date Date,
    time_ns UInt64,
    push_id UInt64,
    batch UInt64,
    stack_hash UInt64,
    pid UInt32,
    tid UInt32,
    cpu UInt32,
    thread String,
    weight UInt64
) ENGINE = MergeTree PARTITION BY date ORDER BY (push_id, stack_hash, tid, time_ns)";

/// One row per finished push, written last: readers see a push's samples only once its row is
/// here. Labels, and what the weights count, are per push.
const PUSHES: &str = "CREATE TABLE IF NOT EXISTS {db}.pushes (
    push_id UInt64,
    pushed DateTime,
    label_keys Array(String),
    label_values Array(String),
    source String,
    title String,
    event String,
    unit String,
    frequency_hz UInt64,
    samples UInt64,
    stacks UInt64,
    batches UInt32,
    first_ns UInt64,
    last_ns UInt64
) ENGINE = ReplacingMergeTree ORDER BY push_id";

/// Creates the database and the tables where missing.
pub(crate) fn ensure(client: &Client) -> Result<()> {
    let db = &client.store().database;
    client.query(&format!("CREATE DATABASE IF NOT EXISTS {db}"))?;
    for table in [STACKS, SAMPLES, PUSHES] {
        client.query(&table.replace("{db}", db))?;
    }
    Ok(())
}

/// Whether the tables exist (a store nothing was pushed to has none).
pub(crate) fn exists(client: &Client) -> Result<bool> {
    let db = super::sql_string(&client.store().database);
    let n = client.query(&format!(
        "SELECT count() FROM system.tables WHERE database = {db} \
         AND name IN ('stacks', 'samples', 'pushes')"
    ))?;
    Ok(n.trim() == "3")
}
