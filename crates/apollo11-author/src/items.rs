//! One declaration's items: each with its key, its step's name and its wave.

use crate::AuthorError;
use apollo11_core::limits::FOR_EACH_ITEMS_MAX;
use apollo11_core::{check_name, ForEach, NameKind, Origin, Value};
use std::collections::HashMap;

/// The name of the step a declaration makes for the item of key `key`: `DECL[KEY]`.
pub fn item_name(declaration: &str, key: &str) -> String {
    format!("{declaration}[{key}]")
}

/// The name of a gate's step after wave `wave`: `GATE[wave-W]`.
pub fn gate_name(gate: &str, wave: u32) -> String {
    format!("{gate}[wave-{wave}]")
}

/// The key of the item at `position` (from 1): its `key` field when the declaration names
/// one (a string or a number), else the item itself when a string or a number, else its
/// position. `None` when the declaration names a field the item lacks.
pub fn item_key(for_each: &ForEach, item: &Value, position: usize) -> Option<String> {
    let scalar = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    match &for_each.key {
        Some(field) => item.get(field).and_then(scalar),
        None => Some(scalar(item).unwrap_or_else(|| position.to_string())),
    }
}

/// A declaration's items, in order, keyed and named.
#[derive(Debug)]
pub(crate) struct Items {
    pub names: Vec<String>,
    pub keys: Vec<String>,
    pub values: Vec<Value>,
    /// Position of each key.
    pub index: HashMap<String, usize>,
    /// Each item's wave, when the declaration or one it pairs with goes in waves.
    pub waves: Vec<Option<u32>>,
    /// Items per wave when the declaration itself goes in waves (or has a gate).
    pub wave_size: Option<usize>,
}

impl Items {
    /// Keys and names the items of `declaration`, and gives them waves when it goes in waves.
    pub fn new(
        declaration: &str,
        for_each: &ForEach,
        values: Vec<Value>,
    ) -> Result<Items, AuthorError> {
        if values.len() > FOR_EACH_ITEMS_MAX as usize {
            return Err(AuthorError::TooManyItems {
                step: declaration.to_owned(),
                count: values.len(),
                max: FOR_EACH_ITEMS_MAX as usize,
            });
        }
        let wave_size = wave_size(declaration, for_each, values.len())?;
        let mut items = Items {
            names: Vec::with_capacity(values.len()),
            keys: Vec::with_capacity(values.len()),
            index: HashMap::with_capacity(values.len()),
            waves: (0..values.len())
                .map(|i| wave_size.map(|n| (i / n) as u32 + 1))
                .collect(),
            wave_size,
            values: Vec::new(),
        };
        for (i, value) in values.iter().enumerate() {
            items.push(declaration, for_each, &values, i, value)?;
        }
        items.values = values;
        Ok(items)
    }

    fn push(
        &mut self,
        declaration: &str,
        for_each: &ForEach,
        values: &[Value],
        i: usize,
        value: &Value,
    ) -> Result<(), AuthorError> {
        let key = item_key(for_each, value, i + 1).ok_or_else(|| AuthorError::NoKey {
            step: declaration.to_owned(),
            position: i + 1,
            key: for_each.key.clone().unwrap_or_default(),
        })?;
        let name = item_name(declaration, &key);
        check_name(NameKind::Step, &name).map_err(|error| AuthorError::BadName {
            step: declaration.to_owned(),
            error,
        })?;
        if let Some(&j) = self.index.get(&key) {
            return Err(AuthorError::DuplicateKey {
                name,
                first: (j + 1, values[j].clone()),
                second: (i + 1, value.clone()),
            });
        }
        self.index.insert(key.clone(), i);
        self.keys.push(key);
        self.names.push(name);
        Ok(())
    }

    /// How many waves the items go in (0 without waves).
    pub fn wave_count(&self) -> u32 {
        self.waves.iter().flatten().copied().max().unwrap_or(0)
    }

    /// The positions of the items of wave `wave` (from 1), for a declaration in waves.
    pub fn wave(&self, wave: u32) -> std::ops::Range<usize> {
        let n = self.wave_size.unwrap_or(self.keys.len());
        let start = ((wave as usize - 1) * n).min(self.keys.len());
        start..(start + n).min(self.keys.len())
    }

    /// The name of the item of `key` here.
    pub fn name_of(&self, key: &str) -> Option<&str> {
        self.index.get(key).map(|&i| self.names[i].as_str())
    }

    /// Where the step of item `i` came from.
    pub fn origin(&self, declaration: &str, i: usize) -> Origin {
        Origin {
            declaration: declaration.to_owned(),
            item: self.values[i].clone(),
            key: self.keys[i].clone(),
            wave: self.waves[i],
        }
    }

    /// Checks that `self` (the items of `step`) and `dependency`'s items have the same keys.
    pub fn check_paired(
        &self,
        step: &str,
        dependency: &str,
        other: &Items,
    ) -> Result<(), AuthorError> {
        let unpaired = |key: &str, missing_in_dependency| AuthorError::Unpaired {
            step: step.to_owned(),
            dependency: dependency.to_owned(),
            key: key.to_owned(),
            missing_in_dependency,
        };
        if let Some(key) = self.keys.iter().find(|k| !other.index.contains_key(*k)) {
            return Err(unpaired(key, true));
        }
        match other.keys.iter().find(|k| !self.index.contains_key(*k)) {
            Some(key) => Err(unpaired(key, false)),
            None => Ok(()),
        }
    }
}

/// Items per wave: the declared size, or all items in one wave when only a gate is declared.
fn wave_size(
    declaration: &str,
    for_each: &ForEach,
    len: usize,
) -> Result<Option<usize>, AuthorError> {
    match (for_each.wave_size, &for_each.gate) {
        (Some(0), _) => Err(AuthorError::ZeroWaveSize {
            step: declaration.to_owned(),
        }),
        (Some(n), _) => Ok(Some(n as usize)),
        (None, Some(_)) => Ok(Some(len.max(1))),
        (None, None) => Ok(None),
    }
}
