//! `verify` and `repair`: what is damaged in the data dir, and the explicit, destructive cut
//! that gets the log past its first damage. Both print everything they report, in text and
//! (`verify --json`) JSON; `repair` cuts nothing unless told `--yes`.

use crate::data::{check_layout, damaged, store_exit, DataDir};
use crate::{out, Exit};
use apollo11_log::{BlobReport, Damage, RepairPlan, RepairReport, VerifyReport};
use serde_json::{json, Value};
use std::path::Path;

pub fn verify(dir: &Path, json: bool) -> Result<Exit, Exit> {
    check_layout(dir)?;
    let report = apollo11_log::verify(dir).map_err(store_exit)?;
    if json {
        out::line(verify_json(&report))?;
    } else {
        for line in verify_lines(&report) {
            out::line(line)?;
        }
    }
    if report.is_clean() {
        return Ok(Exit::code(0));
    }
    Err(damaged("the data dir is damaged (see above)"))
}

fn damage_json(d: &Damage) -> Value {
    json!({"file": d.file, "offset": d.offset, "reason": d.reason})
}

fn blob_json(b: &BlobReport) -> Value {
    let used_by: Vec<Value> = b
        .used_by
        .iter()
        .map(|u| json!({"event_id": u.event_id, "run_id": u.run_id, "step": u.step}))
        .collect();
    json!({"file": b.file, "problem": b.problem, "used_by": used_by})
}

fn verify_json(report: &VerifyReport) -> Value {
    let segments: Vec<Value> = report
        .segments
        .iter()
        .map(|s| json!({"file": s.file, "base_event_id": s.base_event_id, "events": s.events, "bytes": s.bytes, "stored_bytes": s.stored_bytes}))
        .collect();
    let snapshots: Vec<Value> = report
        .snapshots
        .iter()
        .map(|s| json!({"file": s.file, "watermark": s.watermark, "problem": s.problem}))
        .collect();
    json!({
        "clean": report.is_clean(),
        "events": report.event_count(),
        "last_event_id": report.events,
        "segments": segments,
        "snapshots": snapshots,
        "torn_tail": report.torn_tail.as_ref().map(damage_json),
        "torn_files": report.torn_files,
        "damage": report.damage.as_ref().map(damage_json),
        "ignored_index_files": report.ignored_index_files.iter().map(damage_json).collect::<Vec<_>>(),
        "blobs": report.blobs,
        "blob_problems": report.blob_problems.iter().map(blob_json).collect::<Vec<_>>(),
        "archives": report.archives.iter().map(|a| json!({"file": a.file, "runs": a.runs, "events": a.events, "last_event_id": a.last_event_id})).collect::<Vec<_>>(),
        "archive_problems": report.archive_problems.iter().map(damage_json).collect::<Vec<_>>(),
        "ids_past_end": report.ids_past_end.as_ref().map(damage_json),
        "leftover_archives": report.leftover_archives,
        "unfinished_gc": report.unfinished_gc,
    })
}

/// Who refers to a blob: `run r step s event 12, …` (at most a few, then a count).
fn used_by(b: &BlobReport) -> String {
    const SHOWN: usize = 5;
    if b.used_by.is_empty() {
        return "no event refers to it".into();
    }
    let mut uses: Vec<String> = b
        .used_by
        .iter()
        .take(SHOWN)
        .map(|u| {
            let step = u
                .step
                .as_deref()
                .map_or(String::new(), |s| format!(" step {}", out::name(s)));
            format!("run {}{step} event {}", out::name(&u.run_id), u.event_id)
        })
        .collect();
    if b.used_by.len() > SHOWN {
        uses.push(format!("{} more events", b.used_by.len() - SHOWN));
    }
    format!("used by {}", uses.join(", "))
}

