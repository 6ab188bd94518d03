//! The PostgreSQL store against `APOLLO11_TEST_PG_URL`: the conformance suite every store
//! passes, the lease cases, and what only a database does (migrations, error mapping,
//! indexes). Each test has a scratch schema of its own, dropped at its end.

mod database;
mod ids;
mod order;
mod tls;
mod tls_server;
mod visibility;

use apollo11_postgres::{test_url, PgStore};
use std::sync::Arc;

/// A fresh store in a scratch schema, or `None` (the test returns) without a database.
async fn store() -> Option<Arc<PgStore>> {
    let url = test_url()?;
    Some(Arc::new(PgStore::open_scratch(&url).await.unwrap()))
}

/// `store()`, or return from the test.
macro_rules! store_or_skip {
    () => {
        match crate::store().await {
            Some(store) => store,
            None => return,
        }
    };
}
pub(crate) use store_or_skip;

mod conformance {
    apollo11_store::conformance_tests!(crate::store_or_skip!());
}

mod leases {
    apollo11_store::lease_conformance_tests!(crate::store_or_skip!());
}

mod controls {
    apollo11_store::control_conformance_tests!(crate::store_or_skip!());
}
