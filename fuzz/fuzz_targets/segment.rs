//! Segment recovery on arbitrary bytes. The first input byte holds flags: bit 0 gives the
//! header a valid checksum, bit 1 every record it can walk to, bit 2 puts the segment after
//! the template log's others (as its last segment) instead of alone. See `datadir::check`
//! for what must hold.
#![no_main]

use apollo11_fuzz::{datadir, flags, format};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((flags, bytes)) = flags(data) else {
        return;
    };
    let mut segment = bytes.to_vec();
    if flags & 1 != 0 {
        format::fix_segment_header(&mut segment);
    }
    if flags & 2 != 0 {
        format::fix_record_crcs(&mut segment);
    }
    let files = if flags & 4 != 0 {
        let last = datadir::template()
            .iter()
            .map(|(name, _)| name)
            .filter(|name| name.ends_with(".seg"))
            .max()
            .expect("the template has segments");
        let index = last.replace(".seg", ".idx");
        let mut files = datadir::template_with(last, segment);
        files.retain(|(name, _)| *name != index);
        files
    } else {
        vec![("segments/00000000000000000001.seg".to_owned(), segment)]
    };
    datadir::check(&datadir::with_files(&files), true);
});
