//! Backward compatibility: a data directory written by format version 1 is checked in under
//! `tests/data/compat-v1/` and must be read, verified and appended to by every later version.
//! `APOLLO11_BLESS=1` writes it anew (only when the format deliberately changes, with a new
//! directory next to the old one).

use apollo11_core::{
    BlobRef, Event, EventId, EventKind, OverrideTarget, Payload, RunId, Seq, StepName,
};
use apollo11_log::{verify, FileLog, Options};
use apollo11_store::{BlobStore, EventStore, NewEvent, Snapshot, SnapshotStore};
use std::path::{Path, PathBuf};

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/compat-v1")
}

fn options() -> Options {
    Options {
        segment_bytes_max: 4096,
        preallocate: false,
        ..Options::default()
    }
}

fn new(
    step: Option<&str>,
    kind: EventKind,
    attempt: u32,
    at_ms: u64,
    payload: Payload,
) -> NewEvent {
    NewEvent {
        step: step.map(StepName::from),
        kind,
        attempt,
        at_ms,
        instance: "v1".into(),
        payload,
    }
}

/// Every event kind, text and binary payloads, and enough bytes to span several segments.
fn history() -> Vec<NewEvent> {
    let mut events = vec![new(
        None,
        EventKind::RunCreated {
            workflow: "compat".into(),
        },
        0,
        1_000,
        Payload::inline("{\"v\":1}"),
    )];
    for (i, step) in ["a", "b", "c", "d"].iter().enumerate() {
        let at = 2_000 + i as u64 * 100;
        events.push(new(Some(step), EventKind::Started, 1, at, Payload::Empty));
        events.push(new(
            Some(step),
            EventKind::Succeeded,
            1,
            at + 50,
            Payload::Inline(vec![i as u8; 1_500]),
        ));
    }
    events.push(new(
        Some("d"),
        EventKind::Compensating,
        1,
        3_000,
        Payload::Empty,
    ));
    events.push(new(
        Some("d"),
        EventKind::Compensated,
        1,
        3_010,
        Payload::Empty,
    ));
    events.push(new(Some("d"), EventKind::Started, 2, 3_020, Payload::Empty));
    events.push(new(
        Some("d"),
        EventKind::Failed {
            error: "disk full".into(),
            retryable: false,
        },
        2,
        3_030,
        Payload::inline("marker"),
    ));
    let over = EventKind::ManualOverride {
        to: OverrideTarget::Succeeded,
        by: "alice".into(),
        reason: "fixed".into(),
    };
    events.push(new(
        Some("d"),
        over,
        2,
        3_040,
        Payload::Blob(BlobRef {
            sha256: blob_sha(),
            bytes: 5,
        }),
    ));
    events
}

fn blob_sha() -> String {
    apollo11_store::sha256_hex(b"hello")
}

async fn bless() {
    let dir = fixture();
    let _ = std::fs::remove_dir_all(&dir);
    let log = FileLog::open(&dir, options()).unwrap();
    log.put_blob(b"hello".to_vec()).await.unwrap();
    for (i, e) in history().into_iter().enumerate() {
        log.append(&RunId::from("compat-run"), Seq(i as u32 + 1), vec![e])
            .await
            .unwrap();
    }
    log.save_snapshot(Snapshot {
        watermark: EventId(5),
        state: b"state at 5".to_vec(),
    })
    .await
    .unwrap();
    drop(log);
    std::fs::remove_file(dir.join("LOCK")).unwrap();
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[tokio::test]
async fn a_version_1_data_dir_is_read_verified_and_extended() {
    if std::env::var_os("APOLLO11_BLESS").is_some() {
        bless().await;
    }
    let work = tempfile::tempdir().unwrap();
    copy_dir(&fixture(), work.path());
    let report = verify(work.path()).unwrap();
    assert!(report.is_clean() && report.segments.len() > 1, "{report:?}");
    let expected: Vec<Event> = history()
        .into_iter()
        .enumerate()
        .map(|(i, e)| {
            e.into_event(
                EventId(i as u64 + 1),
                RunId::from("compat-run"),
                Seq(i as u32 + 1),
            )
        })
        .collect();
    let reader = FileLog::open_read_only(work.path()).unwrap();
    assert_eq!(
        reader
            .read_run(&RunId::from("compat-run"), Seq(1))
            .await
            .unwrap(),
        expected
    );
    let snapshot = reader.load_snapshot().await.unwrap().unwrap();
    assert_eq!(
        (snapshot.watermark, snapshot.state),
        (EventId(5), b"state at 5".to_vec())
    );
    assert_eq!(
        reader
            .get_blob(&BlobRef {
                sha256: blob_sha(),
                bytes: 5
            })
            .await
            .unwrap(),
        b"hello"
    );
    drop(reader);
    let writer = FileLog::open(work.path(), options()).unwrap();
    let next = Seq(expected.len() as u32 + 1);
    writer
        .append(
            &RunId::from("compat-run"),
            next,
            vec![new(Some("e"), EventKind::Started, 1, 4_000, Payload::Empty)],
        )
        .await
        .unwrap();
    assert_eq!(
        writer.last_event_id().await.unwrap(),
        EventId(expected.len() as u64 + 1)
    );
}
