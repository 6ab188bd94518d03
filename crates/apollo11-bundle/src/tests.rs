use super::*;
use apollo11_core::{limits, BlobRef, EventId, EventKind, Payload, Seq};
use apollo11_store::frame::{self, Parsed};
use apollo11_store::{sha256_hex, BlobStore, EventStore, MemStore, NewEvent};

fn event(run: &str, id: u64, seq: u32, payload: Payload) -> Event {
    Event {
        event_id: EventId(id),
        run_id: RunId(run.into()),
        seq: Seq(seq),
        step: Some(StepName("s".into())),
        kind: EventKind::Started,
        attempt: seq,
        at_ms: 1000 + u64::from(seq),
        instance: "i".into(),
        payload,
    }
}

/// A run of three events, one of them referring to a blob of three chunks, and two files
/// (one empty).
fn sample() -> Bundle {
    let blob: Vec<u8> = (0..150_000u32).map(|i| (i % 251) as u8).collect();
    let reference = Payload::Blob(BlobRef {
        sha256: sha256_hex(&blob),
        bytes: blob.len() as u64,
    });
    Bundle {
        run_id: RunId("r1".into()),
        events: vec![
            event("r1", 3, 1, Payload::inline("hello")),
            event("r1", 7, 2, reference),
            event("r1", 8, 3, Payload::Empty),
        ],
        blobs: vec![blob],
        files: vec![
            BundleFile {
                step: StepName("s".into()),
                name: "1.log".into(),
                bytes: b"a log line\n".to_vec(),
            },
            BundleFile {
                step: StepName("s".into()),
                name: "1.output".into(),
                bytes: Vec::new(),
            },
        ],
    }
}

/// The offset of every record of a bundle file, after its header.
fn record_offsets(bytes: &[u8]) -> Vec<usize> {
    let mut offsets = Vec::new();
    let mut at = HEADER_BYTES;
    while let Parsed::Record { next, .. } = frame::parse_frame(bytes, at) {
        offsets.push(at);
        at = next;
    }
    assert_eq!(at, bytes.len(), "the records fill the file");
    offsets
}

#[test]
fn a_bundle_reads_back_what_was_written() {
    let bundle = sample();
    let bytes = encode(&bundle).unwrap();
    assert_eq!(decode(&bytes).unwrap(), bundle);
}

#[test]
fn a_flip_of_any_bit_is_refused_at_the_offset_of_its_record() {
    let bytes = encode(&sample()).unwrap();
    let offsets = record_offsets(&bytes);
    for i in 0..bytes.len() {
        let mut damaged = bytes.clone();
        damaged[i] ^= 1 << (i % 8);
        let error = decode(&damaged).expect_err("a flipped bit is refused");
        let record = offsets
            .iter()
            .rev()
            .find(|at| **at <= i)
            .map_or(0, |at| *at);
        assert_eq!(error.offset, record as u64, "flip at {i}: {error}");
    }
}

#[test]
fn a_truncated_bundle_is_refused_at_the_record_it_cuts() {
    let bytes = encode(&sample()).unwrap();
    let offsets = record_offsets(&bytes);
    for len in 0..bytes.len() {
        let error = decode(&bytes[..len]).expect_err("a cut bundle is refused");
        let record = offsets
            .iter()
            .rev()
            .find(|at| **at <= len)
            .map_or(0, |at| *at);
        let expected = if len < HEADER_BYTES { 0 } else { record };
        assert_eq!(error.offset, expected as u64, "cut at {len}: {error}");
    }
    let mut longer = bytes.clone();
    longer.push(0);
    let error = decode(&longer).unwrap_err();
    assert_eq!(error.offset, bytes.len() as u64);
    assert!(
        error.reason.contains("1 bytes after the end record"),
        "{error}"
    );
}

/// Replaces the body of the record at `at` (same length) and fixes its CRC, then the file's
/// CRC in the end record: only the checks past the framing can refuse the result.
fn forge(bytes: &mut [u8], at: usize, edit: impl FnOnce(&mut [u8])) {
    let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    edit(&mut bytes[at + 9..at + 8 + len]);
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&bytes[at..at + 4]);
    hasher.update(&bytes[at + 8..at + 8 + len]);
    bytes[at + 4..at + 8].copy_from_slice(&hasher.finalize().to_le_bytes());
    let end = *record_offsets(bytes).last().unwrap();
    let crc = crc32fast::hash(&bytes[..end]);
    let mut fixed = Vec::new();
    frame::append_record(&mut fixed, KIND_END, |b| {
        b.extend_from_slice(&bytes[end + 9..end + 13]);
        b.extend_from_slice(&crc.to_le_bytes());
    });
    bytes[end..].copy_from_slice(&fixed);
}

#[test]
fn hostile_counts_and_sizes_are_refused_without_allocating_them() {
    let bytes = encode(&sample()).unwrap();
    let offsets = record_offsets(&bytes);
    // The manifest's section record says 4 billion data records: reading stops at the first
    // record that is not one (the events section's record), nothing is reserved for them.
    let mut many = bytes.clone();
    forge(&mut many, offsets[0], |b| {
        b[1..5].copy_from_slice(&u32::MAX.to_le_bytes())
    });
    let error = decode(&many).unwrap_err();
    assert_eq!(error.offset, offsets[2] as u64, "{error}");
    // The manifest's chunk says 4 billion events, blobs and files.
    let mut counts = bytes.clone();
    forge(&mut counts, offsets[1], |b| b.fill(0xff));
    let error = decode(&counts).unwrap_err();
    assert_eq!(
        error.offset, offsets[0] as u64,
        "its section's CRC: {error}"
    );
    // A section's byte size of u64::MAX.
    let mut size = bytes.clone();
    forge(&mut size, offsets[2], |b| b[5..13].fill(0xff));
    let error = decode(&size).unwrap_err();
    assert!(error.reason.contains("do not match its size"), "{error}");
    assert_eq!(error.offset, offsets[2] as u64);
    // A record length over the limit.
    let mut long = bytes.clone();
    long[offsets[3]..offsets[3] + 4].copy_from_slice(&(limits::RECORD_BYTES_MAX + 1).to_le_bytes());
    let error = decode(&long).unwrap_err();
    assert!(error.reason.contains("over the limit"), "{error}");
}

