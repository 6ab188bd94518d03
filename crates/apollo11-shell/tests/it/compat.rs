//! Files without parameters or `for_each` parse to the very definitions they always did:
//! the digests are those of the definitions these files gave before those keys existed.

use apollo11_shell::parse;
use std::path::Path;

fn digest_of(fixture: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/fixtures")
        .join(fixture);
    let text = std::fs::read_to_string(path).unwrap();
    let spec = parse(&text, fixture, Path::new("/workflows")).unwrap();
    apollo11_runtime::digest(&spec)
}

#[test]
fn plain_files_parse_to_the_same_definitions() {
    for (fixture, digest) in [
        (
            "five-stage-plain.toml",
            "cf887e27c523695d5ea2fe131c6eb459fc7fa8df342a3c0fe4f92d21a5b16c1b",
        ),
        (
            "ops-runbook-unrolled.toml",
            "6f33f8a0362e26bb10794a66160eae76e1ad371738083d24ec808b4a07e4e8ca",
        ),
    ] {
        assert_eq!(digest_of(fixture), digest, "{fixture}");
    }
}
