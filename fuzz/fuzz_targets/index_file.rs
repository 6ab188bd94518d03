//! The index file decoder: the template log with one of its index files (the first input
//! byte's bits 1 to 3 choose which) replaced by the rest of the input; bit 0 gives it a
//! valid checksum. See `datadir::check` for what must hold (with a forged checksum, reads
//! may refuse a log `verify` finds clean: see its notes).
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
    let files = datadir::template_with(name, index);
    datadir::check(&datadir::with_files(&files), flags & 1 == 0);
});
