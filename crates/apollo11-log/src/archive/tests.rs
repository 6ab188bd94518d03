use super::*;
use crate::file_system::RealFs;
use apollo11_core::{EventId, EventKind, Payload, StepName};
use std::collections::BTreeMap;

/// Runs `a` (3 events), `b` (1) and `c` (2), ids interleaved as a live log has them.
fn live() -> BTreeMap<RunId, Vec<Event>> {
    let mut runs: BTreeMap<RunId, Vec<Event>> = BTreeMap::new();
    for (id, run) in [(1, "a"), (2, "b"), (3, "a"), (4, "c"), (5, "a"), (9, "c")] {
        let events = runs.entry(RunId::from(run)).or_default();
        events.push(Event {
            event_id: EventId(id),
            run_id: RunId::from(run),
            seq: Seq(events.len() as u32 + 1),
            step: Some(StepName("s".into())),
            kind: EventKind::Started,
            attempt: 1,
            at_ms: 1000 + id,
            instance: "i".into(),
            payload: Payload::inline(format!("payload {id}")),
        });
    }
    runs
}

fn write_runs(dir: &Path, runs: &[&str]) -> Result<Written, StoreError> {
    let live = live();
    let read = |run: &RunId| {
        live.get(run).cloned().ok_or_else(|| StoreError::NotFound {
            what: format!("run `{run}`"),
        })
    };
    let runs: Vec<RunId> = runs.iter().map(|r| RunId::from(*r)).collect();
    write(&RealFs, dir, &runs, &read)
}

#[test]
fn archived_runs_read_back_whole_and_from_a_seq_and_are_listed() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_runs(dir.path(), &["c", "a", "c"]).unwrap();
    assert_eq!(
        (written.file.as_str(), written.runs, written.events),
        ("archive/00000000000000000001.arc", 2, 5)
    );
    let path = dir.path().join(&written.file);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), written.bytes);
    let live = live();
    for run in ["a", "c"] {
        let run = RunId::from(run);
        let read = read_run(&RealFs, dir.path(), &run, Seq(1)).unwrap();
        assert_eq!(read.as_ref(), Some(&live[&run]));
        let tail = read_run(&RealFs, dir.path(), &run, Seq(2))
            .unwrap()
            .unwrap();
        assert_eq!(tail, live[&run][1..]);
    }
    let b = RunId::from("b");
    assert_eq!(read_run(&RealFs, dir.path(), &b, Seq(1)).unwrap(), None);
    let listed: Vec<(String, u32, u64)> = runs(&RealFs, dir.path())
        .unwrap()
        .into_iter()
        .map(|s| (s.run_id.to_string(), s.last_seq.0, s.last_event_id.0))
        .collect();
    assert_eq!(listed, [("a".into(), 3, 5), ("c".into(), 2, 9)]);
    let checked = check(&RealFs, &path).unwrap();
    assert_eq!((checked.runs, checked.events), (2, 5));

    let second = write_runs(dir.path(), &["b"]).unwrap();
    assert_eq!(second.file, "archive/00000000000000000002.arc");
    assert_eq!(runs(&RealFs, dir.path()).unwrap().len(), 3);
}

#[test]
fn an_unknown_run_writes_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let error = write_runs(dir.path(), &["a", "nope"]).unwrap_err();
    assert!(matches!(error, StoreError::NotFound { .. }), "{error}");
    assert!(files(&RealFs, dir.path()).unwrap().is_empty());
}

#[test]
fn a_table_of_many_records_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    // Long run ids: about 2,100 entries of 300 bytes make ten table records.
    let ids: Vec<String> = (0..2_100).map(|i| format!("{i:0>250}")).collect();
    let read = |run: &RunId| {
        let mut event = live()[&RunId::from("b")][0].clone();
        event.run_id = run.clone();
        Ok(vec![event])
    };
    let runs_in: Vec<RunId> = ids.iter().map(|i| RunId::from(i.as_str())).collect();
    let written = write(&RealFs, dir.path(), &runs_in, &read).unwrap();
    let checked = check(&RealFs, &dir.path().join(&written.file)).unwrap();
    assert_eq!(checked.runs, ids.len());
    assert_eq!(runs(&RealFs, dir.path()).unwrap().len(), ids.len());
}

/// Every bit of the file flipped, and the file cut at every length: each is refused by the
/// check, naming the file; reads of a run refuse or answer the run unchanged.
#[test]
fn every_flipped_bit_and_every_cut_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_runs(dir.path(), &["a", "c"]).unwrap();
    let path = dir.path().join(&written.file);
    let good = std::fs::read(&path).unwrap();
    let a = RunId::from("a");
    let expect_damage = |what: &str| {
        match check(&RealFs, &path) {
            Err(StoreError::Corrupted { file, .. }) => assert_eq!(file, written.file, "{what}"),
            other => panic!("{what}: {other:?}"),
        }
        match read_run(&RealFs, dir.path(), &a, Seq(1)) {
            Err(StoreError::Corrupted { .. }) => {}
            Ok(Some(events)) => assert_eq!(events, live()[&a], "{what}"),
            other => panic!("{what}: {other:?}"),
        }
    };
    for (what, bytes) in crate::damage::damaged(&good) {
        std::fs::write(&path, &bytes).unwrap();
        expect_damage(&what);
    }
}
