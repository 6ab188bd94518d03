//! Runs only a store's archive holds, on an in-memory archive: listed beside the live runs,
//! marked, newest first and paged across both; a run live and archived at once counts once;
//! an archived run is viewed with no action allowed and every action on it is refused.

use crate::inspect::{append, created};
use apollo11_core::{BlobRef, EventId, RunId, Seq};
use apollo11_runtime::inspect::{archived_refusal, ListedRun, RunFilter};
use apollo11_runtime::Inspector;
use apollo11_store::{
    Archive, BlobStore, EventStore, MemStore, NewEvent, RunSummary, Snapshot, SnapshotStore,
    StoreError,
};
use async_trait::async_trait;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// A MemStore with an archive, as a file log after a `gc`: it reads every run, but lists
/// only those not `moved` out of its live data; its archive holds the `archived` ones.
#[derive(Default)]
struct Archiving {
    store: MemStore,
    moved: Mutex<HashSet<RunId>>,
    archived: Mutex<HashSet<RunId>>,
}

impl Archiving {
    /// `run` into the archive, out of the live data unless `live_too`.
    fn archive(&self, run: &str, live_too: bool) {
        self.archived.lock().unwrap().insert(RunId::from(run));
        if !live_too {
            self.moved.lock().unwrap().insert(RunId::from(run));
        }
    }

    async fn summaries(&self, admit: impl Fn(&RunId) -> bool) -> Vec<RunSummary> {
        let mut all = self.store.list_runs().await.unwrap();
        all.retain(|s| admit(&s.run_id));
        all
    }
}

#[async_trait]
impl Archive for Archiving {
    async fn archived_runs(&self) -> Result<Vec<RunSummary>, StoreError> {
        let archived = self.archived.lock().unwrap().clone();
        Ok(self.summaries(|r| archived.contains(r)).await)
    }

    fn holds_live(&self, run_id: &RunId) -> bool {
        !self.moved.lock().unwrap().contains(run_id)
    }
}

#[async_trait]
impl EventStore for Archiving {
    async fn append(
        &self,
        run_id: &RunId,
        expected_seq: Seq,
        events: Vec<NewEvent>,
    ) -> Result<Vec<EventId>, StoreError> {
        self.store.append(run_id, expected_seq, events).await
    }
    async fn read_run(
        &self,
        run_id: &RunId,
        from_seq: Seq,
    ) -> Result<Vec<apollo11_core::Event>, StoreError> {
        self.store.read_run(run_id, from_seq).await
    }
    async fn read_from(
        &self,
        from: EventId,
        max_events: u32,
    ) -> Result<Vec<apollo11_core::Event>, StoreError> {
        self.store.read_from(from, max_events).await
    }
    async fn list_runs(&self) -> Result<Vec<RunSummary>, StoreError> {
        let moved = self.moved.lock().unwrap().clone();
        Ok(self.summaries(|r| !moved.contains(r)).await)
    }
    async fn last_event_id(&self) -> Result<EventId, StoreError> {
        self.store.last_event_id().await
    }
}

#[async_trait]
impl SnapshotStore for Archiving {
    async fn save_snapshot(&self, snapshot: Snapshot) -> Result<(), StoreError> {
        self.store.save_snapshot(snapshot).await
    }
    async fn load_snapshot(&self) -> Result<Option<Snapshot>, StoreError> {
        self.store.load_snapshot().await
    }
}

#[async_trait]
impl BlobStore for Archiving {
    async fn put_blob(&self, bytes: Vec<u8>) -> Result<BlobRef, StoreError> {
        self.store.put_blob(bytes).await
    }
    async fn get_blob(&self, blob: &BlobRef) -> Result<Vec<u8>, StoreError> {
        self.store.get_blob(blob).await
    }
}

/// Five succeeded runs, created at 1, 2, … 5 s: `l1` and `l3` live, `a2` and `a4` archived,
/// `b5` live and archived at once.
async fn store() -> Arc<Archiving> {
    let store = Arc::new(Archiving::default());
    for (i, run) in ["l1", "a2", "l3", "a4", "b5"].into_iter().enumerate() {
        let history = created(run, "wf", 1_000 * (i as u64 + 1))
            .started("a")
            .succeeded("a", "1")
            .started("b")
            .succeeded("b", "2");
        append(store.as_ref(), history).await;
    }
    store.archive("a2", false);
    store.archive("a4", false);
    store.archive("b5", true);
    store
}

