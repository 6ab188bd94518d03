//! The store traits on [`FileLog`]. Every read of a file, and every write and sync of a
//! snapshot or a blob, runs on tokio's blocking pool (on the calling task in deterministic
//! mode, [`crate::Options::deterministic`]), so an async caller never holds a
//! worker thread on disk IO or an fsync; appends are queued for the writer thread. A borrowed scan
//! reads its chunks on the blocking pool and decodes them where it was called, in place.

use crate::durable_files::write_atomically;
use crate::file_log::{FileLog, Files, Writing};
use crate::file_system::Mode;
use crate::scan::{ReadAhead, CHUNK_EVENTS};
use crate::snapshot;
use crate::write::writer::AppendRequest;
use apollo11_core::{BlobRef, Event, EventId, RunId, Seq};
use apollo11_store::{
    check_blob, sha256_hex, validate, Archive, BlobStore, EventStore, NewEvent, RunSummary,
    Snapshot, SnapshotStore, StoreError, Subscription, Visitor,
};
use async_trait::async_trait;
use std::sync::Arc;
use tokio::sync::oneshot;

impl FileLog {
    /// Runs `work` on the blocking pool with the log's files (here, in deterministic mode). A
    /// panic in it is the caller's.
    pub(crate) async fn blocking<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Files) -> Result<T, StoreError> + Send + 'static,
    {
        if self.files.options.deterministic {
            return work(&self.files);
        }
        let files = self.files.clone();
        joined(tokio::task::spawn_blocking(move || work(&files)).await)
    }

    /// Starts reading, on the blocking pool, the records of the events from `from` on, at
    /// most one chunk's worth and none past `end`.
    fn read_chunk(
        &self,
        from: u64,
        end: u64,
        buffer: Vec<u8>,
    ) -> tokio::task::JoinHandle<Result<ReadAhead, StoreError>> {
        let files = self.files.clone();
        let bounds = (CHUNK_EVENTS as u32, end);
        tokio::task::spawn_blocking(move || files.index().read_ahead(EventId(from), bounds, buffer))
    }

    /// Runs a read of the index on the blocking pool, failing first if the store stopped.
    async fn read<T, F>(&self, read: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&crate::run_index::Index) -> Result<T, StoreError> + Send + 'static,
    {
        self.files.shared.check_poison()?;
        self.blocking(move |files| read(&files.index())).await
    }
}

/// The outcome of work done on the blocking pool; its panic is the awaiting caller's.
fn joined<T>(
    outcome: Result<Result<T, StoreError>, tokio::task::JoinError>,
) -> Result<T, StoreError> {
    match outcome {
        Ok(result) => result,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => Err(StoreError::unavailable("the runtime is shutting down")),
    }
}

#[async_trait]
impl EventStore for FileLog {
    async fn append(
        &self,
        run_id: &RunId,
        expected_seq: Seq,
        events: Vec<NewEvent>,
    ) -> Result<Vec<EventId>, StoreError> {
        validate(run_id, &events)?;
        let writing = self.writable()?;
        let (reply, answer) = oneshot::channel();
        let request = AppendRequest {
            run_id: run_id.clone(),
            expected_seq,
            events,
            reply,
        };
        let stopped = || StoreError::Poisoned {
            cause: (self.files.shared.poison.get())
                .map_or_else(|| "the writer stopped".into(), |c| c.to_string()),
        };
        // Counted among the appends in flight until answered.
        let _appending = match writing {
            Writing::Thread(lane) => {
                let appending = lane.appending();
                if let Some(request) = lane.commit_alone(request) {
                    lane.queue().push(request).await?;
                }
                Some(appending)
            }
            Writing::Inline(inline) => {
                (inline.lock().unwrap_or_else(|p| p.into_inner())).commit(request);
                None
            }
        };
        answer.await.map_err(|_| stopped())?
    }

    /// From the live log when it holds the run, else from the archive files.
    async fn read_run(&self, run_id: &RunId, from_seq: Seq) -> Result<Vec<Event>, StoreError> {
        let run_id = run_id.clone();
        self.files.shared.check_poison()?;
        self.blocking(
            move |files| match files.live(&run_id, |i| i.read_run(&run_id, from_seq)) {
                Some(live) => live,
                None => files.archived(&run_id, from_seq),
            },
        )
        .await
    }

    /// From the live log when it holds the run, else from the archive files.
    async fn read_event(&self, run_id: &RunId, seq: Seq) -> Result<Option<Event>, StoreError> {
        let run_id = run_id.clone();
        self.files.shared.check_poison()?;
        self.blocking(
            move |files| match files.live(&run_id, |i| i.read_event(&run_id, seq)) {
                Some(live) => live,
                None => Ok(files
                    .archived(&run_id, seq)?
                    .into_iter()
                    .find(|e| e.seq == seq)),
            },
        )
        .await
    }

