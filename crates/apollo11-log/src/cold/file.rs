//! The compressed segment file: its layout, and [`ColdFile`], which reads it as the plain
//! segment it holds, one block at a time through a cache of decompressed blocks shared by the
//! whole process (at most [`CACHE_BLOCKS`] of them, least recently used evicted).
//!
//! Layout: one zstd frame per block of [`BLOCK_BYTES`] of the segment (the last one
//! shorter), each with its content size and checksum, then a zstd skippable frame holding the
//! block table: `([stored len u32][plain len u32])*`, then `[block count u32][version u32 = 1]
//! [crc32 u32 of the table, count and version]["A11COLD\0"]`. `zstd -d` reads it as the
//! plain segment.

use super::BLOCK_BYTES;
use crate::file_system::FsFile;
use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Decompressed blocks the process keeps, across every cold segment of every log: 64 MiB.
pub const CACHE_BLOCKS: usize = 64;
/// zstd's default level: compresses about as fast as a disk writes.
const LEVEL: i32 = 3;
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// The last of zstd's 16 skippable frame magic numbers.
const SKIPPABLE_MAGIC: u32 = 0x184d_2a5f;
const TABLE_MAGIC: &[u8; 8] = b"A11COLD\0";
const TABLE_VERSION: u32 = 1;
/// Count, version, CRC and magic at the end of the file.
const TRAILER_BYTES: usize = 20;
/// Bytes of a block's entry in the table.
const ENTRY_BYTES: usize = 8;

/// Where a cold segment's bytes stop being readable, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Broken {
    /// Offset in the segment (decompressed) of the first byte that cannot be read.
    pub offset: u64,
    /// What is wrong.
    pub reason: String,
}

/// One zstd frame of a cold segment.
#[derive(Clone, Copy, Debug)]
struct Block {
    /// Offset of the frame in the file.
    at: u64,
    stored: u32,
    plain: u32,
}

/// Whether `file` starts with a zstd frame, as a cold segment does.
pub fn is_cold(file: &dyn FsFile) -> io::Result<bool> {
    let mut head = [0u8; 4];
    if file.size()? < head.len() as u64 {
        return Ok(false);
    }
    file.read_exact_at(&mut head, 0)?;
    Ok(head == ZSTD_MAGIC)
}

/// A compressed segment, read as the segment it holds. Read only.
pub struct ColdFile {
    raw: Box<dyn FsFile>,
    /// The key of its blocks in the cache.
    id: u64,
    /// Its blocks, or why its table cannot be read.
    blocks: Result<Vec<Block>, String>,
    stored: u64,
}

impl ColdFile {
    /// The compressed segment in `raw` (its table read now; a damaged one makes every read
    /// fail, naming what is wrong).
    pub fn new(raw: Box<dyn FsFile>) -> ColdFile {
        static IDS: AtomicU64 = AtomicU64::new(0);
        let stored = raw.size().unwrap_or(0);
        ColdFile {
            blocks: read_table(raw.as_ref(), stored),
            raw,
            id: IDS.fetch_add(1, Ordering::Relaxed),
            stored,
        }
    }

    /// The file's size on disk.
    pub fn stored_bytes(&self) -> u64 {
        self.stored
    }