fn with_archive(store: &Arc<Archiving>) -> Inspector<Archiving> {
    Inspector::new(store.clone()).with_archive(store.clone())
}

fn names(page: &[ListedRun]) -> Vec<(String, bool)> {
    (page.iter())
        .map(|l| (l.row.run_id.to_string(), l.archived))
        .collect()
}

fn listed(pairs: &[(&str, bool)]) -> Vec<(String, bool)> {
    pairs.iter().map(|(r, a)| (r.to_string(), *a)).collect()
}

#[tokio::test]
async fn archived_runs_are_listed_marked_newest_first_and_a_run_in_both_counts_once() {
    let store = store().await;
    let inspector = with_archive(&store);
    let all = RunFilter::all();
    let live = inspector
        .runs_page_with(&all, None, 10, false)
        .await
        .unwrap();
    let live_only = [("b5", false), ("l3", false), ("l1", false)];
    assert_eq!(names(&live), listed(&live_only));
    let both = inspector
        .runs_page_with(&all, None, 10, true)
        .await
        .unwrap();
    let merged = [
        ("b5", false),
        ("a4", true),
        ("l3", false),
        ("a2", true),
        ("l1", false),
    ];
    assert_eq!(names(&both), listed(&merged));
    let archived = inspector.archived_runs(&all).await.unwrap();
    let ids: Vec<String> = archived.runs.iter().map(|r| r.run_id.to_string()).collect();
    assert_eq!(ids, ["a4", "a2"]);
    assert!(archived.unreadable.is_empty());
}

#[tokio::test]
async fn pages_run_across_live_and_archived_runs_by_creation_then_id() {
    let store = store().await;
    let inspector = with_archive(&store);
    let all = RunFilter::all();
    let mut seen = Vec::new();
    let mut after: Option<(u64, String)> = None;
    loop {
        let at = after.as_ref().map(|(t, r)| (*t, r.as_str()));
        let page = inspector.runs_page_with(&all, at, 2, true).await.unwrap();
        assert!(page.len() <= 2);
        let Some(last) = page.last() else { break };
        after = Some((last.row.created_at, last.row.run_id.to_string()));
        seen.extend(names(&page));
    }
    let merged = [
        ("b5", false),
        ("a4", true),
        ("l3", false),
        ("a2", true),
        ("l1", false),
    ];
    assert_eq!(seen, listed(&merged));
}

#[tokio::test]
async fn an_archived_run_allows_no_action_and_every_action_on_it_is_refused() {
    let store = store().await;
    let inspector = with_archive(&store);
    for run in ["a2", "a4"] {
        let run = RunId::from(run);
        let view = inspector.status_or_archived(&run, None).await.unwrap();
        let expected = inspector.status(&run, None).await.unwrap().archived();
        assert!(view.archived && view.allowed.values().all(|allowed| !allowed));
        assert_eq!(view, expected);
        let refusal = inspector.refusal_if_archived(&run).await.unwrap();
        assert_eq!(refusal, Some(archived_refusal(&run)));
    }
    for run in ["l1", "b5", "unknown"] {
        let run = RunId::from(run);
        assert_eq!(inspector.refusal_if_archived(&run).await.unwrap(), None);
    }
    let live = inspector.status_or_archived(&RunId::from("b5"), None).await;
    assert!(!live.unwrap().archived);
}

#[tokio::test]
async fn without_an_archive_only_the_live_runs_are_listed_and_none_is_refused() {
    let store = store().await;
    let inspector = Inspector::new(store.clone());
    let page = inspector
        .runs_page_with(&RunFilter::all(), None, 10, true)
        .await
        .unwrap();
    let live_only = [("b5", false), ("l3", false), ("l1", false)];
    assert_eq!(names(&page), listed(&live_only));
    let a2 = RunId::from("a2");
    assert_eq!(inspector.refusal_if_archived(&a2).await.unwrap(), None);
    let view = inspector.status_or_archived(&a2, None).await.unwrap();
    assert!(!view.archived);
}
