//! T3: simulated power loss. A deterministic workload of appends, snapshots and blobs runs on
//! `SimFs` until the power fails during a sync chosen by the seed; unsynced writes are then
//! applied, dropped, torn or garbled and unsynced directory changes partly applied. The log
//! reopened on what is left must hold every acknowledged event (I1), be a prefix of what was
//! written (I2), open without error (I5) and keep ids consecutive (I6).
//! `APOLLO11_SEED=N` replays one seed; `APOLLO11_SEEDS=N` runs N seeds (default 1,000).

use apollo11_core::{Event, EventId, EventKind, Payload, RunId, Seq};
use apollo11_log::{Fault, FileLog, Options, SimFs};
use apollo11_store::{
    conformance::event, BlobStore, EventStore, NewEvent, Snapshot, SnapshotStore,
};
use std::collections::BTreeMap;
use std::sync::Arc;

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// What the workload was told was durable, and what was in flight when the power failed.
#[derive(Default)]
struct Acked {
    /// Acknowledged events by id: (run, seq, event as appended).
    events: Vec<(String, u32, NewEvent)>,
    /// The append that got no answer.
    in_flight: Option<(String, u32, Vec<NewEvent>)>,
    snapshots: BTreeMap<u64, Vec<u8>>,
    /// A snapshot whose save got no answer.
    snapshot_in_flight: Option<(u64, Vec<u8>)>,
    blobs: Vec<(apollo11_core::BlobRef, Vec<u8>)>,
}

fn options(rng: &mut Rng) -> Options {
    Options {
        segment_bytes_max: 4096 + rng.below(12_288),
        preallocate: rng.below(2) == 0,
        ..Options::default()
    }
}

async fn workload(log: &FileLog, rng: &mut Rng) -> Acked {
    let mut acked = Acked::default();
    let mut seqs: BTreeMap<String, u32> = BTreeMap::new();
    for _ in 0..60 {
        match rng.below(10) {
            0 => {
                let watermark = acked.events.len() as u64;
                let state = format!("state@{watermark}").into_bytes();
                if log
                    .save_snapshot(Snapshot {
                        watermark: EventId(watermark),
                        state: state.clone(),
                    })
                    .await
                    .is_err()
                {
                    acked.snapshot_in_flight = Some((watermark, state));
                    return acked;
                }
                acked.snapshots.insert(watermark, state);
            }
            1 => {
                let bytes = vec![rng.below(256) as u8; 1 + rng.below(5_000) as usize];
                match log.put_blob(bytes.clone()).await {
                    Ok(blob) => acked.blobs.push((blob, bytes)),
                    Err(_) => return acked,
                }
            }
            _ => {
                let run = format!("run-{}", rng.below(4));
                let seq = seqs.get(&run).copied().unwrap_or(0) + 1;
                let events: Vec<NewEvent> = (0..1 + rng.below(3))
                    .map(|i| {
                        let payload =
                            Payload::Inline(vec![b'a' + (i as u8); rng.below(3_000) as usize]);
                        event(Some("s"), EventKind::Started, 1, payload)
                    })
                    .collect();
                match log
                    .append(&RunId::from(run.as_str()), Seq(seq), events.clone())
                    .await
                {
                    Ok(_) => {
                        seqs.insert(run.clone(), seq + events.len() as u32 - 1);
                        for (i, e) in events.into_iter().enumerate() {
                            acked.events.push((run.clone(), seq + i as u32, e));
                        }
                    }
                    Err(_) => {
                        acked.in_flight = Some((run, seq, events));
                        return acked;
                    }
                }
            }
        }
    }
    acked
}

fn same(found: &Event, run: &str, seq: u32, new: &NewEvent) -> bool {
    found.run_id.as_str() == run
        && found.seq.0 == seq
        && found.kind == new.kind
        && found.payload == new.payload
}

/// What one seed went through, to show the seeds cover the interesting cases.
#[derive(Default)]
struct Coverage {
    crashed_mid_workload: u32,
    torn_tail_cut: u32,
    in_flight_recovered: u32,
    acked_events: u64,
}

