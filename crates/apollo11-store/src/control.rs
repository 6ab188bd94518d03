//! Controls: small versioned records beside the runs, written with compare-and-set, for
//! settings operators change while servers run (a schedule paused, by whom, why). Every
//! instance sharing a store reads the same records; a write names the version it read, so
//! of two concurrent writers exactly one wins and the other gets
//! [`StoreError::ControlConflict`].

use crate::StoreError;
use async_trait::async_trait;

/// The longest key, in bytes.
pub const CONTROL_KEY_BYTES_MAX: usize = 256;
/// The largest value, in bytes.
pub const CONTROL_VALUE_BYTES_MAX: usize = 64 * 1024;

/// One record: its key, its version (1 for the first write, one more at each write) and its
/// value (the caller's bytes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Control {
    /// Its key.
    pub key: String,
    /// Its version.
    pub version: u64,
    /// Its value.
    pub value: Vec<u8>,
}

/// Where controls live.
#[async_trait]
pub trait ControlStore: Send + Sync {
    /// Every record whose key starts with `prefix`, in key order.
    async fn list_controls(&self, prefix: &str) -> Result<Vec<Control>, StoreError>;

    /// Writes `value` under `key` if the record is at version `expected` (0: there is none),
    /// durably before it returns; the new version is `expected + 1`. Another version is a
    /// [`StoreError::ControlConflict`] and writes nothing.
    async fn put_control(
        &self,
        key: &str,
        expected: u64,
        value: Vec<u8>,
    ) -> Result<u64, StoreError>;
}

/// Checks a write against the limits every backend applies.
///
/// # Errors
///
/// [`StoreError::Invalid`] for an empty key, or a key or value over its limit.
pub fn validate_control(key: &str, value: &[u8]) -> Result<(), StoreError> {
    let invalid = |reason: String| StoreError::Invalid {
        what: format!("control `{}`", key.chars().take(64).collect::<String>()),
        reason,
    };
    if key.is_empty() || key.len() > CONTROL_KEY_BYTES_MAX {
        return Err(invalid(format!(
            "a key has 1 to {CONTROL_KEY_BYTES_MAX} bytes, this one {}",
            key.len()
        )));
    }
    if value.len() > CONTROL_VALUE_BYTES_MAX {
        return Err(invalid(format!(
            "a value has at most {CONTROL_VALUE_BYTES_MAX} bytes, this one {}",
            value.len()
        )));
    }
    Ok(())
}

/// The conflict of a write that expected `expected` where the record is at `actual`.
pub fn control_conflict(key: &str, expected: u64, actual: u64) -> StoreError {
    StoreError::ControlConflict {
        key: key.to_owned(),
        expected,
        actual,
    }
}

/// Controls held in memory, in key order: the compare-and-set every backend that keeps them
/// itself (the memory store, the file log) applies.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Controls {
    records: std::collections::BTreeMap<String, Control>,
}

impl Controls {
    /// The records given, by key (a later one of a key replaces an earlier).
    pub fn from_records(records: impl IntoIterator<Item = Control>) -> Controls {
        let records = records.into_iter().map(|c| (c.key.clone(), c)).collect();
        Controls { records }
    }

    /// Every record, in key order.
    pub fn records(&self) -> impl Iterator<Item = &Control> {
        self.records.values()
    }

    /// Every record whose key starts with `prefix`, in key order.
    pub fn list(&self, prefix: &str) -> Vec<Control> {
        (self.records.range(prefix.to_owned()..))
            .take_while(|(key, _)| key.starts_with(prefix))
            .map(|(_, c)| c.clone())
            .collect()
    }

    /// The records after writing `value` under `key` at version `expected + 1`, this one
    /// untouched; the new version.
    ///
    /// # Errors
    ///
    /// [`validate_control`]'s, and [`StoreError::ControlConflict`] when the record is not at
    /// `expected`.
    pub fn put(
        &self,
        key: &str,
        expected: u64,
        value: Vec<u8>,
    ) -> Result<(Controls, u64), StoreError> {
        validate_control(key, &value)?;
        let actual = self.records.get(key).map_or(0, |c| c.version);
        if actual != expected {
            return Err(control_conflict(key, expected, actual));
        }
        let mut next = self.clone();
        let version = expected + 1;
        let record = Control {
            key: key.to_owned(),
            version,
            value,
        };
        next.records.insert(key.to_owned(), record);
        Ok((next, version))
    }
}