    /// Every block that decompresses, in order, up to the first that does not (and where and
    /// why it does not). Bypasses the cache: a whole segment read once would only evict the
    /// blocks readers use.
    pub fn read_intact(&self) -> io::Result<(Vec<u8>, Option<Broken>)> {
        let blocks = match &self.blocks {
            Ok(blocks) => blocks,
            Err(reason) => {
                let broken = Broken {
                    offset: 0,
                    reason: reason.clone(),
                };
                return Ok((Vec::new(), Some(broken)));
            }
        };
        let mut out = Vec::with_capacity(blocks.len() * BLOCK_BYTES);
        for (i, block) in blocks.iter().enumerate() {
            match self.decompress(i, block) {
                Ok(bytes) => out.extend_from_slice(&bytes),
                Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                    let broken = Broken {
                        offset: out.len() as u64,
                        reason: e.to_string(),
                    };
                    return Ok((out, Some(broken)));
                }
                Err(e) => return Err(e),
            }
        }
        Ok((out, None))
    }

    fn blocks(&self) -> io::Result<&[Block]> {
        self.blocks
            .as_deref()
            .map_err(|reason| damaged(reason.clone()))
    }

    /// Block `i`, from the cache or decompressed into it.
    fn block(&self, i: usize, block: &Block) -> io::Result<Arc<[u8]>> {
        let key = (self.id, i);
        if let Some(bytes) = cache().get(key) {
            return Ok(bytes);
        }
        let bytes: Arc<[u8]> = self.decompress(i, block)?.into();
        cache().put(key, bytes.clone());
        Ok(bytes)
    }

    fn decompress(&self, i: usize, block: &Block) -> io::Result<Vec<u8>> {
        let mut frame = vec![0u8; block.stored as usize];
        self.raw.read_exact_at(&mut frame, block.at)?;
        let start = i as u64 * BLOCK_BYTES as u64;
        let place = || {
            format!(
                "compressed block {i} (segment bytes {start}..{}, file bytes {}..{})",
                start + u64::from(block.plain),
                block.at,
                block.at + u64::from(block.stored)
            )
        };
        let bytes = zstd::bulk::decompress(&frame, BLOCK_BYTES)
            .map_err(|e| damaged(format!("{} does not decompress: {e}", place())))?;
        if bytes.len() != block.plain as usize {
            let reason = format!("{} holds {} bytes", place(), bytes.len());
            return Err(damaged(reason));
        }
        Ok(bytes)
    }

    /// The segment's size.
    fn plain_size(&self) -> io::Result<u64> {
        Ok(self.blocks()?.iter().map(|b| u64::from(b.plain)).sum())
    }
}

impl Drop for ColdFile {
    fn drop(&mut self) {
        cache().forget(self.id);
    }
}

impl FsFile for ColdFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let blocks = self.blocks()?;
        let size = self.plain_size()?;
        if offset.saturating_add(buf.len() as u64) > size {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "reading {} bytes at {offset} of a {size}-byte segment",
                    buf.len()
                ),
            ));
        }
        let mut done = 0;
        while done < buf.len() {
            let at = offset + done as u64;
            let i = (at / BLOCK_BYTES as u64) as usize;
            let within = (at % BLOCK_BYTES as u64) as usize;
            let block = self.block(i, &blocks[i])?;
            let n = (block.len() - within).min(buf.len() - done);
            buf[done..done + n].copy_from_slice(&block[within..within + n]);
            done += n;
        }
        Ok(())
    }

    fn write_all_at(&self, _: &[u8], _: u64) -> io::Result<()> {
        Err(read_only())
    }

    fn sync_data(&self) -> io::Result<()> {
        self.raw.sync_data()
    }

    fn set_len(&self, _: u64) -> io::Result<()> {
        Err(read_only())
    }

    fn size(&self) -> io::Result<u64> {
        self.plain_size()
    }
}

fn read_only() -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        "a compressed segment is never written",
    )
}

fn damaged(reason: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, reason)
}

/// `segment` as a cold segment file.
///
/// # Errors
///
/// zstd's, setting up its compressor or compressing a block.
pub fn encode(segment: &[u8]) -> io::Result<Vec<u8>> {
    let mut compressor = zstd::bulk::Compressor::new(LEVEL)?;
    compressor.include_checksum(true)?;
    compressor.include_contentsize(true)?;
    let mut out = Vec::with_capacity(segment.len() / 4);
    let mut table = Vec::new();
    for block in segment.chunks(BLOCK_BYTES) {
        let frame = compressor.compress(block)?;
        table.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        table.extend_from_slice(&(block.len() as u32).to_le_bytes());
        out.extend_from_slice(&frame);
    }
    let count = (table.len() / ENTRY_BYTES) as u32;
    table.extend_from_slice(&count.to_le_bytes());
    table.extend_from_slice(&TABLE_VERSION.to_le_bytes());
    let crc = crc32fast::hash(&table);
    table.extend_from_slice(&crc.to_le_bytes());
    table.extend_from_slice(TABLE_MAGIC);
    out.extend_from_slice(&SKIPPABLE_MAGIC.to_le_bytes());
    out.extend_from_slice(&(table.len() as u32).to_le_bytes());
    out.extend_from_slice(&table);
    Ok(out)
}

/// The segment a cold segment file holds, every block checked.
pub fn decode(file: &[u8]) -> Result<Vec<u8>, String> {
    let cold = ColdFile::new(Box::new(Bytes(file.to_vec())));
    match cold.read_intact() {
        Ok((bytes, None)) => Ok(bytes),
        Ok((_, Some(broken))) => Err(broken.reason),
        Err(e) => Err(e.to_string()),
    }
}

