//! The PostgreSQL medium (`APOLLO11_TEST_PG_URL`; skipped with a notice without it, failed
//! under `APOLLO11_REQUIRE_PG`): seeds whose crashes hand the runs over to the same owner
//! and to a new one hold every invariant, and a crash leaves nothing the dead engine asked
//! for to reach the database later. `cargo xtask sim --store postgres` plays more.

use apollo11_core::{EventKind, Payload, RunId, Seq};
use apollo11_sim::{simulate, Crash, Medium, Postgres, Scenario, Takeover};
use apollo11_store::{EventStore, NewEvent, StoreError};

/// Seeds with several runs, a kill, and both kinds of takeover.
fn eventful() -> impl Iterator<Item = u64> {
    (0..).filter(|&seed| {
        let s = Scenario::generate(seed);
        s.runs > 1
            && s.crashes.iter().any(|c| matches!(c, Crash::Kill { .. }))
            && s.takeovers.contains(&Takeover::SameOwner)
            && s.takeovers.contains(&Takeover::NewOwner)
    })
}

#[test]
fn every_invariant_holds_through_takeovers_by_the_same_and_a_new_owner() {
    let Some(url) = apollo11_postgres::test_url() else {
        return;
    };
    for seed in eventful().take(3) {
        let outcome = simulate(&Scenario::generate(seed), &mut Postgres::new(&url));
        if let Err(f) = outcome {
            panic!("seed {seed}: {}\n{}", f.message, f.history.join("\n"));
        }
    }
}

fn created() -> NewEvent {
    NewEvent {
        step: None,
        kind: EventKind::RunCreated {
            workflow: "w".into(),
        },
        attempt: 0,
        at_ms: 1,
        instance: "test".into(),
        payload: Payload::default(),
    }
}

#[test]
fn a_crashed_store_reaches_the_database_no_more_and_the_next_one_sees_what_it_wrote() {
    let Some(url) = apollo11_postgres::test_url() else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut medium = Postgres::new(url);
        let dead = medium.open().await.unwrap();
        let (a, b) = (RunId::from("a"), RunId::from("b"));
        dead.append(&a, Seq(1), vec![created()]).await.unwrap();
        medium.crash(&dead).await.unwrap();
        let after = dead.append(&b, Seq(1), vec![created()]).await;
        assert!(
            matches!(after, Err(StoreError::Unavailable { .. })),
            "{after:?}"
        );
        let next = medium.open().await.unwrap();
        let runs: Vec<RunId> = (next.list_runs().await.unwrap())
            .into_iter()
            .map(|r| r.run_id)
            .collect();
        assert_eq!(runs, [a]);
    });
}
