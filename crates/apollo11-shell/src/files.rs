//! The files the CLI keeps for steps in the data dir, and how it creates and reads them.
//!
//! Layout: `logs/<run>/<step>/<attempt>.log` (stdout and stderr), `<attempt>.output` (what the
//! step wrote to `APOLLO11_OUTPUT`), and `.compensate.log` / `.compensate.output` for its
//! compensation; payloads handed to a step go to `<attempt>.previous-payload` or
//! `<attempt>.step-output` next to them. What an attempt reads of the run goes apart, in
//! `inputs/<run>/<step>/<attempt>/` (one file per step it may read: `APOLLO11_INPUTS`) and
//! `inputs/<run>/<step>/<attempt>.params.json` (`APOLLO11_PARAMS`), `.compensate` added for
//! a compensation: kept out of `logs/`, whose step folders hold files only (a bundle carries
//! them), and removed once the attempt ends. The run id and the step name are each one path
//! component (both pass `check_name`), so no name can reach outside its folder or make two
//! steps share a file. Every path is under the data dir, which is absolute: steps run in
//! their workflow's folder, not where `apollo11` was started.
//!
//! Folders the CLI creates are 0700 and files 0600, whatever the umask: logs and outputs may
//! hold anything a step prints.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The files of one attempt (or compensation) of one step.
pub struct StepFiles {
    /// stdout and stderr of the process.
    pub log: PathBuf,
    /// `APOLLO11_OUTPUT`.
    pub output: PathBuf,
    /// A payload handed to the process (`*_FILE` variables).
    pub payload: PathBuf,
    /// The outputs of the steps it may read, one file each (`APOLLO11_INPUTS`).
    pub inputs: PathBuf,
    /// The run's arguments as JSON (`APOLLO11_PARAMS`).
    pub params: PathBuf,
    /// Where a failing attempt may write the delay it asks for before the next one
    /// (`APOLLO11_RETRY_AFTER_FILE`).
    pub retry_after: PathBuf,
}

/// The folder of a run's step folders.
pub fn run_dir(data_dir: &Path, run: &str) -> PathBuf {
    data_dir.join("logs").join(run)
}

/// The folder of a step's files.
pub fn step_dir(data_dir: &Path, run: &str, step: &str) -> PathBuf {
    run_dir(data_dir, run).join(step)
}

/// Where an attempt's (or its compensation's) files go.
pub fn step_files(
    data_dir: &Path,
    run: &str,
    step: &str,
    attempt: u32,
    compensation: bool,
) -> StepFiles {
    let dir = step_dir(data_dir, run, step);
    let read = data_dir.join("inputs").join(run).join(step);
    let (base, payload) = if compensation {
        (format!("{attempt}.compensate"), "step-output")
    } else {
        (attempt.to_string(), "previous-payload")
    };
    StepFiles {
        log: dir.join(format!("{base}.log")),
        output: dir.join(format!("{base}.output")),
        payload: dir.join(format!("{base}.{payload}")),
        inputs: read.join(&base),
        params: read.join(format!("{base}.params.json")),
        retry_after: dir.join(format!("{base}.retry-after")),
    }
}

/// Creates a folder and its missing parents, each 0700.
///
/// # Errors
///
/// The operating system's error.
pub fn create_private_dir(path: &Path) -> std::io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(path)
}

/// Creates (or truncates) a file for writing, 0600 even if it existed with another mode.
///
/// # Errors
///
/// The operating system's error.
pub fn create_private_file(path: &Path) -> std::io::Result<File> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    Ok(file)
}

/// Why an output file could not be taken as a payload.
pub enum OutputError {
    /// It is over the limit; nothing of it was read.
    TooLarge {
        /// Its size.
        bytes: u64,
    },
    /// It could not be read.
    Io(std::io::Error),
}

/// Reads what a step wrote to its output file, refusing (from its size, before reading) one
/// over `max` bytes. A missing file is no output.
///
/// # Errors
///
/// [`OutputError::TooLarge`] over `max` bytes; [`OutputError::Io`] when it cannot be read.
pub fn read_output(path: &Path, max: u64) -> Result<Vec<u8>, OutputError> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(OutputError::Io(e)),
    };
    let bytes = file.metadata().map_err(OutputError::Io)?.len();
    if bytes > max {
        return Err(OutputError::TooLarge { bytes });
    }
    // The file may still grow (a step's background process): never read past the limit.
    let mut out = Vec::with_capacity(bytes as usize);
    file.take(max + 1)
        .read_to_end(&mut out)
        .map_err(OutputError::Io)?;
    if out.len() as u64 > max {
        return Err(OutputError::TooLarge {
            bytes: out.len() as u64,
        });
    }
    Ok(out)
}

/// The last `lines` lines of a file, reading at most its last `window` bytes (a log may be
/// huge). A line the window starts inside is marked with a leading `…`.
///
/// # Errors
///
/// The operating system's error, a missing file included.
pub fn tail(path: &Path, lines: usize, window: u64) -> std::io::Result<Vec<String>> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    let start = len.saturating_sub(window);
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::with_capacity((len - start) as usize);
    file.take(window).read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes);
    let mut all: Vec<String> = text.lines().map(str::to_owned).collect();
    if let Some(first) = all.first_mut().filter(|_| start > 0) {
        first.insert(0, '…');
    }
    let from = all.len().saturating_sub(lines);
    Ok(all.split_off(from))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_stay_one_component_and_files_do_not_collide() {
        let data = Path::new("/data");
        let a = step_files(data, "a", "b", 1, false);
        let c = step_files(data, "a", "b", 1, true);
        assert_eq!(a.log, Path::new("/data/logs/a/b/1.log"));
        assert_eq!(a.payload, Path::new("/data/logs/a/b/1.previous-payload"));
        assert_eq!(c.output, Path::new("/data/logs/a/b/1.compensate.output"));
        assert_eq!(
            c.payload,
            Path::new("/data/logs/a/b/1.compensate.step-output")
        );
        assert_eq!(a.inputs, Path::new("/data/inputs/a/b/1"));
        assert_eq!(c.inputs, Path::new("/data/inputs/a/b/1.compensate"));
        assert_eq!(a.params, Path::new("/data/inputs/a/b/1.params.json"));
    }

    #[test]
    fn tail_reads_only_the_end_and_marks_a_cut_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::write(&path, format!("{}\nx\ny\nz\n", "w".repeat(100))).unwrap();
        assert_eq!(tail(&path, 2, 1_000).unwrap(), ["y", "z"]);
        assert_eq!(tail(&path, 10, 10).unwrap(), ["…www", "x", "y", "z"]);
    }

    #[test]
    fn an_output_over_the_limit_is_refused_from_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        std::fs::write(&path, [7u8; 11]).unwrap();
        assert!(matches!(
            read_output(&path, 10),
            Err(OutputError::TooLarge { bytes: 11 })
        ));
        assert_eq!(read_output(&path, 11).ok(), Some(vec![7u8; 11]));
        assert_eq!(read_output(&dir.path().join("none"), 1).ok(), Some(vec![]));
    }
}