/// The blocks of the cold segment `raw` of `stored` bytes, every field of its table checked.
fn read_table(raw: &dyn FsFile, stored: u64) -> Result<Vec<Block>, String> {
    let unreadable = |e: io::Error| format!("its block table is unreadable: {e}");
    let mut trailer = [0u8; TRAILER_BYTES];
    let trailer_at = stored
        .checked_sub(TRAILER_BYTES as u64)
        .ok_or_else(|| format!("{stored} bytes, too short for a compressed segment"))?;
    raw.read_exact_at(&mut trailer, trailer_at)
        .map_err(unreadable)?;
    let u32_at = |b: &[u8], at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4"));
    if &trailer[12..] != TABLE_MAGIC {
        return Err("no block table at its end (bad magic): a compressed segment cut short".into());
    }
    let (count, version) = (u32_at(&trailer, 0), u32_at(&trailer, 4));
    if version != TABLE_VERSION {
        return Err(format!(
            "compressed segment version {version}; this build reads {TABLE_VERSION}"
        ));
    }
    let content = ENTRY_BYTES as u64 * u64::from(count) + TRAILER_BYTES as u64;
    let table_at = stored
        .checked_sub(content + 8)
        .ok_or_else(|| format!("its block table counts {count} blocks, more than fit"))?;
    let mut table = vec![0u8; (content + 8) as usize];
    raw.read_exact_at(&mut table, table_at)
        .map_err(unreadable)?;
    let crc_covers = &table[8..table.len() - 12];
    if crc32fast::hash(crc_covers) != u32_at(&trailer, 8) {
        return Err("its block table fails its checksum".into());
    }
    if u32_at(&table, 0) != SKIPPABLE_MAGIC || u64::from(u32_at(&table, 4)) != content {
        return Err("its block table's frame header is wrong".into());
    }
    let mut blocks = Vec::with_capacity(count as usize);
    let mut at = 0u64;
    for (i, entry) in table[8..8 + count as usize * ENTRY_BYTES]
        .chunks_exact(ENTRY_BYTES)
        .enumerate()
    {
        let (stored, plain) = (u32_at(entry, 0), u32_at(entry, 4));
        let last = i + 1 == count as usize;
        let plain_ok = plain as usize == BLOCK_BYTES
            || (last && (1..=BLOCK_BYTES).contains(&(plain as usize)));
        if !plain_ok || stored == 0 {
            return Err(format!(
                "its block table's entry {i} is wrong ({stored} bytes holding {plain})"
            ));
        }
        blocks.push(Block { at, stored, plain });
        at += u64::from(stored);
    }
    if at != table_at || blocks.is_empty() {
        return Err(format!(
            "its block table accounts for {at} bytes of frames, the file has {table_at}"
        ));
    }
    Ok(blocks)
}

/// A cached block: (the file's id, the block's number).
type Key = (u64, usize);

/// Decompressed blocks, with when each was last used.
#[derive(Default)]
struct Cache {
    blocks: HashMap<Key, (Arc<[u8]>, u64)>,
    tick: u64,
}

/// The process's cache of decompressed blocks.
fn cache() -> CacheGuard {
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    CacheGuard(CACHE.get_or_init(Mutex::default))
}

struct CacheGuard(&'static Mutex<Cache>);

impl CacheGuard {
    fn lock(&self) -> std::sync::MutexGuard<'static, Cache> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn get(&self, key: Key) -> Option<Arc<[u8]>> {
        let mut cache = self.lock();
        cache.tick += 1;
        let tick = cache.tick;
        let (bytes, used) = cache.blocks.get_mut(&key)?;
        *used = tick;
        Some(bytes.clone())
    }

    fn put(&self, key: Key, bytes: Arc<[u8]>) {
        let mut cache = self.lock();
        if cache.blocks.len() >= CACHE_BLOCKS {
            let oldest = cache.blocks.iter().min_by_key(|(_, (_, used))| *used);
            if let Some(oldest) = oldest.map(|(key, _)| *key) {
                cache.blocks.remove(&oldest);
            }
        }
        cache.tick += 1;
        let tick = cache.tick;
        cache.blocks.insert(key, (bytes, tick));
    }

    fn forget(&self, id: u64) {
        self.lock().blocks.retain(|&(file, _), _| file != id);
    }
}

