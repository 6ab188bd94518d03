//! Read-only commands: `status`, `events`, `runs`, `plan`. They open the log without the
//! lock, so they work while a run is in progress, and change nothing. The runtime's
//! inspector answers; these commands only render.

use crate::data::{engine_exit, store_exit, DataDir};
use crate::{out, render, Exit};
use apollo11_core::{EventId, StepName};
use apollo11_runtime::inspect::{Pause, RunFilter, RunRow};
use apollo11_runtime::{Inspector, RunId};
use apollo11_store::{DynStore, LeaseStore};
use std::sync::Arc;

async fn inspector(dir: &DataDir) -> Result<Inspector<DynStore>, Exit> {
    Ok(Inspector::new(Arc::new(dir.open_reader().await?)))
}

pub async fn status(
    dir: &DataDir,
    run_id: &str,
    at: Option<u64>,
    json: bool,
) -> Result<Exit, Exit> {
    let mut view = inspector(dir)
        .await?
        .status(&RunId::from(run_id), at.map(EventId))
        .await
        .map_err(engine_exit)?;
    apollo11_shell::shell::name_waits(&mut view);
    if json {
        out::line(render::status_json(&view))?;
    } else {
        if let Some(at) = at {
            out::line(format!("as of event {at}:"))?;
        }
        out::line(render::status_table(&view, dir))?;
    }
    Ok(Exit::code(0))
}

pub async fn events(dir: &DataDir, run_id: &str, json: bool) -> Result<Exit, Exit> {
    let page = inspector(dir)
        .await?
        .events(&RunId::from(run_id), EventId(0), usize::MAX)
        .await
        .map_err(engine_exit)?;
    for e in &page.events {
        if json {
            out::line(render::event_json(e))?;
        } else {
            out::line(render::event_line(e))?;
        }
    }
    Ok(Exit::code(0))
}

/// Every run the log can answer for, newest first; one that cannot be read is named on
/// stderr and the others are still listed, then the command exits with the worst code it met.
/// With `--store`, each run's driver too: the instance holding its lease (`-` for none).
/// With `all`, then the runs only the data dir's archive files hold, each marked `archived`.
pub async fn runs(dir: &DataDir, json: bool, all: bool) -> Result<Exit, Exit> {
    let (store, archive) = if all && dir.shared.is_none() {
        let log = Arc::new(crate::data::open_reader(&dir.path)?);
        (Arc::new(DynStore::new(log.clone())), Some(log))
    } else {
        (Arc::new(dir.open_reader().await?), None)
    };
    let mut inspector = Inspector::new(store.clone());
    if let Some(log) = archive {
        inspector = inspector.with_archive(log);
    }
    let list = inspector
        .runs(&RunFilter::all())
        .await
        .map_err(engine_exit)?;
    let archived = (inspector.archived_runs(&RunFilter::all()).await).map_err(engine_exit)?;
    let leases = store.leases();
    if !json {
        // A time of `LAST EVENT` is 20 characters wide.
        let last = match leases {
            Some(_) => format!("{:<20}  DRIVER", "LAST EVENT"),
            None => "LAST EVENT".to_owned(),
        };
        out::line(format!(
            "{:<40} {:<20} {:<12} {:>7}  {last}",
            "RUN", "WORKFLOW", "STATE", "DONE"
        ))?;
    }
    let mut code = 0;
    for bad in list.unreadable.iter().chain(&archived.unreadable) {
        let exit = engine_exit(bad.error.clone());
        let why = exit.message.as_deref().unwrap_or("unreadable");
        crate::warn(&format!(
            "run `{}` cannot be read: {why}",
            out::name(bad.run_id.as_str())
        ));
        code = code.max(exit.code);
    }
    for row in &list.runs {
        let driver = match &leases {
            Some(leases) => Some(driver(leases.as_ref(), &row.run_id).await?),
            None => None,
        };
        out::line(run_line(row, driver, json))?;
    }
    for row in &archived.runs {
        out::line(archived_line(row, json))?;
    }
    Ok(Exit::code(code))
}

/// One line of `runs --all` for an archived run: `run_line`'s, marked.
fn archived_line(row: &RunRow, json: bool) -> String {
    if json {
        let mut value = serde_json::json!(row);
        value["archived"] = true.into();
        return value.to_string();
    }
    format!("{}  archived", run_line(row, None, false))
}

