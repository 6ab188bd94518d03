//! `export`, `import` and `verify FILE.a11`: a run in one bundle file (`apollo11_bundle`),
//! with its steps' files from the data dir.

use crate::data::{open_writer, store_exit, DataDir};
use crate::{out, Exit};
use apollo11_bundle::{self as bundle, Bundle, BundleFile, ImportError};
use apollo11_core::{check_name, NameKind, RunId, StepName};
use apollo11_shell::files::{create_private_dir, create_private_file, run_dir, step_dir};
use apollo11_store::DynStore;
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub async fn export(dir: &DataDir, run_id: &str, output: &Path, force: bool) -> Result<Exit, Exit> {
    check_target(output, force)?;
    let store = dir.open_reader().await?;
    let files = read_step_files(&dir.path, run_id)?;
    let bundle = bundle::export(&store, &RunId::from(run_id), files)
        .await
        .map_err(store_exit)?
        .ok_or_else(|| {
            Exit::fail(
                2,
                format!("unknown run {run_id} in this data dir (see `apollo11 runs`)"),
            )
        })?;
    let bytes = bundle::encode(&bundle).map_err(store_exit)?;
    write_new(output, &bytes, force).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => exists(output),
        _ => Exit::fail(1, format!("cannot write {}: {e}", output.display())),
    })?;
    out::line(format!(
        "{run_id}: {} written ({})",
        out::name(&output.display().to_string()),
        counts(&bundle, bytes.len())
    ))?;
    Ok(Exit::code(0))
}

fn counts(bundle: &Bundle, bytes: usize) -> String {
    format!(
        "{} events, {} blobs, {} step files, {bytes} bytes",
        bundle.events.len(),
        bundle.blobs.len(),
        bundle.files.len()
    )
}

pub async fn import(dir: &DataDir, file: &Path) -> Result<Exit, Exit> {
    let bundle = read_bundle(file)?;
    let store = match dir.open_shared().await? {
        Some(shared) => shared,
        None => DynStore::new(Arc::new(open_writer(dir)?)),
    };
    bundle::check_import(&store, &bundle)
        .await
        .map_err(import_exit)?;
    write_step_files(&dir.path, &bundle)?;
    let imported = bundle::import(&store, &bundle).await.map_err(import_exit)?;
    let ids = &imported.event_ids;
    let appended = ids.len() as u32 - imported.present;
    out::line(format!(
        "{}: {appended} events imported ({} were already here), event ids {} to {}",
        bundle.run_id.0,
        imported.present,
        ids[0].0,
        ids[ids.len() - 1].0
    ))?;
    Ok(Exit::code(0))
}

fn import_exit(e: ImportError) -> Exit {
    match e {
        ImportError::Store(e) => store_exit(e),
        differs @ ImportError::Differs { .. } => Exit::fail(2, differs.to_string()),
    }
}

pub fn verify(file: &Path, json: bool) -> Result<Exit, Exit> {
    let bytes = read_file(file)?;
    let shown = out::name(&file.display().to_string());
    match bundle::decode(&bytes) {
        Ok(bundle) if json => out::line(json!({
            "file": file, "clean": true, "run_id": bundle.run_id, "events": bundle.events.len(),
            "blobs": bundle.blobs.len(), "files": bundle.files.len(), "bytes": bytes.len(),
        }))?,
        Ok(bundle) => out::line(format!(
            "{shown}: a clean bundle of run {} ({})",
            out::name(&bundle.run_id.0),
            counts(&bundle, bytes.len())
        ))?,
        Err(e) => {
            if json {
                out::line(
                    json!({"file": file, "clean": false, "offset": e.offset, "reason": e.reason}),
                )?;
            }
            return Err(damaged_bundle(&shown, &e));
        }
    }
    Ok(Exit::code(0))
}

fn damaged_bundle(shown: &str, e: &bundle::BundleError) -> Exit {
    Exit::fail(3, format!("{shown}: a damaged run bundle, refused {e}"))
}

/// A bundle file's bytes; only a regular file (a device or a pipe could be endless).
fn read_file(file: &Path) -> Result<Vec<u8>, Exit> {
    let failed = |e: String| Exit::fail(2, format!("cannot read {}: {e}", file.display()));
    let meta = std::fs::metadata(file).map_err(|e| failed(e.to_string()))?;
    if !meta.is_file() {
        return Err(failed(format!(
            "{}, not a regular file",
            file_kind(&meta.file_type())
        )));
    }
    std::fs::read(file).map_err(|e| failed(e.to_string()))
}

fn read_bundle(file: &Path) -> Result<Bundle, Exit> {
    let bytes = read_file(file)?;
    bundle::decode(&bytes).map_err(|e| damaged_bundle(&out::name(&file.display().to_string()), &e))
}

