//! What the fuzz targets share: the on-disk framing written independently of the log's own
//! code (so a fuzzer's bytes can be given valid checksums and reach the decoders behind
//! them), a data dir on the simulated file system, and the properties every data dir must
//! keep whatever its bytes.

pub mod datadir;
pub mod format;
pub mod http;
pub mod targets;

use std::future::Future;
use std::sync::OnceLock;

/// Runs `future` to its end on one runtime shared by every input (the log's reads run on
/// its blocking pool).
pub fn block_on<F: Future>(future: F) -> F::Output {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .expect("a tokio runtime")
        })
        .block_on(future)
}

/// Splits the first byte off an input: the flags a target reads, and the rest.
pub fn flags(data: &[u8]) -> Option<(u8, &[u8])> {
    data.split_first().map(|(flags, rest)| (*flags, rest))
}