/// A file held in memory, to decode a cold segment built in memory.
struct Bytes(Vec<u8>);

impl FsFile for Bytes {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let range = usize::try_from(offset)
            .ok()
            .and_then(|at| Some(at..at.checked_add(buf.len())?))
            .filter(|r| r.end <= self.0.len())
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(&self.0[range]);
        Ok(())
    }

    fn write_all_at(&self, _: &[u8], _: u64) -> io::Result<()> {
        Err(read_only())
    }

    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }

    fn set_len(&self, _: u64) -> io::Result<()> {
        Err(read_only())
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.0.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cache is the process's: its tests take turns.
    static CACHE_TESTS: Mutex<()> = Mutex::new(());

    fn cold(segment: &[u8]) -> ColdFile {
        ColdFile::new(Box::new(Bytes(encode(segment).unwrap())))
    }

    #[test]
    fn a_segment_of_several_blocks_reads_back_at_any_offset_and_is_never_written() {
        let segment: Vec<u8> = (0..BLOCK_BYTES * 2 + 1000)
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        let file = cold(&segment);
        assert_eq!(file.size().unwrap(), segment.len() as u64);
        let ranges = [
            (0, 10),
            (BLOCK_BYTES - 5, 10),
            (2 * BLOCK_BYTES - 1, 1001),
            (123, 2 * BLOCK_BYTES),
        ];
        for (at, len) in ranges {
            let mut buf = vec![0; len];
            file.read_exact_at(&mut buf, at as u64).unwrap();
            assert_eq!(buf, segment[at..at + len], "{len} bytes at {at}");
        }
        let mut past = [0u8; 2];
        let end = segment.len() as u64 - 1;
        let error = file.read_exact_at(&mut past, end).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
        assert!(file.write_all_at(b"x", 0).is_err());
        assert!(file.set_len(0).is_err());
        assert_eq!(file.read_intact().unwrap(), (segment, None));
    }

    #[test]
    fn no_cut_reads_and_no_flipped_bit_reads_as_other_bytes() {
        let segment: Vec<u8> = b"APOLLO11".iter().cycle().take(300).copied().collect();
        let file = encode(&segment).unwrap();
        assert_eq!(decode(&file), Ok(segment.clone()));
        for cut in 0..file.len() {
            assert!(decode(&file[..cut]).is_err(), "cut at {cut}");
        }
        let mut refused = 0;
        for bit in 0..file.len() * 8 {
            let mut flipped = file.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            match decode(&flipped) {
                Ok(bytes) => assert_eq!(bytes, segment, "bit {bit}"),
                Err(_) => refused += 1,
            }
        }
        // Only flips zstd cannot see and that change nothing read (the window size, the
        // skippable frame's magic variant) pass.
        assert!(refused * 10 >= file.len() * 8 * 9, "{refused} refused");
    }

    #[test]
    fn the_cache_keeps_the_blocks_used_last() {
        let _turn = CACHE_TESTS.lock().unwrap_or_else(|p| p.into_inner());
        let before = cache().lock().blocks.len();
        let segment = vec![5u8; BLOCK_BYTES * 3];
        let file = cold(&segment);
        let mut byte = [0u8; 1];
        for block in [0, 1, 2, 0] {
            file.read_exact_at(&mut byte, (block * BLOCK_BYTES) as u64)
                .unwrap();
        }
        let held = |id| cache().lock().blocks.keys().filter(|k| k.0 == id).count();
        assert_eq!(held(file.id), 3);
        assert!(cache().lock().blocks.len() <= CACHE_BLOCKS.max(before + 3));
        let id = file.id;
        drop(file);
        assert_eq!(held(id), 0, "a dropped file's blocks are forgotten");
    }

    #[test]
    fn the_cache_never_holds_more_than_its_bound() {
        let _turn = CACHE_TESTS.lock().unwrap_or_else(|p| p.into_inner());
        let file = cold(&vec![0u8; BLOCK_BYTES * (CACHE_BLOCKS + 1)]);
        let mut byte = [0u8; 1];
        for block in 0..=CACHE_BLOCKS {
            file.read_exact_at(&mut byte, (block * BLOCK_BYTES) as u64)
                .unwrap();
            assert!(cache().lock().blocks.len() <= CACHE_BLOCKS);
        }
        let first = cache().lock().blocks.contains_key(&(file.id, 0));
        assert!(!first, "the least recently used block was evicted");
    }
}
