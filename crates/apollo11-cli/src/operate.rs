//! `override`, `pause`, `rollback`, `validate`, `verify`.

use crate::data::{engine_exit, open_writer, DataDir};
use crate::{definition, Exit};
use apollo11_core::OverrideTarget;
use apollo11_runtime::{Engine, EngineConfig, RunAction, RunId};
use std::path::Path;
use std::sync::Arc;

pub async fn override_step(
    dir: &DataDir,
    run_id: &str,
    step: &str,
    to: &str,
    reason: &str,
    by: &str,
) -> Result<Exit, Exit> {
    let to = OverrideTarget::parse(to).ok_or_else(|| {
        Exit::fail(
            2,
            format!("--to {to}: expected succeeded, skipped, pending or failed"),
        )
    })?;
    if reason.trim().is_empty() {
        return Err(Exit::fail(
            2,
            "--reason must say why: it is kept in the log for whoever replays this run",
        ));
    }
    let store = Arc::new(open_writer(dir)?);
    let engine = Engine::open(store, EngineConfig::default())
        .await
        .map_err(engine_exit)?;
    engine
        .override_step(&RunId::from(run_id), step, to, by, reason)
        .await
        .map_err(engine_exit)?;
    engine.close().await;
    println!(
        "{run_id}: {step} set to {} by {by} ({reason}); continue with `apollo11 resume {run_id}`",
        to.name()
    );
    Ok(Exit::code(0))
}

/// `pause` and `rollback`: an operator action on a whole run, recorded with who and why;
/// `resume` then drives the run (and lifts a pause).
pub async fn act(
    dir: &DataDir,
    run_id: &str,
    action: RunAction,
    reason: &str,
    by: &str,
) -> Result<Exit, Exit> {
    if reason.trim().is_empty() {
        return Err(Exit::fail(
            2,
            "--reason must say why: it is kept in the log for whoever replays this run",
        ));
    }
    let store = Arc::new(open_writer(dir)?);
    let engine = Engine::open(store, EngineConfig::default())
        .await
        .map_err(engine_exit)?;
    let id = RunId::from(run_id);
    let done = match action {
        RunAction::Pause => engine.pause(&id, by, reason).await,
        RunAction::Resume => engine.unpause(&id, by, reason).await,
        RunAction::Rollback => engine.request_rollback(&id, by, reason).await,
    };
    engine.close().await;
    done.map_err(engine_exit)?;
    let next = match action {
        RunAction::Pause => "`apollo11 resume` lifts it",
        RunAction::Resume | RunAction::Rollback => "it happens at the next `apollo11 resume`",
    };
    println!("{run_id}: {action} recorded, by {by} ({reason}); {next} {run_id}");
    Ok(Exit::code(0))
}

pub fn validate(file: &Path) -> Result<Exit, Exit> {
    let spec = definition::load(file).map_err(|e| Exit::fail(2, e.to_string()))?;
    println!(
        "{}: workflow `{}` with {} steps is valid",
        file.display(),
        spec.name,
        spec.steps.len()
    );
    Ok(Exit::code(0))
}

pub fn verify(dir: &Path, json: bool) -> Result<Exit, Exit> {
    if !dir.join("segments").is_dir() {
        return Err(Exit::fail(
            2,
            format!("{} holds no Apollo-11 data", dir.display()),
        ));
    }
    let report = apollo11_log::verify(dir).map_err(crate::data::store_exit)?;
    if json {
        let segments: Vec<_> = report.segments.iter().map(|s| serde_json::json!({"file": s.file, "base_event_id": s.base_event_id, "events": s.events, "bytes": s.bytes})).collect();
        let snapshots: Vec<_> = report.snapshots.iter().map(|s| serde_json::json!({"file": s.file, "watermark": s.watermark, "problem": s.problem})).collect();
        let damage = |d: &Option<apollo11_log::Damage>| {
            d.as_ref().map(
                |d| serde_json::json!({"file": d.file, "offset": d.offset, "reason": d.reason}),
            )
        };
        let out = serde_json::json!({"clean": report.is_clean(), "events": report.events, "segments": segments, "snapshots": snapshots, "torn_tail": damage(&report.torn_tail), "torn_files": report.torn_files, "damage": damage(&report.damage)});
        println!("{out}");
    } else {
        for s in &report.segments {
            println!(
                "segment  {:<40} events {:>8} from #{:<8} {} bytes",
                s.file, s.events, s.base_event_id, s.bytes
            );
        }
        for s in &report.snapshots {
            println!(
                "snapshot {:<40} {}",
                s.file,
                s.problem.clone().unwrap_or_else(|| format!(
                    "ok, covers events up to {}",
                    s.watermark.unwrap_or(0)
                ))
            );
        }
        if let Some(t) = &report.torn_tail {
            println!("torn tail in {} at offset {}: {} (cut at the next writing open, kept in a .torn file)", t.file, t.offset, t.reason);
        }
        for f in &report.torn_files {
            println!("kept     segments/{f} (bytes cut by an earlier recovery)");
        }
        match &report.damage {
            Some(d) => println!("DAMAGE   {} at offset {}: {}", d.file, d.offset, d.reason),
            None if report.is_clean() => println!("clean: {} events verified", report.events),
            None => println!(
                "damaged snapshots (the log itself is intact: {} events)",
                report.events
            ),
        }
    }
    Ok(Exit::code(if report.is_clean() { 0 } else { 3 }))
}
