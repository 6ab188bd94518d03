//! Event ids stay above every id given before: a database migrated from the id counter
//! keeps its events' ids, and one whose transaction ids went back (restored into a new
//! cluster) has its ids' base raised when opened.

use crate::database::{admin, created};
use apollo11_core::{EventId, RunId, Seq};
use apollo11_postgres::{test_url, PgOptions, PgStore};
use apollo11_store::EventStore;

/// An id far above any this cluster's transactions give now.
const HIGH: i64 = 1 << 45;

/// The scratch store with run `old`'s one event moved to id `id`, as another database
/// would have given it.
async fn with_old_event(url: &str, id: i64) -> (PgStore, tokio_postgres::Client) {
    let scratch = PgStore::open_scratch(url).await.unwrap();
    scratch
        .append(&RunId::from("old"), Seq(1), vec![created()])
        .await
        .unwrap();
    let client = admin(url).await;
    let s = scratch.schema();
    client
        .batch_execute(&format!(
            "UPDATE \"{s}\".events SET event_id = {id}; \
             UPDATE \"{s}\".runs SET last_event_id = {id}"
        ))
        .await
        .unwrap();
    (scratch, client)
}

async fn reopen(url: &str, schema: &str) -> PgStore {
    let options = PgOptions {
        schema: schema.to_owned(),
        ..PgOptions::new(url)
    };
    PgStore::open(options).await.unwrap()
}

/// Appends to a new run and to `old`: both ids must be above `HIGH`, and read in order
/// after it.
async fn new_ids_go_above_the_old(store: &PgStore) {
    let new = store
        .append(&RunId::from("new"), Seq(1), vec![created()])
        .await
        .unwrap();
    let old = store
        .append(&RunId::from("old"), Seq(2), vec![created()])
        .await
        .unwrap();
    assert!(new[0].0 > HIGH as u64 && old[0] > new[0], "{new:?} {old:?}");
    let read: Vec<EventId> = (store.read_from(EventId(1), 10).await.unwrap())
        .iter()
        .map(|e| e.event_id)
        .collect();
    assert_eq!(read, [EventId(HIGH as u64), new[0], old[0]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_migrated_from_the_id_counter_keeps_its_ids_and_gives_higher_ones() {
    let Some(url) = test_url() else { return };
    let (scratch, client) = with_old_event(&url, HIGH).await;
    let s = scratch.schema();
    // Back to version 4: the counter, at the last id it gave.
    client
        .batch_execute(&format!(
            "DROP TABLE \"{s}\".event_id_base; \
             CREATE TABLE \"{s}\".event_ids (last bigint NOT NULL); \
             INSERT INTO \"{s}\".event_ids VALUES ({HIGH}); \
             DELETE FROM \"{s}\".schema_version WHERE version = 5"
        ))
        .await
        .unwrap();
    let store = reopen(&url, s).await;
    new_ids_go_above_the_old(&store).await;
    let counter: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename = 'event_ids'",
            &[&s],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(counter, 0, "the counter's table is dropped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opening_a_database_whose_transaction_ids_went_back_raises_the_ids_base() {
    let Some(url) = test_url() else { return };
    let scratch = PgStore::open_scratch(&url).await.unwrap();
    let client = admin(&url).await;
    let base = format!("SELECT base FROM \"{}\".event_id_base", scratch.schema());
    let before: i64 = client.query_one(&base, &[]).await.unwrap().get(0);
    // Opening a database whose ids are all its cluster's own changes nothing.
    drop(reopen(&url, scratch.schema()).await);
    let after: i64 = client.query_one(&base, &[]).await.unwrap().get(0);
    assert_eq!(before, after);
    drop(scratch);
    let (scratch, _client) = with_old_event(&url, HIGH).await;
    let store = reopen(&url, scratch.schema()).await;
    new_ids_go_above_the_old(&store).await;
}