    async fn read_from(&self, from: EventId, max_events: u32) -> Result<Vec<Event>, StoreError> {
        self.read(move |index| index.read_from(from, max_events))
            .await
    }

    /// Reads a chunk ahead on the blocking pool while the one before is decoded here, each
    /// in a buffer kept between calls: the disk work overlaps the decoding, and a chunk is
    /// decoded while it is still in the cache it was read into.
    async fn scan_from(
        &self,
        from: EventId,
        max: u32,
        visit: &mut Visitor<'_>,
    ) -> Result<Option<EventId>, StoreError> {
        self.files.shared.check_poison()?;
        if self.files.options.deterministic {
            return self.files.index().scan_from(from, max, visit);
        }
        // The ids of the first and last events to visit (ids a compacted segment skips are
        // not counted in `max`).
        let Some((first, end)) = self.files.index().events_from(from.0.max(1), max) else {
            return Ok(None);
        };
        let mut buffers = self.scan_buffers();
        let mut reading = Some(self.read_chunk(first, end, buffers.pop().unwrap_or_default()));
        let mut last = None;
        while let Some(read) = reading.take() {
            let mut ahead = joined(read.await)?;
            let done = ahead.last().map_or(end, |id| id.0);
            if done < end {
                let buffer = buffers.pop().unwrap_or_default();
                reading = Some(self.read_chunk(done + 1, end, buffer));
            }
            loop {
                let scanned = {
                    let index = self.files.index();
                    let current = ahead.is_of(&index);
                    current
                        .then(|| index.scan_read(&ahead, visit))
                        .transpose()?
                };
                if let Some(visited) = scanned {
                    last = visited.or(last);
                    break;
                }
                // A gc swap replaced the index since the read: the events up to `done` that
                // are still live, read again at their new places.
                let again = self.read_chunk(ahead.from(), done, ahead.into_buffer());
                ahead = joined(again.await)?;
            }
            buffers.push(ahead.into_buffer());
        }
        self.keep_scan_buffers(buffers);
        Ok(last)
    }

    /// Pushed by the writer after each batch's sync. A read-only log is a fixed view of
    /// the log as it was opened: its subscriptions deliver what it holds, then wait.
    async fn subscribe<'s>(&'s self, after: EventId) -> Result<Subscription<'s>, StoreError> {
        let shared = &self.files.shared;
        shared.check_poison()?;
        let index = self.files.index();
        let live = shared.feed.subscribe();
        let visible = EventId(index.last_event_id);
        drop(index);
        // A poisoning told to subscribers before this one existed is seen here instead.
        shared.check_poison()?;
        Ok(Subscription::pushed(self, after, visible, live))
    }

    async fn list_runs(&self) -> Result<Vec<RunSummary>, StoreError> {
        self.files.shared.check_poison()?;
        Ok(self.files.index().list_runs())
    }

    async fn last_event_id(&self) -> Result<EventId, StoreError> {
        self.files.shared.check_poison()?;
        Ok(EventId(self.files.index().last_event_id))
    }
}

#[async_trait]
impl SnapshotStore for FileLog {
    async fn save_snapshot(&self, snapshot: Snapshot) -> Result<(), StoreError> {
        self.writable()?;
        self.blocking(move |files| {
            let result = files.write_snapshot(&snapshot);
            files.poison_on_io(result)
        })
        .await
    }

    async fn load_snapshot(&self) -> Result<Option<Snapshot>, StoreError> {
        self.files.shared.check_poison()?;
        self.blocking(Files::load_snapshot).await
    }
}

/// The runs `gc` moved to the archive files, which the log still reads.
#[async_trait]
impl Archive for FileLog {
    async fn archived_runs(&self) -> Result<Vec<RunSummary>, StoreError> {
        FileLog::archived_runs(self).await
    }

    fn holds_live(&self, run_id: &RunId) -> bool {
        FileLog::holds_live(self, run_id)
    }
}

impl Files {
    /// `read` of the index when the live log holds `run_id`; `None` when it does not.
    pub(crate) fn live<T>(
        &self,
        run_id: &RunId,
        read: impl FnOnce(&crate::run_index::Index) -> T,
    ) -> Option<T> {
        let index = self.index();
        (index.last_seq(run_id.as_str()) > 0).then(|| read(&index))
    }

    /// The run's events from `from_seq` on in the archive files (none when they lack it).
    fn archived(&self, run_id: &RunId, from_seq: Seq) -> Result<Vec<Event>, StoreError> {
        let place = self.shared.archived_at(run_id);
        let found = crate::archive::find_run(self.fs.as_ref(), &self.dir, place, run_id, from_seq)?;
        Ok(found.unwrap_or_default())
    }

