//! A scenario's results: printed as a markdown table, saved as JSON with the host facts and
//! the git revision, so runs can be compared over time.

use crate::catalog::Scenario;
use anyhow::{Context, Result};
use serde_json::{json, Value};
use std::path::Path;

/// A table of figures for one scenario, each row under a key of the scenario's [`Schema`].
///
/// [`Schema`]: crate::catalog::Schema
pub struct Report {
    pub scenario: Scenario,
    pub columns: &'static [&'static str],
    pub rows: Vec<(String, Vec<Value>)>,
    pub notes: Vec<String>,
}

impl Report {
    pub fn new(scenario: Scenario) -> Report {
        Report {
            scenario,
            columns: scenario.schema().columns,
            rows: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Prints and keeps one row. `key` must be one of the scenario's row keys, which the
    /// goals of BENCHMARKS.md name: another is a mistake in this program, caught at once.
    pub fn row(&mut self, key: &str, cells: Vec<Value>) {
        let schema = self.scenario.schema();
        assert!(
            schema.rows.contains(&key),
            "{}: row key `{key}` is not in the catalog's {:?}",
            self.scenario.name(),
            schema.rows
        );
        assert_eq!(
            cells.len(),
            self.columns.len(),
            "{} row `{key}`: one cell per column",
            self.scenario.name()
        );
        println!(
            "| {} |",
            cells.iter().map(cell).collect::<Vec<_>>().join(" | ")
        );
        self.rows.push((key.to_owned(), cells));
    }

    pub fn header(&self) {
        println!(
            "\n## {}\n\n| {} |\n|{}",
            self.scenario.name(),
            self.columns.join(" | "),
            "---|".repeat(self.columns.len())
        );
    }

    pub fn note(&mut self, note: String) {
        println!("{note}");
        self.notes.push(note);
    }

    /// Writes `<out>/<scenario>.json`.
    pub fn save(&self, out: &Path, quick: bool) -> Result<()> {
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|(key, cells)| {
                let row = std::iter::once(("row".to_owned(), Value::from(key.as_str())));
                let named = self.columns.iter().map(|c| c.to_string());
                Value::Object(row.chain(named.zip(cells.iter().cloned())).collect())
            })
            .collect();
        let doc = json!({
            "scenario": self.scenario.name(),
            "quick": quick,
            "git_revision": std::env::var("APOLLO11_GIT_REV").unwrap_or_else(|_| "unknown".into()),
            "host": host(),
            "rows": rows,
            "notes": self.notes,
        });
        std::fs::write(
            out.join(format!("{}.json", self.scenario.name())),
            serde_json::to_string_pretty(&doc)? + "\n",
        )?;
        Ok(())
    }
}

fn cell(v: &Value) -> String {
    match v {
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or_default();
            if f >= 100.0 {
                format!("{f:.0}")
            } else {
                format!("{f:.2}")
            }
        }
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn host() -> Value {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpu = read("/proc/cpuinfo")
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .unwrap_or("")
        .trim()
        .to_owned();
    let memory_kib = read("/proc/meminfo")
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1).map(str::to_owned))
        .unwrap_or_default();
    json!({
        "cpu": cpu,
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "memory_kib": memory_kib,
        "kernel": read("/proc/sys/kernel/osrelease").trim(),
    })
}

/// The value at quantile `q` of sorted samples, in microseconds.
pub fn quantile_us(sorted: &[std::time::Duration], q: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted.get(i).map_or(0.0, |d| d.as_secs_f64() * 1e6)
}

/// One `write` of `batch` records of `record_bytes` then one `fdatasync`, in a loop, for
/// `seconds`: the physical limit the log is compared with. Returns records per second and
/// the sorted latencies of each write + sync.
pub fn raw_fsync(
    dir: &Path,
    batch: usize,
    record_bytes: usize,
    seconds: f64,
) -> Result<(f64, Vec<std::time::Duration>)> {
    use std::os::unix::fs::FileExt;
    std::fs::create_dir_all(dir)?;
    let path = dir.join("raw-fsync.bin");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)?;
    let region = 256u64 << 20;
    file.set_len(region)?;
    let buf = vec![b'r'; record_bytes * batch.max(1)];
    let started = std::time::Instant::now();
    let (mut offset, mut records, mut latencies) = (0u64, 0u64, Vec::new());
    while started.elapsed().as_secs_f64() < seconds {
        let t = std::time::Instant::now();
        file.write_all_at(&buf, offset % (region - buf.len() as u64))?;
        file.sync_data()?;
        latencies.push(t.elapsed());
        offset += buf.len() as u64;
        records += batch as u64;
    }
    let rate = records as f64 / started.elapsed().as_secs_f64();
    std::fs::remove_file(path)?;
    latencies.sort();
    Ok((rate, latencies))
}

/// Runs this benchmark binary again with `flag ARGS` (a probe, measured in a fresh process)
/// and returns the JSON its last line of output holds.
pub fn child(flag: &str, args: &[&str]) -> Result<Value> {
    let output = std::process::Command::new(std::env::current_exe()?)
        .arg(flag)
        .args(args)
        .output()
        .with_context(|| format!("starting the {flag} probe"))?;
    if !output.status.success() {
        anyhow::bail!(
            "{flag} probe failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout
        .lines()
        .last()
        .with_context(|| format!("{flag} probe printed nothing"))?;
    Ok(serde_json::from_str(last)?)
}

/// This process's resident set, from /proc/self/statm.
pub fn resident_bytes() -> Result<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm")?;
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .context("statm has no resident field")?
        .parse()?;
    Ok(pages * 4096)
}

/// This process's peak resident set (`VmHWM`), from /proc/self/status.
pub fn peak_resident_bytes() -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .context("no VmHWM in /proc/self/status")?
        .parse()?;
    Ok(kib * 1024)
}

/// The median of `values` (the upper one of an even count; NaN for none), sorting them.
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    #[test]
    fn saved_rows_carry_their_key_and_columns() {
        let out = tempfile::tempdir().expect("a temporary dir");
        let mut report = Report::new(Scenario::Replay);
        let cells = (0..report.columns.len()).map(|i| json!(i)).collect();
        report.row("log", cells);
        report.save(out.path(), true).expect("saved");
        let text = std::fs::read_to_string(out.path().join("replay.json")).expect("replay.json");
        let doc: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(doc["scenario"], "replay");
        assert_eq!(doc["quick"], true);
        assert_eq!(doc["rows"][0]["row"], "log");
        assert_eq!(doc["rows"][0]["ratio_to_naive"], 7);
    }

    #[test]
    #[should_panic(expected = "row key `chains` is not in the catalog")]
    fn a_row_key_outside_the_catalog_is_refused() {
        let mut report = Report::new(Scenario::Scheduler);
        let cells = vec![json!(null); report.columns.len()];
        report.row("chains", cells);
    }

    #[test]
    #[should_panic(expected = "one cell per column")]
    fn a_row_of_the_wrong_width_is_refused() {
        Report::new(Scenario::Scheduler).row("chain", vec![json!(1)]);
    }

    /// Row keys and columns are distinct, and no column is named `row`, the key's own field.
    #[test]
    fn every_schema_names_each_row_and_column_once() {
        for scenario in Scenario::value_variants() {
            let schema = scenario.schema();
            for names in [schema.rows, schema.columns] {
                let mut sorted = names.to_vec();
                sorted.sort_unstable();
                sorted.dedup();
                assert_eq!(sorted.len(), names.len(), "{scenario:?}: {names:?}");
            }
            assert!(!schema.columns.contains(&"row"), "{scenario:?}");
        }
    }
}
