//! Read-only looks at the segments (an open without the lock, `verify`) beside a `gc` swap in
//! another process, or one a crash left unfinished: its renames, met half done, show a run's
//! later events without its earlier ones, which is not damage. Such a look that finds damage
//! while a manifest is there looks again, a few times a short wait apart; a manifest still
//! there then is reported as the swap in progress, never as damage.

use crate::file_system::Fs;
use apollo11_store::StoreError;
use std::path::Path;
use std::time::{Duration, Instant};

/// Looks again after damage beside a manifest for this long after the first look ended…
const PATIENCE: Duration = Duration::from_millis(500);
/// …this long apart (a swap's renames take milliseconds), and at least once (a slow look,
/// as `verify` of a large log, may have met the renames and end after them).
const WAIT: Duration = Duration::from_millis(50);

/// `look`'s answer, looked again while `damaged` says it found damage and a manifest is in
/// `dir`; [`StoreError::GcInProgress`] naming the manifest when one is still there after the
/// last look.
///
/// # Errors
///
/// `look`'s, [`StoreError::GcInProgress`], and [`StoreError::Io`] when the archive folder
/// cannot be listed.
pub(crate) fn look_beside_swaps<T>(
    fs: &dyn Fs,
    dir: &Path,
    damaged: impl Fn(&Result<T, StoreError>) -> bool,
    mut look: impl FnMut() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let mut until: Option<Instant> = None;
    loop {
        let answer = look();
        if !damaged(&answer) {
            return answer;
        }
        let Some(manifest) = super::unfinished(fs, dir)?.into_iter().next() else {
            return answer;
        };
        let until = *until.get_or_insert_with(|| Instant::now() + PATIENCE);
        if Instant::now() >= until {
            return Err(StoreError::GcInProgress { manifest });
        }
        std::thread::sleep(WAIT);
    }
}