    /// Writes `snapshot` atomically (temp, sync, rename, sync the directory) and removes
    /// the oldest beyond the number kept.
    fn write_snapshot(&self, snapshot: &Snapshot) -> Result<(), StoreError> {
        let last = self.index().last_event_id;
        if snapshot.watermark.0 > last {
            return Err(snapshot::beyond_log(snapshot.watermark.0, last));
        }
        let record_crc = self.index().watermark_crc(snapshot.watermark.0)?;
        let dir = self.dir.join("snapshots");
        let path = dir.join(snapshot::file_name(snapshot.watermark.0));
        let bytes = snapshot::encode(snapshot, self.options.durability, record_crc.unwrap_or(0));
        write_atomically(self.fs.as_ref(), &path, &bytes)?;
        let names = self.snapshot_names()?;
        for old in names.iter().rev().skip(self.options.snapshots_kept) {
            let path = dir.join(old);
            self.fs
                .remove(&path)
                .map_err(|e| StoreError::io(format!("removing {}", path.display()), e))?;
        }
        self.fs
            .sync_dir(&dir)
            .map_err(|e| StoreError::io(format!("syncing {}", dir.display()), e))
    }

    /// The newest snapshot that decodes, covers no event past the log's end and belongs to
    /// this log; the others are skipped for older ones.
    fn load_snapshot(&self) -> Result<Option<Snapshot>, StoreError> {
        let last = self.index().last_event_id;
        for name in self.snapshot_names()?.iter().rev() {
            let path = self.dir.join("snapshots").join(name);
            let Ok(bytes) = self.fs.open(&path, Mode::Read).and_then(|f| f.read_all()) else {
                continue;
            };
            let Ok(file) = snapshot::decode(&bytes) else {
                continue;
            };
            let watermark = file.snapshot.watermark.0;
            if watermark > last {
                continue;
            }
            let record_crc = self.index().watermark_crc(watermark)?;
            if snapshot::foreign(&file, record_crc).is_none() {
                return Ok(Some(file.snapshot));
            }
        }
        Ok(None)
    }

    fn snapshot_names(&self) -> Result<Vec<String>, StoreError> {
        let dir = self.dir.join("snapshots");
        let names = self
            .fs
            .list(&dir)
            .map_err(|e| StoreError::io(format!("listing {}", dir.display()), e))?;
        Ok(names
            .into_iter()
            .filter(|n| snapshot::is_snapshot(n))
            .collect())
    }

    /// Stores `bytes` under their hash unless a file of that name and size is there: a
    /// blob is checked against its hash when it is read, never when it is stored again.
    fn put_blob(&self, bytes: &[u8]) -> Result<BlobRef, StoreError> {
        let blob = BlobRef {
            sha256: sha256_hex(bytes),
            bytes: bytes.len() as u64,
        };
        let path = self.dir.join("blobs").join(&blob.sha256);
        let _writing = self.blob_writes.lock().unwrap_or_else(|p| p.into_inner());
        let size = self.fs.open(&path, Mode::Read).and_then(|f| f.size());
        if !matches!(size, Ok(size) if size == blob.bytes) {
            let written = write_atomically(self.fs.as_ref(), &path, bytes);
            self.poison_on_io(written)?;
        }
        Ok(blob)
    }

    fn get_blob(&self, blob: &BlobRef) -> Result<Vec<u8>, StoreError> {
        let valid_name =
            blob.sha256.len() == 64 && blob.sha256.bytes().all(|b| b.is_ascii_hexdigit());
        if !valid_name {
            return Err(StoreError::Invalid {
                what: "blob reference".into(),
                reason: format!("`{}` is not a SHA-256", blob.sha256),
            });
        }
        let path = self.dir.join("blobs").join(&blob.sha256);
        let bytes = match self.fs.open(&path, Mode::Read).and_then(|f| f.read_all()) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::NotFound {
                    what: format!("blob {}", blob.sha256),
                })
            }
            Err(e) => return Err(StoreError::io(format!("reading {}", path.display()), e)),
        };
        check_blob(blob, &bytes, &format!("blobs/{}", blob.sha256))?;
        Ok(bytes)
    }
}

#[async_trait]
impl BlobStore for FileLog {
    async fn put_blob(&self, bytes: Vec<u8>) -> Result<BlobRef, StoreError> {
        self.writable()?;
        self.blocking(move |files| files.put_blob(&bytes)).await
    }

    async fn get_blob(&self, blob: &BlobRef) -> Result<Vec<u8>, StoreError> {
        self.files.shared.check_poison()?;
        let blob = Arc::new(blob.clone());
        self.blocking(move |files| files.get_blob(&blob)).await
    }
}
