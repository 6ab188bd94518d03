//! A new run's id and folder: the id a run gets when none is given, and the run's folder
//! made (and every step's folder path checked) before the run's first event.

use crate::files;
use apollo11_core::{limits, WorkflowSpec};
use std::path::Path;

/// A run id that sorts by start time and says what ran: the workflow's name (cut so the id
/// stays a valid name), the start time to the millisecond, and `-N` from the second try on.
pub fn default_run_id(workflow: &str, now_ms: u64, n: u32) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(now_ms);
    let stamp = humantime::format_rfc3339_millis(at)
        .to_string()
        .replace(':', "");
    let suffix = if n > 1 {
        format!("-{n}")
    } else {
        String::new()
    };
    run_id_of(workflow, &format!("{stamp}{suffix}"))
}

/// `WORKFLOW-TAIL`, the workflow's name cut so that the id stays a valid name.
pub fn run_id_of(workflow: &str, tail: &str) -> String {
    let room = limits::NAME_BYTES_MAX as usize - tail.len() - 1;
    let mut end = workflow.len().min(room);
    while !workflow.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}-{tail}", &workflow[..end])
}

/// The longest path the kernel takes, in bytes (Linux's `PATH_MAX` less its NUL).
const PATH_BYTES_MAX: usize = 4_095;

/// A run's folder, or a step's, that could not be created.
#[derive(Debug)]
pub struct FolderError {
    run_id: String,
    step: Option<String>,
    folder: std::path::PathBuf,
    /// Why it could not be created.
    pub source: std::io::Error,
}

impl FolderError {
    /// `run `ID`` or `run `ID`, step `NAME``: whose folder it was.
    pub fn whose(&self) -> String {
        match &self.step {
            Some(step) => format!("run `{}`, step `{step}`", self.run_id),
            None => format!("run `{}`", self.run_id),
        }
    }
}

impl std::fmt::Display for FolderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (whose, folder) = (self.whose(), self.folder.display());
        write!(f, "{whose}: cannot create {folder}: {}", self.source)
    }
}

/// Creates the folder of a run's files before its first event, so a data dir that cannot be
/// written, a run id the file system refuses, or a step whose folder's path would be too
/// long is an error now rather than a run that cannot start its steps. A step's own folder
/// is made by its first try: a run whose steps are skipped makes none.
///
/// # Errors
///
/// The folder that could not be created (or whose path is too long), and why.
pub fn create(data_dir: &Path, run_id: &str, spec: &WorkflowSpec) -> Result<(), FolderError> {
    let refused = |step: Option<&str>, folder, source| FolderError {
        run_id: run_id.to_owned(),
        step: step.map(str::to_owned),
        folder,
        source,
    };
    let folder = files::run_dir(data_dir, run_id);
    files::create_private_dir(&folder).map_err(|e| refused(None, folder, e))?;
    for step in &spec.steps {
        let folder = files::step_dir(data_dir, run_id, &step.name);
        if folder.as_os_str().len() > PATH_BYTES_MAX {
            let too_long = std::io::Error::new(
                std::io::ErrorKind::InvalidFilename,
                format!("its path is longer than {PATH_BYTES_MAX} bytes"),
            );
            return Err(refused(Some(&step.name), folder, too_long));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use apollo11_core::{check_name, NameKind};

    #[test]
    fn default_ids_are_valid_names_and_differ_by_try() {
        let longest = "é".repeat(100);
        for name in ["five-stage", longest.as_str()] {
            let first = default_run_id(name, 1_796_053_190_895, 1);
            let second = default_run_id(name, 1_796_053_190_895, 2);
            check_name(NameKind::Run, &first).unwrap();
            check_name(NameKind::Run, &second).unwrap();
            assert_ne!(first, second);
            assert!(first.ends_with("T153950.895Z"), "{first}");
        }
    }
}
