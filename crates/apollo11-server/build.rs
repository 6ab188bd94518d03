//! Embeds every file of the flat `ui/` folder (the web UI) into the binary: writes
//! `$OUT_DIR/ui_files.rs`, a list of `(name, include_bytes!(path))`. No folder, no files.

use std::path::Path;

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let ui = Path::new(&manifest).join("ui");
    // Watching the crate's folder notices `ui/` appearing; watching `ui/` its files changing.
    println!(
        "cargo:rerun-if-changed={}",
        if ui.is_dir() { "ui" } else { "." }
    );
    let mut names: Vec<String> = std::fs::read_dir(&ui)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.path().is_file())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let entries: Vec<String> = names
        .iter()
        .map(|name| {
            let path = ui.join(name);
            format!(
                "({name:?}, include_bytes!({:?}) as &[u8])",
                path.display().to_string()
            )
        })
        .collect();
    let out = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("ui_files.rs");
    std::fs::write(out, format!("&[{}]", entries.join(",\n")))
        .expect("writing ui_files.rs in OUT_DIR");
}