async fn one_seed(seed: u64, coverage: &mut Coverage) {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let options = options(&mut rng);
    let fs = Arc::new(SimFs::new());
    fs.set_fault(Some(Fault::PowerLossAtSync {
        at: rng.below(90) as u32,
        seed,
    }));
    let acked = match FileLog::open_with(fs.clone(), "/d", options.clone()) {
        Ok(log) => workload(&log, &mut rng).await,
        Err(_) => Acked::default(),
    };
    let image = Arc::new(fs.crashed().unwrap_or_else(|| fs.power_loss(seed)));
    let log = FileLog::open_with(image.clone(), "/d", options.clone())
        .unwrap_or_else(|e| panic!("seed {seed}: recovery failed (I5): {e}"));
    coverage.crashed_mid_workload += u32::from(fs.crashed().is_some());
    coverage.torn_tail_cut += u32::from(log.recovery().torn.is_some());
    coverage.acked_events += acked.events.len() as u64;
    let found = log.read_from(EventId(1), u32::MAX).await.unwrap();
    let ids: Vec<u64> = found.iter().map(|e| e.event_id.0).collect();
    assert_eq!(
        ids,
        (1..=found.len() as u64).collect::<Vec<_>>(),
        "seed {seed}: ids not consecutive (I6)"
    );
    assert!(
        found.len() >= acked.events.len(),
        "seed {seed}: {} acknowledged, {} recovered (I1)",
        acked.events.len(),
        found.len()
    );
    for (i, (run, seq, new)) in acked.events.iter().enumerate() {
        assert!(
            same(&found[i], run, *seq, new),
            "seed {seed}: event {} differs from what was acknowledged (I1/I2)",
            i + 1
        );
    }
    let extra = &found[acked.events.len()..];
    if !extra.is_empty() {
        coverage.in_flight_recovered += 1;
        let (run, seq, events) = acked
            .in_flight
            .as_ref()
            .unwrap_or_else(|| panic!("seed {seed}: events recovered that were never written"));
        assert_eq!(
            extra.len(),
            events.len(),
            "seed {seed}: the in-flight append came back partly"
        );
        for (i, e) in events.iter().enumerate() {
            assert!(
                same(&extra[i], run, seq + i as u32, e),
                "seed {seed}: in-flight event {i} differs (I2)"
            );
        }
    }
    let loaded = log
        .load_snapshot()
        .await
        .unwrap()
        .map(|s| (s.watermark.0, s.state));
    let newest_acked = acked
        .snapshots
        .iter()
        .next_back()
        .map(|(w, s)| (*w, s.clone()));
    match (&loaded, &newest_acked) {
        (None, None) => {}
        (None, Some(_)) => panic!("seed {seed}: an acknowledged snapshot was lost"),
        (Some(l), _) => {
            let saved = acked.snapshots.get(&l.0) == Some(&l.1)
                || acked.snapshot_in_flight.as_ref() == Some(l);
            assert!(saved, "seed {seed}: loaded a snapshot that was never saved");
            assert!(
                newest_acked.is_none_or(|n| l.0 >= n.0),
                "seed {seed}: an older snapshot than the newest acknowledged"
            );
        }
    }
    for (blob, bytes) in &acked.blobs {
        assert_eq!(
            &log.get_blob(blob)
                .await
                .unwrap_or_else(|e| panic!("seed {seed}: acknowledged blob lost: {e}")),
            bytes
        );
    }
    let run = RunId::from("after");
    log.append(
        &run,
        Seq(1),
        vec![event(
            None,
            EventKind::RunCreated {
                workflow: "w".into(),
            },
            0,
            Payload::Empty,
        )],
    )
    .await
    .unwrap();
    drop(log);
    let log = FileLog::open_with(image, "/d", options).unwrap();
    assert_eq!(
        log.last_event_id().await.unwrap(),
        EventId(found.len() as u64 + 1),
        "seed {seed}"
    );
}

#[tokio::test]
async fn acknowledged_events_survive_power_loss_for_every_seed() {
    let seeds: Vec<u64> = match std::env::var("APOLLO11_SEED") {
        Ok(seed) => vec![seed.parse().expect("APOLLO11_SEED is a number")],
        Err(_) => {
            let count = std::env::var("APOLLO11_SEEDS")
                .ok()
                .and_then(|n| n.parse().ok())
                .unwrap_or(1_000);
            (1..=count).collect()
        }
    };
    let mut c = Coverage::default();
    for &seed in &seeds {
        one_seed(seed, &mut c).await;
    }
    println!(
        "power loss: {} seeds; {} crashed mid-workload, {} cut a torn tail, {} recovered an unacknowledged append, {} acknowledged events checked",
        seeds.len(), c.crashed_mid_workload, c.torn_tail_cut, c.in_flight_recovered, c.acked_events
    );
    if seeds.len() >= 100 {
        assert!(
            c.crashed_mid_workload * 2 > seeds.len() as u32,
            "most seeds must crash mid-workload"
        );
        assert!(
            c.torn_tail_cut > 0 && c.in_flight_recovered > 0 && c.acked_events > 0,
            "the seeds miss a case"
        );
    }
}
