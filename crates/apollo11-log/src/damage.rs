//! Tests' damage: every way a file can be cut short or have one bit flipped, which a decoder
//! must refuse.

/// `bytes` cut at every shorter length, then with each single bit flipped; each with what was
/// done to it, for the assertion's message.
pub(crate) fn damaged(bytes: &[u8]) -> impl Iterator<Item = (String, Vec<u8>)> + '_ {
    let cuts = (0..bytes.len()).map(|cut| (format!("cut at {cut}"), bytes[..cut].to_vec()));
    let flips = (0..bytes.len() * 8).map(|bit| {
        let mut flipped = bytes.to_vec();
        flipped[bit / 8] ^= 1 << (bit % 8);
        (format!("bit {bit}"), flipped)
    });
    cuts.chain(flips)
}
