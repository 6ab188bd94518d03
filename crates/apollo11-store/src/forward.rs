//! Stores that wrap another ([`DynStore`](crate::DynStore), `Acked`) hand every call they do
//! not change to it. The forwarding is written once, here: an impl made by these macros
//! forwards every method of its trait, the defaulted ones too (so a backend's own
//! `read_event`, `scan_from` or `subscribe` is the one that runs), except those the wrapper
//! writes itself.

/// `impl EventStore for $ty`: `append` as given, every read forwarded to `self.$inner`.
macro_rules! forward_event_store {
    (impl[$($gen:tt)*] for $ty:ty, to $inner:ident, { $($append:tt)* }) => {
        #[async_trait::async_trait]
        impl<$($gen)*> $crate::EventStore for $ty {
            $($append)*

            async fn read_run(
                &self,
                run_id: &::apollo11_core::RunId,
                from_seq: ::apollo11_core::Seq,
            ) -> Result<Vec<::apollo11_core::Event>, $crate::StoreError> {
                self.$inner.read_run(run_id, from_seq).await
            }

            async fn read_event(
                &self,
                run_id: &::apollo11_core::RunId,
                seq: ::apollo11_core::Seq,
            ) -> Result<Option<::apollo11_core::Event>, $crate::StoreError> {
                self.$inner.read_event(run_id, seq).await
            }

            async fn read_from(
                &self,
                from: ::apollo11_core::EventId,
                max_events: u32,
            ) -> Result<Vec<::apollo11_core::Event>, $crate::StoreError> {
                self.$inner.read_from(from, max_events).await
            }

            async fn scan_from(
                &self,
                from: ::apollo11_core::EventId,
                max_events: u32,
                visit: &mut $crate::Visitor<'_>,
            ) -> Result<Option<::apollo11_core::EventId>, $crate::StoreError> {
                self.$inner.scan_from(from, max_events, visit).await
            }

            async fn subscribe<'s>(
                &'s self,
                after: ::apollo11_core::EventId,
            ) -> Result<$crate::Subscription<'s>, $crate::StoreError> {
                self.$inner.subscribe(after).await
            }

            async fn list_runs(&self) -> Result<Vec<$crate::RunSummary>, $crate::StoreError> {
                self.$inner.list_runs().await
            }

            async fn last_event_id(
                &self,
            ) -> Result<::apollo11_core::EventId, $crate::StoreError> {
                self.$inner.last_event_id().await
            }
        }
    };
}

/// `impl SnapshotStore` and `impl BlobStore` for `$ty`, every call forwarded to `self.$inner`;
/// `$snapshot` and `$blob` are the bounds each impl needs.
macro_rules! forward_snapshots_and_blobs {
    (
        impl[$($snapshot:tt)*] SnapshotStore,
        impl[$($blob:tt)*] BlobStore,
        for $ty:ty, to $inner:ident
    ) => {
        #[async_trait::async_trait]
        impl<$($snapshot)*> $crate::SnapshotStore for $ty {
            async fn save_snapshot(&self, snapshot: $crate::Snapshot) -> Result<(), $crate::StoreError> {
                self.$inner.save_snapshot(snapshot).await
            }

            async fn load_snapshot(&self) -> Result<Option<$crate::Snapshot>, $crate::StoreError> {
                self.$inner.load_snapshot().await
            }
        }

        #[async_trait::async_trait]
        impl<$($blob)*> $crate::BlobStore for $ty {
            async fn put_blob(
                &self,
                bytes: Vec<u8>,
            ) -> Result<::apollo11_core::BlobRef, $crate::StoreError> {
                self.$inner.put_blob(bytes).await
            }

            async fn get_blob(
                &self,
                blob: &::apollo11_core::BlobRef,
            ) -> Result<Vec<u8>, $crate::StoreError> {
                self.$inner.get_blob(blob).await
            }
        }
    };
}

pub(crate) use {forward_event_store, forward_snapshots_and_blobs};
