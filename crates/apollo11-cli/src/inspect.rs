//! Read-only commands: `status`, `events`, `runs`, `plan`. They open the log without the
//! lock, so they work while a run is in progress, and change nothing.

use crate::data::{load_run, open_reader, store_exit};
use crate::{out, render, Exit};
use apollo11_core::{EventKind, Payload, Seq};
use apollo11_machine::{Command, FailReason, Now, PauseCause, RunMachine, RunStatus};
use apollo11_store::EventStore;
use std::collections::BTreeSet;
use std::path::Path;

pub async fn status(dir: &Path, run_id: &str, at: Option<u64>, json: bool) -> Result<Exit, Exit> {
    let store = open_reader(dir)?;
    let run = load_run(&store, run_id, at).await?;
    let status = run.status();
    if json {
        out::line(render::status_json(
            &run.state.run_id,
            status,
            &run.state,
            &run.spec,
        ))?;
    } else {
        if let Some(at) = at {
            out::line(format!("as of event {at}:"))?;
        }
        out::line(render::status_table(
            &run.state.run_id,
            status,
            &run.state,
            &run.spec,
            dir,
        ))?;
    }
    Ok(Exit::code(0))
}

pub async fn events(dir: &Path, run_id: &str, json: bool) -> Result<Exit, Exit> {
    let store = open_reader(dir)?;
    let run = load_run(&store, run_id, None).await?;
    for e in &run.events {
        if json {
            out::line(render::event_json(e))?;
        } else {
            out::line(render::event_line(e))?;
        }
    }
    Ok(Exit::code(0))
}

/// Every run the log can answer for; one that cannot be read is named on stderr and the
/// others are still listed, then the command exits with the worst code it met.
pub async fn runs(dir: &Path, json: bool) -> Result<Exit, Exit> {
    let store = open_reader(dir)?;
    let runs = store.list_runs().await.map_err(store_exit)?;
    if !json {
        out::line(format!(
            "{:<40} {:<20} {:<12} {:>7}  LAST EVENT",
            "RUN", "WORKFLOW", "STATE", "DONE"
        ))?;
    }
    let mut code = 0;
    for summary in runs {
        let run = match load_run(&store, summary.run_id.as_str(), None).await {
            Ok(run) => run,
            Err(exit) => {
                let why = exit.message.as_deref().unwrap_or("unreadable");
                crate::warn(&format!(
                    "run `{}` cannot be read: {why}",
                    out::name(summary.run_id.as_str())
                ));
                code = code.max(exit.code);
                continue;
            }
        };
        out::line(run_line(&run, &summary, json))?;
    }
    Ok(Exit::code(code))
}

/// One line of `runs`.
fn run_line(run: &crate::data::Run, summary: &apollo11_store::RunSummary, json: bool) -> String {
    let done = run
        .spec
        .steps
        .iter()
        .filter(|s| run.state.status(&s.name).satisfies_dependents())
        .count();
    if json {
        let line = serde_json::json!({"run_id": summary.run_id.as_str(), "workflow": run.spec.name, "state": run.status().name(), "steps_done": done, "steps": run.spec.steps.len(), "last_event_id": summary.last_event_id.0});
        return line.to_string();
    }
    let last = run.events.last().map_or(0, |e| e.at_ms);
    let done = format!("{done}/{}", run.spec.steps.len());
    let at = humantime::format_rfc3339_seconds(
        std::time::UNIX_EPOCH + std::time::Duration::from_millis(last),
    );
    format!(
        "{:<40} {:<20} {:<12} {:>7}  {at}",
        out::name(summary.run_id.as_str()),
        out::name(&run.spec.name),
        run.status().name(),
        done
    )
}

