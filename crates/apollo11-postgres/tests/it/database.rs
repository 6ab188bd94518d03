//! What only the database backend does.

use apollo11_core::{EventKind, Payload, RunId, Seq};
use apollo11_postgres::{test_url, PgOptions, PgStore, SCHEMA_VERSION};
use apollo11_store::conformance::event;
use apollo11_store::{EventStore, LeaseStore, StoreError};
use std::sync::Arc;
use std::time::Duration;

pub(crate) fn created() -> apollo11_store::NewEvent {
    event(
        None,
        EventKind::RunCreated {
            workflow: "wf".into(),
        },
        0,
        Payload::Empty,
    )
}

/// A connection of its own to the test database, for what the store does not do.
pub(crate) async fn admin(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
}

/// Returns once a session named `application_name` waits for a lock, as `client` sees it
/// (its activity snapshot cleared before each look, which inside a transaction would stay
/// as it was at the first).
pub(crate) async fn until_waiting_on_a_lock(
    client: &tokio_postgres::Client,
    application_name: &str,
) {
    let waiting = "SELECT count(*) FROM pg_stat_activity \
                   WHERE application_name = $1 AND wait_event_type = 'Lock'";
    loop {
        client
            .batch_execute("SELECT pg_stat_clear_snapshot()")
            .await
            .unwrap();
        let row = client
            .query_one(waiting, &[&application_name])
            .await
            .unwrap();
        if row.get::<_, i64>(0) > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_opening_one_schema_at_once_migrate_it_once() {
    let Some(url) = test_url() else { return };
    let scratch = PgStore::open_scratch(&url).await.unwrap();
    let schema = scratch.schema().to_owned();
    // The scratch store made the schema; drop its tables' record to open a new database.
    let client = admin(&url).await;
    client
        .batch_execute(&format!(
            "DROP TABLE \"{schema}\".schema_version, \"{schema}\".events, \"{schema}\".runs, \
             \"{schema}\".event_id_base, \"{schema}\".snapshots, \"{schema}\".blobs, \"{schema}\".instances, \
             \"{schema}\".controls"
        ))
        .await
        .unwrap();
    let opens = (0..6).map(|_| {
        let options = PgOptions {
            schema: schema.clone(),
            ..PgOptions::new(url.clone())
        };
        tokio::spawn(PgStore::open(options))
    });
    let mut stores = Vec::new();
    for open in opens {
        stores.push(open.await.unwrap().unwrap());
    }
    let versions: Vec<i32> = client
        .query(
            &format!("SELECT version FROM \"{schema}\".schema_version ORDER BY version"),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        versions,
        (1..=SCHEMA_VERSION).collect::<Vec<_>>(),
        "each migration once"
    );
    // Every instance sees what another wrote.
    stores[0]
        .append(&RunId::from("r"), Seq(1), vec![created()])
        .await
        .unwrap();
    assert_eq!(
        stores[5]
            .read_run(&RunId::from("r"), Seq(1))
            .await
            .unwrap()
            .len(),
        1
    );
    // A database newer than this build is refused, not written to.
    client
        .execute(
            &format!("INSERT INTO \"{schema}\".schema_version (version) VALUES ($1)"),
            &[&(SCHEMA_VERSION + 1)],
        )
        .await
        .unwrap();
    let options = PgOptions {
        schema,
        ..PgOptions::new(url.clone())
    };
    let e = PgStore::open(options).await.unwrap_err().to_string();
    assert!(
        e.contains(&format!("it is at version {}", SCHEMA_VERSION + 1)),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_of_a_run_go_by_an_index() {
    let Some(url) = test_url() else { return };
    let store = PgStore::open_scratch(&url).await.unwrap();
    for r in 0..200 {
        let run = RunId::from(format!("run-{r}").as_str());
        let events = vec![created(); 20];
        store.append(&run, Seq(1), events).await.unwrap();
    }
    let client = admin(&url).await;
    let schema = store.schema();
    client
        .batch_execute(&format!("ANALYZE \"{schema}\".events"))
        .await
        .unwrap();
    let plan: Vec<String> = client
        .query(
            &format!(
                "EXPLAIN SELECT * FROM \"{schema}\".events WHERE run_id = 'run-7' AND seq >= 3 ORDER BY seq"
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let plan = plan.join("\n");
    assert!(plan.contains("Index"), "{plan}");
    assert!(!plan.contains("Seq Scan"), "{plan}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_whose_connection_the_server_kills_is_unavailable_and_its_retry_lands() {
    let Some(url) = test_url() else { return };
    let store = Arc::new(PgStore::open_scratch(&url).await.unwrap());
    let run = RunId::from("r");
    store.append(&run, Seq(1), vec![created()]).await.unwrap();
    // Another session holds the run's row, so the store's append waits inside its
    // transaction; then the server ends the store's connections.
    let mut blocker = admin(&url).await;
    let schema = store.schema().to_owned();
    let held = blocker.transaction().await.unwrap();
    held.execute(
        &format!("SELECT 1 FROM \"{schema}\".runs WHERE run_id = 'r' FOR UPDATE"),
        &[],
    )
    .await
    .unwrap();
    let append = {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .append(&RunId::from("r"), Seq(2), vec![created()])
                .await
        })
    };
    let killer = admin(&url).await;
    until_waiting_on_a_lock(&killer, &schema).await;
    killer
        .execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
            &[&schema],
        )
        .await
        .unwrap();
    let e = append.await.unwrap().unwrap_err();
    assert!(matches!(e, StoreError::Unavailable { .. }), "{e:?}");
    assert!(e.to_string().contains("57P01"), "{e}");
    assert_eq!(e.sqlstate(), Some("57P01"), "{e:?}");
    held.rollback().await.unwrap();
    // Nothing was written; the same append, retried as a driver does (another pooled
    // connection the server ended may answer first), goes in on a new connection.
    let mut tries = 0;
    while let Err(e) = store.append(&run, Seq(2), vec![created()]).await {
        assert!(e.is_retryable() && tries < 10, "try {tries}: {e:?}");
        tries += 1;
    }
    assert_eq!(store.read_run(&run, Seq(1)).await.unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_url_or_schema_or_unreachable_server_says_what_is_wrong() {
    let Some(url) = test_url() else { return };
    let bad_schema = PgOptions {
        schema: "Not-A-Name".into(),
        ..PgOptions::new(url)
    };
    let e = PgStore::open(bad_schema).await.unwrap_err().to_string();
    assert!(
        e.starts_with("invalid database schema name: \"Not-A-Name\""),
        "{e}"
    );
    let e = PgStore::open(PgOptions::new("postgres://a b c:x"))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("invalid database url"), "{e}");
    let nobody = PgOptions {
        connect_timeout: Duration::from_secs(2),
        ..PgOptions::new("postgres://postgres@127.0.0.1:1/test")
    };
    let e = PgStore::open(nobody).await.unwrap_err();
    assert!(matches!(e, StoreError::Unavailable { .. }), "{e:?}");
    assert!(e.to_string().contains("connecting to the database"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_name_with_a_nul_byte_is_refused_alone() {
    let Some(url) = test_url() else { return };
    let store = PgStore::open_scratch(&url).await.unwrap();
    let mut bad = created();
    bad.instance = "a\0b".into();
    let e = store
        .append(&RunId::from("r"), Seq(1), vec![bad])
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid instance name: event 1 of the append contains a NUL byte"
    );
    store
        .append(&RunId::from("r"), Seq(1), vec![created()])
        .await
        .unwrap();
}

/// Each store's writer remembers where it left the runs it wrote and plans its next batch
/// against that without reading them: another instance moving a run (an append, a lease
/// taken over) must never let a stale append in, nor refuse a good one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_that_last_saw_a_run_is_not_fooled_when_another_instance_moves_it() {
    let Some(url) = test_url() else { return };
    let a = PgStore::open_scratch(&url).await.unwrap();
    let mut options = PgOptions::new(&url);
    options.schema = a.schema().to_owned();
    let b = PgStore::open(options).await.unwrap();
    let run = RunId::from("r");
    a.append(&run, Seq(1), vec![created()]).await.unwrap();
    a.append(&run, Seq(2), vec![created()]).await.unwrap();
    // b appends seq 3: a last saw the run at seq 2.
    b.append(&run, Seq(3), vec![created()]).await.unwrap();
    let sessions = || async {
        let pids =
            "SELECT array_agg(pid ORDER BY pid) FROM pg_stat_activity WHERE application_name = $1";
        let admin = admin(&url).await;
        let pids: Vec<i32> = admin.query_one(pids, &[&a.schema()]).await.unwrap().get(0);
        pids
    };
    let before = sessions().await;
    let e = a.append(&run, Seq(3), vec![created()]).await.unwrap_err();
    assert!(
        matches!(e, StoreError::Conflict { actual: Seq(3), .. }),
        "{e:?}"
    );
    // The batch the database refused left its connection usable, and pooled.
    assert_eq!(sessions().await, before);
    a.append(&run, Seq(4), vec![created()]).await.unwrap();
    // a holds the lease (epoch 1) and appends under it; b takes the run over (epoch 2)
    // and appends; a's appends at epoch 1 are fenced off, whatever seq they carry.
    let held = a
        .acquire(&run, "a", Duration::from_millis(200))
        .await
        .unwrap()
        .unwrap();
    a.append_fenced(&held.fence(), Seq(5), vec![created()])
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let taken = b
        .acquire(&run, "b", Duration::from_secs(10))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(taken.epoch, held.epoch + 1);
    for seq in [6, 7] {
        let e = a
            .append_fenced(&held.fence(), Seq(seq), vec![created()])
            .await
            .unwrap_err();
        assert!(matches!(e, StoreError::Fenced { .. }), "seq {seq}: {e:?}");
    }
    // a's own new lease: its writer last saw the old epoch, the append still goes in.
    b.release(&taken).await.unwrap();
    let again = a
        .acquire(&run, "a", Duration::from_secs(10))
        .await
        .unwrap()
        .unwrap();
    a.append_fenced(&again.fence(), Seq(6), vec![created()])
        .await
        .unwrap();
    let seqs: Vec<u32> = a
        .read_run(&run, Seq(1))
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq.0)
        .collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5, 6]);
}