fn verify_lines(report: &VerifyReport) -> Vec<String> {
    let mut lines = Vec::new();
    for s in &report.segments {
        let stored = s.stored_bytes.map_or(String::new(), |stored| {
            format!(", compressed (zstd) to {stored} bytes on disk")
        });
        lines.push(format!(
            "segment  {:<40} events {:>8} from #{:<8} {} bytes{stored}",
            s.file, s.events, s.base_event_id, s.bytes
        ));
    }
    for s in &report.snapshots {
        let what = s
            .problem
            .clone()
            .unwrap_or_else(|| format!("ok, covers events up to {}", s.watermark.unwrap_or(0)));
        lines.push(format!("snapshot {:<40} {what}", s.file));
    }
    for d in &report.ignored_index_files {
        lines.push(format!(
            "index    {:<40} ignored: {} (derived data, rebuilt by the next writing open)",
            d.file, d.reason
        ));
    }
    lines.push(format!("blobs    {} files hashed", report.blobs));
    for b in &report.blob_problems {
        lines.push(format!(
            "BLOB     {}: {}; {}",
            b.file,
            b.problem,
            used_by(b)
        ));
    }
    for a in &report.archives {
        lines.push(format!(
            "archive  {:<40} runs {:>8} events {:>8}",
            a.file, a.runs, a.events
        ));
    }
    for d in &report.archive_problems {
        lines.push(format!(
            "ARCHIVE  {} at offset {}: {}",
            d.file, d.offset, d.reason
        ));
    }
    if let Some(d) = &report.ids_past_end {
        lines.push(format!(
            "IDS      {} at offset {}: {}",
            d.file, d.offset, d.reason
        ));
    }
    for file in &report.leftover_archives {
        lines.push(format!(
            "archive  {file}: a copy a gc stopped before its swap left (every run still live), \
             removed by the next writing open"
        ));
    }
    for manifest in &report.unfinished_gc {
        lines.push(format!(
            "gc       {manifest}: a swap a crash interrupted, finished by the next writing open \
             (damage reported above may be its half-done state: do not repair before)"
        ));
    }
    if let Some(t) = &report.torn_tail {
        lines.push(format!(
            "torn tail in {} at offset {}: {} (cut at the next writing open, kept in a .torn file)",
            t.file, t.offset, t.reason
        ));
    }
    for f in &report.torn_files {
        lines.push(format!(
            "kept     segments/{f} (bytes cut by an earlier recovery)"
        ));
    }
    lines.push(verdict(report));
    lines
        .into_iter()
        .map(|l| out::shown(&l, out::DETAIL_CHARS_MAX))
        .collect()
}

/// The last line: the log's damage first, else what else is damaged, else clean.
fn verdict(report: &VerifyReport) -> String {
    if let Some(d) = &report.damage {
        return format!("DAMAGE   {} at offset {}: {}", d.file, d.offset, d.reason);
    }
    let snapshots = report
        .snapshots
        .iter()
        .filter(|s| s.problem.is_some())
        .count();
    let mut damaged = Vec::new();
    if snapshots > 0 {
        damaged.push(count(snapshots, "snapshot"));
    }
    if !report.blob_problems.is_empty() {
        damaged.push(count(report.blob_problems.len(), "blob"));
    }
    if !report.archive_problems.is_empty() {
        damaged.push(count(report.archive_problems.len(), "archive file"));
    }
    if report.ids_past_end.is_some() {
        damaged.push("archived event ids past the log's end".into());
    }
    let events = report.event_count();
    if damaged.is_empty() {
        return format!("clean: {events} events and {} blobs verified", report.blobs);
    }
    format!(
        "damaged: {} (the log itself is intact: {events} events)",
        damaged.join(" and "),
    )
}

