//! The file log's change feed: pushed by the writer after each batch's sync, so a
//! subscriber sees exactly what readers may see, and a slow subscriber is told it fell
//! behind while appends go on.

use crate::common::{append, created, real_log, sim_log, sized};
use apollo11_core::EventId;
use apollo11_log::{FileLog, Options};
use apollo11_store::{conformance, Change, EventStore};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_subscriber_is_told_it_fell_behind_on_the_real_and_the_simulated_fs() {
    for (name, log) in [("real", real_log()), ("sim", sim_log())] {
        let told =
            conformance::a_slow_subscriber_is_told_it_fell_behind_and_resumes_by_re_reading(log)
                .await;
        assert!(
            told,
            "{name}: the file log pushes, so a slow subscriber falls behind"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_log_delivers_what_it_holds_then_waits() {
    let dir = tempfile::tempdir().unwrap();
    let log = FileLog::open(dir.path(), Options::default()).unwrap();
    append(&log, "r", vec![created(), sized("s", 10)]).await;
    drop(log);
    let reader = FileLog::open_read_only(dir.path()).unwrap();
    let mut sub = reader.subscribe(EventId(0)).await.unwrap();
    for id in [1, 2] {
        match sub.next().await.unwrap() {
            Change::Event(e) => assert_eq!(e.event_id, EventId(id)),
            other => panic!("{other:?}"),
        }
    }
    let waiting = tokio::time::timeout(Duration::from_millis(50), sub.next()).await;
    assert!(waiting.is_err(), "nothing more: {waiting:?}");
}
