//! A bundle between two stores of the store crate alone: no file log is in this crate's
//! dependencies, and the source numbers its events with gaps, as a database does.

use apollo11_bundle::{decode, encode, export, import, BundleFile};
use apollo11_core::{EventKind, Payload, RunId, Seq, StepName};
use apollo11_store::{BlobStore, EventStore, IdGaps, MemStore, NewEvent};

fn started(step: &str, payload: Payload) -> NewEvent {
    NewEvent {
        step: Some(StepName(step.into())),
        kind: EventKind::Started,
        attempt: 1,
        at_ms: 1_000,
        instance: "i".into(),
        payload,
    }
}

#[tokio::test]
async fn a_run_of_one_memory_store_exports_to_a_file_and_imports_into_another() {
    let from = MemStore::with_id_gaps(IdGaps::Even);
    let run = RunId("r".into());
    let blob = from.put_blob(vec![5; 70_000]).await.unwrap();
    let events = vec![
        started("a", Payload::inline("x")),
        started("b", Payload::Blob(blob)),
    ];
    from.append(&run, Seq(1), events).await.unwrap();
    let file = BundleFile {
        step: StepName("a".into()),
        name: "1.log".into(),
        bytes: b"line\n".to_vec(),
    };
    let bundle = export(&from, &run, vec![file.clone()])
        .await
        .unwrap()
        .unwrap();
    let bytes = encode(&bundle).unwrap();
    let read = decode(&bytes).unwrap();
    assert_eq!((&read, &read.files), (&bundle, &vec![file]));

    let into = MemStore::new();
    let imported = import(&into, &read).await.unwrap();
    let source = from.read_run(&run, Seq(1)).await.unwrap();
    let held = into.read_run(&run, Seq(1)).await.unwrap();
    assert_eq!(held.len(), 2);
    assert_eq!(
        held.iter().map(|e| e.event_id).collect::<Vec<_>>(),
        imported.event_ids
    );
    for (ours, theirs) in held.iter().zip(&source) {
        assert_eq!(ours.clone().with_event_id(theirs.event_id), *theirs);
    }
    let Payload::Blob(blob) = &held[1].payload else {
        panic!("the second event refers to its blob: {:?}", held[1].payload)
    };
    assert_eq!(into.get_blob(blob).await.unwrap(), vec![5; 70_000]);
}