fn count(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// `repair`: shows what the cut would be; with `--yes`, makes it and says what it kept where.
/// With `--yes` the plan is made under the lock, after a `gc` swap a crash interrupted is
/// finished: without it, such a swap refuses the plan (exit 1).
pub fn repair(dir: &DataDir, yes: bool) -> Result<Exit, Exit> {
    check_layout(dir)?;
    if yes {
        let report = apollo11_log::repair(&dir.path).map_err(store_exit)?;
        for line in repaired_lines(&report) {
            out::line(out::shown(&line, out::DETAIL_CHARS_MAX))?;
        }
        return blobs_left(dir);
    }
    let plan = apollo11_log::plan_repair(&dir.path).map_err(store_exit)?;
    if plan.is_empty() {
        out::line(nothing_to_repair(plan.event_count))?;
        return blobs_left(dir);
    }
    for line in plan_lines(&plan) {
        out::line(out::shown(&line, out::DETAIL_CHARS_MAX))?;
    }
    let loss = match plan.damage {
        Some(_) => format!(
            "makes this cut, which loses every event after event {} for good",
            plan.events_kept
        ),
        None => "makes these changes".into(),
    };
    Err(Exit::fail(
        2,
        format!("nothing was changed: `apollo11 repair --yes` {loss}"),
    ))
}

fn nothing_to_repair(events: u64) -> String {
    format!("nothing to repair: the log is intact ({events} events)")
}

/// What `repair --yes` did, a line each.
fn repaired_lines(report: &RepairReport) -> Vec<String> {
    let changed = !(report.kept_in.is_empty()
        && report.dropped.is_empty()
        && report.set_aside.is_empty()
        && report.reserved.is_none());
    let mut lines = vec![match &report.damage {
        Some(d) => format!(
            "repaired: the log keeps events 1 to {} and was cut at {} offset {}",
            report.events_kept, d.file, d.offset
        ),
        None if !changed => nothing_to_repair(report.event_count),
        None => format!(
            "repaired: the log was intact and keeps its {} events",
            report.event_count
        ),
    }];
    lines.extend(
        report
            .kept_in
            .iter()
            .map(|k| format!("kept     the bytes cut, in {k}")),
    );
    lines.extend(report.dropped.iter().map(|d| format!("removed  {d}")));
    lines.extend(
        (report.set_aside.iter()).map(|f| format!("set aside {f} (its runs are no longer read)")),
    );
    lines.extend(report.reserved.iter().map(|r| {
        format!(
            "reserved ids up to {} in {r}: archived ids are never given again",
            report.events_kept
        )
    }));
    lines
}

/// `compact`: compresses the sealed segments past the newest `keep`, one line each.
pub fn compact(dir: &DataDir, keep: usize) -> Result<Exit, Exit> {
    let log = crate::data::open_existing_writer(dir)?;
    let done = log.compress_cold(keep).map_err(store_exit)?;
    let (plain, stored) = done
        .iter()
        .fold((0, 0), |(p, s), c| (p + c.plain_bytes, s + c.stored_bytes));
    out::line(format!(
        "compressed {} segments: {plain} bytes to {stored} on disk",
        done.len()
    ))?;
    Ok(Exit::code(0))
}

/// Damaged or missing blobs are no part of the log: no cut brings them back. Says so (exit
/// 3) when there are any, since a run that needs one cannot go on.
fn blobs_left(dir: &Path) -> Result<Exit, Exit> {
    let report = apollo11_log::verify(dir).map_err(store_exit)?;
    if report.blob_problems.is_empty() {
        return Ok(Exit::code(0));
    }
    for b in &report.blob_problems {
        let line = format!("BLOB     {}: {}; {}", b.file, b.problem, used_by(b));
        out::line(out::shown(&line, out::DETAIL_CHARS_MAX))?;
    }
    let n = report.blob_problems.len();
    Err(Exit::fail(
        3,
        format!(
            "{} cannot be repaired by cutting the log: restore {} from a copy of this data dir (`apollo11 verify` lists the events that need {})",
            count(n, "damaged or missing blob"),
            if n == 1 { "it" } else { "them" },
            if n == 1 { "it" } else { "them" },
        ),
    ))
}

fn plan_lines(plan: &RepairPlan) -> Vec<String> {
    let mut lines = Vec::new();
    match &plan.damage {
        Some(damage) => {
            lines.push(format!(
                "DAMAGE   {} at offset {}: {}",
                damage.file, damage.offset, damage.reason
            ));
            lines.push(format!(
                "repair would keep events 1 to {} and cut the log there:",
                plan.events_kept
            ));
        }
        None => lines.push(format!(
            "the log is intact ({} events); repair would set aside damaged archive files, \
             reserve archived ids or remove damaged snapshots (caches of the log):",
            plan.event_count
        )),
    }
    for c in &plan.cuts {
        let kept = if c.kept {
            "kept in a .torn file"
        } else {
            "all zeros, nothing to keep"
        };
        lines.push(match c.at {
            0 => format!("  move aside {} ({} bytes, {kept})", c.file, c.bytes),
            at => format!(
                "  cut        {} from offset {at} ({} bytes, {kept})",
                c.file, c.bytes
            ),
        });
    }
    for d in &plan.drops {
        lines.push(format!("  remove     {d}"));
    }
    for a in &plan.set_aside {
        let d = &a.damage;
        let runs = match &a.runs {
            Some(runs) => format!(
                "{} runs lost: {}",
                runs.len(),
                (runs.iter().map(|r| r.as_str()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => "its table is damaged: the runs lost are unknown".into(),
        };
        lines.push(format!(
            "  set aside  {} as {} (at offset {}: {}; {runs})",
            d.file, a.to, d.offset, d.reason
        ));
    }
    if let Some(up_to) = plan.reserve {
        lines.push(format!(
            "  reserve    ids {} to {up_to}, which an archive file holds, so none is given again",
            plan.events_kept + 1
        ));
    }
    lines
}
