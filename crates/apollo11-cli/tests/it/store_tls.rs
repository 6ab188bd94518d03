//! `--store` URLs' TLS settings: a verify mode without its root file is a usage error (2),
//! and TLS required of a server without it is a store out of reach (4) that names TLS.

use crate::harness::Cli;

#[test]
fn a_verify_mode_without_sslrootcert_exits_2_naming_it() {
    let cli = Cli::new();
    let ran = cli.run(&[
        "--store",
        "postgres://nobody@127.0.0.1:1/none?sslmode=verify-full",
        "runs",
    ]);
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(ran.stderr.contains("sslrootcert"), "{}", ran.stderr);
}

#[test]
fn tls_required_of_a_server_without_it_exits_4_naming_tls() {
    let Ok(url) = std::env::var("APOLLO11_TEST_PG_URL") else {
        eprintln!("skipped: APOLLO11_TEST_PG_URL is not set");
        return;
    };
    let join = if url.contains('?') { '&' } else { '?' };
    let cli = Cli::new();
    let ran = cli.run(&["--store", &format!("{url}{join}sslmode=require"), "runs"]);
    assert_eq!(ran.code, 4, "{}", ran.stderr);
    assert!(ran.stderr.contains("TLS"), "{}", ran.stderr);
}