/// What `resume` would do now: the same `decide` the engine runs, on the same state, with
/// nothing executing (as after a crash). Attempts and compensations it would mark
/// interrupted are folded as failed so the plan also shows what follows from that; a paused
/// run gets what an operator must do.
pub async fn plan(dir: &Path, run_id: &str) -> Result<Exit, Exit> {
    let store = open_reader(dir)?;
    let run = load_run(&store, run_id, None).await?;
    let mut machine = RunMachine::compile(&run.spec, run.state.clone(), |_, fallback| fallback)
        .map_err(|e| Exit::fail(1, e.to_string()))?;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64;
    let nothing = BTreeSet::new();
    let mut at_ms = now_ms;
    let status = run.status();
    out::line(format!("run {run_id} is {status}; resume would:"))?;
    // Follow the decisions through interruptions and backoffs (at most a few rounds) until
    // something starts or the run is finished, folding nothing but hypothetical failures.
    for _ in 0..4 {
        let commands = machine.decide(Now {
            ms: at_ms,
            executing: &nothing,
        });
        let mut wake = None;
        let mut failures = Vec::new();
        for command in &commands {
            match command {
                Command::WakeAt { ms } => wake = Some(*ms),
                Command::Fail { .. } | Command::FailCompensation { .. } => {
                    failures.extend(command.event());
                }
                Command::Start { .. } | Command::Compensate { .. } | Command::Finish { .. } => {}
            }
            let line = describe(command, at_ms);
            out::line(format!("  {}", out::shown(&line, out::DETAIL_CHARS_MAX)))?;
        }
        let acted = commands.iter().any(|c| {
            matches!(
                c,
                Command::Start { .. } | Command::Compensate { .. } | Command::Finish { .. }
            )
        });
        let failed = !failures.is_empty();
        for (step, kind, attempt) in failures {
            let event = hypothetical(machine.state(), step, kind, attempt, at_ms);
            machine.apply(&event);
        }
        if commands.contains(&Command::Finish {
            status: RunStatus::Paused,
        }) {
            for line in operator_advice(run_id, &machine) {
                println!("  {line}");
            }
        }
        match (acted, wake) {
            (false, Some(ms)) if !failed => at_ms = ms,
            (false, _) if failed => {}
            _ => break,
        }
    }
    out::line("(nothing was changed)")?;
    Ok(Exit::code(0))
}

/// What an operator can do about a paused run.
fn operator_advice(run_id: &str, machine: &RunMachine) -> Vec<String> {
    let Some(cause) = machine.pause_cause() else {
        return Vec::new();
    };
    let why = crate::render::paused_because_cause(machine.state(), &cause);
    let over = |step: &str, to: &str| {
        format!("`apollo11 override {run_id} {step} --to {to} --reason TEXT`")
    };
    let mut lines = vec![format!("the run waits for a person: {why}")];
    match cause {
        PauseCause::Operator { .. } => {
            lines.push("`apollo11 resume` lifts the pause and goes on;".to_owned());
            lines.push(format!(
                "or `apollo11 rollback {run_id} --reason TEXT` to undo the run instead."
            ));
            return lines;
        }
        PauseCause::StepFailed { step } => {
            lines.push(format!(
                "fix the cause, then {} to run it again, or {} / {} to go on without it;",
                over(step.as_str(), "pending"),
                over(step.as_str(), "succeeded"),
                over(step.as_str(), "skipped")
            ));
        }
        PauseCause::CompensationFailed { step, retry_with } => {
            lines.push(format!(
                "undo what `{step}` did by hand, then {} to go on without undoing it again;",
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

/// The event resume would append for a command that fails an attempt or a compensation try.
fn hypothetical(
    state: &apollo11_machine::RunState,
    step: &apollo11_core::StepName,
    kind: EventKind,
    attempt: u32,
    at_ms: u64,
) -> apollo11_core::Event {
    apollo11_core::Event {
        event_id: apollo11_core::EventId(state.last_event_id.0 + 1),
        run_id: state.run_id.clone(),
        seq: Seq(state.last_seq.0 + 1),
        step: Some(step.clone()),
        kind,
        attempt,
        at_ms,
        instance: "plan".into(),
        payload: Payload::Empty,
    }
}

fn describe(command: &Command, now_ms: u64) -> String {
    match command {
        Command::Start { step, attempt } if *attempt == 1 => format!("start {step}"),
        Command::Start { step, attempt } => format!("rerun {step} as attempt {attempt}"),
        Command::Fail {
            step,
            attempt,
            reason: FailReason::Interrupted,
        } => {
            format!("mark {step} attempt {attempt} as interrupted (it was running when the engine stopped), then retry it per its policy")
        }
        Command::Fail {
            step,
            attempt,
            reason: FailReason::Timeout,
        } => format!("fail {step} attempt {attempt}: past its timeout"),
        Command::Compensate { step, .. } => format!("compensate {step}"),
        Command::FailCompensation { step, .. } => format!(
            "mark the compensation of {step} as interrupted (it was running when the engine stopped), then try it again per the step's retry policy"
        ),
        Command::WakeAt { ms } => format!(
            "then, after {} (a retry backoff or a timeout):",
            render::millis(ms.saturating_sub(now_ms))
        ),
        Command::Finish { status } => format!("nothing: the run is {status}"),
    }
}