/// The instance holding a run's lease, or `-`.
async fn driver(leases: &dyn LeaseStore, run_id: &RunId) -> Result<String, Exit> {
    let lease = leases.lease(run_id).await.map_err(store_exit)?;
    Ok(lease.map_or_else(|| "-".to_owned(), |l| l.owner))
}

/// One line of `runs`.
pub(crate) fn run_line(row: &RunRow, driver: Option<String>, json: bool) -> String {
    if json {
        let mut value = serde_json::json!(row);
        if let Some(driver) = driver {
            value["driver"] = driver.into();
        }
        return value.to_string();
    }
    let driver = driver.map_or_else(String::new, |d| format!("  {}", out::name(&d)));
    let done = format!("{}/{}", row.steps_done, row.steps);
    let at = humantime::format_rfc3339_seconds(
        std::time::UNIX_EPOCH + std::time::Duration::from_millis(row.updated_at),
    );
    format!(
        "{:<40} {:<20} {:<12} {:>7}  {at}{driver}",
        out::name(row.run_id.as_str()),
        out::name(&row.workflow),
        row.state.name(),
        done
    )
}

/// What `resume` would do now (see `Inspector::plan`); a paused run gets what an operator
/// must do.
pub async fn plan(dir: &DataDir, run_id: &str) -> Result<Exit, Exit> {
    let plan = inspector(dir)
        .await?
        .plan(&RunId::from(run_id))
        .await
        .map_err(engine_exit)?;
    out::line(format!(
        "run {} is {}; resume would:",
        out::name(run_id),
        plan.state
    ))?;
    for line in &plan.lines {
        out::line(format!("  {}", out::shown(line, out::DETAIL_CHARS_MAX)))?;
    }
    if let Some(pause) = &plan.paused {
        for line in operator_advice(run_id, pause) {
            out::line(format!("  {line}"))?;
        }
    }
    out::line("(nothing was changed)")?;
    Ok(Exit::code(0))
}

/// `plan RUN --rerun STEP [--downstream]`: what `apollo11 rerun` would do, or why the run
/// refuses it (exit 2).
pub async fn rerun_plan(
    dir: &DataDir,
    run_id: &str,
    step: &str,
    downstream: bool,
) -> Result<Exit, Exit> {
    let plan = inspector(dir)
        .await?
        .rerun_plan(&RunId::from(run_id), step, downstream)
        .await
        .map_err(engine_exit)?;
    let names = |steps: &[StepName]| render::names(steps.iter().map(StepName::as_str));
    let flag = if downstream { " --downstream" } else { "" };
    out::line(format!(
        "`apollo11 rerun {} {}{flag}` would:",
        out::name(run_id),
        out::name(step)
    ))?;
    if !plan.compensate.is_empty() {
        out::line(format!(
            "  compensate, in this order: {}",
            names(&plan.compensate)
        ))?;
    }
    out::line(format!(
        "  run again, each with a fresh budget of attempts: {}",
        names(&plan.steps)
    ))?;
    out::line("(nothing was changed)")?;
    Ok(Exit::code(0))
}

/// What an operator can do about a paused run.
fn operator_advice(run_id: &str, pause: &Pause) -> Vec<String> {
    let run_id = out::name(run_id);
    let over = |step: &str, to: &str| {
        format!(
            "`apollo11 override {run_id} {} --to {to} --reason TEXT`",
            out::name(step)
        )
    };
    let mut lines = vec![format!(
        "the run waits for a person: {}",
        render::paused_because(pause)
    )];
    match pause {
        Pause::Operator { .. } => {
            lines.push("`apollo11 resume` lifts the pause and goes on;".to_owned());
            lines.push(format!(
                "or `apollo11 rollback {run_id} --reason TEXT` to undo the run instead."
            ));
            return lines;
        }
        Pause::StepFailed { step, .. } => {
            lines.push(format!(
                "fix the cause, then {} to run it again, or {} / {} to go on without it;",
                over(step.as_str(), "pending"),
                over(step.as_str(), "succeeded"),
                over(step.as_str(), "skipped")
            ));
        }
        Pause::CompensationFailed {
            step, retry_with, ..
        } => {
            lines.push(format!(
                "undo what `{}` did by hand, then {} to go on without undoing it again;",
                out::name(step.as_str()),
                over(step.as_str(), "skipped")
            ));
            if let Some(to) = retry_with {
                lines.push(format!(
                    "or fix what makes the compensation fail, then {} to have it tried again;",
                    over(step.as_str(), to.name())
                ));
            }
        }
    }
    lines.push(format!("then `apollo11 resume {run_id}`."));
    lines
}
