//! A run out of a store into a bundle, and a bundle into a store. The imported events keep
//! everything but their ids: a store numbers its events itself, so the run's events get the
//! target's next ids, in the same order; seqs, and so every fold of the run, are unchanged.

use super::{Bundle, BundleFile};
use apollo11_core::{limits, Event, EventId, Payload, RunId, Seq};
use apollo11_store::{BlobStore, EventStore, NewEvent, StoreError};
use std::fmt;

/// The run `run_id` of `store`, with the blobs its events refer to and the step files given;
/// `None` for a run the store does not hold.
///
/// # Errors
///
/// The store's errors (a blob that cannot be read among them).
pub async fn export<S: EventStore + BlobStore + ?Sized>(
    store: &S,
    run_id: &RunId,
    files: Vec<BundleFile>,
) -> Result<Option<Bundle>, StoreError> {
    let events = store.read_run(run_id, Seq(1)).await?;
    if events.is_empty() {
        return Ok(None);
    }
    let mut blobs = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for event in &events {
        if let Payload::Blob(blob) = &event.payload {
            if seen.insert(blob.sha256.clone()) {
                blobs.push(store.get_blob(blob).await?);
            }
        }
    }
    Ok(Some(Bundle {
        run_id: run_id.clone(),
        events,
        blobs,
        files,
    }))
}

/// Why a bundle was not imported.
#[derive(Debug)]
pub enum ImportError {
    /// The store holds the run with other events than the bundle's: the first that differs.
    Differs {
        /// The run.
        run_id: RunId,
        /// The seq of the first event that differs (or that the store has and the bundle not).
        seq: u32,
    },
    /// The store's error.
    Store(StoreError),
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImportError::Differs { run_id, seq } => write!(
                f,
                "run {} exists with other events than the bundle's (they differ at seq {seq})",
                run_id.0
            ),
            ImportError::Store(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ImportError {}

impl From<StoreError> for ImportError {
    fn from(e: StoreError) -> ImportError {
        ImportError::Store(e)
    }
}

/// What an import did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Imported {
    /// Events the store already held (a bundle imported before, or an import cut short).
    pub present: u32,
    /// The store's ids of the run's events, in seq order (those present and those appended).
    pub event_ids: Vec<EventId>,
}

/// How many of the bundle's events the store already holds (0 for a run it does not know),
/// changing nothing.
///
/// # Errors
///
/// [`ImportError::Differs`] when the store holds the run with other events (every field but
/// the id is compared); store errors.
pub async fn check_import<S: EventStore + ?Sized>(
    store: &S,
    bundle: &Bundle,
) -> Result<u32, ImportError> {
    Ok(present(store, bundle).await?.len() as u32)
}

/// The store's events of the bundle's run, if they are a prefix of the bundle's.
async fn present<S: EventStore + ?Sized>(
    store: &S,
    bundle: &Bundle,
) -> Result<Vec<Event>, ImportError> {
    let held = store.read_run(&bundle.run_id, Seq(1)).await?;
    let differs = |seq: usize| ImportError::Differs {
        run_id: bundle.run_id.clone(),
        seq: seq as u32 + 1,
    };
    if held.len() > bundle.events.len() {
        return Err(differs(bundle.events.len()));
    }
    for (i, (ours, theirs)) in held.iter().zip(&bundle.events).enumerate() {
        if ours.clone().with_event_id(theirs.event_id) != *theirs {
            return Err(differs(i));
        }
    }
    Ok(held)
}

/// Puts the bundle's blobs and appends the events the store does not hold yet (all of them
/// for a new run), in batches: importing the same bundle again appends nothing, and an
/// import cut short is finished by the next.
///
/// # Errors
///
/// As [`check_import`]; the store's errors, `Conflict` when another writer appends to the
/// run meanwhile.
pub async fn import<S: EventStore + BlobStore + ?Sized>(
    store: &S,
    bundle: &Bundle,
) -> Result<Imported, ImportError> {
    let held = present(store, bundle).await?;
    for blob in &bundle.blobs {
        store.put_blob(blob.clone()).await?;
    }
    let mut event_ids: Vec<EventId> = held.iter().map(|e| e.event_id).collect();
    let present = event_ids.len() as u32;
    let batch = limits::APPEND_BATCH_EVENTS_MAX as usize;
    for events in bundle.events[held.len()..].chunks(batch) {
        let expected = Seq(event_ids.len() as u32 + 1);
        let news: Vec<NewEvent> = events.iter().cloned().map(NewEvent::from).collect();
        let ids = store.append(&bundle.run_id, expected, news).await?;
        event_ids.extend(ids);
    }
    Ok(Imported { present, event_ids })
}
