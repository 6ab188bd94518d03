//! The files the log creates on the real file system: owner-only permissions whatever the
//! umask (step outputs can hold secrets), and a lock file that is never followed through a
//! symbolic link or a hard link to another file.

use crate::common::{append, created, sized};
use apollo11_log::{repair, FileLog, Options};
use apollo11_store::{BlobStore, Snapshot, SnapshotStore, StoreError};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

const CHILD_DIR: &str = "APOLLO11_PERMISSIONS_DIR";

/// Run by the test below in a child process whose umask lets everything through: creates a
/// log with every kind of file (segments, index files, a snapshot, a blob, a `.torn` file).
#[tokio::test]
async fn child_process_creates_every_kind_of_file() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    let options = Options {
        segment_bytes_max: 4096,
        ..Options::default()
    };
    let log = FileLog::open(&dir, options.clone()).unwrap();
    append(&log, "r", vec![created()]).await;
    for _ in 0..8 {
        append(&log, "r", vec![sized("s", 1000)]).await;
    }
    log.save_snapshot(Snapshot {
        watermark: apollo11_core::EventId(9),
        state: b"secret".to_vec(),
    })
    .await
    .unwrap();
    log.put_blob(vec![7; 10_000]).await.unwrap();
    drop(log);
    // Garbage after the last batch: the next open cuts it into a `.torn` file.
    let segments = apollo11_log::verify(&dir).unwrap().segments;
    let last = Path::new(&dir).join(&segments.last().unwrap().file);
    let mut bytes = std::fs::read(&last).unwrap();
    let end = segments.last().unwrap().bytes as usize;
    bytes[end..end + 10].fill(0x33);
    std::fs::write(&last, bytes).unwrap();
    let log = FileLog::open(&dir, options).unwrap();
    assert!(log.recovery().torn.is_some());
}

/// Every entry under `dir` (itself included) with its permission bits.
fn modes(dir: &Path, out: &mut Vec<(String, bool, u32)>) {
    let meta = std::fs::symlink_metadata(dir).unwrap();
    out.push((
        dir.display().to_string(),
        true,
        meta.permissions().mode() & 0o777,
    ));
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            modes(&path, out);
        } else {
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            out.push((path.display().to_string(), false, mode));
        }
    }
}

#[test]
fn every_directory_and_file_the_log_creates_is_its_owners_only_whatever_the_umask() {
    for umask in ["000", "022", "277"] {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("made").join("by-the-log");
        let output = Command::new("sh")
            .arg("-c")
            .arg(format!("umask {umask} && exec \"$0\" \"$@\""))
            .arg(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "files::child_process_creates_every_kind_of_file",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_DIR, &dir)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "umask {umask}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let mut found = Vec::new();
        modes(&root.path().join("made"), &mut found);
        let names: Vec<&str> = found.iter().map(|(n, _, _)| n.as_str()).collect();
        for kind in [".seg", ".idx", ".snap", ".torn", "LOCK", "blobs/"] {
            assert!(
                names.iter().any(|n| n.contains(kind)),
                "no {kind}: {names:?}"
            );
        }
        for (name, is_dir, mode) in &found {
            let expected = if *is_dir { 0o700 } else { 0o600 };
            assert_eq!(*mode, expected, "umask {umask}: {name} has mode {mode:o}");
        }
    }
}

#[test]
fn an_existing_data_dir_open_to_others_is_narrowed_to_its_owner() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    drop(FileLog::open(dir.path(), Options::default()).unwrap());
    let mode = std::fs::metadata(dir.path()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
}

/// A file outside the data directory that a planted `LOCK` points at.
fn victim(root: &Path) -> std::path::PathBuf {
    let victim = root.join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
    victim
}

fn assert_untouched(victim: &Path) {
    assert_eq!(std::fs::read(victim).unwrap(), b"precious");
    let mode = std::fs::metadata(victim).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644);
}

/// Makes `link` (the lock file) point at `victim`.
type Link = fn(&Path, &Path) -> std::io::Result<()>;

#[test]
fn a_lock_file_that_is_a_symbolic_or_hard_link_is_refused_and_its_target_untouched() {
    let cases: [(&str, Link, &str); 2] = [
        (
            "symbolic",
            |v, l| std::os::unix::fs::symlink(v, l),
            "symbolic link",
        ),
        ("hard", |v, l| std::fs::hard_link(v, l), "hard link"),
    ];
    for (case, link, words) in cases {
        let root = tempfile::tempdir().unwrap();
        let victim = victim(root.path());
        let dir = root.path().join("data");
        std::fs::create_dir(&dir).unwrap();
        link(&victim, &dir.join("LOCK")).unwrap();
        for refused in [
            FileLog::open(&dir, Options::default()).err(),
            repair(&dir).err(),
        ] {
            let refused = refused.unwrap_or_else(|| panic!("{case}: a linked LOCK was taken"));
            assert!(
                matches!(refused, StoreError::Io { .. }),
                "{case}: {refused}"
            );
            let message = refused.to_string();
            assert!(
                message.contains(words) && message.contains("LOCK"),
                "{case}: {message}"
            );
            assert_untouched(&victim);
        }
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "{case}: nothing created"
        );
    }
}