/// Every file in the run's step folders (none when no step has run).
fn read_step_files(data_dir: &Path, run_id: &str) -> Result<Vec<BundleFile>, Exit> {
    let mut files = Vec::new();
    for step in sorted_entries(&run_dir(data_dir, run_id))? {
        for file in sorted_entries(&step)? {
            files.push(read_step_file(&step, &file)?);
        }
    }
    Ok(files)
}

fn read_step_file(step: &Path, file: &Path) -> Result<BundleFile, Exit> {
    let not_ours =
        |what: &str| Exit::fail(1, format!("{}: {what}, not a step's file", file.display()));
    let name = |path: &Path| path.file_name().and_then(|n| n.to_str()).map(str::to_owned);
    let (Some(step_name), Some(file_name)) = (name(step), name(file)) else {
        return Err(not_ours("a name that is not UTF-8"));
    };
    for part in [&step_name, &file_name] {
        check_name(NameKind::Step, part).map_err(|e| not_ours(&e.to_string()))?;
    }
    if !std::fs::symlink_metadata(file).is_ok_and(|m| m.is_file()) {
        return Err(not_ours("not a regular file"));
    }
    Ok(BundleFile {
        step: StepName(step_name),
        name: file_name,
        bytes: read_file(file)?,
    })
}

/// The entries of a folder in name order; none when it does not exist.
fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>, Exit> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Exit::fail(1, format!("cannot read {}: {e}", dir.display()))),
    };
    let mut paths = entries
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Exit::fail(1, format!("cannot read {}: {e}", dir.display())))?;
    paths.sort();
    Ok(paths)
}

/// Writes the bundle's step files where the shell keeps them. Every one is checked first: a
/// file already there must hold the same bytes (a bundle imported again, not written again),
/// else nothing at all is written.
fn write_step_files(data_dir: &Path, bundle: &Bundle) -> Result<(), Exit> {
    let failed = |path: &Path, e: std::io::Error| {
        Exit::fail(1, format!("cannot write {}: {e}", path.display()))
    };
    let mut missing = Vec::new();
    for file in &bundle.files {
        let dir = step_dir(data_dir, &bundle.run_id.0, &file.step.0);
        let path = dir.join(&file.name);
        match std::fs::read(&path) {
            Ok(held) if held == file.bytes => {}
            Ok(_) => {
                return Err(Exit::fail(
                    2,
                    format!(
                        "{} exists with other bytes than the bundle's",
                        path.display()
                    ),
                ))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => missing.push((dir, path, file)),
            Err(e) => return Err(failed(&path, e)),
        }
    }
    for (dir, path, file) in missing {
        create_private_dir(&dir).map_err(|e| failed(&path, e))?;
        let mut out = create_private_file(&path).map_err(|e| failed(&path, e))?;
        out.write_all(&file.bytes)
            .and_then(|()| out.sync_all())
            .map_err(|e| failed(&path, e))?;
    }
    Ok(())
}

/// Refuses an export to `path` when something is there: always when it is not a regular
/// file (a device, a pipe, a link or a folder would be replaced by the bundle), and unless
/// `force` when it is one.
fn check_target(path: &Path, force: bool) -> Result<(), Exit> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Exit::fail(2, format!("cannot write {}: {e}", path.display()))),
        Ok(meta) if !meta.file_type().is_file() => Err(Exit::fail(
            2,
            format!(
                "{} is not a regular file ({}); a bundle is written only to a new file or, with --force, over a regular one",
                out::name(&path.display().to_string()),
                file_kind(&meta.file_type())
            ),
        )),
        Ok(_) if force => Ok(()),
        Ok(_) => Err(exists(path)),
    }
}

fn exists(path: &Path) -> Exit {
    Exit::fail(
        2,
        format!(
            "{} exists; --force replaces it",
            out::name(&path.display().to_string())
        ),
    )
}

fn file_kind(kind: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_dir() {
        "a folder"
    } else if kind.is_fifo() {
        "a pipe"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else {
        "a socket"
    }
}

/// Writes `bytes` to `path` whole or not at all (a temp file of this process, synced, then put in place),
/// 0600: a bundle holds what steps printed. Without `replace` it is linked in place, which
/// fails with `AlreadyExists` if anything came there since [`check_target`]; with it, renamed
/// over.
fn write_new(path: &Path, bytes: &[u8], replace: bool) -> std::io::Result<()> {
    let mut temp = path.as_os_str().to_owned();
    temp.push(format!(".{}.tmp", std::process::id()));
    let temp = PathBuf::from(temp);
    let written = write_synced(&temp, bytes).and_then(|()| {
        if replace {
            std::fs::rename(&temp, path)
        } else {
            std::fs::hard_link(&temp, path)
        }
    });
    if written.is_err() || !replace {
        // The temp file is no bundle of anyone's; a failure to remove it hides nothing.
        let _ = std::fs::remove_file(&temp);
    }
    written
}

/// A new file (never one that is there, nor through a link) of `bytes`, synced, 0600.
fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}
