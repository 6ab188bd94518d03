//! What is on disk in the live log: records and their framing (`record.rs`), segment files
//! (`segment.rs`: header, batches, the scan that finds where committed data ends), event
//! encoding (`codec.rs`, the only bincode user) and the index files saved beside sealed
//! segments (`index_file.rs`). The byte layout is in docs/log-format.md.

pub(crate) mod codec;
pub(crate) mod index_file;
pub(crate) mod record;
pub(crate) mod segment;
