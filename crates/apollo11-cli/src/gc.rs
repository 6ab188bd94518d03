//! `gc`: the retention policy (flags over `[retention]` in the data dir's `apollo11.toml`)
//! and what it lets go. The inspector decides (`Inspector::retention`); `--dry-run` renders
//! it, and without it the log moves those runs out of its live segments into an archive
//! file (`FileLog::collect`), and the engine's snapshot forgets them (`Engine::forget`).

use crate::data::{engine_exit, open_existing_writer, store_exit, DataDir};
use crate::inspect::run_line;
use crate::{out, Exit};
use apollo11_log::{FileLog, RunId};
use apollo11_runtime::inspect::{Kept, Retention};
use apollo11_runtime::{Engine, EngineConfig, Inspector};
use serde::Deserialize;
use std::path::Path;
use std::sync::Arc;

/// The data dir's configuration file.
pub const CONFIG_FILE: &str = "apollo11.toml";

/// `apollo11.toml`: every table optional, unknown keys refused.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    retention: RetentionConfig,
}

/// `[retention]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RetentionConfig {
    keep_days: Option<u32>,
    keep_last: Option<u32>,
}

/// The policy of `--keep-days` and `--keep-last`, each flag given over the config file's
/// value.
fn policy(
    data_dir: &Path,
    keep_days: Option<u32>,
    keep_last: Option<u32>,
) -> Result<Retention, Exit> {
    let config = read_config(&data_dir.join(CONFIG_FILE))?.retention;
    Retention::new(
        keep_days.or(config.keep_days),
        keep_last.or(config.keep_last),
    )
    .map_err(|e| Exit::fail(2, e))
}

/// The config file, or the defaults when there is none.
fn read_config(path: &Path) -> Result<Config, Exit> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Config::default()),
        Err(e) => return Err(Exit::fail(2, format!("reading {}: {e}", path.display()))),
    };
    toml::from_str(&text).map_err(|e| {
        let located =
            apollo11_shell::definition::toml_error(&text, &path.display().to_string(), &e);
        Exit::fail(2, located.to_string())
    })
}

/// `gc --dry-run`: the runs the policy lets go, one line each as `runs` prints them, after
/// a line saying how many stay and why. Takes no lock and changes nothing.
pub async fn dry_run(
    dir: &DataDir,
    keep_days: Option<u32>,
    keep_last: Option<u32>,
) -> Result<Exit, Exit> {
    let policy = file_log_policy(dir, keep_days, keep_last)?;
    let inspector = Inspector::new(Arc::new(dir.open_reader().await?));
    let plan = inspector.retention(&policy).await.map_err(engine_exit)?;
    let kept: Vec<String> = (plan.kept.iter())
        .map(|(why, n)| format!("{n} {}", reason(*why)))
        .collect();
    out::line(format!(
        "would archive {} runs; keeping {}",
        plan.archive.len(),
        if kept.is_empty() {
            "none".to_owned()
        } else {
            kept.join(", ")
        }
    ))?;
    for row in &plan.archive {
        out::line(run_line(row, None, false))?;
    }
    Ok(Exit::code(0))
}

/// `gc`: archives the runs the policy lets go, moving them out of the live segments (those
/// with an event in the segment being written are left for a later `gc`), then prints what
/// it moved and the live segments' bytes before and after. Takes the data dir's lock: while a
/// server or a run holds it, exits 4 naming the holder.
pub async fn collect(
    dir: &DataDir,
    keep_days: Option<u32>,
    keep_last: Option<u32>,
) -> Result<Exit, Exit> {
    let policy = file_log_policy(dir, keep_days, keep_last)?;
    let log = Arc::new(open_existing_writer(dir)?);
    let plan = (Inspector::new(log.clone()).retention(&policy).await).map_err(engine_exit)?;
    let runs: Vec<RunId> = plan.archive.iter().map(|row| row.run_id.clone()).collect();
    let worker = log.clone();
    let collected = tokio::task::spawn_blocking(move || worker.collect(&runs))
        .await
        .map_err(|e| Exit::fail(1, format!("gc stopped: {e}")))?
        .map_err(store_exit)?;
    forget(log, &collected.moved).await?;
    out::line(format!(
        "archived {} runs ({} events){}; {} left in the segment being written for a later gc",
        collected.moved.len(),
        collected.events,
        collected
            .archive
            .map_or(String::new(), |f| format!(" to {f}")),
        collected.left.len(),
    ))?;
    out::line(format!(
        "live segments: {} bytes before, {} after ({} rewritten, appends paused {} ms)",
        collected.live_bytes_before,
        collected.live_bytes_after,
        collected.segments,
        collected.pause.as_millis(),
    ))?;
    for run in &collected.moved {
        out::line(format!(
            "archived {}",
            out::shown(run.as_str(), out::DETAIL_CHARS_MAX)
        ))?;
    }
    Ok(Exit::code(0))
}

/// Saves a snapshot of the engine's view without the `moved` runs (`Engine::forget`): the
/// next engine to open (`serve`, `run`) would otherwise load them from the snapshot the last
/// one saved, and keep them in memory for as long as it runs.
async fn forget(log: Arc<FileLog>, moved: &[RunId]) -> Result<(), Exit> {
    if moved.is_empty() {
        return Ok(());
    }
    let engine = (Engine::open(log, EngineConfig::default()).await).map_err(engine_exit)?;
    engine.forget(moved).await;
    engine.close().await;
    Ok(())
}

/// The policy, for the data dir's file log only: with `--store`, the database keeps the
/// events and has no retention.
pub fn file_log_policy(
    dir: &DataDir,
    keep_days: Option<u32>,
    keep_last: Option<u32>,
) -> Result<Retention, Exit> {
    if dir.shared.is_some() {
        return Err(Exit::fail(
            2,
            "`gc` archives runs of the data dir's file log; with --store the database keeps \
             the events, and it has no retention",
        ));
    }
    policy(&dir.path, keep_days, keep_last)
}

fn reason(why: Kept) -> &'static str {
    match why {
        Kept::NotFinished => "running, paused or failed",
        Kept::Newest => "among the newest of their workflow",
        Kept::Recent => "ended recently",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_in(text: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(CONFIG_FILE), text).unwrap();
        dir
    }

    #[test]
    fn flags_win_over_the_config_file_rule_by_rule() {
        let dir = config_in("[retention]\nkeep_days = 30\nkeep_last = 5\n");
        let policy = policy(dir.path(), None, Some(2)).ok().unwrap();
        assert_eq!((policy.keep_days, policy.keep_last), (Some(30), Some(2)));
    }

    #[test]
    fn no_rule_anywhere_is_refused() {
        let empty = tempfile::tempdir().unwrap();
        let exit = policy(empty.path(), None, None).err().unwrap();
        assert_eq!(exit.code, 2);
        assert!(exit.message.unwrap().contains("no retention policy"));
    }

    #[test]
    fn an_unknown_key_or_a_bad_value_is_refused_on_one_line_naming_the_file_line_and_column() {
        for (text, at) in [
            (
                "[retention]\nkeep_dayz = 3\n",
                ":2:1: unknown field `keep_dayz`",
            ),
            ("[retention]\nkeep_days = -1\n", ":2:13: "),
        ] {
            let dir = config_in(text);
            let exit = policy(dir.path(), Some(1), None).err().unwrap();
            assert_eq!(exit.code, 2, "{text}");
            let message = exit.message.unwrap();
            assert!(message.contains(&format!("{CONFIG_FILE}{at}")), "{message}");
            assert!(!message.contains('\n'), "{message}");
        }
    }
}
