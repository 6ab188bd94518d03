//! `apollo11` killed with SIGKILL while a step runs: the crash spends none of the step's
//! attempts, so `resume` runs it again rather than rolling the run back; a step whose
//! attempts are cut short three times in a row pauses the run, naming the step, until a
//! person resumes it; the cgroup such a try was left in is read for what it used and removed
//! by `resume`.

use crate::harness::{wait_for, Cli};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// `book` (with a compensation), then `slow`, allowed one attempt, under rollback. Each
/// attempt of `slow` appends its number to `seen`; attempts up to `hang_until` touch
/// `slow.N` and work for 30 s.
fn one_attempt(hang_until: u32) -> String {
    format!(
        r#"[workflow]
name = "once"
on_failure = "rollback"
[[steps]]
name = "book"
idempotency = "keyed"
run = "echo book >> seen"
compensate = "echo unbook >> seen"
[[steps]]
name = "slow"
depends_on = ["book"]
idempotency = "natural"
retry = {{ max_attempts = 1, initial = "10ms" }}
run = '''
echo "slow $APOLLO11_ATTEMPT" >> seen
if [ "$APOLLO11_ATTEMPT" -le {hang_until} ]; then touch "slow.$APOLLO11_ATTEMPT"; sleep 30; fi
'''
"#
    )
}

/// Runs `args` and kills `apollo11` with SIGKILL once `started` exists.
pub fn kill_9_once(cli: &Cli, args: &[&str], started: &str) {
    let mut child = cli.spawn(args);
    wait_for(&cli.file(started));
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
    child.wait().unwrap();
}

/// Starts run `r` of `one_attempt(hang_until)` and kills `apollo11` in attempt 1 of `slow`.
fn run_and_kill(cli: &Cli, hang_until: u32) {
    let wf = cli.workflow("wf.toml", &one_attempt(hang_until));
    let run = ["run", wf.to_str().unwrap(), "--run-id", "r"];
    kill_9_once(cli, &run, "slow.1");
}

/// `apollo11 resume r`, which must exit with `code`.
fn resume(cli: &Cli, code: i32) {
    let out = cli.run(&["resume", "r"]);
    assert_eq!(out.code, code, "{}{}", out.stdout, out.stderr);
}

fn seen(cli: &Cli) -> Vec<String> {
    std::fs::read_to_string(cli.file("seen"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn kill_9_mid_step_spends_no_attempt_and_resume_runs_the_step_again() {
    let cli = Cli::new();
    run_and_kill(&cli, 1);
    resume(&cli, 0);
    let status = cli.status_json("r");
    assert_eq!(status["state"], "succeeded", "{status}");
    assert_eq!(status["steps"]["slow"]["attempt"], 2, "{status}");
    assert_eq!(seen(&cli), ["book", "slow 1", "slow 2"], "nothing undone");
    let kinds: Vec<_> = cli
        .events_json("r")
        .into_iter()
        .filter(|e| e["step"] == "slow")
        .map(|e| e["kind"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        kinds,
        [
            "started",
            "placed",
            "interrupted",
            "started",
            "placed",
            "attempt_usage",
            "succeeded"
        ]
    );
}

#[test]
fn a_step_killed_with_the_engine_three_times_pauses_the_run_until_a_person_resumes_it() {
    let cli = Cli::new();
    run_and_kill(&cli, 3);
    kill_9_once(&cli, &["resume", "r"], "slow.2");
    kill_9_once(&cli, &["resume", "r"], "slow.3");
    resume(&cli, 1);
    let status = cli.status_json("r");
    assert_eq!(status["state"], "paused", "{status}");
    let reason = "step `slow` was interrupted 3 times in a row";
    assert!(status.to_string().contains(reason), "{status}");
    let plan = cli.run(&["plan", "r"]);
    assert!(plan.stdout.contains(reason), "{}", plan.stdout);
    assert_eq!(
        seen(&cli),
        ["book", "slow 1", "slow 2", "slow 3"],
        "no compensation, no fourth attempt"
    );
    resume(&cli, 0);
    assert_eq!(cli.status_json("r")["steps"]["slow"]["attempt"], 4);
    assert_eq!(seen(&cli), ["book", "slow 1", "slow 2", "slow 3", "slow 4"]);
}

#[test]
fn resume_reads_what_a_try_killed_with_its_engine_used_from_its_cgroup_then_removes_it() {
    if !crate::limits::cgroups() {
        return;
    }
    let cli = Cli::new();
    let toml = r#"[workflow]
name = "held"
[[steps]]
name = "held"
idempotency = "natural"
limits = { memory = "256MiB" }
run = '''
if [ "$APOLLO11_ATTEMPT" -eq 1 ]; then
  i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done
fi
echo $$ > held.new && mv held.new held.pid
if [ "$APOLLO11_ATTEMPT" -eq 1 ]; then sleep 30; fi
'''
"#;
    let wf = cli.workflow("wf.toml", toml);
    kill_9_once(
        &cli,
        &["run", wf.to_str().unwrap(), "--run-id", "r"],
        "held.pid",
    );
    let pid = std::fs::read_to_string(cli.file("held.pid")).unwrap();
    let cgroup = crate::workers::cgroup_of(pid.trim());
    assert!(
        !crate::workers::cgroups_named(&cgroup).is_empty(),
        "the killed engine left its try's cgroup {cgroup}"
    );
    resume(&cli, 0);
    assert_eq!(
        crate::workers::cgroups_named(&cgroup),
        Vec::<std::path::PathBuf>::new()
    );
    let status = cli.status_json("r");
    let first = &status["steps"]["held"]["usage"][0];
    assert_eq!(first["attempt"], 1, "{status}");
    assert_eq!(first["isolation"], "cgroup", "{first}");
    assert_eq!(first["memory_limit_bytes"], 256 << 20, "{first}");
    assert!(
        first["cpu_user_ms"].as_u64() > Some(0),
        "it counted: {first}"
    );
    assert!(first["peak_memory_bytes"].as_u64() > Some(0), "{first}");
    let kinds: Vec<String> = (cli.events_json("r").iter())
        .filter(|e| e["step"] == "held" && e["attempt"] == 1)
        .map(|e| e["kind"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(kinds, ["started", "placed", "attempt_usage", "interrupted"]);
}
