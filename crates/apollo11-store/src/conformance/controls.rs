//! The cases every [`ControlStore`] passes: compare-and-set, one winner among racing
//! writers, listing by prefix, limits.

use crate::{ControlStore, StoreError, CONTROL_KEY_BYTES_MAX, CONTROL_VALUE_BYTES_MAX};
use std::sync::Arc;

/// Generates one `#[test]` per control case, each on a runtime of its own
/// ([`block_on`](super::block_on)); `$make` must evaluate to an `Arc<impl ControlStore>`
/// that is fresh and empty each time it is evaluated.
#[macro_export]
macro_rules! control_conformance_tests {
    ($make:expr) => {
        $crate::control_conformance_tests!(@cases $make;
            a_control_is_written_at_the_version_read_and_listed_by_prefix,
            racing_writers_of_a_control_get_exactly_one_winner,
            control_writes_are_checked,
        );
    };
    (@cases $make:expr; $($case:ident),* $(,)?) => {$(
        #[test]
        fn $case() {
            $crate::conformance::block_on(async {
                $crate::conformance::controls::$case($make).await;
            });
        }
    )*};
}

/// Versions count up from 1; a stale version writes nothing; a prefix lists its keys alone.
#[doc(hidden)]
pub async fn a_control_is_written_at_the_version_read_and_listed_by_prefix(
    store: Arc<impl ControlStore>,
) {
    assert!(store.list_controls("").await.unwrap().is_empty());
    assert_eq!(
        store.put_control("s/a", 0, b"one".to_vec()).await.unwrap(),
        1
    );
    assert_eq!(
        store.put_control("s/a", 1, b"two".to_vec()).await.unwrap(),
        2
    );
    match store.put_control("s/a", 1, b"stale".to_vec()).await {
        Err(StoreError::ControlConflict {
            key,
            expected: 1,
            actual: 2,
        }) => assert_eq!(key, "s/a"),
        other => panic!("a stale version must conflict: {other:?}"),
    }
    match store.put_control("s/new", 3, b"x".to_vec()).await {
        Err(StoreError::ControlConflict { actual: 0, .. }) => {}
        other => panic!("a missing record is at version 0: {other:?}"),
    }
    store.put_control("s/b", 0, Vec::new()).await.unwrap();
    store
        .put_control("t/a", 0, b"other".to_vec())
        .await
        .unwrap();
    let listed = store.list_controls("s/").await.unwrap();
    let seen: Vec<_> = (listed.iter())
        .map(|c| (c.key.as_str(), c.version, c.value.as_slice()))
        .collect();
    assert_eq!(seen, [("s/a", 2, &b"two"[..]), ("s/b", 1, &b""[..])]);
    assert_eq!(store.list_controls("").await.unwrap().len(), 3);
}

/// Writers racing from one version: one wins, the others conflict, the value is the
/// winner's.
#[doc(hidden)]
pub async fn racing_writers_of_a_control_get_exactly_one_winner(
    store: Arc<impl ControlStore + 'static>,
) {
    let writers: Vec<_> = (0..8u8)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move { (i, store.put_control("race", 0, vec![i]).await) })
        })
        .collect();
    let mut results = Vec::new();
    for writer in writers {
        results.push(writer.await.expect("a writer panicked"));
    }
    let winners: Vec<_> = (results.iter()).filter(|(_, r)| r.is_ok()).collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    for (_, result) in &results {
        if let Err(e) = result {
            assert!(matches!(e, StoreError::ControlConflict { .. }), "{e}");
        }
    }
    let stored = store.list_controls("race").await.unwrap();
    assert_eq!(stored[0].value, vec![winners[0].0]);
    assert_eq!(stored[0].version, 1);
}

/// An empty key, a key or a value over its limit: refused, nothing written.
#[doc(hidden)]
pub async fn control_writes_are_checked(store: Arc<impl ControlStore>) {
    let long_key = "k".repeat(CONTROL_KEY_BYTES_MAX + 1);
    let big = vec![0; CONTROL_VALUE_BYTES_MAX + 1];
    for (key, value) in [
        ("", Vec::new()),
        (long_key.as_str(), Vec::new()),
        ("k", big),
    ] {
        match store.put_control(key, 0, value).await {
            Err(StoreError::Invalid { .. }) => {}
            other => panic!("{key:.10}: {other:?}"),
        }
    }
    let edge = "k".repeat(CONTROL_KEY_BYTES_MAX);
    (store
        .put_control(&edge, 0, vec![0; CONTROL_VALUE_BYTES_MAX])
        .await)
        .unwrap();
    assert_eq!(store.list_controls("").await.unwrap().len(), 1);
}
