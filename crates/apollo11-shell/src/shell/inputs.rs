//! What an attempt reads of its run, as files: `APOLLO11_INPUTS`, a folder with one file per
//! step the attempt may read that recorded an output, named as templates name that step and
//! holding its output's bytes exactly; and `APOLLO11_PARAMS`, the run's arguments (never a
//! secret) as one JSON object. Both are private (0700/0600), written before the attempt's
//! process starts and removed once it ends.

use crate::files::{create_private_dir, create_private_file, StepFiles};
use apollo11_core::{check_name, NameKind, Value};
use std::collections::BTreeMap;
use std::io::Write;

/// Writes the inputs folder and the parameters file of an attempt, anything a crashed try
/// of the same attempt left there removed first.
///
/// # Errors
///
/// The operating system's error, or `InvalidInput` for a step name that is not one path
/// component (which `check_name` never lets into a definition).
pub fn write(
    files: &StepFiles,
    inputs: &BTreeMap<String, Vec<u8>>,
    params: &BTreeMap<String, Value>,
) -> std::io::Result<()> {
    remove(files);
    create_private_dir(&files.inputs)?;
    for (step, bytes) in inputs {
        check_name(NameKind::Step, step)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
        create_private_file(&files.inputs.join(step))?.write_all(bytes)?;
    }
    let params = serde_json::to_vec(params).expect("JSON values serialize");
    create_private_file(&files.params)?.write_all(&params)
}

/// Removes what [`write`] wrote, if anything, and the step's folder of them once empty (a
/// step has one try at a time: no other attempt of it is writing there).
pub fn remove(files: &StepFiles) {
    let _ = std::fs::remove_dir_all(&files.inputs);
    let _ = std::fs::remove_file(&files.params);
    if let Some(step) = files.params.parent() {
        let _ = std::fs::remove_dir(step);
    }
}