#[test]
fn a_file_name_that_would_leave_its_folder_is_refused() {
    let mut bundle = sample();
    bundle.files[0].name = "..".into();
    let bytes = encode(&bundle).unwrap();
    let error = decode(&bytes).unwrap_err();
    assert!(error.reason.contains("file name of step s"), "{error}");
    bundle.files[0].name = "a/b".into();
    let error = decode(&encode(&bundle).unwrap()).unwrap_err();
    assert!(error.reason.contains("file name of step s"), "{error}");
}

#[test]
fn events_must_be_one_run_in_seq_order_with_their_blobs() {
    let mut other_run = sample();
    other_run.events[1].run_id = RunId("r2".into());
    let error = decode(&encode(&other_run).unwrap()).unwrap_err();
    assert!(error.reason.contains("seq 2 of run \"r1\""), "{error}");
    let mut gap = sample();
    gap.events[2].seq = Seq(4);
    assert!(decode(&encode(&gap).unwrap()).is_err());
    let mut no_blob = sample();
    no_blob.blobs.clear();
    let bytes = encode(&no_blob).unwrap();
    let error = decode(&bytes).unwrap_err();
    assert_eq!(
        error.offset,
        record_offsets(&bytes)[4] as u64,
        "the event's record"
    );
    assert!(error.reason.contains("does not hold"), "{error}");
}

async fn source() -> (MemStore, RunId) {
    let store = MemStore::new();
    let run = RunId("r1".into());
    let blob = store.put_blob(vec![9; 10_000]).await.unwrap();
    let events = sample().events.into_iter().enumerate().map(|(i, e)| {
        let payload = if i == 1 {
            Payload::Blob(blob.clone())
        } else {
            e.payload.clone()
        };
        NewEvent {
            payload,
            ..NewEvent::from(e)
        }
    });
    let other = RunId("other".into());
    let first = vec![NewEvent::from(event("other", 0, 1, Payload::Empty))];
    store.append(&other, Seq(1), first).await.unwrap();
    store.append(&run, Seq(1), events.collect()).await.unwrap();
    (store, run)
}

#[tokio::test]
async fn import_appends_under_new_ids_once_and_refuses_other_events() {
    let (from, run) = source().await;
    let bundle = export(&from, &run, Vec::new()).await.unwrap().unwrap();
    assert_eq!(bundle.blobs, vec![vec![9; 10_000]]);
    let bundle = decode(&encode(&bundle).unwrap()).unwrap();
    let into = MemStore::new();
    let imported = import(&into, &bundle).await.unwrap();
    assert_eq!((imported.present, imported.event_ids.len()), (0, 3));
    let held = into.read_run(&run, Seq(1)).await.unwrap();
    let source_events = from.read_run(&run, Seq(1)).await.unwrap();
    for ((ours, theirs), id) in held.iter().zip(&source_events).zip(&imported.event_ids) {
        assert_eq!(ours.event_id, *id);
        assert_eq!(ours.clone().with_event_id(theirs.event_id), *theirs);
    }
    assert_eq!(held[0].event_id, EventId(1), "the target numbers them");
    assert_eq!(source_events[0].event_id, EventId(2));
    let blob = match &held[1].payload {
        Payload::Blob(blob) => blob.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(into.get_blob(&blob).await.unwrap(), vec![9; 10_000]);
    // Again: nothing appended, the same ids.
    let again = import(&into, &bundle).await.unwrap();
    assert_eq!((again.present, again.event_ids), (3, imported.event_ids));
    assert_eq!(into.last_event_id().await.unwrap(), EventId(3));
    // A store with the same run id and other events refuses it, changing nothing.
    let clash = MemStore::new();
    let mut first = NewEvent::from(bundle.events[0].clone());
    first.attempt = 99;
    clash.append(&run, Seq(1), vec![first]).await.unwrap();
    let refused = import(&clash, &bundle).await.unwrap_err();
    assert!(
        matches!(refused, ImportError::Differs { seq: 1, .. }),
        "{refused}"
    );
    assert_eq!(clash.last_event_id().await.unwrap(), EventId(1));
}

#[tokio::test]
async fn an_import_cut_short_is_finished_by_the_next() {
    let (from, run) = source().await;
    let bundle = export(&from, &run, Vec::new()).await.unwrap().unwrap();
    let into = MemStore::new();
    let prefix = bundle.events[..2]
        .iter()
        .cloned()
        .map(NewEvent::from)
        .collect();
    into.append(&run, Seq(1), prefix).await.unwrap();
    assert_eq!(check_import(&into, &bundle).await.unwrap(), 2);
    let imported = import(&into, &bundle).await.unwrap();
    assert_eq!((imported.present, imported.event_ids.len()), (2, 3));
    // More events than the bundle's is another run.
    let extra = vec![NewEvent::from(event("r1", 0, 4, Payload::Empty))];
    into.append(&run, Seq(4), extra).await.unwrap();
    let refused = check_import(&into, &bundle).await.unwrap_err();
    assert!(
        matches!(refused, ImportError::Differs { seq: 4, .. }),
        "{refused}"
    );
}
