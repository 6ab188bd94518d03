//! T8: a second writer — another process, not another handle — is refused at once with a
//! clear error naming the holder, and writes nothing: no byte, no mode, not even a `chmod`
//! that leaves the mode as it was.

use crate::common::{append, created, sized};
use apollo11_log::{FileLog, Options};
use apollo11_store::StoreError;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

const CHILD_DIR: &str = "APOLLO11_SECOND_WRITER_DIR";

/// The body of the child process spawned by the test below; without the variable it is
/// not in a child and returns at once.
#[test]
fn child_process_opens_the_data_dir_for_writing() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    let started = Instant::now();
    let outcome = FileLog::open(
        &dir,
        Options {
            segment_bytes_max: 64 * 1024,
            ..Options::default()
        },
    );
    let elapsed_us = started.elapsed().as_micros();
    match outcome {
        Err(e @ StoreError::Locked { .. }) => {
            println!("refused after {elapsed_us} us: {e}");
            std::process::exit(42);
        }
        Err(e) => {
            println!("unexpected error: {e}");
            std::process::exit(43);
        }
        Ok(_) => std::process::exit(44),
    }
}

/// A file's bytes, mode, and the time its inode last changed (seconds, nanoseconds): a
/// `chmod` to the mode it has already changes that too.
type FileState = (Vec<u8>, u32, (i64, i64));

/// Every file under `dir` with its state.
fn contents(dir: &Path) -> BTreeMap<String, FileState> {
    use std::os::unix::fs::MetadataExt;
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(contents(&path));
        } else {
            let meta = std::fs::metadata(&path).unwrap();
            let changed = (meta.ctime(), meta.ctime_nsec());
            let bytes = std::fs::read(&path).unwrap();
            out.insert(path.display().to_string(), (bytes, meta.mode(), changed));
        }
    }
    out
}

#[tokio::test]
async fn a_second_writer_process_is_refused_at_once_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let log = FileLog::open(
        dir.path(),
        Options {
            segment_bytes_max: 64 * 1024,
            ..Options::default()
        },
    )
    .unwrap();
    append(&log, "r", vec![created(), sized("s", 100)]).await;
    let before = contents(dir.path());
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "second_writer::child_process_opens_the_data_dir_for_writing",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR, dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(42),
        "the child was not refused: {stdout}"
    );
    let holder = format!("pid {}", std::process::id());
    assert!(
        stdout.contains("is locked by another writer") && stdout.contains(&holder),
        "{stdout}"
    );
    // libtest prints the test's name on the same line, before its output.
    let refusal = stdout
        .find("refused after")
        .map(|at| stdout[at..].lines().next().unwrap_or_default());
    println!("second writer: {}", refusal.unwrap_or_default());
    assert_eq!(
        contents(dir.path()),
        before,
        "the refused writer changed the data dir"
    );
    append(&log, "r", vec![sized("t", 1)]).await;
}

/// A server's lock names where it listens, and a refused writer's error says so in one line
/// that `LockHolder::parse` reads back.
#[test]
fn a_serving_holder_records_its_address_for_refused_writers() {
    let dir = tempfile::tempdir().unwrap();
    let served = FileLog::open_serving(dir.path(), Options::default(), "127.0.0.1:8711").unwrap();
    let text = std::fs::read_to_string(dir.path().join("LOCK")).unwrap();
    assert_eq!(
        text,
        format!("pid {}\nlisten 127.0.0.1:8711\n", std::process::id())
    );
    let refused = std::thread::spawn({
        let dir = dir.path().to_owned();
        move || FileLog::open(dir, Options::default()).err()
    })
    .join()
    .unwrap();
    let Some(StoreError::Locked {
        holder: Some(holder),
        ..
    }) = refused
    else {
        panic!("not refused with a holder: {refused:?}");
    };
    assert!(!holder.contains('\n'), "{holder}");
    let parsed = apollo11_log::LockHolder::parse(&holder);
    assert_eq!(parsed.listen.as_deref(), Some("127.0.0.1:8711"));
    assert_eq!(parsed.pid, Some(std::process::id()));
    drop(served);
}
