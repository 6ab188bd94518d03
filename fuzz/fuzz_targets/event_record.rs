//! The event decoder: the input is the body of one event record, framed with a valid
//! checksum and committed as a batch of its own at the start of a segment, so every byte
//! reaches the decoder (the event must carry id 1 to be indexed). See `datadir::check` for
//! what must hold.
#![no_main]

use apollo11_fuzz::{datadir, format};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    let mut segment = format::segment_header(1);
    format::push_batch(&mut segment, &[body]);
    let name = "segments/00000000000000000001.seg".to_owned();
    datadir::check(&datadir::with_files(&[(name, segment)]), true);
});
