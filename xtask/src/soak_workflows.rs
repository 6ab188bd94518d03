//! The soak's shell workflows, written as TOML files into the `--workflows` folder. Each step
//! first appends `run step attempt pid` to the steps ledger (`ledger.rs`), so the end check
//! can tell every execution. What each ends in, and which operator actions it gets, is in
//! `soak_load.rs` and `soak_check.rs`.

use anyhow::{Context, Result};
use std::path::Path;

/// Four steps in a diamond, 50 ms each: the bulk of the load.
pub const SMALL: &str = "soak-small";
/// Its first step fails (retryably) on its first attempt and succeeds on the second.
pub const RETRY: &str = "soak-retry";
/// The last step fails for good; the two before it are compensated: rolled back.
pub const FATAL: &str = "soak-fatal";
/// As `FATAL`, but a compensation fails too: paused with a step `compensation_failed`.
pub const COMP_FAILS: &str = "soak-comp-fails";
/// `gate` fails for good under `on_failure = "pause"`; an operator overrides it.
pub const STUCK: &str = "soak-stuck";
/// Six steps of 5 s in a chain; operators pause, resume and roll some back.
pub const LONG: &str = "soak-long";
/// The step of `STUCK` an operator overrides.
pub const GATE: &str = "gate";

/// Writes every workflow into `dir`, their steps appending to `ledger`.
pub fn write(dir: &Path, ledger: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let line = format!(
        r#"echo "$APOLLO11_RUN_ID $APOLLO11_STEP $APOLLO11_ATTEMPT $$" >> "{}""#,
        ledger.display()
    );
    for (name, text) in [
        (SMALL, small(&line)),
        (RETRY, retry(&line)),
        (FATAL, fatal(&line, "true")),
        (COMP_FAILS, fatal(&line, "exit 1")),
        (STUCK, stuck(&line)),
        (LONG, long(&line)),
    ] {
        let file = dir.join(format!("{name}.toml"));
        std::fs::write(&file, text).with_context(|| format!("writing {}", file.display()))?;
    }
    Ok(())
}

/// The `[workflow]` table and the defaults every soak workflow shares.
fn head(name: &str, on_failure: &str) -> String {
    format!(
        "[workflow]\nname = \"{name}\"\non_failure = \"{on_failure}\"\n\n[defaults]\ntimeout = \"1m\"\nretry = {{ max_attempts = 3, backoff = \"fixed\", initial = \"10ms\" }}\nnon_retryable_exit_codes = [2]\n"
    )
}

/// One `[[steps]]` table.
fn step(name: &str, run: &str, depends_on: &[&str], compensate: Option<&str>) -> String {
    let mut text =
        format!("\n[[steps]]\nname = \"{name}\"\nrun = '{run}'\nidempotency = \"keyed\"\n");
    if !depends_on.is_empty() {
        let deps: Vec<String> = depends_on.iter().map(|d| format!("\"{d}\"")).collect();
        text += &format!("depends_on = [{}]\n", deps.join(", "));
    }
    if let Some(compensate) = compensate {
        text += &format!("compensate = '{compensate}'\n");
    }
    text
}

fn small(line: &str) -> String {
    let run = format!("{line} && sleep 0.05");
    head(SMALL, "pause")
        + &step("a", &run, &[], None)
        + &step("b", &run, &["a"], None)
        + &step("c", &run, &["a"], None)
        + &step("d", &run, &["b", "c"], None)
}

fn retry(line: &str) -> String {
    head(RETRY, "pause")
        + &step(
            "flaky",
            &format!(r#"{line} && [ "$APOLLO11_ATTEMPT" -gt 1 ]"#),
            &[],
            None,
        )
        + &step("after", line, &["flaky"], None)
}

/// `reserve` → `charge` → `ship`, which exits 2 (not retryable); `charge`'s compensation
/// runs `charge_undo`.
fn fatal(line: &str, charge_undo: &str) -> String {
    let name = if charge_undo == "true" {
        FATAL
    } else {
        COMP_FAILS
    };
    head(name, "rollback")
        + &step("reserve", line, &[], Some("true"))
        + &step("charge", line, &["reserve"], Some(charge_undo))
        + &step("ship", &format!("{line}; exit 2"), &["charge"], None)
}

fn stuck(line: &str) -> String {
    head(STUCK, "pause")
        + &step("prepare", line, &[], None)
        + &step(GATE, &format!("{line}; exit 2"), &["prepare"], None)
        + &step("publish", line, &[GATE], None)
}

fn long(line: &str) -> String {
    let run = format!("{line} && sleep 5");
    let mut text = head(LONG, "rollback");
    for i in 0..6 {
        let before = format!("s{}", i.max(1) - 1);
        let deps: &[&str] = if i == 0 { &[] } else { &[before.as_str()] };
        text += &step(&format!("s{i}"), &run, deps, Some("true"));
    }
    text
}
