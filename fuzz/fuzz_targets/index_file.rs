//! The index file decoder: the template log with one of its index files (the first input
//! byte's bits 1 to 3 choose which) replaced by the rest of the input; bit 0 gives it a
//! valid checksum. See `datadir::check` for what must hold; an index file never changes
//! what the log reads.
#![no_main]

use apollo11_fuzz::{datadir, flags, format};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((flags, bytes)) = flags(data) else {
        return;
    };
    let mut index = bytes.to_vec();
    if flags & 1 != 0 {
        format::fix_index_crc(&mut index);
    }
    let names: Vec<&String> = datadir::template()
        .iter()
        .map(|(name, _)| name)
        .filter(|name| name.ends_with(".idx"))
        .collect();
    let name = names[usize::from(flags >> 1) % names.len()];
    datadir::check(&datadir::with_files(&datadir::template_with(name, index)));
});
