//! Operators' actions on a run a server drives, asked while its steps are at work: what was
//! recorded is carried out.

use crate::harness::{wait_until, Cli};
use crate::serve::{serve, state};

/// `a` then `b` and `c`, each with a compensation that appends its name to `undo`; `b` and
/// `c`, the last steps, sleep until the file `gate` exists.
const LAST_STEPS_SLEEP: &str = r#"[workflow]
name = "slow-end"
[[steps]]
name = "a"
run = "true"
idempotency = "keyed"
compensate = "echo a >> undo"
[[steps]]
name = "b"
run = "while [ ! -f gate ]; do sleep 0.02; done"
idempotency = "keyed"
compensate = "echo b >> undo"
depends_on = ["a"]
[[steps]]
name = "c"
run = "while [ ! -f gate ]; do sleep 0.02; done"
idempotency = "keyed"
compensate = "echo c >> undo"
depends_on = ["a"]
"#;

#[test]
fn a_rollback_asked_while_the_last_steps_run_undoes_them_once_they_succeed() {
    let cli = Cli::new();
    let wf = cli.workflow("slow-end.toml", LAST_STEPS_SLEEP);
    let (mut server, _) = serve(&cli);
    let following = cli.spawn(&["run", wf.to_str().unwrap(), "--run-id", "r"]);
    wait_until("b and c run", || {
        cli.run(&["status", "r", "--json"]).code == 0 && {
            let steps = &cli.status_json("r")["steps"];
            steps["b"]["state"] == "running" && steps["c"]["state"] == "running"
        }
    });
    let asked = cli.run(&["rollback", "r", "--reason", "abandon", "--by", "alice"]);
    assert_eq!(asked.code, 0, "{}", asked.stderr);
    assert!(
        asked
            .stdout
            .contains("rollback recorded, by alice (abandon)"),
        "{}",
        asked.stdout
    );
    std::fs::write(cli.file("gate"), "").unwrap();
    let followed = crate::harness::ran(following.wait_with_output().unwrap());
    assert_eq!(followed.code, 1, "{}{}", followed.stdout, followed.stderr);
    wait_until("r ends", || state(&cli, "r") != "running");
    assert_eq!(state(&cli, "r"), "rolled_back");
    let undone = std::fs::read_to_string(cli.file("undo")).unwrap();
    let undone: Vec<&str> = undone.lines().collect();
    assert_eq!(undone.len(), 3, "each compensation once: {undone:?}");
    let mut last_steps = undone[..2].to_vec();
    last_steps.sort_unstable();
    assert_eq!(
        (last_steps, undone[2]),
        (vec!["b", "c"], "a"),
        "b and c (either order: one wave) before a"
    );
    let steps = &cli.status_json("r")["steps"];
    for step in ["a", "b", "c"] {
        assert_eq!(steps[step]["state"], "compensated", "{step}");
    }
    server.kill().unwrap();
}
