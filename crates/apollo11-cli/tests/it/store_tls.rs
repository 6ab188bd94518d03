//! `--store` URLs' TLS settings: a verify mode without its root file is a usage error (2),
//! and a server whose certificate the roots do not vouch for (or without TLS) is a store
//! out of reach (4) that names TLS.

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
fn a_server_the_roots_do_not_vouch_for_exits_4_naming_tls() {
    let Ok(url) = std::env::var("APOLLO11_TEST_PG_URL") else {
        eprintln!("skipped: APOLLO11_TEST_PG_URL is not set");
        return;
    };
    // The public roots: none signed the test server's certificate, if it has TLS at all.
    let roots = "/etc/ssl/certs/ca-certificates.crt";
    if !std::path::Path::new(roots).is_file() {
        eprintln!("skipped: no {roots}");
        return;
    }
    let join = if url.contains('?') { '&' } else { '?' };
    let store = format!("{url}{join}sslmode=verify-ca&sslrootcert={roots}");
    let ran = Cli::new().run(&["--store", &store, "runs"]);
    assert_eq!(ran.code, 4, "{}", ran.stderr);
    assert!(ran.stderr.contains("TLS"), "{}", ran.stderr);
}
