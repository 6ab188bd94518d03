//! Controls ([`ControlStore`]) of the file log: every record in one file, `controls` in the
//! data directory, rewritten whole and atomically at each write (temp, sync, rename, sync
//! dir) under the files' control lock, so a write is durable before it is acknowledged and a
//! crash leaves the old records or all of the new ones.
//!
//! Layout, little-endian: the magic `A11CTL1\n`, a `u32` record count, each record as its
//! key (`u32` length, UTF-8), its `u64` version and its value (`u32` length, bytes), then a
//! CRC-32 of everything before it.

use crate::durable_files::write_atomically;
use crate::file_log::{FileLog, Files};
use crate::file_system::Mode;
use apollo11_store::{Control, ControlStore, Controls, StoreError};
use async_trait::async_trait;
use std::path::PathBuf;

/// The file's name in the data directory.
pub(crate) const FILE: &str = "controls";
const MAGIC: &[u8; 8] = b"A11CTL1\n";

#[async_trait]
impl ControlStore for FileLog {
    async fn list_controls(&self, prefix: &str) -> Result<Vec<Control>, StoreError> {
        self.files.shared.check_poison()?;
        let prefix = prefix.to_owned();
        self.blocking(move |files| Ok(files.read_controls()?.list(&prefix)))
            .await
    }

    async fn put_control(
        &self,
        key: &str,
        expected: u64,
        value: Vec<u8>,
    ) -> Result<u64, StoreError> {
        self.writable()?;
        let key = key.to_owned();
        self.blocking(move |files| {
            let _writing = files
                .control_writes
                .lock()
                .expect("a control write panicked");
            let (next, version) = files.read_controls()?.put(&key, expected, value)?;
            let result =
                write_atomically(files.fs.as_ref(), &files.controls_path(), &encode(&next));
            files.poison_on_io(result).map(|()| version)
        })
        .await
    }
}

impl Files {
    fn controls_path(&self) -> PathBuf {
        self.dir.join(FILE)
    }

    /// The records of the controls file; none when there is no file.
    fn read_controls(&self) -> Result<Controls, StoreError> {
        let path = self.controls_path();
        let file = match self.fs.open(&path, Mode::Read) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Controls::default()),
            Err(e) => return Err(StoreError::io(format!("opening {}", path.display()), e)),
        };
        let bytes = (file.read_all())
            .map_err(|e| StoreError::io(format!("reading {}", path.display()), e))?;
        decode(&bytes).map_err(|(offset, reason)| StoreError::Corrupted {
            file: path.display().to_string(),
            offset,
            reason: reason.to_owned(),
        })
    }
}

/// The file's bytes for `controls`.
fn encode(controls: &Controls) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    let records: Vec<_> = controls.records().collect();
    out.extend_from_slice(&(records.len() as u32).to_le_bytes());
    for record in records {
        out.extend_from_slice(&(record.key.len() as u32).to_le_bytes());
        out.extend_from_slice(record.key.as_bytes());
        out.extend_from_slice(&record.version.to_le_bytes());
        out.extend_from_slice(&(record.value.len() as u32).to_le_bytes());
        out.extend_from_slice(&record.value);
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The controls in `bytes`, or where and why they do not decode.
fn decode(bytes: &[u8]) -> Result<Controls, (u64, &'static str)> {
    let body_len = (bytes.len().checked_sub(4)).ok_or((0, "shorter than its checksum"))?;
    let (body, crc) = bytes.split_at(body_len);
    if crc32fast::hash(body).to_le_bytes() != crc {
        return Err((body_len as u64, "checksum mismatch"));
    }
    let mut reader = Reader { bytes: body, at: 0 };
    if reader.take(MAGIC.len())? != MAGIC {
        return Err((0, "not a controls file (magic)"));
    }
    let count = reader.u32()?;
    let mut records = Vec::new();
    for _ in 0..count {
        let key_len = reader.u32()? as usize;
        let key = std::str::from_utf8(reader.take(key_len)?)
            .map_err(|_| (reader.at as u64, "key not UTF-8"))?;
        let version = u64::from_le_bytes(reader.take(8)?.try_into().expect("8 bytes"));
        let value_len = reader.u32()? as usize;
        let value = reader.take(value_len)?.to_vec();
        records.push(Control {
            key: key.to_owned(),
            version,
            value,
        });
    }
    if reader.at != body.len() {
        return Err((reader.at as u64, "bytes after the last record"));
    }
    Ok(Controls::from_records(records))
}

/// Reads the body front to back, every length checked against what is left.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], (u64, &'static str)> {
        let end = (self.at.checked_add(n))
            .filter(|&end| end <= self.bytes.len())
            .ok_or((self.at as u64, "a length past the end"))?;
        let taken = &self.bytes[self.at..end];
        self.at = end;
        Ok(taken)
    }

    fn u32(&mut self) -> Result<u32, (u64, &'static str)> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_round_trips_and_damage_is_named_by_offset() {
        let (one, _) = Controls::default().put("a", 0, b"x".to_vec()).unwrap();
        let (two, _) = one.put("b/c", 0, Vec::new()).unwrap();
        let bytes = encode(&two);
        assert_eq!(decode(&bytes).unwrap(), two);
        assert_eq!(
            decode(&encode(&Controls::default())).unwrap(),
            Controls::default()
        );
        let mut flipped = bytes.clone();
        flipped[10] ^= 1;
        assert_eq!(decode(&flipped).unwrap_err().1, "checksum mismatch");
        assert_eq!(
            decode(&bytes[..3]).unwrap_err().1,
            "shorter than its checksum"
        );
    }
}
