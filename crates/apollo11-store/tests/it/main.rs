//! The conformance suite on the in-memory store.

use apollo11_store::MemStore;
use std::sync::Arc;

apollo11_store::conformance_tests!(Arc::new(MemStore::new()));
