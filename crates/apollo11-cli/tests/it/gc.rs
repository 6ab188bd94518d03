//! `gc --dry-run`: the runs the retention policy lets go, from flags over `[retention]` in
//! the data dir's `apollo11.toml`; never a paused run; nothing changed.

use crate::harness::Cli;

const OK: &str = "[workflow]\nname = \"ok\"\n[[steps]]\nname = \"a\"\nrun = \"true\"\nidempotency = \"natural\"\n";

/// The run ids `gc --dry-run` lists, after its first line.
fn listed(stdout: &str) -> Vec<String> {
    (stdout.lines().skip(1))
        .map(|l| l.split_whitespace().next().unwrap().to_owned())
        .collect()
}

#[test]
fn a_dry_run_lists_finished_runs_past_the_policy_and_changes_nothing() {
    let cli = Cli::new();
    let ok = cli.workflow("ok.toml", OK);
    let stuck = cli.workflow("stuck.toml", crate::operator::UNDO_FAILS);
    for run in ["ok-1", "ok-2", "ok-3"] {
        let ran = cli.run(&["run", ok.to_str().unwrap(), "--run-id", run]);
        assert_eq!(ran.code, 0, "{}", ran.stderr);
    }
    let ran = cli.run(&["run", stuck.to_str().unwrap(), "--run-id", "stuck-1"]);
    assert_eq!(ran.code, 1, "paused: {}", ran.stderr);
    assert_eq!(cli.status_json("stuck-1")["state"], "paused");
    let before = cli.run(&["runs", "--json"]).stdout;

    // Every run ended just now: keeping 0 days lets every finished run go, the paused one
    // stays.
    let ran = cli.run(&["gc", "--dry-run", "--keep-days", "0"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert!(
        ran.stdout
            .starts_with("would archive 3 runs; keeping 1 running, paused or failed"),
        "{}",
        ran.stdout
    );
    assert_eq!(listed(&ran.stdout), ["ok-3", "ok-2", "ok-1"]);

    // The config file's rule, a flag over it: the newest of each workflow stays.
    std::fs::write(
        cli.data.path().join("apollo11.toml"),
        "[retention]\nkeep_last = 2\n",
    )
    .unwrap();
    let ran = cli.run(&["gc", "--dry-run"]);
    assert_eq!(listed(&ran.stdout), ["ok-1"], "{}", ran.stderr);
    let ran = cli.run(&["gc", "--dry-run", "--keep-last", "1"]);
    assert_eq!(listed(&ran.stdout), ["ok-2", "ok-1"], "{}", ran.stderr);
    // A week keeps everything that ended today.
    let ran = cli.run(&["gc", "--dry-run", "--keep-last", "0", "--keep-days", "7"]);
    assert_eq!(listed(&ran.stdout), Vec::<String>::new(), "{}", ran.stdout);

    assert_eq!(
        cli.run(&["runs", "--json"]).stdout,
        before,
        "nothing changed"
    );
}

#[test]
fn no_policy_a_bad_config_file_and_a_database_store_are_refused() {
    let cli = Cli::new();
    let ran = cli.run(&["gc", "--dry-run"]);
    assert_eq!(ran.code, 2);
    assert!(ran.stderr.contains("no retention policy"), "{}", ran.stderr);

    let ran = cli.run(&["gc", "--keep-days", "1"]);
    assert_eq!(ran.code, 2, "only the dry run is built: {}", ran.stderr);

    std::fs::write(
        cli.data.path().join("apollo11.toml"),
        "[retention]\nkeep_days = \"soon\"\n",
    )
    .unwrap();
    let ran = cli.run(&["gc", "--dry-run"]);
    assert_eq!(ran.code, 2);
    assert!(ran.stderr.contains("apollo11.toml"), "{}", ran.stderr);

    let ran = cli.run(&[
        "--store",
        "postgres://nobody@127.0.0.1:1/none",
        "gc",
        "--dry-run",
        "--keep-days",
        "1",
    ]);
    assert_eq!(ran.code, 2);
    assert!(ran.stderr.contains("with --store"), "{}", ran.stderr);
}
